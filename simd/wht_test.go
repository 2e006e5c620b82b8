package simd

import (
	crand "crypto/rand"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"testing"
)

// naiveHadamard returns H_d·x in float64 by the O(d²) matrix product with
// (H_d)_ij = (−1)^popcount(i AND j), and Σ_j |x_j|.
func naiveHadamard(x []float32) (y []float64, l1 float64) {
	y = make([]float64, len(x))
	for i := range x {
		var s float64
		for j, v := range x {
			if bits.OnesCount(uint(i&j))%2 == 1 {
				s -= float64(v)
			} else {
				s += float64(v)
			}
		}
		y[i] = s
	}
	for _, v := range x {
		l1 += math.Abs(float64(v))
	}
	return y, l1
}

func norm64(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// WHT against the O(d²) product: exactly on small integers, within the
// documented γ_m·Σ|x_j| on random inputs (the float64 reference's own error,
// < d·2⁻⁵³·Σ|x_j|, is added to the allowance).
func TestWHTMatchesNaiveHadamard(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for d := 1; d <= 512; d *= 2 {
		m := bits.TrailingZeros(uint(d))
		xi := make([]float32, d)
		for i := range xi {
			xi[i] = float32(rng.IntN(201) - 100)
		}
		want, _ := naiveHadamard(xi)
		WHT(xi)
		for i := range xi {
			if float64(xi[i]) != want[i] {
				t.Fatalf("d=%d integer input: WHT[%d] = %v, want %v exactly", d, i, xi[i], want[i])
			}
		}
		x := randVec(rng, d)
		want, l1 := naiveHadamard(x)
		WHT(x)
		tol := (gamma(m) + float64(d)*0x1p-53) * l1
		for i := range x {
			if math.Abs(float64(x[i])-want[i]) > tol {
				t.Fatalf("d=%d: WHT[%d] = %v, want %v ± %.3g", d, i, x[i], want[i], tol)
			}
		}
	}
}

// The blocked, radix-8/4 transform equals the plain radix-2 loop bit for
// bit, at lengths on both sides of the block size.
func TestWHTBitIdenticalToRadix2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{1, 2, 4, 8, 16, 32, 64, 512, whtBlock, 2 * whtBlock, 8 * whtBlock, 32 * whtBlock} {
		x := randVec(rng, d)
		ref := append([]float32(nil), x...)
		for h := 1; h < d; h *= 2 {
			radix2(ref, h)
		}
		WHT(x)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("d=%d: WHT[%d] = %v, radix-2 loop %v", d, i, x[i], ref[i])
			}
		}
	}
}

// Orthonormality: WHTOrtho preserves the norm within γ_{m+2}, is its own
// inverse within γ_{2m+4} (the documented bounds, relative to ‖x‖₂), and
// WHT twice is d·x exactly on integers.
func TestWHTOrthonormal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{1, 2, 8, 64, 1024, 1 << 15} {
		m := bits.TrailingZeros(uint(d))
		x := randVec(rng, d)
		orig := append([]float32(nil), x...)
		n0 := norm64(orig)
		WHTOrtho(x)
		if n1 := norm64(x); math.Abs(n1-n0) > gamma(m+2)*n0 {
			t.Fatalf("d=%d: ‖WHTOrtho(x)‖ = %v, ‖x‖ = %v, allowed ±%.3g", d, n1, n0, gamma(m+2)*n0)
		}
		WHTOrtho(x)
		var e float64
		for i := range x {
			e += (float64(x[i]) - float64(orig[i])) * (float64(x[i]) - float64(orig[i]))
		}
		if e = math.Sqrt(e); e > gamma(2*m+4)*n0 {
			t.Fatalf("d=%d: ‖WHTOrtho(WHTOrtho(x)) − x‖ = %.3g > γ_%d·‖x‖ = %.3g", d, e, 2*m+4, gamma(2*m+4)*n0)
		}
		for i := range x {
			x[i] = float32(rng.IntN(2001) - 1000)
		}
		copy(orig, x)
		WHT(x)
		WHT(x)
		for i := range x {
			if x[i] != float32(d)*orig[i] {
				t.Fatalf("d=%d: H·H·x [%d] = %v, want d·x = %v", d, i, x[i], float32(d)*orig[i])
			}
		}
	}
}

// Linearity, exactly: on small integers (every partial sum below 2²⁴) and
// for d a power of 4 (1/√d exact) all float32 operations are exact, so
// H(a·x + b·y) = a·Hx + b·Hy bit for bit, for WHT, WHTOrtho and Rotate.
func TestWHTLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const d = 1024
	ints := func() []float32 {
		v := make([]float32, d)
		for i := range v {
			v[i] = float32(rng.IntN(61) - 30)
		}
		return v
	}
	rot := NewHadamardRotation(1000, [32]byte{9})
	for _, tr := range []struct {
		name string
		f    func([]float32) []float32
	}{
		{"WHT", func(v []float32) []float32 { v = append([]float32(nil), v...); WHT(v); return v }},
		{"WHTOrtho", func(v []float32) []float32 { v = append([]float32(nil), v...); WHTOrtho(v); return v }},
		{"Rotate", func(v []float32) []float32 { out := make([]float32, d); rot.Rotate(out, v[:1000]); return out }},
	} {
		x, y := ints(), ints()
		const a, b = 3, -2
		comb := make([]float32, d)
		for i := range comb {
			comb[i] = a*x[i] + b*y[i]
		}
		got, hx, hy := tr.f(comb), tr.f(x), tr.f(y)
		for i := range got {
			if want := a*hx[i] + b*hy[i]; got[i] != want {
				t.Fatalf("%s: T(ax+by)[%d] = %v, a·Tx + b·Ty = %v", tr.name, i, got[i], want)
			}
		}
	}
}

