package simd

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// The fast Walsh–Hadamard transform and the randomized Hadamard rotation
// that "flattens" client updates before integer rounding in the
// distributed discrete Gaussian mechanism (Kairouz, Liu, Steinke 2021,
// ICML, "The distributed discrete Gaussian mechanism for federated
// learning with secure aggregation", §4; KLS21 below).
//
// H_d is the Sylvester–Hadamard matrix, H_1 = [1], H_2d = [H_d H_d; H_d −H_d],
// so (H_d)_ij = (−1)^popcount(i AND j), symmetric, with H_d·H_d = d·I.
// The transform runs log₂d butterfly stages ((a, b) ↦ (a+b, a−b) at
// distance h = 1, 2, 4, …) in portable Go, three stages per pass over
// memory (radix 8; a last radix-4 or radix-2 pass where log₂d is not a
// multiple of 3), all stages with h below whtBlock done block by block
// while the block is in L1, and a diagonal (signs, scale) multiplied in
// during the first pass. Every element undergoes the same float32
// operations in the same order as in the plain radix-2 loop, so WHT is
// bit-identical to it. For d = 2¹⁸, 0.7–0.85 ms (Rotate about the same,
// Unrotate 0.2 ms more for its separate sign-and-scale pass) on one core
// of the project's shared, loaded x86 VM (AMD Turin-class), about twice
// as fast as the radix-2 loop (BenchmarkWHT).

const errNotPow2 = "simd: WHT length must be a power of two"

// whtBlock is the number of float32s (16 KiB) transformed through all
// their inner stages at once, so that those stages run in L1.
const whtBlock = 4096

// WHT computes x ← H_d·x in place, the unnormalised Walsh–Hadamard
// transform of length d = len(x), in d·log₂d additions and subtractions.
// Applying it twice gives d·x.
//
// Every output is a sum of the d inputs with signs ±1 along a balanced
// binary tree of depth m = log₂d, so by the analysis of pairwise
// summation (Higham, "Accuracy and Stability of Numerical Algorithms",
// 2nd ed., §4.2)
//
//	|WHT(x)_i − (H_d x)_i| ≤ γ_m · Σ_j |x_j|,  γ_m = m·u/(1 − m·u), u = 2⁻²⁴,
//
// barring overflow (|(H_d x)_i| can reach d·max|x_j|) and underflow.
// Inputs that are small integers (|Σ_j x_j| < 2²⁴ at every stage) give
// exact results.
//
// It panics unless d is a power of two (d ≥ 1).
func WHT(x []float32) {
	if !isPow2(len(x)) {
		panic(errNotPow2)
	}
	wht(x, nil, 1)
}

// WHTOrtho computes x ← H_d·x/√d in place, the orthonormal Walsh–Hadamard
// transform (its own inverse), d = len(x) a power of two (panics
// otherwise). With m = log₂d, in Euclidean norm
//
//	‖WHTOrtho(x) − H_d x/√d‖₂ ≤ γ_{m+2} · ‖x‖₂,
//
// barring overflow and underflow: the scale factor 1/√d (exact when d is
// a power of 4, within u otherwise) is applied first, with one rounding
// per element; then stage k multiplies the norm by √2 and adds a rounding
// error of at most u times its output's norm, so the m stages add at most
// √d·((1+u)^m − 1) times the scaled input's norm. For d = 2¹⁸,
// γ₂₀ ≈ 1.2e-6. The result may differ in the last bit from WHT followed
// by a multiplication by 1/√d when d is not a power of 4.
func WHTOrtho(x []float32) {
	if !isPow2(len(x)) {
		panic(errNotPow2)
	}
	wht(x, nil, invSqrtPow2(len(x)))
}

