//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// streamReadWidths names the reference reads BenchmarkStream compares the
// selected path with: 512-bit loads on the avx512 path, 256-bit loads on
// the avx2 path (and 512-bit ones too where the CPU has them, the
// machine's best), the widest the CPU has on the generic path, a Go loop
// on a CPU with neither.
func streamReadWidths() []string {
	switch {
	case hasAVX512:
		return []string{"read512"}
	case hasAVX2 && cpuAVX512:
		return []string{"read256", "read512"}
	case hasAVX2:
		return []string{"read256"}
	case cpuAVX512:
		return []string{"read512"}
	case cpuAVX2:
		return []string{"read256"}
	}
	return []string{"read-go"}
}

// streamRead reads x and y once each, interleaved (two streams at once,
// as Axpy, Add, Dot and ClipAdd's second pass read them; at memory sizes
// this measured up to 1.3× a read of x then y), into independent
// accumulators so that neither add latency nor registers limit it before
// the caches or memory do. It is the bandwidth BenchmarkStream's kernels
// are compared to.
func streamRead(width string, x, y []float32) float32 {
	switch width {
	case "read512":
		return streamRead512(x, y)
	case "read256":
		return streamRead256(x, y)
	}
	return streamReadGo(x) + streamReadGo(y)
}

//go:noinline
func streamRead512(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3, s4, s5, s6, s7 archsimd.Float32x16
	for len(x) >= 64 && len(y) >= 64 {
		s0 = s0.Add(archsimd.LoadFloat32x16((*[16]float32)(x[0:16])))
		s1 = s1.Add(archsimd.LoadFloat32x16((*[16]float32)(y[0:16])))
		s2 = s2.Add(archsimd.LoadFloat32x16((*[16]float32)(x[16:32])))
		s3 = s3.Add(archsimd.LoadFloat32x16((*[16]float32)(y[16:32])))
		s4 = s4.Add(archsimd.LoadFloat32x16((*[16]float32)(x[32:48])))
		s5 = s5.Add(archsimd.LoadFloat32x16((*[16]float32)(y[32:48])))
		s6 = s6.Add(archsimd.LoadFloat32x16((*[16]float32)(x[48:64])))
		s7 = s7.Add(archsimd.LoadFloat32x16((*[16]float32)(y[48:64])))
		x, y = x[64:], y[64:]
	}
	r := hsum16(s0.Add(s1).Add(s2.Add(s3)).Add(s4.Add(s5).Add(s6.Add(s7))))
	return r + streamReadGo(x) + streamReadGo(y)
}

//go:noinline
func streamRead256(x, y []float32) float32 {
	// Four accumulators of pair sums: eight loads and four accumulators fit
	// in the 15 registers Go allocates (eight accumulators spilled one).
	y = y[:len(x)]
	var s0, s1, s2, s3 archsimd.Float32x8
	for len(x) >= 32 && len(y) >= 32 {
		s0 = s0.Add(archsimd.LoadFloat32x8((*[8]float32)(x[0:8])).Add(archsimd.LoadFloat32x8((*[8]float32)(y[0:8]))))
		s1 = s1.Add(archsimd.LoadFloat32x8((*[8]float32)(x[8:16])).Add(archsimd.LoadFloat32x8((*[8]float32)(y[8:16]))))
		s2 = s2.Add(archsimd.LoadFloat32x8((*[8]float32)(x[16:24])).Add(archsimd.LoadFloat32x8((*[8]float32)(y[16:24]))))
		s3 = s3.Add(archsimd.LoadFloat32x8((*[8]float32)(x[24:32])).Add(archsimd.LoadFloat32x8((*[8]float32)(y[24:32]))))
		x, y = x[32:], y[32:]
	}
	var t [8]float32
	s0.Add(s1).Add(s2.Add(s3)).Store(&t)
	archsimd.ClearAVXUpperBits()
	return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7] + streamReadGo(x) + streamReadGo(y)
}
