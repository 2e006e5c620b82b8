package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// testLengths covers every remainder of the 8-way (and 4-way) unrolled
// loops several times over, plus the two model sizes' smaller one.
func testLengths() []int {
	var ns []int
	for n := 0; n <= 67; n++ {
		ns = append(ns, n)
	}
	return append(ns, 1000, 7850)
}

// randVec returns n values spread over several binades, both signs.
func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32((rng.Float64()*2 - 1) * math.Exp2(float64(rng.IntN(9)-4)))
	}
	return x
}

const u32 = 0x1p-24 // unit roundoff of float32

func gamma(m int) float64 { return float64(m) * u32 / (1 - float64(m)*u32) }

func TestAxpyMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range testLengths() {
		for _, alpha := range []float32{0, 1, -1, 0.37, -2.5e3} {
			dst, x := randVec(rng, n), randVec(rng, n)
			orig := append([]float32(nil), dst...)
			Axpy(dst, alpha, x)
			for i := range dst {
				ax := float64(alpha) * float64(x[i]) // exact
				want := float64(orig[i]) + ax
				tol := 3 * u32 * (math.Abs(ax) + math.Abs(float64(orig[i])))
				if d := math.Abs(float64(dst[i]) - want); d > tol {
					t.Fatalf("n=%d alpha=%v i=%d: got %v want %v (|err| %g > %g)", n, alpha, i, dst[i], want, d, tol)
				}
				// The same element computed on its own, in float32:
				// catches any mixing of positions bit for bit.
				if e := orig[i] + alpha*x[i]; dst[i] != e {
					t.Fatalf("n=%d i=%d: got %v, scalar float32 gives %v", n, i, dst[i], e)
				}
			}
		}
	}
}

func TestDotWithinDocumentedBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range append(testLengths(), 199210) {
		x, y := randVec(rng, n), randVec(rng, n)
		var ref, abs float64
		for i := range x {
			p := float64(x[i]) * float64(y[i]) // exact
			ref += p
			abs += math.Abs(p)
		}
		got := float64(Dot(x, y))
		// The float64 reference carries its own ≤ n·2⁻⁵³ error.
		tol := gamma(n/8+6)*abs + float64(n)*0x1p-52*abs
		if math.Abs(got-ref) > tol {
			t.Fatalf("n=%d: Dot=%v float64 ref=%v, |err| %g > bound %g", n, got, ref, math.Abs(got-ref), tol)
		}
	}
}

func TestDotExactOnIntegers(t *testing.T) {
	// Small integers: every product and partial sum is exact in float32,
	// so any order of summation must give the exact value.
	for _, n := range testLengths() {
		x, y := make([]float32, n), make([]float32, n)
		var want int
		for i := range x {
			a, b := i%13-6, (i*7)%11-5
			x[i], y[i] = float32(a), float32(b)
			want += a * b
		}
		if got := Dot(x, y); got != float32(want) {
			t.Fatalf("n=%d: Dot=%v want %d", n, got, want)
		}
	}
}

func TestNorm2(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range append(testLengths(), 199210) {
		x := randVec(rng, n)
		var s float64
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		want := math.Sqrt(s)
		if got := Norm2(x); math.Abs(got-want) > float64(n+2)*0x1p-52*want {
			t.Fatalf("n=%d: Norm2=%v want %v", n, got, want)
		}
	}
	exact := []struct {
		x    []float32
		want float64
	}{
		{nil, 0},
		{[]float32{3, 4}, 5},
		{[]float32{-3, 0, 4, 0, 0, 0, 0, 0, 0, 12}, 13},
		// No overflow although each square overflows float32.
		{[]float32{math.MaxFloat32, -math.MaxFloat32, math.MaxFloat32, math.MaxFloat32}, 2 * math.MaxFloat32},
		// No underflow: subnormal squares are exact in float64.
		{[]float32{0x1p-149, 0x1p-149, -0x1p-149, 0x1p-149}, 0x1p-148},
		{[]float32{float32(math.Inf(-1)), 1}, math.Inf(1)},
	}
	for _, c := range exact {
		if got := Norm2(c.x); got != c.want {
			t.Errorf("Norm2(%v) = %v want %v", c.x, got, c.want)
		}
	}
	if got := Norm2([]float32{1, float32(math.NaN()), float32(math.Inf(1))}); !math.IsNaN(got) {
		t.Errorf("Norm2 with NaN = %v, want NaN", got)
	}
}

