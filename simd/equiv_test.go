package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Property tests: every exported kernel, on whatever path this build and
// CPU select (AVX-512 under GOEXPERIMENT=simd, the generic loops
// otherwise), against the generic loop of generic.go: bit for bit where
// the kernel does the same operations per element, and for the reductions
// against a float64 truth within the bounds documented on Dot and Norm2
// (vec_test.go checks those bounds too). Lengths cover 0, 1, every
// remainder of 16- and 32-wide blocks, and the models' sizes; slices start
// at offsets 0–3 of their allocation so that vector loads are unaligned.

func equivLengths() []int {
	ns := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 95, 96, 97, 1000, 7850, 199210}
	for n := 100; n < 140; n++ {
		ns = append(ns, n)
	}
	return ns
}

// special mixes edge values into random data.
func special(rng *rand.Rand, n int) []float32 {
	x := randVec(rng, n)
	vals := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 3e38, -3e38, 1e-30}
	for i := range x {
		if rng.IntN(5) == 0 {
			x[i] = vals[rng.IntN(len(vals))]
		}
	}
	return x
}

// offset returns a copy of x starting 0–3 elements into its allocation.
func offset(rng *rand.Rand, x []float32) []float32 {
	o := rng.IntN(4)
	y := make([]float32, len(x)+o)[o:]
	copy(y, x)
	return y
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d = %v (%#x), generic loop gives %v (%#x)", what, i, len(want), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func TestElementwiseKernelsMatchGenericBitForBit(t *testing.T) {
	forEachPath(t, testElementwiseKernelsMatchGeneric)
}

func testElementwiseKernelsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, n := range equivLengths() {
		for trial := range 3 {
			x, y := offset(rng, special(rng, n)), offset(rng, special(rng, n))
			if trial == 2 && n > 0 { // non-finite values travel through too
				x[rng.IntN(n)] = float32(math.NaN())
				y[rng.IntN(n)] = float32(math.Inf(-1))
			}
			alpha := []float32{0.37, -2.5e3, 1, 0}[trial]
			name := func(k string) string { return fmt.Sprintf("%s n=%d trial=%d", k, n, trial) }

			got, want := offset(rng, y), append([]float32(nil), y...)
			Axpy(got, alpha, x)
			axpyGeneric(want, alpha, x)
			sameBits(t, name("Axpy"), got, want)

			got, want = offset(rng, y), append([]float32(nil), y...)
			Scale(got, alpha)
			scaleGeneric(want, alpha)
			sameBits(t, name("Scale"), got, want)

			got, want = offset(rng, y), append([]float32(nil), y...)
			Add(got, x)
			addGeneric(want, x)
			sameBits(t, name("Add"), got, want)

			got, want = offset(rng, y), make([]float32, n)
			Sub(got, x, y)
			subGeneric(want, x, y)
			sameBits(t, name("Sub"), got, want)

			got, want = offset(rng, x), append([]float32(nil), x...)
			ReLU(got)
			reluGeneric(want)
			sameBits(t, name("ReLU"), got, want)

			got, want = offset(rng, y), append([]float32(nil), y...)
			ReLUMask(got, x)
			reluMaskGeneric(want, x)
			sameBits(t, name("ReLUMask"), got, want)

			if g, w := AllFinite(x), allFiniteGeneric(x); g != w {
				t.Fatalf("%s: AllFinite = %v, generic %v", name("AllFinite"), g, w)
			}
		}
	}
}

func TestAllFiniteFindsEveryPosition(t *testing.T) {
	forEachPath(t, testAllFiniteFindsEveryPosition)
}

func testAllFiniteFindsEveryPosition(t *testing.T) {
	for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 100} {
		for i := range n {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				x := make([]float32, n)
				x[i] = bad
				if AllFinite(x) {
					t.Fatalf("n=%d: %v at %d not found", n, bad, i)
				}
			}
		}
	}
}

func TestReLUSemantics(t *testing.T) {
	forEachPath(t, testReLUSemantics)
}

func testReLUSemantics(t *testing.T) {
	nan := float32(math.NaN())
	negz := float32(math.Copysign(0, -1))
	in := []float32{-1, 2, nan, negz, 0, -1e-40, 1e-40, float32(math.Inf(-1)), float32(math.Inf(1)), -3, 4, -5, 6, -7, 8, -9, 10, -11}
	want := []float32{0, 2, nan, negz, 0, 0, 1e-40, 0, float32(math.Inf(1)), 0, 4, 0, 6, 0, 8, 0, 10, 0}
	got := append([]float32(nil), in...)
	ReLU(got)
	sameBits(t, "ReLU", got, want)
	d := make([]float32, len(in))
	for i := range d {
		d[i] = float32(i + 1)
	}
	ReLUMask(d, in)
	for i, a := range in {
		if w := float32(i + 1); !(a > 0) {
			w = 0
			if math.Float32bits(d[i]) != 0 {
				t.Fatalf("ReLUMask: d[%d] = %v for a = %v, want +0", i, d[i], a)
			}
		} else if d[i] != w {
			t.Fatalf("ReLUMask: d[%d] = %v for a = %v, want %v", i, d[i], a, w)
		}
	}
}

