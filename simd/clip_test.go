package simd

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactSumSquares returns Σ x_i² exactly (every float32 square is exact in
// 256-bit binary floating point, and so is the sum at this precision).
func exactSumSquares(x []float32) *big.Float {
	s := new(big.Float).SetPrec(2048)
	var p big.Float
	p.SetPrec(2048)
	for _, v := range x {
		f := new(big.Float).SetFloat64(float64(v))
		p.Mul(f, f)
		s.Add(s, &p)
	}
	return s
}

// exceeds reports whether ‖x‖₂ > c, decided exactly (‖x‖₂² > c²).
func exceeds(x []float32, c float64) bool {
	cc := new(big.Float).SetPrec(2048).SetFloat64(c)
	cc.Mul(cc, cc)
	return exactSumSquares(x).Cmp(cc) > 0
}

// naiveClip is the textbook π(Δ, S) in float32: one multiplication by the
// nearest float32 to c/‖x‖₂. It is here to show that the test vectors are
// adversarial: it overshoots c on many of them.
func naiveClip(x []float32, c float64) {
	if n := Norm2(x); n > c {
		Scale(x, float32(c/n))
	}
}

func TestClipToNormNeverExceedsC(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var cases, naiveOver int
	check := func(x []float32, c float64) {
		t.Helper()
		orig := append([]float32(nil), x...)
		naive := append([]float32(nil), x...)
		naiveClip(naive, c)
		if exceeds(naive, c) {
			naiveOver++
		}
		cases++
		pre := Norm2(orig)
		norm := ClipToNorm(x, c)
		if norm != pre {
			t.Fatalf("returned norm %v, want pre-clip Norm2 %v", norm, pre)
		}
		if exceeds(x, c) {
			t.Fatalf("n=%d c=%v: clipped norm %v exceeds c", len(x), c, Norm2(x))
		}
		if !(pre > c) {
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(orig[i]) {
					t.Fatalf("norm %v ≤ c=%v but element %d changed", pre, c, i)
				}
			}
			return
		}
		// Clipping is a rescaling by ≈ c/‖x‖ and lands just under c
		// (for c well above the subnormal range).
		if c > 1e-30 {
			if got := Norm2(x); got < c*(1-1e-6) {
				t.Fatalf("n=%d c=%v: clipped norm %v shrank too far", len(x), c, got)
			}
			s := c / pre
			for i := range x {
				want := float64(orig[i]) * s
				if math.Abs(float64(x[i])-want) > 1e-6*math.Abs(want)+1e-45 {
					t.Fatalf("element %d: %v, want ≈ %v (not a rescaling)", i, x[i], want)
				}
			}
		}
	}
	for trial := range 3000 {
		n := 1 + rng.IntN(70)
		if trial%100 == 0 {
			n = 7850
		}
		x := make([]float32, n)
		switch trial % 4 {
		case 0: // generic random vector
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
		case 1: // all equal: every product rounds the same way
			v := float32(1 + rng.Float64())
			for i := range x {
				x[i] = v
			}
		case 2: // one dominant coordinate
			x[rng.IntN(n)] = float32(1e3 * (1 + rng.Float64()))
			for i := range x {
				if x[i] == 0 {
					x[i] = float32(rng.NormFloat64() * 1e-3)
				}
			}
		case 3: // values a few ulps above powers of two
			for i := range x {
				x[i] = math.Float32frombits(math.Float32bits(float32(math.Exp2(float64(rng.IntN(8))))) + uint32(rng.IntN(4)))
			}
		}
		norm := Norm2(x)
		var c float64
		switch rng.IntN(3) {
		case 0:
			c = norm * rng.Float64()
		case 1: // just below the norm: scale factor within an ulp of 1
			c = norm * (1 - float64(1+rng.IntN(8))*0x1p-24)
		default:
			c = float64(float32(norm * (0.5 + 0.5*rng.Float64()))) // a float32-representable c
		}
		if c <= 0 {
			c = 1e-3
		}
		check(x, c)
	}
	// Subnormal products: the first pass cannot hit the target and the
	// re-check loop has to finish the job.
	for _, c := range []float64{1e-44, 1e-40, 3e-39, 1e-300, 5e-324} {
		x := make([]float32, 37)
		for i := range x {
			x[i] = math.Float32frombits(uint32(1 + i*3)) // subnormals
		}
		check(x, c)
	}
	// Huge values: norm far above float32 range in the squares.
	huge := []float32{math.MaxFloat32, -math.MaxFloat32, 1, math.MaxFloat32 / 3}
	check(huge, 1)
	check([]float32{math.MaxFloat32}, math.MaxFloat32/2)
	check(nil, 1)
	check([]float32{0, 0, 0}, 1e-30)
	t.Logf("%d cases; the naive float32 clip exceeded c on %d", cases, naiveOver)
	if naiveOver == 0 {
		t.Fatal("test vectors are not adversarial: the naive clip never exceeded c")
	}
}

