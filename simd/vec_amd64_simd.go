//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// AVX-512 level-1 kernels. Element-wise kernels do exactly the float32
// operations of the generic loops (no fusing), so they are bit-identical
// to them; the reductions (dot, sumSquares) keep 32 (float32) or 48
// (float64) interleaved partial sums combined pairwise, within the bounds
// documented on Dot and Norm2. Tails shorter than a vector use the generic
// loops (element-wise) or zero-filled partial loads (reductions).
//
// Every kernel clears the upper halves of the vector registers
// (archsimd.ClearAVXUpperBits, i.e. VZEROUPPER) once, after its last
// 512-bit instruction and before the scalar tail or return, as the AVX2
// kernels do (avx2Exit): Go's scalar float code is legacy SSE, and after
// 512-bit code that left the upper halves dirty each SSE write merges into
// the full register (docs/performance.md, "VZEROUPPER and ClipAdd").

func axpyAVX512(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	va := archsimd.BroadcastFloat32x16(alpha)
	for len(dst) >= 32 && len(x) >= 32 {
		d0 := archsimd.LoadFloat32x16((*[16]float32)(dst[0:16]))
		d1 := archsimd.LoadFloat32x16((*[16]float32)(dst[16:32]))
		x0 := archsimd.LoadFloat32x16((*[16]float32)(x[0:16]))
		x1 := archsimd.LoadFloat32x16((*[16]float32)(x[16:32]))
		x0.Mul(va).Add(d0).Store((*[16]float32)(dst[0:16]))
		x1.Mul(va).Add(d1).Store((*[16]float32)(dst[16:32]))
		dst, x = dst[32:], x[32:]
	}
	archsimd.ClearAVXUpperBits()
	axpyGeneric(dst, alpha, x)
}

func addAVX512(dst, x []float32) {
	x = x[:len(dst)]
	for len(dst) >= 32 && len(x) >= 32 {
		d0 := archsimd.LoadFloat32x16((*[16]float32)(dst[0:16]))
		d1 := archsimd.LoadFloat32x16((*[16]float32)(dst[16:32]))
		x0 := archsimd.LoadFloat32x16((*[16]float32)(x[0:16]))
		x1 := archsimd.LoadFloat32x16((*[16]float32)(x[16:32]))
		d0.Add(x0).Store((*[16]float32)(dst[0:16]))
		d1.Add(x1).Store((*[16]float32)(dst[16:32]))
		dst, x = dst[32:], x[32:]
	}
	archsimd.ClearAVXUpperBits()
	addGeneric(dst, x)
}

func subAVX512(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for len(dst) >= 16 && len(x) >= 16 && len(y) >= 16 {
		x0 := archsimd.LoadFloat32x16((*[16]float32)(x[0:16]))
		y0 := archsimd.LoadFloat32x16((*[16]float32)(y[0:16]))
		x0.Sub(y0).Store((*[16]float32)(dst[0:16]))
		dst, x, y = dst[16:], x[16:], y[16:]
	}
	archsimd.ClearAVXUpperBits()
	subGeneric(dst, x, y)
}

func scaleAVX512(dst []float32, alpha float32) {
	va := archsimd.BroadcastFloat32x16(alpha)
	for len(dst) >= 32 {
		d0 := archsimd.LoadFloat32x16((*[16]float32)(dst[0:16]))
		d1 := archsimd.LoadFloat32x16((*[16]float32)(dst[16:32]))
		d0.Mul(va).Store((*[16]float32)(dst[0:16]))
		d1.Mul(va).Store((*[16]float32)(dst[16:32]))
		dst = dst[32:]
	}
	archsimd.ClearAVXUpperBits()
	scaleGeneric(dst, alpha)
}

// dotAVX512: two Float32x16 accumulators (32 partial sums, fused
// multiply-adds), the tail through a zero-filled partial load, then a
// five-level pairwise combine. A term passes through at most ⌈n/32⌉
// accumulator roundings and five combine roundings, inside Dot's bound.
func dotAVX512(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1 archsimd.Float32x16
	for len(x) >= 32 && len(y) >= 32 {
		s0 = archsimd.LoadFloat32x16((*[16]float32)(x[0:16])).MulAdd(archsimd.LoadFloat32x16((*[16]float32)(y[0:16])), s0)
		s1 = archsimd.LoadFloat32x16((*[16]float32)(x[16:32])).MulAdd(archsimd.LoadFloat32x16((*[16]float32)(y[16:32])), s1)
		x, y = x[32:], y[32:]
	}
	if len(x) > 0 {
		s0 = archsimd.LoadFloat32x16SlicePart(x).MulAdd(archsimd.LoadFloat32x16SlicePart(y), s0)
		if len(x) > 16 {
			s1 = archsimd.LoadFloat32x16SlicePart(x[16:]).MulAdd(archsimd.LoadFloat32x16SlicePart(y[16:]), s1)
		}
	}
	return hsum16(s0.Add(s1))
}

