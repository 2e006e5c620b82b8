//go:build amd64

package simd

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate sh -c "go run sgemm512_gen.go > sgemm512_kernel_amd64.s"

// AVX-512 SGEMM in Go assembly, for both builds (plain and
// GOEXPERIMENT=simd) on CPUs with AVX-512F. Go's assembler names all 32 ZMM
// registers, which archsimd code cannot use (Go allocates 15; see
// gemm_amd64_simd.go), so the tiles of C held in registers are 2.5× as
// large as gemmAVX512's. Two kernels, generated into
// sgemm512_kernel_amd64.s by sgemm512_gen.go:
//
//   - sgemm512Kernel (NN, TN, and NT with many rows): the loop structure
//     of sgemmAsm (sgemm_amd64.go; Goto & van de Geijn 2008, BLIS) around
//     a tile of up to 10×32 of C: 20 accumulators, more than the 8 FMAs
//     that two 512-bit FMA pipes with four cycles of latency (Zen 4/5) need
//     in flight; per k step two loads of B and ten broadcasts of A for
//     twenty VFMADD231PS. Operands are read in place as in sgemmAsm (op(A)
//     with two strides, op(B) = B by rows), B under a column mask at the
//     right edge (masked loads read nothing beyond the tile), and C is
//     stored under the same mask, so no edge is padded or copied: the
//     kernel has a loop for every tile height 1–10 and for 32 or 16
//     columns. Row strips are of equal height (m = 32 runs as 4 strips of
//     8, not 10+10+10+2; a strip of few rows leaves the FMA pipes idle).
//     op(B) = Bᵀ is packed, block by block, into panels of 32 columns by
//     16×16 register transposes (sgemm512PackBT).
//   - sgemm512Dot4 (NT with at most sgemm512DotM rows and k divisible by
//     4: the dense layers' forward pass at batch 20): packing Bᵀ costs as
//     much as the product when each packed element serves only 20 rows
//     (the outer-product kernel ran at ≈120 GFLOP/s there), so B is read in
//     place instead, as dot products along k. A tile is up to 20 rows × 4
//     columns of C in 20 accumulators; each holds 4 rows × 4 phases of k
//     (lane 4r+e sums the steps ≡ e mod 4 of row r), fed by op(A) packed
//     4 rows × 4 steps per vector (packA4, small: m·k floats) and four
//     consecutive floats of a row of B broadcast to the four 128-bit lanes
//     (VBROADCASTF32X4). The horizontal sums at the end of a tile are two
//     rounds of VSHUFPS per four accumulators, and only 4 phases are
//     combined (not 16 as in a plain dot product), so they cost ≈5% at k =
//     784. B is read once per strip of 20 rows.
//
// Sums over k. sgemm512Kernel, as sgemmAsm: each element of C is
// accumulated with fused multiply-adds in order of k within a k block (kc
// = ⌈k/nb⌉ steps, nb = ⌈k/sgemm512KC⌉ blocks), multiplied by alpha (one
// rounding) and added to C (FMA) block after block: per element error ≤
// γ_{k+nb}·Σ|alpha·a·b| + γ_{nb}·|beta·c| (Higham 2002, §3.1).
// sgemm512Dot4 adds each block's k steps in four interleaved sums, each in
// order of k, combined as (s0+s1)+(s2+s3), so per block γ_{kc/4+2} in place
// of γ_{kc}, and the same bound holds (k/4 + 2 ≤ k for k ≥ 4). Both are
// within the bound Gemm documents. Zeros of A are not skipped (0·Inf and
// 0·NaN give NaN); elements outside C's tile are neither read nor stored;
// beta = 0 writes C without reading it.

const (
	sgemm512MR = 10 // most rows of a C tile (the models' batch 20 is two tiles)
	sgemm512NR = 32 // columns of a C tile (two ZMM registers)
	// Most k per block: an A strip of 20 KiB stays in L1 while B's strip
	// (64 KiB) streams from L2; on the Zen 5 core 512 measured as fast as
	// 256 or faster (the CNN's im2col conv2, k = 288: 125 → 150 GFLOP/s,
	// one k block instead of two).
	sgemm512KC = 512
	sgemm512NC = 128 // most columns per block of packed Bᵀ: KC·NC·4 B = 256 KiB (L2), the pooled buffer

	// NT with at most sgemm512DotM rows and k divisible by 4 runs on
	// sgemm512Dot4 (at m = 64 the outer-product kernel was faster), in k
	// blocks of at most sgemm512DotKC: the packed A of 20 rows is 40 KiB.
	sgemm512DotM  = 40
	sgemm512DotKC = 512
)

// cpuAsm512 says whether this CPU runs sgemm512Kernel: AVX-512F with the
// operating system saving the ZMM and opmask state (x/sys/cpu checks it).
var cpuAsm512 = cpu.X86.HasAVX512F