// HadamardRotation is the randomized rotation of KLS21 §4, x ↦ H·D·x/√p
// for vectors of length Dim() zero-padded to p = PaddedDim(), the next
// power of two, with D = diag(s_0, …, s_{p−1}) a diagonal of ±1 signs drawn
// from a public per-round seed, so that clients and server apply the same
// rotation. Its inverse is D·Hᵀ·y/√p = D·H·y/√p (H is symmetric). It
// spreads a vector's norm over all coordinates: for any fixed x each
// rotated coordinate is a Rademacher sum of variance ‖x‖²/p, so by
// Hoeffding and a union bound max_i |(Rx)_i| ≤ ‖x‖₂·√(2·ln(2p/β)/p) with
// probability ≥ 1 − β over the signs.
//
// The signs: the ChaCha8 generator of math/rand/v2 (the C2SP chacha8rand
// stream) keyed with the seed gives 64-bit words w_0, w_1, …, and
// s_i = −1 iff bit i mod 64 (least significant first) of w_⌊i/64⌋ is 1.
//
// It is immutable after construction and safe for concurrent use.
type HadamardRotation struct {
	dim, padded int
	signs       []uint64 // bit i set: s_i = −1
	scale       float32  // 1/√padded
}

// NewHadamardRotation returns the rotation for vectors of length
// 1 ≤ dim ≤ 2³⁰ (panics otherwise), padded to the next power of two p ≥ dim, with signs
// from seed.
func NewHadamardRotation(dim int, seed [32]byte) *HadamardRotation {
	if dim < 1 || dim > 1<<30 {
		panic("simd: HadamardRotation dimension must be in [1, 2³⁰]")
	}
	p := 1 << bits.Len(uint(dim-1))
	r := &HadamardRotation{dim: dim, padded: p, signs: make([]uint64, (p+63)/64), scale: invSqrtPow2(p)}
	src := rand.NewChaCha8(seed)
	for i := range r.signs {
		r.signs[i] = src.Uint64()
	}
	return r
}

// Dim is the length of the vectors the rotation takes.
func (r *HadamardRotation) Dim() int { return r.dim }

// PaddedDim is p, the next power of two ≥ Dim(): the length of rotated
// vectors.
func (r *HadamardRotation) PaddedDim() int { return r.padded }

// Sign returns s_i ∈ {−1, +1}, the i-th entry of D, 0 ≤ i < PaddedDim().
func (r *HadamardRotation) Sign(i int) float32 {
	if uint(i) >= uint(r.padded) {
		panic("simd: HadamardRotation sign index out of range")
	}
	return 1 - 2*float32(r.signs[i/64]>>(i%64)&1)
}

// Rotate writes dst = H·D·[x; 0]/√p, the rotation of x (len Dim()) padded
// with zeros to p = PaddedDim() = len(dst). x may be dst[:Dim()] (in
// place); other overlaps give unspecified results. The norm is preserved
// up to the error bound of WHTOrtho (the signs and the padding are
// exact): ‖Rotate(x) − R·x‖₂ ≤ γ_{log₂p+2}·‖x‖₂, and Unrotate(Rotate(x))
// is within γ_{2·log₂p+4}·‖x‖₂ of [x; 0] (≈2.3e-6 relative for p = 2¹⁸).
//
// It panics if len(x) != Dim() or len(dst) != PaddedDim().
func (r *HadamardRotation) Rotate(dst, x []float32) {
	if len(x) != r.dim || len(dst) != r.padded {
		panic(errLength)
	}
	copy(dst, x)
	clear(dst[r.dim:])
	wht(dst, r.signs, r.scale)
}

