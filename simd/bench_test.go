package simd

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSizes are a row of the MLP's hidden layers (the bias and ReLU
// calls of the forward and backward passes, where a call's fixed costs
// show) and the two models' parameter counts: logreg 784·10+10 and the
// 784-200-200-10 MLP.
var benchSizes = []int{200, 7850, 199210}

func benchVecs(n int) (x, y []float32) {
	rng := rand.New(rand.NewPCG(1, 1))
	return randVec(rng, n), randVec(rng, n)
}

// benchVec runs f over vectors of each size; SetBytes counts the float32
// bytes read and written, so MB/s is memory throughput.
func benchVec(b *testing.B, vecsTouched int, f func(x, y []float32)) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			x, y := benchVecs(n)
			b.SetBytes(int64(4 * n * vecsTouched))
			b.ReportAllocs()
			for b.Loop() {
				f(x, y)
			}
		})
	}
}

var sinkF32 float32
var sinkF64 float64
var sinkBool bool

func BenchmarkAxpy(b *testing.B) {
	benchVec(b, 3, func(x, y []float32) { Axpy(y, 1e-9, x) })
}

func BenchmarkDot(b *testing.B) {
	benchVec(b, 2, func(x, y []float32) { sinkF32 = Dot(x, y) })
}

func BenchmarkNorm2(b *testing.B) {
	benchVec(b, 1, func(x, _ []float32) { sinkF64 = Norm2(x) })
}

func BenchmarkScale(b *testing.B) {
	// A variable factor (a constant 1 would be folded away); its square is
	// 1 up to rounding, so repeated calls keep x in range.
	alpha := [2]float32{1.0001, 1 / 1.0001}
	i := 0
	benchVec(b, 2, func(x, _ []float32) { Scale(x, alpha[i&1]); i++ })
}

func BenchmarkAdd(b *testing.B) {
	benchVec(b, 3, func(x, y []float32) { Add(y, x) })
}

func BenchmarkSub(b *testing.B) {
	benchVec(b, 3, func(x, y []float32) { Sub(y, x, x) })
}

func BenchmarkAllFinite(b *testing.B) {
	benchVec(b, 1, func(x, _ []float32) { sinkBool = AllFinite(x) })
}

func BenchmarkClipToNorm(b *testing.B) {
	// Every call clips, so this times the clipping path (norm, scale,
	// re-check norm); the copy that restores the input is included.
	benchVec(b, 5, func(x, y []float32) { copy(y, x); sinkF64 = ClipToNorm(y, 1) })
}