// sgemm512Kernel is implemented in sgemm512_kernel_amd64.s: mr ≤ 10 rows
// of A from a, kc steps of B's rows of 32 floats (16 where mask>>16 = 0)
// from b under mask (bit j: column j), and C from c.
//
//go:noescape
func sgemm512Kernel(kc int, a unsafe.Pointer, rsA, csA uintptr, b unsafe.Pointer, rsB uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load int, mr int, mask uint64)

// sgemm512Dot4 is implemented in sgemm512_kernel_amd64.s: C(i, j) for
// i < mr ≤ 20, j < nr ≤ 4 over 4·nq steps of k, op(A) packed by packA4 at
// a4 (a4Stride bytes per 4 k steps), row j of B at b + j·ldb.
//
//go:noescape
func sgemm512Dot4(nq int, a4 unsafe.Pointer, a4Stride uintptr, b unsafe.Pointer, ldb uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load int, mr, nr int)

// sgemm512PackA4 is implemented in sgemm512_kernel_amd64.s: one group of
// rows of packA4.
//
//go:noescape
func sgemm512PackA4(dst unsafe.Pointer, dstStride uintptr, a unsafe.Pointer, lda uintptr, rows, kc int)

// sgemm512PackBT is implemented in sgemm512_kernel_amd64.s: the transpose
// of kc floats from each of 16 rows into kc rows of 16 floats at dst,
// dstStride bytes apart.
//
//go:noescape
func sgemm512PackBT(dst unsafe.Pointer, dstStride uintptr, rows *[16]unsafe.Pointer, kc int)

// sgemm512FMAPeak runs n rounds of 24 independent ZMM FMAs (768 flops).
//
//go:noescape
func sgemm512FMAPeak(n int)

// sgemm512Buf holds one call's block of packed Bᵀ, or of op(A) packed
// for sgemm512Dot4.
type sgemm512Buf struct {
	b [sgemm512KC * sgemm512NC]float32
}

var sgemm512Bufs = sync.Pool{New: func() any { return new(sgemm512Buf) }}