// Unrotate computes y ← D·H·y/√p in place (len(y) = PaddedDim(), panics
// otherwise), the inverse rotation Rᵀ = R⁻¹. For y = Rotate(x) plus noise,
// y[:Dim()] is then x plus the de-rotated noise, and y[Dim():] holds only
// the de-rotated noise (and rounding) of the padding coordinates.
func (r *HadamardRotation) Unrotate(y []float32) {
	if len(y) != r.padded {
		panic(errLength)
	}
	wht(y, nil, 1)
	mulSigns(y, r.signs, r.scale)
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// invSqrtPow2 returns float32(1/√n) for a power of two n: exact for even
// log₂n, otherwise 2^(−⌊k/2⌋)·√½ rounded to float64 and then to float32
// (relative error below u·(1 + 2⁻²⁸), u = 2⁻²⁴).
func invSqrtPow2(n int) float32 {
	k := bits.TrailingZeros(uint(n))
	s := math.Ldexp(1, -k/2)
	if k%2 == 1 {
		s *= math.Sqrt2 / 2
	}
	return float32(s)
}

// mulSigns multiplies x[i] by s_i·alpha, s_i = −1 where bit i of signs is
// set and +1 otherwise (signs nil: all +1). The sign is exact, so each
// element is rounded once, as by a multiplication by alpha.
func mulSigns(x []float32, signs []uint64, alpha float32) {
	if signs == nil {
		scale(x, alpha)
		return
	}
	tbl := [2]float32{alpha, -alpha}
	for w := 0; w*64 < len(x); w++ {
		blk := x[w*64 : min(len(x), w*64+64)]
		m := signs[w]
		for j := range blk {
			blk[j] *= tbl[m>>j&1]
		}
	}
}

// wht computes x ← H·C·x in place, len(x) a power of two, where C is the
// diagonal of c_i = s_i·alpha (s_i as in mulSigns), multiplied in during
// the first pass (not at all when signs is nil and alpha is 1).
func wht(x []float32, signs []uint64, alpha float32) { whtBlocked(x, signs, alpha, whtBlock) }

// whtBlocked is wht with blocks of blk (a power of two ≥ 8) elements.
func whtBlocked(x []float32, signs []uint64, alpha float32, blk int) {
	n := len(x)
	pre := signs != nil || alpha != 1
	if n < 8 {
		if pre {
			mulSigns(x, signs, alpha)
		}
		for h := 1; h < n; h *= 2 {
			radix2(x, h)
		}
		return
	}
	blk = min(n, blk)
	for off := 0; off < n; off += blk {
		b := x[off : off+blk]
		if pre {
			var sg []uint64
			if signs != nil {
				sg = signs[off/64:]
			}
			radix8Mul(b, sg, alpha)
		} else {
			radix8(b)
		}
		stages(b, 8)
	}
	stages(x, blk)
}

// stages runs the butterfly stages h = from, 2·from, … < len(x), three
// (radix 8) or two (radix 4) at a time.
func stages(x []float32, from int) {
	h := from
	for ; 8*h <= len(x); h *= 8 {
		radix8s(x, h)
	}
	switch {
	case 4*h == len(x):
		radix4(x, h)
	case 2*h == len(x):
		radix2(x, h)
	}
}

// radix2 is one butterfly stage at distance h.
func radix2(x []float32, h int) {
	for i := 0; i < len(x); i += 2 * h {
		a := x[i : i+h]
		b := x[i+h : i+2*h]
		b = b[:len(a)]
		for j := range a {
			u, v := a[j], b[j]
			a[j], b[j] = u+v, u-v
		}
	}
}

// radix4 is the butterfly stages at distances h and 2h in one pass.
func radix4(x []float32, h int) {
	for i := 0; i < len(x); i += 4 * h {
		a := x[i : i+h]
		b := x[i+h : i+2*h]
		c := x[i+2*h : i+3*h]
		d := x[i+3*h : i+4*h]
		b, c, d = b[:len(a)], c[:len(a)], d[:len(a)]
		for j := range a {
			s0, d0 := a[j]+b[j], a[j]-b[j]
			s1, d1 := c[j]+d[j], c[j]-d[j]
			a[j], c[j] = s0+s1, s0-s1
			b[j], d[j] = d0+d1, d0-d1
		}
	}
}

// radix8s is the butterfly stages at distances h, 2h and 4h in one pass.
func radix8s(x []float32, h int) {
	for i := 0; i < len(x); i += 8 * h {
		v0 := x[i : i+h]
		v1 := x[i+h : i+2*h][:len(v0)]
		v2 := x[i+2*h : i+3*h][:len(v0)]
		v3 := x[i+3*h : i+4*h][:len(v0)]
		v4 := x[i+4*h : i+5*h][:len(v0)]
		v5 := x[i+5*h : i+6*h][:len(v0)]
		v6 := x[i+6*h : i+7*h][:len(v0)]
		v7 := x[i+7*h : i+8*h][:len(v0)]
		for j := range v0 {
			a0, a1 := v0[j]+v1[j], v0[j]-v1[j]
			a2, a3 := v2[j]+v3[j], v2[j]-v3[j]
			a4, a5 := v4[j]+v5[j], v4[j]-v5[j]
			a6, a7 := v6[j]+v7[j], v6[j]-v7[j]
			b0, b2 := a0+a2, a0-a2
			b1, b3 := a1+a3, a1-a3
			b4, b6 := a4+a6, a4-a6
			b5, b7 := a5+a7, a5-a7
			v0[j], v4[j] = b0+b4, b0-b4
			v1[j], v5[j] = b1+b5, b1-b5
			v2[j], v6[j] = b2+b6, b2-b6
			v3[j], v7[j] = b3+b7, b3-b7
		}
	}
}

// radix8Mul is radix8 on c_i·x_i, c_i = s_i·alpha as in mulSigns.
func radix8Mul(x []float32, signs []uint64, alpha float32) {
	tbl := [2]float32{alpha, -alpha}
	var m uint64
	for i := 0; len(x) >= 8; i += 8 {
		if signs != nil {
			if i%64 == 0 {
				m = signs[i/64]
			}
		}
		v := (*[8]float32)(x)
		c := m >> (i % 64)
		v0, v1 := v[0]*tbl[c&1], v[1]*tbl[c>>1&1]
		v2, v3 := v[2]*tbl[c>>2&1], v[3]*tbl[c>>3&1]
		v4, v5 := v[4]*tbl[c>>4&1], v[5]*tbl[c>>5&1]
		v6, v7 := v[6]*tbl[c>>6&1], v[7]*tbl[c>>7&1]
		a0, a1 := v0+v1, v0-v1
		a2, a3 := v2+v3, v2-v3
		a4, a5 := v4+v5, v4-v5
		a6, a7 := v6+v7, v6-v7
		b0, b2 := a0+a2, a0-a2
		b1, b3 := a1+a3, a1-a3
		b4, b6 := a4+a6, a4-a6
		b5, b7 := a5+a7, a5-a7
		v[0], v[4] = b0+b4, b0-b4
		v[1], v[5] = b1+b5, b1-b5
		v[2], v[6] = b2+b6, b2-b6
		v[3], v[7] = b3+b7, b3-b7
		x = x[8:]
	}
}

// radix8 is the butterfly stages at distances 1, 2 and 4 on each run of 8
// (len(x) a multiple of 8).
func radix8(x []float32) {
	for len(x) >= 8 {
		v := (*[8]float32)(x)
		// h = 1
		a0, a1 := v[0]+v[1], v[0]-v[1]
		a2, a3 := v[2]+v[3], v[2]-v[3]
		a4, a5 := v[4]+v[5], v[4]-v[5]
		a6, a7 := v[6]+v[7], v[6]-v[7]
		// h = 2
		b0, b2 := a0+a2, a0-a2
		b1, b3 := a1+a3, a1-a3
		b4, b6 := a4+a6, a4-a6
		b5, b7 := a5+a7, a5-a7
		// h = 4
		v[0], v[4] = b0+b4, b0-b4
		v[1], v[5] = b1+b5, b1-b5
		v[2], v[6] = b2+b6, b2-b6
		v[3], v[7] = b3+b7, b3-b7
		x = x[8:]
	}
}