// BenchmarkGemm covers the products of the MLP (784-200-200-10) at batch
// 20 with its out×in weight layout: forward X·Wᵀ (NT), weight gradient
// dZᵀ·X (TN) and input gradient dZ·W (NN), for the 784→200, 200→200 and
// 200→10 layers, the 784→200 layer at batch 32 and 64, and those of the
// EMNIST CNN (fl/model/cnn.go: conv 3×3 with 32 and 64 filters on 28×28
// input, im2col over the batch, dense 9216→128→10) at batch 20: forward
// col·Wᵀ (NT), weight gradient δᵀ·col (TN) and input gradient δ·W (NN).
// MB/s here is MFLOP/s (2mnk per call), also reported as GFLOP/s;
// BenchmarkFMAPeak and BenchmarkFMAPeakAVX2 (simd build) give the core's
// peak. The kernels are those Path reports (DPFL_SIMD selects).
func BenchmarkGemm(b *testing.B) {
	for _, s := range gemmBenchShapes {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			a, bb, c := randVec(rng, s.m*s.k), randVec(rng, s.k*s.n), make([]float32, s.m*s.n)
			lda, ldb := s.k, s.n
			if s.tA {
				lda = s.m
			}
			if s.tB {
				ldb = s.k
			}
			flop := 2 * s.m * s.n * s.k
			b.SetBytes(int64(flop))
			b.ReportAllocs()
			for b.Loop() {
				Gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(float64(flop)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

var gemmBenchShapes = []struct {
	name    string
	tA, tB  bool
	m, n, k int
}{
	{"fwd_NT_20x200x784", false, true, 20, 200, 784},
	{"dW_TN_200x784x20", true, false, 200, 784, 20},
	{"dX_NN_20x784x200", false, false, 20, 784, 200},
	{"fwd_NT_20x200x200", false, true, 20, 200, 200},
	{"dW_TN_200x200x20", true, false, 200, 200, 20},
	{"dX_NN_20x200x200", false, false, 20, 200, 200},
	{"fwd_NT_20x10x200", false, true, 20, 10, 200},
	{"dW_TN_10x200x20", true, false, 10, 200, 20},
	{"dX_NN_20x200x10", false, false, 20, 200, 10},
	// Batch 32 and 64, the "batch ≥ 32" efficiency target.
	{"fwd_NT_32x200x784", false, true, 32, 200, 784},
	{"dW_TN_200x784x32", true, false, 200, 784, 32},
	{"dX_NN_32x784x200", false, false, 32, 784, 200},
	{"fwd_NT_64x200x784", false, true, 64, 200, 784},
	{"dW_TN_200x784x64", true, false, 200, 784, 64},
	{"dX_NN_64x784x200", false, false, 64, 784, 200},
	// The CNN at batch 20: 20·26² and 20·24² im2col rows.
	{"cnn_conv1_NT_13520x32x9", false, true, 13520, 32, 9},
	{"cnn_conv1_dW_TN_32x9x13520", true, false, 32, 9, 13520},
	{"cnn_conv2_NT_11520x64x288", false, true, 11520, 64, 288},
	{"cnn_conv2_dW_TN_64x288x11520", true, false, 64, 288, 11520},
	{"cnn_conv2_dX_NN_11520x288x64", false, false, 11520, 288, 64},
	{"cnn_fc1_NT_20x128x9216", false, true, 20, 128, 9216},
	{"cnn_fc1_dW_TN_128x9216x20", true, false, 128, 9216, 20},
	{"cnn_fc1_dX_NN_20x9216x128", false, false, 20, 9216, 128},
	{"cnn_fc2_NT_20x10x128", false, true, 20, 10, 128},
	{"cnn_fc2_dW_TN_10x128x20", true, false, 10, 128, 20},
	{"cnn_fc2_dX_NN_20x128x10", false, false, 20, 128, 10},
	// The CNN as it now trains (fl/model/cnn.go): conv1 per image (676
	// positions), conv2 as Winograd F(2×2, 3×3), 16 products per image over
	// 145 tiles (144 padded to a multiple of 5): forward V·Uᵀ, filter
	// gradient ∂Mᵀ·V and input gradient ∂M·U.
	{"cnn_conv1_NT_676x32x9", false, true, 676, 32, 9},
	{"cnn_conv1_dW_TN_9x32x676", true, false, 9, 32, 676},
	{"cnn_wino_NN_145x64x32", false, false, 145, 64, 32},
	{"cnn_wino_dU_TN_64x32x145", true, false, 64, 32, 145},
	{"cnn_wino_dV_NN_145x32x64", false, false, 145, 32, 64},
}

// BenchmarkKernelThenScalar times a short vector kernel (200 floats, a
// hidden layer's row) followed by scalar float code that Go compiles to
// legacy SSE: 200 independent float32 updates, as a layer's bias add or
// ReLU is followed by scalar loss or pooling code. With the upper halves
// of the vector registers left dirty, each SSE write merges into the full
// register and so waits for the register's previous value, which chains
// iterations that are otherwise independent. It measures what VZEROUPPER
// at the end of the kernels saves on the path selected (DPFL_SIMD).
func BenchmarkKernelThenScalar(b *testing.B) {
	x, y := benchVecs(200)
	z := make([]float32, 200)
	for _, k := range []struct {
		name string
		f    func()
	}{
		{"Add", func() { Add(y, x) }},
		{"Axpy", func() { Axpy(y, 1e-9, x) }},
		{"ReLU", func() { ReLU(y) }},
		{"Dot", func() { sinkF32 = Dot(x, y) }},
		{"Norm2", func() { sinkF64 = Norm2(x) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				k.f()
				scalarUpdate(z, y)
			}
		})
	}
}

// scalarUpdate is scalar float code with independent iterations.
//
//go:noinline
func scalarUpdate(z, v []float32) {
	v = v[:len(z)]
	for i, e := range v {
		z[i] = z[i]*0.5 + e*0.25
	}
}
