//go:build !amd64

package simd

// cpuAsmGemm is false off amd64: there is no assembly SGEMM (sgemm_amd64.go).
const cpuAsmGemm = false

func sgemmAsm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("simd: no assembly SGEMM on this architecture")
}
