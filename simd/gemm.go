package simd

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices
// (BLAS sgemm with gonum/blas's row-major convention), where op(A) is m×k,
// op(B) is k×n and C is m×n. transA means A is stored k×m and op(A) = Aᵀ;
// likewise transB means B is stored n×k. Element (r, s) of a stored matrix
// X with leading dimension ldx is x[r·ldx+s]; C must not overlap A or B.
//
// As in BLAS, beta = 0 overwrites C without reading it (NaNs already in C
// do not propagate), and alpha = 0 or k = 0 only scales C by beta without
// reading A or B.
//
// It panics, like gonum's Sgemm, on negative m, n or k, on a leading
// dimension smaller than the stored row length (or 1), and on a slice too
// short for the matrix it describes.
//
// Implementations. On an AVX-512 CPU (both builds; DPFL_SIMD=avx512 or
// unset) the NN, TN and NT products run on the AVX-512 assembly SGEMM of
// sgemm512_amd64.go and sgemm512_kernel_amd64.s (10×32 tiles of C in 20
// ZMM accumulators, A broadcast from memory, B read in place under column
// masks, Bᵀ packed for NT but for NT with at most 40 rows, which runs as
// dot products along k; ≈170–210 GFLOP/s at the models' shapes on one Zen
// 5 core, 76–96% of its measured 221 GFLOP/s peak; docs/performance.md,
// "AVX-512 machines"), with the AVX2 kernel's error bound below and the
// same NaN behaviour. On a CPU with AVX2 and FMA but not AVX-512 (or with
// DPFL_SIMD=avx2) they run on the AVX2 + FMA assembly kernel of
// sgemm_amd64.go and sgemm_kernel_amd64.s (5×16 tiles of C, one VFMADD231PS
// per accumulator and step, operands read in place but for Bᵀ and a B
// whose rows alias in L1, e.g. 9216 floats apart, which are copied; the
// last columns under lane masks; ≈85–98 GFLOP/s at the CNN's fc1 weight
// and input gradients on one Zen 5 core, ≈65–70% of its AVX2 FMA peak;
// ≈75–82 GFLOP/s at the MLP's NN/TN and the CNN's large shapes on one Zen
// 3 core under KVM, ≈70% of its ≈110 GFLOP/s FMA peak;
// docs/performance.md), in
// both builds, with the same NaN behaviour, per element error ≤
// γ_{k+nb}·Σ|alpha·a·b| + γ_{nb}·|beta·c| for nb = ⌈k/256⌉ k blocks, and a
// ≈280 KiB workspace from a sync.Pool per call; but for NT with at most 64
// rows and at least 64 k steps (16 with at most 20 rows: the dense layers'
// forward pass), which runs in both builds as dot products along k on
// the AVX2 assembly kernel of sgemm_nt_amd64.go and sgemm_nt_amd64.s (2×4
// tiles in eight YMM accumulators, A and B read in place, nothing packed
// and no workspace; ≈85–90 GFLOP/s at 20×200×784 and 20×200×200 on one
// Zen 5 core, ≈65% of its AVX2 FMA peak; per element error ≤
// γ_{min(k,⌈kc/8⌉+3)+nb+1}·Σ|alpha·a·b| + γ_{nb}·|beta·c| for nb =
// ⌈k/512⌉ k blocks of kc steps, the same NaN behaviour). In the
// GOEXPERIMENT=simd build, the remaining NT products with at most 20 rows
// and more than 16 columns (k < 16) stay on the archsimd kernel of
// gemm_avx2_amd64_simd.go (5×16 tiles over packed panels, whose 8×8
// transposes pack Bᵀ faster; error ≤ γ_{k+1}·Σ|a·b| plus ⌈k/96⌉+1
// roundings of beta·C; ≈460 KiB pooled buffer). Otherwise
// (a CPU without AVX2 and FMA, DPFL_SIMD=generic, TT) the products are
// delegated to gonum's Sgemm
// (gonum.org/v1/gonum/blas/gonum, SSE assembly inner loops, ≈8–25
// GFLOP/s) on C tiles of at most 64×192 so that gonum stays on its
// serial path: from four 64×64 blocks on it starts goroutines, which
// allocates and competes with the callers, which already run one model
// workspace per client worker in parallel. gonum sums over k in float32 in
// order of k (error ≤ γ_k·Σ|a·b| per element, Higham §3.5), and where
// op(B) is not transposed a zero element of A skips its row of B, so 0·Inf
// or 0·NaN there contributes 0 rather than NaN. Callers must therefore not
// rely on either NaN behaviour. Gemm does not allocate (but for the AVX2
// path's pool refilling after a garbage collection).
func Gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic("simd: Gemm with negative dimension")
	}
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	if lda < max(1, colsA) || ldb < max(1, colsB) || ldc < max(1, n) {
		panic("simd: Gemm leading dimension too small")
	}
	if m == 0 || n == 0 {
		return
	}
	if (rowsA > 0 && len(a) < (rowsA-1)*lda+colsA) ||
		(rowsB > 0 && len(b) < (rowsB-1)*ldb+colsB) ||
		len(c) < (m-1)*ldc+n {
		panic("simd: Gemm slice too short")
	}
	if alpha == 0 || k == 0 {
		if beta != 1 {
			for i := range m {
				ci := c[i*ldc : i*ldc+n]
				if beta == 0 {
					clear(ci)
				} else {
					scale(ci, beta)
				}
			}
		}
		return
	}
	gemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Tile sizes keeping gonum's Sgemm serial: it goes parallel once
// ⌈m/64⌉·⌈n/64⌉ ≥ 4 (blockSize and minParBlock in blas/gonum). Wide tiles
// keep its axpy inner loops long.
const (
	gemmTileM = 64
	gemmTileN = 3 * 64
)

// gemmGonum runs gonum's serial Sgemm tile by tile over C. Arguments have
// been validated by Gemm, so every tile is valid for gonum too.
func gemmGonum(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	tA, tB := blas.NoTrans, blas.NoTrans
	if transA {
		tA = blas.Trans
	}
	if transB {
		tB = blas.Trans
	}
	var impl gonum.Implementation
	for i := 0; i < m; i += gemmTileM {
		mi := min(gemmTileM, m-i)
		offA := i * lda // rows i… of A
		if transA {
			offA = i // columns i… of the stored k×m A
		}
		for j := 0; j < n; j += gemmTileN {
			nj := min(gemmTileN, n-j)
			offB := j // columns j… of B
			if transB {
				offB = j * ldb // rows j… of the stored n×k B
			}
			impl.Sgemm(tA, tB, mi, nj, k, alpha, a[offA:], lda, b[offB:], ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}