// hsum16 adds the 16 lanes of v pairwise (four levels). It ends the
// caller's vector work: the scalar adds follow VZEROUPPER.
func hsum16(v archsimd.Float32x16) float32 {
	w := v.GetLo().Add(v.GetHi())
	q := w.GetLo().Add(w.GetHi())
	var t [4]float32
	q.Store(&t)
	archsimd.ClearAVXUpperBits()
	return (t[0] + t[2]) + (t[1] + t[3])
}

// sumSquaresAVX512 widens 8 floats at a time to float64 (exact squares)
// into six Float64x8 accumulators (48 partial sums), then 8-float steps
// into the first, combined pairwise. Six chains keep both FMA pipes busy,
// and six accumulators with their six operands fit in the 15 vector
// registers Go allocates (eight spilled): ≈1.1× the four of before in L2
// (docs/performance.md, "VZEROUPPER and ClipAdd").
func sumSquaresAVX512(x []float32) float64 {
	var s0, s1, s2, s3, s4, s5 archsimd.Float64x8
	for len(x) >= 48 {
		a := archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).ConvertToFloat64()
		b := archsimd.LoadFloat32x8((*[8]float32)(x[8:16])).ConvertToFloat64()
		c := archsimd.LoadFloat32x8((*[8]float32)(x[16:24])).ConvertToFloat64()
		d := archsimd.LoadFloat32x8((*[8]float32)(x[24:32])).ConvertToFloat64()
		e := archsimd.LoadFloat32x8((*[8]float32)(x[32:40])).ConvertToFloat64()
		f := archsimd.LoadFloat32x8((*[8]float32)(x[40:48])).ConvertToFloat64()
		s0 = a.MulAdd(a, s0)
		s1 = b.MulAdd(b, s1)
		s2 = c.MulAdd(c, s2)
		s3 = d.MulAdd(d, s3)
		s4 = e.MulAdd(e, s4)
		s5 = f.MulAdd(f, s5)
		x = x[48:]
	}
	for len(x) >= 8 {
		a := archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).ConvertToFloat64()
		s0 = a.MulAdd(a, s0)
		x = x[8:]
	}
	var t [8]float64
	s0.Add(s1).Add(s2.Add(s3)).Add(s4.Add(s5)).Store(&t)
	archsimd.ClearAVXUpperBits()
	s := ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]))
	return s + sumSquaresGeneric(x)
}

// allFiniteAVX512 sums x·0 (±0 for finite x, NaN for NaN and ±Inf).
func allFiniteAVX512(x []float32) bool {
	var s0, s1 archsimd.Float32x16
	var zero archsimd.Float32x16
	for len(x) >= 32 {
		s0 = s0.Add(archsimd.LoadFloat32x16((*[16]float32)(x[0:16])).Mul(zero))
		s1 = s1.Add(archsimd.LoadFloat32x16((*[16]float32)(x[16:32])).Mul(zero))
		x = x[32:]
	}
	return hsum16(s0.Add(s1)) == 0 && allFiniteGeneric(x)
}

// reluAVX512 replaces exactly the elements with v < 0 (not NaN, not −0) by
// +0, like the generic loop.
func reluAVX512(v []float32) {
	var zero archsimd.Float32x16
	for len(v) >= 16 {
		x := archsimd.LoadFloat32x16((*[16]float32)(v[0:16]))
		zero.Merge(x, x.Less(zero)).Store((*[16]float32)(v[0:16]))
		v = v[16:]
	}
	archsimd.ClearAVXUpperBits()
	reluGeneric(v)
}

// reluMaskAVX512 zeroes d where !(a > 0).
func reluMaskAVX512(d, a []float32) {
	a = a[:len(d)]
	var zero archsimd.Float32x16
	for len(d) >= 16 && len(a) >= 16 {
		m := archsimd.LoadFloat32x16((*[16]float32)(a[0:16])).Greater(zero)
		archsimd.LoadFloat32x16((*[16]float32)(d[0:16])).Masked(m).Store((*[16]float32)(d[0:16]))
		d, a = d[16:], a[16:]
	}
	archsimd.ClearAVXUpperBits()
	reluMaskGeneric(d, a)
}
