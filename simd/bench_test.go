package simd

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchSizes are the two models' parameter counts: logreg 784·10+10 and
// the 784-200-200-10 MLP.
var benchSizes = []int{7850, 199210}

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
// dZᵀ·X (TN) and input gradient dZ·W (NN), for the 784→200 and 200→200
// layers, and the 784→200 layer at batch 32 and 64. MB/s here is MFLOP/s
// (2mnk per call); BenchmarkFMAPeak (simd build) gives the core's peak.
func BenchmarkGemm(b *testing.B) {
	for _, s := range []struct {
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
		// Batch 32 and 64, the "batch ≥ 32" efficiency target.
		{"fwd_NT_32x200x784", false, true, 32, 200, 784},
		{"dW_TN_200x784x32", true, false, 200, 784, 32},
		{"dX_NN_32x784x200", false, false, 32, 784, 200},
		{"fwd_NT_64x200x784", false, true, 64, 200, 784},
		{"dW_TN_200x784x64", true, false, 200, 784, 64},
		{"dX_NN_64x784x200", false, false, 64, 784, 200},
	} {
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
			b.SetBytes(int64(2 * s.m * s.n * s.k))
			b.ReportAllocs()
			for b.Loop() {
				Gemm(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
		})
	}
}
