//go:build goexperiment.simd && amd64

package simd

import (
	"testing"

	"simd/archsimd"
)

// BenchmarkFMAPeak measures the core's FP32 fused multiply-add peak with
// archsimd: eight independent Float32x16 FMA chains, no memory operands.
// MB/s is MFLOP/s (2 flops per lane per FMA), the denominator of the SGEMM
// efficiency quoted in the README.
func BenchmarkFMAPeak(b *testing.B) {
	if !cpuAVX512 {
		b.Skip("no AVX-512")
	}
	const iters = 4096
	b.SetBytes(iters * 8 * 16 * 2)
	x := archsimd.BroadcastFloat32x16(0.999999)
	y := archsimd.BroadcastFloat32x16(1e-7)
	for b.Loop() {
		c0, c1, c2, c3, c4, c5, c6, c7 := fmaChains(iters, x, y)
		sinkF32 = hsum16(c0.Add(c1).Add(c2).Add(c3).Add(c4).Add(c5).Add(c6).Add(c7))
	}
}

// fmaChains runs n rounds of eight independent FMAs, written like the SGEMM
// micro-kernels (accumulators as results) so that they stay in registers.
//
//go:noinline
func fmaChains(n int, x, y archsimd.Float32x16) (c0, c1, c2, c3, c4, c5, c6, c7 archsimd.Float32x16) {
	for range n {
		c0 = c0.MulAdd(x, y)
		c1 = c1.MulAdd(x, y)
		c2 = c2.MulAdd(x, y)
		c3 = c3.MulAdd(x, y)
		c4 = c4.MulAdd(x, y)
		c5 = c5.MulAdd(x, y)
		c6 = c6.MulAdd(x, y)
		c7 = c7.MulAdd(x, y)
	}
	return
}

// BenchmarkFMAPeakAVX2 is BenchmarkFMAPeak for the AVX2 path: ten
// independent Float32x8 FMA chains (two FMA pipes × four cycles of latency
// on Zen 3 and most AVX2 cores need at least eight), accumulator as the
// multiplicand so that VFMADD213PS updates it in place without moves. MB/s
// is MFLOP/s: the denominator of the AVX2 SGEMM efficiency.
func BenchmarkFMAPeakAVX2(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("no AVX2+FMA")
	}
	const iters = 4096
	b.SetBytes(iters * 10 * 8 * 2)
	x := archsimd.BroadcastFloat32x8(0.999999)
	y := archsimd.BroadcastFloat32x8(1e-7)
	for b.Loop() {
		c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 := fmaChains8(iters, x, y)
		v := c0.Add(c1).Add(c2).Add(c3).Add(c4).Add(c5).Add(c6).Add(c7).Add(c8).Add(c9)
		var t [8]float32
		v.Store(&t)
		sinkF32 = t[0] + t[7]
	}
	b.ReportMetric(float64(iters*10*8*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// fmaChains8 runs n rounds of ten independent Float32x8 FMAs.
//
//go:noinline
func fmaChains8(n int, x, y archsimd.Float32x8) (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 archsimd.Float32x8) {
	for range n {
		c0 = c0.MulAdd(x, y)
		c1 = c1.MulAdd(x, y)
		c2 = c2.MulAdd(x, y)
		c3 = c3.MulAdd(x, y)
		c4 = c4.MulAdd(x, y)
		c5 = c5.MulAdd(x, y)
		c6 = c6.MulAdd(x, y)
		c7 = c7.MulAdd(x, y)
		c8 = c8.MulAdd(x, y)
		c9 = c9.MulAdd(x, y)
	}
	return
}

// BenchmarkAVXTransition measures what avx2Exit saves: a 256-bit add
// followed by a scalar float32 update (which Go compiles to legacy SSE),
// with and without VZEROUPPER between them. On the Zen 3 (KVM) machine the
// AVX2 kernels were tuned on, "dirty" took ≈130 ns per iteration and
// "vzeroupper" ≈6 ns.
func BenchmarkAVXTransition(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("no AVX2")
	}
	b.Run("dirty", func(b *testing.B) {
		for b.Loop() {
			transitionAVX(false)
			transitionSSE()
		}
	})
	b.Run("vzeroupper", func(b *testing.B) {
		for b.Loop() {
			transitionAVX(true)
			transitionSSE()
		}
	})
}

// BenchmarkAVXTransition512 is BenchmarkAVXTransition for the AVX-512
// kernels: a 512-bit add, then the scalar update, with and without
// VZEROUPPER (archsimd.ClearAVXUpperBits) between them.
func BenchmarkAVXTransition512(b *testing.B) {
	if !cpuAVX512 {
		b.Skip("no AVX-512")
	}
	b.Run("dirty", func(b *testing.B) {
		for b.Loop() {
			transitionAVX512(false)
			transitionSSE()
		}
	})
	b.Run("vzeroupper", func(b *testing.B) {
		for b.Loop() {
			transitionAVX512(true)
			transitionSSE()
		}
	})
}

var (
	transitionVec    [8]float32
	transitionVec512 [16]float32
	transitionScalar float32
)

//go:noinline
func transitionAVX512(clear bool) {
	v := archsimd.LoadFloat32x16(&transitionVec512)
	v.Add(v).Store(&transitionVec512)
	if clear {
		archsimd.ClearAVXUpperBits()
	}
}

//go:noinline
func transitionAVX(clear bool) {
	v := archsimd.LoadFloat32x8(&transitionVec)
	v.Add(v).Store(&transitionVec)
	if clear {
		avx2Exit()
	}
}

//go:noinline
func transitionSSE() { transitionScalar = transitionScalar*0.5 + 1 }