func TestReductionsWithinBoundsOnEveryPath(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(43, 44))
		for _, n := range equivLengths() {
			x, y := offset(rng, randVec(rng, n)), offset(rng, randVec(rng, n))
			var ref, abs, sq float64
			for i := range x {
				p := float64(x[i]) * float64(y[i])
				ref += p
				abs += math.Abs(p)
				sq += float64(x[i]) * float64(x[i])
			}
			tol := gamma(n/8+6)*abs + float64(n)*0x1p-52*abs
			if got := float64(Dot(x, y)); !(math.Abs(got-ref) <= tol) {
				t.Fatalf("n=%d: Dot %v, float64 %v, err %g > %g", n, got, ref, math.Abs(got-ref), tol)
			}
			if got := Norm2(x); !(math.Abs(got-math.Sqrt(sq)) <= float64(n/8+12)*0x1p-53*math.Sqrt(sq)) { // NaN fails
				t.Fatalf("n=%d: Norm2 %v, float64 %v", n, got, math.Sqrt(sq))
			}
		}
	})
}

// TestKernelBlocksEveryLength runs Norm2, Axpy, Add and ClipAdd at every
// length below 200, on every path: all remainders of the 48-float (AVX-512)
// and 24-float (AVX2) blocks of sumSquares with their 8- and 4-float steps,
// and of the 32-float blocks of the AVX2 Axpy and Add with their 8-float
// steps, at least three full blocks deep. Norm2 must stay within the bound
// of TestReductionsWithinBoundsOnEveryPath against a float64 sum,
// (n/8+12)·2⁻⁵³ relative (a float64 rounding per partial-sum addition
// and combine step, and the square root's); Axpy and Add must equal the
// generic loops bit for bit; ClipAdd must equal ClipToNorm then Add.
func TestKernelBlocksEveryLength(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(47, 48))
		for n := range 200 {
			x, y := offset(rng, randVec(rng, n)), offset(rng, randVec(rng, n))
			var sq float64
			for _, v := range x {
				sq += float64(v) * float64(v)
			}
			if got, want := Norm2(x), math.Sqrt(sq); !(math.Abs(got-want) <= float64(n/8+12)*0x1p-53*want) { // NaN fails
				t.Fatalf("n=%d: Norm2 %v, float64 %v", n, got, want)
			}
			got, want := offset(rng, y), append([]float32(nil), y...)
			Axpy(got, -0.37, x)
			axpyGeneric(want, -0.37, x)
			sameBits(t, fmt.Sprintf("Axpy n=%d", n), got, want)
			got, want = offset(rng, y), append([]float32(nil), y...)
			Add(got, x)
			addGeneric(want, x)
			sameBits(t, fmt.Sprintf("Add n=%d", n), got, want)
			got, want = offset(rng, y), append([]float32(nil), y...)
			clipped := append([]float32(nil), x...)
			ClipToNorm(clipped, 0.5)
			Add(want, clipped)
			ClipAdd(got, x, 0.5)
			sameBits(t, fmt.Sprintf("ClipAdd n=%d", n), got, want)
		}
	})
}

func TestModularKernelsMatchGeneric(t *testing.T) {
	forEachPath(t, testModularKernelsMatchGeneric)
}

func testModularKernelsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, n := range equivLengths() {
		o := rng.IntN(4)
		x32, y32 := make([]uint32, n+o)[o:], make([]uint32, n)
		for i := range n {
			x32[i], y32[i] = rng.Uint32(), rng.Uint32()
			if i%7 == 0 { // carries out of the top bit
				x32[i], y32[i] = math.MaxUint32-uint32(i), uint32(i)+5
			}
		}
		a32 := append([]uint32(nil), x32...)
		AddUint32(a32, y32)
		s32 := append([]uint32(nil), a32...)
		SubUint32(s32, y32)
		for i := range n {
			if a32[i] != x32[i]+y32[i] || s32[i] != x32[i] {
				t.Fatalf("n=%d i=%d: uint32 add/sub wrong", n, i)
			}
		}
	}
	s := make([]uint32, 3)
	mustPanic(t, "AddUint32 lengths", func() { AddUint32(s, s[:2]) })
	mustPanic(t, "SubUint32 lengths", func() { SubUint32(s, s[:2]) })
	mustPanic(t, "ReLUMask lengths", func() { ReLUMask(make([]float32, 3), make([]float32, 2)) })
}
