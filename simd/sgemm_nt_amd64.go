//go:build amd64

package simd

import "unsafe"

//go:generate sh -c "go run sgemm_nt_gen.go > sgemm_nt_amd64.s"

// NT products with few rows on the AVX2 + FMA path: C = alpha·A·Bᵀ +
// beta·C with A m×k and B n×k stored row-major, both with their rows
// contiguous in k. sgemmAsm must transpose Bᵀ into panels of 16 columns,
// and with m ≤ 20 rows each packed element serves only 20 multiply-adds,
// so packing costs about as much as the product (≈42% of the FMA peak at
// the dense layers' forward pass, 20×200×784). sgemmNTDot instead computes
// dot products along k, reading A and B in place (the AVX-512 path's
// sgemm512Dot4 does the same; sgemm512_amd64.go): tiles of 2 rows of A ×
// 4 rows of B in eight YMM accumulators, each lane summing every eighth k
// step, and a horizontal sum per element at the end of the tile.
//
// Sums over k: within a k block of kc steps each element is the pairwise
// sum of eight lane sums, each accumulated with fused multiply-adds in
// order of k, so a product passes through at most min(kc, ⌈kc/8⌉+3)
// roundings; blocks are added to C as in sgemmAsm (alpha·sum, one
// rounding, then one FMA with C). Per element error ≤
// γ_{min(k,⌈kc/8⌉+3)+nb+1}·Σ|alpha·a·b| + γ_{nb}·|beta·c| for nb k blocks:
// within γ_{k+nb} for k ≥ 5 and never worse than sgemmAsm's blocked
// sums. Zeros of A are not skipped (0·Inf and 0·NaN give NaN); steps past
// kc are masked out of the loads, not multiplied by zero; beta = 0 writes
// C without reading it.

const (
	// sgemmNTMaxM is the most rows of C that run on sgemmNTDot, and
	// sgemmNTMinK the fewest k steps (sgemmNTMinKFew with at most
	// sgemmNTFewM rows): with fewer steps the horizontal sums of every
	// tile cost more than packing Bᵀ. Measured on one Zen 5 core
	// (BenchmarkSgemmNT, AVX2 peak ≈130–140 GFLOP/s): NT 64×200×64 ran at
	// 88 GFLOP/s as dot products against 69 packed, 64×200×32 at 58
	// against 66; 20×200×16 at 44 against 40 and 20×32×9 at 25 against 40;
	// with k = 784 dot products stayed faster up to 128 rows and tied at
	// 256, but the packed kernel won at the CNN's small-k shapes with many
	// rows (676×32×9, 145×64×32).
	sgemmNTMaxM    = 64
	sgemmNTMinK    = 64
	sgemmNTFewM    = 20
	sgemmNTMinKFew = 16
	// sgemmNTKC is the most k steps per block: the k block of 20 rows of
	// A (40 KiB at 512 steps) stays in the 48 KiB L1 of the Zen 5 core
	// while the four rows of B of a column strip stream past; 400–800
	// measured alike at 20×200×784, and without blocking the CNN's fc1
	// (20×128×9216) lost ≈8%.
	sgemmNTKC = 512
)

// useSgemmNT reports whether an NT product with m rows and k steps runs on
// sgemmNT rather than on a kernel that packs Bᵀ.
func useSgemmNT(m, k int) bool {
	return m <= sgemmNTMaxM && (k >= sgemmNTMinK || m <= sgemmNTFewM && k >= sgemmNTMinKFew)
}

// sgemmNTDot is implemented in sgemm_nt_amd64.s: C(i, j) for i < m rows of
// A (from a, lda bytes apart) and j < nr ≤ 4 rows of B (from b, ldb bytes
// apart) over kc ≥ 1 steps of k, into C at c (ldc bytes per row):
// alpha·sum, or alpha·sum + beta·C with load ≠ 0.
//
//go:noescape
func sgemmNTDot(kc int, a unsafe.Pointer, lda uintptr, m int, b unsafe.Pointer, ldb uintptr, nr int, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load int)

// sgemmNT computes C = alpha·A·Bᵀ + beta·C with sgemmNTDot for validated
// arguments with m, n, k > 0 and alpha ≠ 0 (see the file comment): k
// blocks of equal size (a multiple of 8 but for the last) of at most
// sgemmNTKC steps, in each a column strip of 4 rows of B at a time against
// all m rows of A. It needs cpuAsmGemm.
func sgemmNT(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	nb := (k + sgemmNTKC - 1) / sgemmNTKC
	kc0 := ((k+nb-1)/nb + 7) / 8 * 8
	load := 0
	if beta != 0 {
		load = 1
	}
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		pa := unsafe.Pointer(&a[pc])
		for jr := 0; jr < n; jr += 4 {
			sgemmNTDot(kc, pa, uintptr(lda)*4, m, unsafe.Pointer(&b[jr*ldb+pc]), uintptr(ldb)*4, min(4, n-jr),
				unsafe.Pointer(&c[jr]), uintptr(ldc)*4, alpha, beta, load)
		}
		// Later k blocks add to what the first one stored.
		beta, load = 1, 1
	}
}