// Scale, Add and Sub round once per element. float64 holds any product or
// sum of two float32 values closely enough that rounding it to float32
// gives the correctly rounded float32 result (53 ≥ 2·24+2), so these
// float64 references must match bit for bit.
func TestScaleAddSubExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range testLengths() {
		x, y := randVec(rng, n), randVec(rng, n)
		alpha := float32(rng.NormFloat64())

		got := append([]float32(nil), x...)
		Scale(got, alpha)
		for i := range got {
			if w := float32(float64(x[i]) * float64(alpha)); got[i] != w {
				t.Fatalf("Scale n=%d i=%d: %v want %v", n, i, got[i], w)
			}
		}

		got = append(got[:0], x...)
		Add(got, y)
		for i := range got {
			if w := float32(float64(x[i]) + float64(y[i])); got[i] != w {
				t.Fatalf("Add n=%d i=%d: %v want %v", n, i, got[i], w)
			}
		}

		got = make([]float32, n)
		Sub(got, x, y)
		for i := range got {
			if w := float32(float64(x[i]) - float64(y[i])); got[i] != w {
				t.Fatalf("Sub n=%d i=%d: %v want %v", n, i, got[i], w)
			}
		}
		// dst aliasing x, as in Δ = x_i − x_t computed in place.
		alias := append([]float32(nil), x...)
		Sub(alias, alias, y)
		for i := range alias {
			if alias[i] != got[i] {
				t.Fatalf("Sub aliased n=%d i=%d: %v want %v", n, i, alias[i], got[i])
			}
		}
	}
}

func TestAllFinite(t *testing.T) {
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, n := range testLengths()[:68] {
		x := make([]float32, n)
		for i := range x {
			// Extremes that are finite must not trip it.
			x[i] = []float32{math.MaxFloat32, -math.MaxFloat32, 0x1p-149, -0, 1}[i%5]
		}
		if !AllFinite(x) {
			t.Fatalf("n=%d: finite vector reported non-finite", n)
		}
		for p := range n {
			for _, v := range bad {
				old := x[p]
				x[p] = v
				if AllFinite(x) {
					t.Fatalf("n=%d: %v at %d not detected", n, v, p)
				}
				x[p] = old
			}
		}
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", name)
		}
	}()
	f()
}

func TestLengthMismatchPanics(t *testing.T) {
	a, b := make([]float32, 5), make([]float32, 6)
	mustPanic(t, "Axpy", func() { Axpy(a, 1, b) })
	mustPanic(t, "Axpy short dst", func() { Axpy(b, 1, a) })
	mustPanic(t, "Dot", func() { Dot(a, b) })
	mustPanic(t, "Add", func() { Add(a, b) })
	mustPanic(t, "Sub dst", func() { Sub(b, a, a) })
	mustPanic(t, "Sub x", func() { Sub(a, b, a) })
	mustPanic(t, "Sub y", func() { Sub(a, a, b) })
}

func TestNoAllocation(t *testing.T) {
	x, y := make([]float32, 1000), make([]float32, 1000)
	for i := range x {
		x[i] = float32(i)
	}
	c := make([]float32, 20*30)
	allocs := testing.AllocsPerRun(10, func() {
		Axpy(y, 0.5, x)
		_ = Dot(x, y)
		_ = Norm2(x)
		Scale(y, 0.5)
		Add(y, x)
		Sub(y, x, y)
		_ = AllFinite(x)
		_ = ClipToNorm(y, 1)
		Gemm(false, true, 20, 30, 10, 1, x, 10, y, 10, 0, c, 30)
		Gemm(true, false, 200, 200, 20, 1, make4k, 200, make4k, 200, 0, c4k, 200)
	})
	if allocs != 0 {
		t.Errorf("kernels allocated %v times per run", allocs)
	}
}

var (
	make4k = make([]float32, 200*20)
	c4k    = make([]float32, 200*200) // 16 gonum blocks: would go parallel untiled
)
