//go:build !(goexperiment.simd && amd64)

package simd

// Portable dispatch: every vector kernel is its generic loop (generic.go);
// Gemm runs the AVX-512 assembly SGEMM of sgemm512_amd64.go on an amd64
// CPU with AVX-512F (Path "avx512"), the AVX2 + FMA one of sgemm_amd64.go
// on one with AVX2 and FMA (Path "avx2"), gonum otherwise (gemm.go).
// kernels_amd64_simd.go carries the opposite build constraint and holds
// the archsimd dispatch.

func axpy(dst []float32, alpha float32, x []float32) { axpyGeneric(dst, alpha, x) }
func dot(x, y []float32) float32                     { return dotGeneric(x, y) }
func sumSquares(x []float32) float64                 { return sumSquaresGeneric(x) }
func scale(dst []float32, alpha float32)             { scaleGeneric(dst, alpha) }
func add(dst, x []float32)                           { addGeneric(dst, x) }
func sub(dst, x, y []float32)                        { subGeneric(dst, x, y) }
func allFinite(x []float32) bool                     { return allFiniteGeneric(x) }
func relu(v []float32)                               { reluGeneric(v) }
func reluMask(d, a []float32)                        { reluMaskGeneric(d, a) }

func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if hasAVX512 && !(transA && transB) {
		sgemm512(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if hasAVX2 && !(transA && transB) {
		sgemmAsm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// No archsimd kernels in this build: cpuAVX512 and cpuAVX2 are whether the
// assembly SGEMMs run here, the one "avx512" and the one "avx2" kernel of
// this build (choosePath warns if DPFL_SIMD asks for a path the CPU lacks).
// Tests use forEachPath, which runs every path the CPU has.
var (
	cpuAVX512 = cpuAsm512
	cpuAVX2   = cpuAsmGemm
)

var hasAVX512, hasAVX2 = choosePath(cpuAVX512, cpuAVX2)
