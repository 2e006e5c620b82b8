//go:build !amd64

package simd

// cpuAsm512 is false off amd64: there is no AVX-512 SGEMM (sgemm512_amd64.go).
const cpuAsm512 = false

func sgemm512(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("simd: no AVX-512 SGEMM on this architecture")
}