// sgemm512 computes C = alpha·op(A)·op(B) + beta·C for validated arguments
// with m, n, k > 0, alpha ≠ 0 and not both transposed (see the file
// comment); it needs cpuAsm512.
func sgemm512(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transB && !transA && m <= sgemm512DotM && k%4 == 0 {
		sgemm512NTDot(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	var buf *sgemm512Buf
	if transB {
		buf = sgemm512Bufs.Get().(*sgemm512Buf)
	}
	nb := (k + sgemm512KC - 1) / sgemm512KC
	kc0 := (k + nb - 1) / nb
	// ns strips of height ⌈m/ns⌉ or ⌊m/ns⌋, the taller first.
	ns := (m + sgemm512MR - 1) / sgemm512MR
	load := 0
	if beta != 0 {
		load = 1
	}
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		for jc := 0; jc < n; jc += sgemm512NC {
			nc := min(sgemm512NC, n-jc)
			if transB {
				packBT32(buf.b[:], b, ldb, pc, kc, jc, nc)
			}
			if transA && nb > 1 {
				// Long k with op(A) = Aᵀ (the filter gradients of an
				// im2col convolution): column tile by column tile, so that
				// one strip of B (kc × 32) serves every row strip from
				// L1/L2 rather than the whole block of B cycling through
				// L2 once per row strip (im2col conv2's 64×288×11520: ≈20%
				// faster). With few k blocks C is the larger operand and
				// is better written row by row (128×9216×20: ≈10% slower
				// column tile by column tile).
				for jr := 0; jr < nc; jr += sgemm512NR {
					nr := min(sgemm512NR, nc-jr)
					pb, rsB := unsafe.Pointer(&b[pc*ldb+jc+jr]), uintptr(ldb)*4
					mask := uint64(1)<<nr - 1
					ir := 0
					for s := range ns {
						mr := (m - ir + ns - s - 1) / (ns - s)
						pa, rsA, csA := sgemm512AStrip(transA, a, lda, ir, pc)
						sgemm512Kernel(kc, pa, rsA, csA, pb, rsB, unsafe.Pointer(&c[ir*ldc+jc+jr]), uintptr(ldc)*4, alpha, beta, load, mr, mask)
						ir += mr
					}
				}
				continue
			}
			ir := 0
			for s := range ns {
				// Strips of height ⌈(m-ir)/(ns-s)⌉: later ones are no taller.
				mr := (m - ir + ns - s - 1) / (ns - s)
				pa, rsA, csA := sgemm512AStrip(transA, a, lda, ir, pc)
				for jr := 0; jr < nc; jr += sgemm512NR {
					nr := min(sgemm512NR, nc-jr)
					var pb unsafe.Pointer
					var rsB uintptr
					if transB {
						pb, rsB = unsafe.Pointer(&buf.b[jr*kc]), panelStride(nr)
					} else {
						pb, rsB = unsafe.Pointer(&b[pc*ldb+jc+jr]), uintptr(ldb)*4
					}
					mask := uint64(1)<<nr - 1
					pcC := unsafe.Pointer(&c[ir*ldc+jc+jr])
					sgemm512Kernel(kc, pa, rsA, csA, pb, rsB, pcC, uintptr(ldc)*4, alpha, beta, load, mr, mask)
				}
				ir += mr
			}
		}
		// Later k blocks add to what the first one stored.
		beta, load = 1, 1
	}
	if buf != nil {
		sgemm512Bufs.Put(buf)
	}
}

// sgemm512AStrip returns where the kernel reads rows ir… of op(A) from
// k step pc on, and its strides in bytes.
func sgemm512AStrip(transA bool, a []float32, lda, ir, pc int) (unsafe.Pointer, uintptr, uintptr) {
	if transA {
		return unsafe.Pointer(&a[pc*lda+ir]), 4, uintptr(lda) * 4
	}
	return unsafe.Pointer(&a[ir*lda+pc]), uintptr(lda) * 4, 4
}

// panelStride is the row stride in bytes of a packed panel of nr columns:
// 32 floats, or 16 for a last panel of at most 16 columns.
func panelStride(nr int) uintptr {
	if nr <= 16 {
		return 16 * 4
	}
	return 32 * 4
}

// packBT32 packs columns [jc, jc+nc) of op(B) = Bᵀ (B stored n×k, so
// op(B)(p, j) = b[j·ldb + p]) for k steps [pc, pc+kc) into dst as
// consecutive panels of 32 columns, each kc rows of 32 floats (16 for a
// last panel of at most 16 columns): panel jr at dst[jr·kc:]. Columns
// past nc in a panel repeat the last one (the kernel masks them).
func packBT32(dst []float32, b []float32, ldb, pc, kc, jc, nc int) {
	var rows [16]unsafe.Pointer
	for jr := 0; jr < nc; jr += sgemm512NR {
		nr := min(sgemm512NR, nc-jr)
		stride := panelStride(nr)
		for h := 0; h < nr; h += 16 {
			for r := range rows {
				j := jc + jr + min(h+r, nr-1)
				rows[r] = unsafe.Pointer(&b[j*ldb+pc])
			}
			sgemm512PackBT(unsafe.Pointer(&dst[jr*kc+h]), stride, &rows, kc)
		}
	}
}

// sgemm512NTDot computes C = alpha·A·Bᵀ + beta·C with sgemm512Dot4, for
// few rows (m ≤ sgemm512DotM) and k divisible by 4: B is read in place,
// once per strip of at most 20 rows, and only A is packed.
func sgemm512NTDot(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	buf := sgemm512Bufs.Get().(*sgemm512Buf)
	groups := (m + 3) / 4
	// k blocks of at most kcMax steps (a multiple of 4) such that the
	// packed block fits the buffer.
	kcMax := min(sgemm512DotKC, len(buf.b)/(16*groups)*4)
	nb := (k + kcMax - 1) / kcMax
	kc0 := ((k+nb-1)/nb + 3) / 4 * 4
	ns := (m + 19) / 20
	load := 0
	if beta != 0 {
		load = 1
	}
	for pc := 0; pc < k; pc += kc0 {
		kc := min(kc0, k-pc)
		packA4(buf.b[:], a, lda, m, pc, kc)
		for jr := 0; jr < n; jr += 4 {
			nr := min(4, n-jr)
			pb := unsafe.Pointer(&b[jr*ldb+pc])
			ir := 0
			for s := range ns {
				mr := (m - ir + ns - s - 1) / (ns - s)
				mr = (mr + 3) / 4 * 4 // whole groups but for the last strip
				mr = min(mr, m-ir)
				pa := unsafe.Pointer(&buf.b[ir*4])
				sgemm512Dot4(kc/4, pa, uintptr(groups)*64, pb, uintptr(ldb)*4, unsafe.Pointer(&c[ir*ldc+jr]), uintptr(ldc)*4, alpha, beta, load, mr, nr)
				ir += mr
			}
		}
		beta, load = 1, 1
	}
	sgemm512Bufs.Put(buf)
}

// packA4 packs rows [0, m) of A (row-major, leading dimension lda) for k
// steps [pc, pc+kc), kc divisible by 4, for sgemm512Dot4: for each 4 k
// steps q, for each group g of rows 4g…4g+3, the 16 floats A(4g+r, pc+4q+e)
// at dst[(q·groups+g)·16 + 4r + e] (rows past m repeat row m-1).
func packA4(dst []float32, a []float32, lda, m, pc, kc int) {
	groups := (m + 3) / 4
	_ = dst[(kc/4)*groups*16-1]
	for g := range groups {
		sgemm512PackA4(unsafe.Pointer(&dst[g*16]), uintptr(groups)*64, unsafe.Pointer(&a[4*g*lda+pc]), uintptr(lda)*4, min(4, m-4*g), kc)
	}
}