func TestClipToNormBelowThresholdAndInf(t *testing.T) {
	x := []float32{3, 4}
	if n := ClipToNorm(x, 5); n != 5 || x[0] != 3 || x[1] != 4 {
		t.Errorf("norm exactly c: got norm %v x %v, want 5 and unchanged", n, x)
	}
	if n := ClipToNorm(x, math.Inf(1)); n != 5 || x[0] != 3 {
		t.Errorf("c=+Inf must never clip: norm %v x %v", n, x)
	}
	ClipToNorm(x, 1)
	if exceeds(x, 1) || x[0] <= 0 || x[1] <= x[0] {
		t.Errorf("clip of (3,4) to 1 gave %v", x)
	}
}

func TestClipToNormNonFinite(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		x := []float32{1, v, 2}
		n := ClipToNorm(x, 1)
		if !math.IsNaN(n) && !math.IsInf(n, 1) {
			t.Errorf("norm with %v = %v, want NaN or +Inf", v, n)
		}
		if x[0] != 1 || x[2] != 2 {
			t.Errorf("non-finite input was modified: %v", x)
		}
	}
}

func TestClipToNormBadC(t *testing.T) {
	for _, c := range []float64{0, -1, math.NaN(), math.Inf(-1)} {
		mustPanic(t, "ClipToNorm", func() { ClipToNorm([]float32{1}, c) })
	}
}

// ClipAdd must equal ClipToNorm followed by Add bit for bit, on both
// sides of the clip, and leave delta unchanged in its fused range.
func TestClipAddEqualsClipThenAdd(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(51, 52))
		for _, n := range equivLengths() {
			for _, c := range []float64{1e-3, 0.5, 1, 3, 1e6} {
				delta := offset(rng, special(rng, n))
				sum := offset(rng, randVec(rng, n))
				want := append([]float32(nil), sum...)
				clipped := append([]float32(nil), delta...)
				wantNorm := ClipToNorm(clipped, c)
				Add(want, clipped)
				orig := append([]float32(nil), delta...)
				norm := ClipAdd(sum, delta, c)
				if norm != wantNorm {
					t.Fatalf("n=%d c=%v: norm %v, ClipToNorm %v", n, c, norm, wantNorm)
				}
				sameBits(t, fmt.Sprintf("ClipAdd n=%d c=%v", n, c), sum, want)
				sameBits(t, fmt.Sprintf("ClipAdd delta n=%d c=%v", n, c), delta, orig)
			}
		}
	})
	// Tiny c takes the ClipToNorm path and clips delta in place.
	delta := []float32{3, 4}
	sum := []float32{1, 1}
	if n := ClipAdd(sum, delta, 1e-40); n != 5 || Norm2(delta) > 1e-40 {
		t.Fatalf("tiny c: norm %v, delta %v", n, delta)
	}
	nan := []float32{1, float32(math.NaN())}
	sum = []float32{1, 2}
	if n := ClipAdd(sum, nan, 1); !math.IsNaN(n) || sum[0] != 1 || sum[1] != 2 {
		t.Fatalf("NaN delta: norm %v, sum %v", n, sum)
	}
	mustPanic(t, "ClipAdd c=0", func() { ClipAdd(sum, sum, 0) })
	mustPanic(t, "ClipAdd lengths", func() { ClipAdd(sum, sum[:1], 1) })
}
