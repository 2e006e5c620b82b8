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
	if !hasAVX512 {
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
