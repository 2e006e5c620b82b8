//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// AVX2 (256-bit) versions of the level-1 kernels, for CPUs with AVX2 and
// FMA but not AVX-512. Same operations and tails as vec_amd64_simd.go, so
// element-wise kernels are bit-identical to the generic loops and the
// reductions stay within Dot's and Norm2's bounds. Gemm's AVX2 kernel is
// in gemm_avx2_amd64_simd.go.
//
// Every kernel calls avx2Exit (VZEROUPPER) after its last 256-bit
// instruction, before the scalar tail and before returning: Go's scalar
// float code is legacy SSE, and the first SSE instruction after 256-bit
// code without it cost ≈125 ns on the Zen 3 machine this was measured on
// (BenchmarkAVXTransition), which made Add on 200 floats 1.7× slower than
// the generic loop.

// axpyAVX2 and addAVX2 take four vectors a step (≈1.45× two a step in L2
// on a Zen 5 core, docs/performance.md, "VZEROUPPER and ClipAdd"), then
// single vectors, then the generic loop for the last < 8 elements.
func axpyAVX2(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	va := archsimd.BroadcastFloat32x8(alpha)
	for len(dst) >= 32 && len(x) >= 32 {
		d0 := archsimd.LoadFloat32x8((*[8]float32)(dst[0:8]))
		d1 := archsimd.LoadFloat32x8((*[8]float32)(dst[8:16]))
		d2 := archsimd.LoadFloat32x8((*[8]float32)(dst[16:24]))
		d3 := archsimd.LoadFloat32x8((*[8]float32)(dst[24:32]))
		archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).Mul(va).Add(d0).Store((*[8]float32)(dst[0:8]))
		archsimd.LoadFloat32x8((*[8]float32)(x[8:16])).Mul(va).Add(d1).Store((*[8]float32)(dst[8:16]))
		archsimd.LoadFloat32x8((*[8]float32)(x[16:24])).Mul(va).Add(d2).Store((*[8]float32)(dst[16:24]))
		archsimd.LoadFloat32x8((*[8]float32)(x[24:32])).Mul(va).Add(d3).Store((*[8]float32)(dst[24:32]))
		dst, x = dst[32:], x[32:]
	}
	for len(dst) >= 8 && len(x) >= 8 {
		d0 := archsimd.LoadFloat32x8((*[8]float32)(dst[0:8]))
		archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).Mul(va).Add(d0).Store((*[8]float32)(dst[0:8]))
		dst, x = dst[8:], x[8:]
	}
	avx2Exit()
	axpyGeneric(dst, alpha, x)
}

func addAVX2(dst, x []float32) {
	x = x[:len(dst)]
	for len(dst) >= 32 && len(x) >= 32 {
		d0 := archsimd.LoadFloat32x8((*[8]float32)(dst[0:8]))
		d1 := archsimd.LoadFloat32x8((*[8]float32)(dst[8:16]))
		d2 := archsimd.LoadFloat32x8((*[8]float32)(dst[16:24]))
		d3 := archsimd.LoadFloat32x8((*[8]float32)(dst[24:32]))
		d0.Add(archsimd.LoadFloat32x8((*[8]float32)(x[0:8]))).Store((*[8]float32)(dst[0:8]))
		d1.Add(archsimd.LoadFloat32x8((*[8]float32)(x[8:16]))).Store((*[8]float32)(dst[8:16]))
		d2.Add(archsimd.LoadFloat32x8((*[8]float32)(x[16:24]))).Store((*[8]float32)(dst[16:24]))
		d3.Add(archsimd.LoadFloat32x8((*[8]float32)(x[24:32]))).Store((*[8]float32)(dst[24:32]))
		dst, x = dst[32:], x[32:]
	}
	for len(dst) >= 8 && len(x) >= 8 {
		archsimd.LoadFloat32x8((*[8]float32)(dst[0:8])).Add(archsimd.LoadFloat32x8((*[8]float32)(x[0:8]))).Store((*[8]float32)(dst[0:8]))
		dst, x = dst[8:], x[8:]
	}
	avx2Exit()
	addGeneric(dst, x)
}

func subAVX2(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for len(dst) >= 8 && len(x) >= 8 && len(y) >= 8 {
		archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).Sub(archsimd.LoadFloat32x8((*[8]float32)(y[0:8]))).Store((*[8]float32)(dst[0:8]))
		dst, x, y = dst[8:], x[8:], y[8:]
	}
	avx2Exit()
	subGeneric(dst, x, y)
}

func scaleAVX2(dst []float32, alpha float32) {
	va := archsimd.BroadcastFloat32x8(alpha)
	for len(dst) >= 16 {
		d0 := archsimd.LoadFloat32x8((*[8]float32)(dst[0:8]))
		d1 := archsimd.LoadFloat32x8((*[8]float32)(dst[8:16]))
		d0.Mul(va).Store((*[8]float32)(dst[0:8]))
		d1.Mul(va).Store((*[8]float32)(dst[8:16]))
		dst = dst[16:]
	}
	avx2Exit()
	scaleGeneric(dst, alpha)
}

