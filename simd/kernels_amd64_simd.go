//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// Dispatch for GOEXPERIMENT=simd on amd64. For now it is the same as
// kernels_generic.go, so the package builds and passes its tests under
// both settings; archsimd implementations of these functions replace the
// forwarding bodies here (keeping the generic loops for tails), and the
// tests compare every kernel against float64 references either way.

func axpy(dst []float32, alpha float32, x []float32) { axpyGeneric(dst, alpha, x) }
func dot(x, y []float32) float32                     { return dotGeneric(x, y) }
func sumSquares(x []float32) float64                 { return sumSquaresGeneric(x) }
func scale(dst []float32, alpha float32)             { scaleGeneric(dst, alpha) }
func add(dst, x []float32)                           { addGeneric(dst, x) }
func sub(dst, x, y []float32)                        { subGeneric(dst, x, y) }
func allFinite(x []float32) bool                     { return allFiniteGeneric(x) }

func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if hasAVX512 {
		gemmAVX512(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// hasAVX512 selects the AVX-512 kernels (AVX-512F and the VL/BW/DQ
// extensions archsimd's 512-bit operations use); tests switch it off to
// exercise the fallbacks on an AVX-512 machine.
var hasAVX512 = archsimd.X86.AVX512()