// Rotate then Unrotate returns the padded input within γ_{2m+4}·‖x‖
// (documented), preserves the norm within γ_{m+2}·‖x‖, agrees with the
// definition H·D·[x; 0]/√p computed from the O(p²) product in float64,
// and works in place.
func TestWHTRotationInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dim := range []int{1, 3, 64, 100, 1000, 4096, 5000} {
		r := NewHadamardRotation(dim, [32]byte{byte(dim), 1})
		p := r.PaddedDim()
		if p < dim || p >= 2*dim && dim > 1 || !isPow2(p) || r.Dim() != dim {
			t.Fatalf("dim %d: padded to %d", dim, p)
		}
		m := bits.TrailingZeros(uint(p))
		x := randVec(rng, dim)
		n0 := norm64(x)
		y := make([]float32, p)
		r.Rotate(y, x)
		if n1 := norm64(y); math.Abs(n1-n0) > gamma(m+2)*n0 {
			t.Fatalf("dim %d: ‖Rx‖ = %v, ‖x‖ = %v", dim, n1, n0)
		}
		if p <= 1024 {
			dx := make([]float32, p)
			for i := range x {
				dx[i] = r.Sign(i) * x[i]
			}
			want, _ := naiveHadamard(dx)
			var e float64
			for i := range y {
				d := float64(y[i]) - want[i]/math.Sqrt(float64(p))
				e += d * d
			}
			if math.Sqrt(e) > gamma(m+2)*n0+1e-12*n0 {
				t.Fatalf("dim %d: ‖Rotate(x) − H·D·x/√p‖ = %.3g", dim, math.Sqrt(e))
			}
		}
		in := make([]float32, p)
		copy(in, x)
		r.Rotate(in, in[:dim])
		for i := range y {
			if math.Float32bits(in[i]) != math.Float32bits(y[i]) {
				t.Fatalf("dim %d: in-place Rotate differs at %d", dim, i)
			}
		}
		r.Unrotate(y)
		var e float64
		for i := range y {
			var want float64
			if i < dim {
				want = float64(x[i])
			}
			e += (float64(y[i]) - want) * (float64(y[i]) - want)
		}
		if e = math.Sqrt(e); e > gamma(2*m+4)*n0 {
			t.Fatalf("dim %d: ‖Unrotate(Rotate(x)) − x‖ = %.3g > %.3g", dim, e, gamma(2*m+4)*n0)
		}
	}
	r := NewHadamardRotation(5, [32]byte{})
	mustPanic(t, "Rotate short dst", func() { r.Rotate(make([]float32, 5), make([]float32, 5)) })
	mustPanic(t, "Rotate long x", func() { r.Rotate(make([]float32, 8), make([]float32, 6)) })
	mustPanic(t, "Unrotate", func() { r.Unrotate(make([]float32, 5)) })
	mustPanic(t, "WHT 3", func() { WHT(make([]float32, 3)) })
	mustPanic(t, "WHT 0", func() { WHT(nil) })
	mustPanic(t, "WHTOrtho 12", func() { WHTOrtho(make([]float32, 12)) })
	mustPanic(t, "NewHadamardRotation 0", func() { NewHadamardRotation(0, [32]byte{}) })
	mustPanic(t, "Sign out of range", func() { r.Sign(8) })
}

// The sign diagonal follows the documented layout of the seed's ChaCha8
// words (bit i mod 64 of word ⌊i/64⌋), so one seed gives one rotation on
// every client; another seed flips about half the signs (Hoeffding at
// δ = 1e-9, false failure < 1e-9 per check).
func TestWHTSignsFromSeed(t *testing.T) {
	const dim = 200000
	seed := [32]byte{1, 2, 3, 4}
	a, b := NewHadamardRotation(dim, seed), NewHadamardRotation(dim, seed)
	p := a.PaddedDim()
	src := rand.NewChaCha8(seed)
	var w uint64
	neg := 0
	for i := 0; i < p; i++ {
		if i%64 == 0 {
			w = src.Uint64()
		}
		want := float32(1)
		if w>>(i%64)&1 == 1 {
			want = -1
			neg++
		}
		if a.Sign(i) != want || b.Sign(i) != want {
			t.Fatalf("sign %d: %v and %v, want %v", i, a.Sign(i), b.Sign(i), want)
		}
	}
	eps := math.Sqrt(float64(p) * math.Log(2/1e-9) / 2)
	if math.Abs(float64(neg)-float64(p)/2) > eps {
		t.Fatalf("%d of %d signs negative", neg, p)
	}
	seed[31] = 1
	c := NewHadamardRotation(dim, seed)
	diff := 0
	for i := 0; i < p; i++ {
		if c.Sign(i) != a.Sign(i) {
			diff++
		}
	}
	if math.Abs(float64(diff)-float64(p)/2) > eps {
		t.Fatalf("another seed changes %d of %d signs", diff, p)
	}
	x := randVec(rand.New(rand.NewPCG(1, 1)), dim)
	ya, yb := make([]float32, p), make([]float32, p)
	a.Rotate(ya, x)
	b.Rotate(yb, x)
	for i := range ya {
		if math.Float32bits(ya[i]) != math.Float32bits(yb[i]) {
			t.Fatalf("same seed, different rotation at %d", i)
		}
	}
}