// dotAVX2: four Float32x8 accumulators (32 partial sums) with fused
// multiply-adds, the tail through zero-filled partial loads, then a
// five-level pairwise combine: within Dot's bound as for dotAVX512.
func dotAVX2(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 archsimd.Float32x8
	for len(x) >= 32 && len(y) >= 32 {
		s0 = archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(y[0:8])), s0)
		s1 = archsimd.LoadFloat32x8((*[8]float32)(x[8:16])).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(y[8:16])), s1)
		s2 = archsimd.LoadFloat32x8((*[8]float32)(x[16:24])).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(y[16:24])), s2)
		s3 = archsimd.LoadFloat32x8((*[8]float32)(x[24:32])).MulAdd(archsimd.LoadFloat32x8((*[8]float32)(y[24:32])), s3)
		x, y = x[32:], y[32:]
	}
	for len(x) > 0 {
		s0 = archsimd.LoadFloat32x8SlicePart(x).MulAdd(archsimd.LoadFloat32x8SlicePart(y), s0)
		x, y = x[min(8, len(x)):], y[min(8, len(y)):]
		s0, s1, s2, s3 = s1, s2, s3, s0
	}
	v := s0.Add(s1).Add(s2.Add(s3))
	q := v.GetLo().Add(v.GetHi())
	var t [4]float32
	q.Store(&t)
	avx2Exit()
	return (t[0] + t[2]) + (t[1] + t[3])
}

// sumSquaresAVX2 widens 4 floats at a time to float64 (exact squares) into
// six Float64x4 accumulators (24 partial sums), then 4-float steps into
// the first; six for the reasons given on sumSquaresAVX512. In cache it is
// bound by the conversions (VCVTPS2PD widens 4 floats, one a cycle), at
// ≈60 GB/s on a Zen 5 core, a third of what the core reads from L2.
func sumSquaresAVX2(x []float32) float64 {
	var s0, s1, s2, s3, s4, s5 archsimd.Float64x4
	for len(x) >= 24 {
		a := archsimd.LoadFloat32x4((*[4]float32)(x[0:4])).ConvertToFloat64()
		b := archsimd.LoadFloat32x4((*[4]float32)(x[4:8])).ConvertToFloat64()
		c := archsimd.LoadFloat32x4((*[4]float32)(x[8:12])).ConvertToFloat64()
		d := archsimd.LoadFloat32x4((*[4]float32)(x[12:16])).ConvertToFloat64()
		e := archsimd.LoadFloat32x4((*[4]float32)(x[16:20])).ConvertToFloat64()
		f := archsimd.LoadFloat32x4((*[4]float32)(x[20:24])).ConvertToFloat64()
		s0 = a.MulAdd(a, s0)
		s1 = b.MulAdd(b, s1)
		s2 = c.MulAdd(c, s2)
		s3 = d.MulAdd(d, s3)
		s4 = e.MulAdd(e, s4)
		s5 = f.MulAdd(f, s5)
		x = x[24:]
	}
	for len(x) >= 4 {
		a := archsimd.LoadFloat32x4((*[4]float32)(x[0:4])).ConvertToFloat64()
		s0 = a.MulAdd(a, s0)
		x = x[4:]
	}
	var t [4]float64
	s0.Add(s1).Add(s2.Add(s3)).Add(s4.Add(s5)).Store(&t)
	avx2Exit()
	return (t[0] + t[2]) + (t[1] + t[3]) + sumSquaresGeneric(x)
}

func allFiniteAVX2(x []float32) bool {
	var s0, s1, zero archsimd.Float32x8
	for len(x) >= 16 {
		s0 = s0.Add(archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).Mul(zero))
		s1 = s1.Add(archsimd.LoadFloat32x8((*[8]float32)(x[8:16])).Mul(zero))
		x = x[16:]
	}
	var t [8]float32
	s0.Add(s1).Store(&t)
	avx2Exit()
	return ((t[0]+t[1])+(t[2]+t[3]))+((t[4]+t[5])+(t[6]+t[7])) == 0 && allFiniteGeneric(x)
}

func reluAVX2(v []float32) {
	var zero archsimd.Float32x8
	for len(v) >= 8 {
		x := archsimd.LoadFloat32x8((*[8]float32)(v[0:8]))
		zero.Merge(x, x.Less(zero)).Store((*[8]float32)(v[0:8]))
		v = v[8:]
	}
	avx2Exit()
	reluGeneric(v)
}

func reluMaskAVX2(d, a []float32) {
	a = a[:len(d)]
	var zero archsimd.Float32x8
	for len(d) >= 8 && len(a) >= 8 {
		m := archsimd.LoadFloat32x8((*[8]float32)(a[0:8])).Greater(zero)
		archsimd.LoadFloat32x8((*[8]float32)(d[0:8])).Masked(m).Store((*[8]float32)(d[0:8]))
		d, a = d[8:], a[8:]
	}
	avx2Exit()
	reluMaskGeneric(d, a)
}