// Flattening (KLS21 §4): for a fixed x and random signs every rotated
// coordinate is a Rademacher sum with variance ‖x‖²/p, so by Hoeffding and
// a union bound max_i |(Rx)_i| ≤ ‖x‖·√(2 ln(2p/β)/p) except with
// probability β = 1e-9 per draw of the signs. Spiky inputs (one spike,
// two, a few heavy-tailed ones) with fresh random seeds: 30 draws, false
// failure < 3e-8 for the test. The allowance includes the rotation's
// rounding, γ_{m+2}·‖x‖.
func TestWHTFlattensSpikes(t *testing.T) {
	const dim, beta = 3000, 1e-9
	rng := rand.New(rand.NewPCG(11, 12))
	spikes := map[string]func() []float32{
		"one": func() []float32 { x := make([]float32, dim); x[rng.IntN(dim)] = 5; return x },
		"two": func() []float32 {
			x := make([]float32, dim)
			x[rng.IntN(dim)], x[rng.IntN(dim)] = 3, -4
			return x
		},
		"few": func() []float32 {
			x := make([]float32, dim)
			for range 8 {
				x[rng.IntN(dim)] = float32(math.Exp(3 * rng.NormFloat64()))
			}
			return x
		},
	}
	for name, gen := range spikes {
		for range 10 {
			var seed [32]byte
			if _, err := crand.Read(seed[:]); err != nil {
				t.Fatal(err)
			}
			r := NewHadamardRotation(dim, seed)
			p := r.PaddedDim()
			x := gen()
			nx := norm64(x)
			y := make([]float32, p)
			r.Rotate(y, x)
			var maxAbs float64
			for _, v := range y {
				maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
			}
			bound := nx*math.Sqrt(2*math.Log(2*float64(p)/beta)/float64(p)) + gamma(bits.TrailingZeros(uint(p))+2)*nx
			if maxAbs > bound {
				t.Fatalf("%s (seed %x): max |Rx| = %.4g > %.4g = ‖x‖·√(2 ln(2p/β)/p), ‖x‖ = %.4g",
					name, seed, maxAbs, bound, nx)
			}
		}
	}
}

// Transform time at d = 2¹⁸ (the MLP's 199,210 parameters padded).
func BenchmarkWHT(b *testing.B) {
	const d = 1 << 18
	x := randVec(rand.New(rand.NewPCG(1, 2)), d)
	b.Run("WHT/2^18", func(b *testing.B) {
		b.SetBytes(4 * d)
		for b.Loop() {
			WHT(x)
		}
	})
	b.Run("WHTOrtho/2^18", func(b *testing.B) {
		b.SetBytes(4 * d)
		for b.Loop() {
			WHTOrtho(x)
		}
	})
	b.Run("radix2/2^18", func(b *testing.B) { // the plain loop, for comparison
		b.SetBytes(4 * d)
		for b.Loop() {
			for h := 1; h < d; h *= 2 {
				radix2(x, h)
			}
		}
	})
	r := NewHadamardRotation(199210, [32]byte{1})
	xr := x[:199210:199210]
	y := make([]float32, d)
	b.Run("Rotate/199210", func(b *testing.B) {
		b.SetBytes(4 * d)
		for b.Loop() {
			r.Rotate(y, xr)
		}
	})
	b.Run("Unrotate/199210", func(b *testing.B) {
		b.SetBytes(4 * d)
		for b.Loop() {
			r.Unrotate(y)
		}
	})
}

// Block sizes around whtBlock, and radix 4 instead of radix 8 for the
// stages above the first three, at d = 2¹⁸ (all bit-identical).
func BenchmarkWHTVariants(b *testing.B) {
	const d = 1 << 18
	x := randVec(rand.New(rand.NewPCG(1, 2)), d)
	for _, blk := range []int{1024, 4096, 16384} {
		b.Run("blk="+strconv.Itoa(blk), func(b *testing.B) {
			b.SetBytes(4 * d)
			for b.Loop() {
				whtBlocked(x, nil, 1, blk)
			}
		})
	}
	b.Run("radix4", func(b *testing.B) {
		b.SetBytes(4 * d)
		for b.Loop() {
			radix8(x)
			h := 8
			for ; 4*h <= d; h *= 4 {
				radix4(x, h)
			}
			if h < d {
				radix2(x, h)
			}
		}
	})
}
