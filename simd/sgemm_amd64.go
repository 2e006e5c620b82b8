//go:build amd64

package simd

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// AVX2 + FMA SGEMM in Go assembly, for both builds (plain and
// GOEXPERIMENT=simd). The loop structure is that of Goto & van de Geijn
// 2008 ("Anatomy of high-performance matrix multiplication", §4) and BLIS
// (Van Zee & van de Geijn 2015): k blocks of at most sgemmKC steps, column
// blocks of at most sgemmNC, and a 5×16 register tile of C
// (sgemmKernel5x16, sgemm_kernel_amd64.s) that runs one VFMADD231PS per
// accumulator and step.
//
// Why assembly: archsimd's MulAdd is emitted in the 213 form, whose result
// overwrites a multiplicand, and Go's register allocator spills past about
// ten accumulators; the archsimd kernel (gemm_avx2_amd64_simd.go) reached
// 24–43 GFLOP/s at the MLP's shapes on a Zen 3 core with a ≈110 GFLOP/s FMA
// peak. In assembly the accumulators stay in place, A is broadcast straight
// from memory and B is read from memory once per step.
//
// Operands are read in place wherever the kernel can address them with
// two strides: op(A) always (an element (i, p) of op(A) is at
// a + i·rsA + p·csA, with (rsA, csA) = (lda, 1) for A and (1, lda) for Aᵀ),
// and op(B) = B (NN, TN) by rows of 16 columns. Only op(B) = Bᵀ (NT) is
// packed, block by block, into panels of 16 columns (a transposition), and
// the partial tiles at the bottom and right edges of C are padded with
// zeros through small buffers. With m ≤ 20 rows (the models' batch), A is
// read by the kernel in place and B costs one pass.
//
// Sums over k: each element of C is accumulated with fused multiply-adds
// in order of k within a k block (kc = ⌈k/nb⌉ steps, nb = ⌈k/sgemmKC⌉
// blocks), multiplied by alpha (one rounding) and added to C (FMA) block
// after block: per element error ≤ γ_{k+nb}·Σ|alpha·a·b| + γ_{nb}·|beta·c|
// (Higham 2002, §3.1), within the bound Gemm documents. Zeros of A are not
// skipped (0·Inf and 0·NaN give NaN); padding is computed but never stored;
// beta = 0 writes C without reading it.

const (
	sgemmMR = 5   // rows of a C tile (the models' batch 20 is four tiles)
	sgemmNR = 16  // columns of a C tile (two YMM registers)
	sgemmKC = 256 // most k per block: a row of 5 A strips + a 16-column B strip stay in L1
	sgemmNC = 256 // most columns per block of packed Bᵀ: KC·NC·4 B = 256 KiB (L2)
)

// cpuAsmGemm says whether this CPU runs sgemmKernel5x16: AVX2 and FMA,
// with the operating system saving the YMM state (x/sys/cpu checks it).
var cpuAsmGemm = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// sgemmKernel5x16 is implemented in sgemm_kernel_amd64.s; a and b must
// address kc steps of a full 5×16 tile and c five rows of 16 floats.
//
//go:noescape
func sgemmKernel5x16(kc int, a unsafe.Pointer, rsA, csA uintptr, b unsafe.Pointer, rsB uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load int)

// sgemmBuf is one call's workspace: a block of packed Bᵀ, one padded A
// tile strip and one padded B strip for the edges, and a tile of sums.
type sgemmBuf struct {
	b    [sgemmKC * sgemmNC]float32
	a    [sgemmKC * sgemmMR]float32
	bs   [sgemmKC * sgemmNR]float32
	tile [sgemmMR * sgemmNR]float32
}

var sgemmBufs = sync.Pool{New: func() any { return new(sgemmBuf) }}

// sgemmAsm computes C = alpha·op(A)·op(B) + beta·C for validated arguments
// with m, n, k > 0, alpha ≠ 0 and not both transposed; it needs
// cpuAsmGemm. NT products with few rows and enough k steps (useSgemmNT)
// run as dot products on sgemmNT (sgemm_nt_amd64.go), all others on
// sgemmPacked.
func sgemmAsm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transB && !transA && useSgemmNT(m, k) {
		sgemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemmPacked(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemmPacked is sgemmAsm on sgemmKernel5x16 (see the file comment), for
// any shape sgemmAsm accepts.
func sgemmPacked(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	g := sgemm{transA: transA, transB: transB, m: m, n: n, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc, alpha: alpha}
	g.buf = sgemmBufs.Get().(*sgemmBuf)
	nb := (k + sgemmKC - 1) / sgemmKC
	kc0 := (k + nb - 1) / nb
	g.beta, g.load = beta, 0
	if beta != 0 {
		g.load = 1
	}
	for pc := 0; pc < k; pc += kc0 {
		g.pc, g.kc = pc, min(kc0, k-pc)
		for jc := 0; jc < n; jc += sgemmNC {
			g.block(jc, min(sgemmNC, n-jc))
		}
		// Later k blocks add to what the first one stored.
		g.beta, g.load = 1, 1
	}
	sgemmBufs.Put(g.buf)
}

// sgemm is one call of sgemmAsm and its current k block [pc, pc+kc).
type sgemm struct {
	transA, transB bool
	m, n, pc, kc   int
	a, b, c        []float32
	lda, ldb, ldc  int
	alpha, beta    float32
	load           int
	buf            *sgemmBuf
}

// block runs the columns [jc, jc+nc) of C for the current k block: packs
// Bᵀ if op(B) is transposed, then every tile, row strip by row strip.
func (g *sgemm) block(jc, nc int) {
	if g.transB {
		packBT16(g.buf.b[:], g.b, g.ldb, g.pc, g.kc, jc, nc)
	}
	for ir := 0; ir < g.m; ir += sgemmMR {
		mr := min(sgemmMR, g.m-ir)
		pa, rsA, csA := g.aStrip(ir, mr)
		for jr := 0; jr < nc; jr += sgemmNR {
			nr := min(sgemmNR, nc-jr)
			pb, rsB := g.bStrip(jc, jr, nr, ir == 0)
			if mr == sgemmMR && nr == sgemmNR {
				pc := unsafe.Pointer(&g.c[ir*g.ldc+jc+jr])
				sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, pc, uintptr(g.ldc)*4, g.alpha, g.beta, g.load)
				continue
			}
			t := &g.buf.tile
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, unsafe.Pointer(&t[0]), sgemmNR*4, 1, 0, 0)
			g.storeEdge(t, ir, jc+jr, mr, nr)
		}
	}
}

// aStrip returns where the kernel reads rows [ir, ir+mr) of op(A) for the
// current k block, and its strides in bytes: in place for a full strip,
// else copied into the zero-padded buffer (rsA = 1, csA = 5 floats).
func (g *sgemm) aStrip(ir, mr int) (unsafe.Pointer, uintptr, uintptr) {
	if mr == sgemmMR {
		if g.transA {
			return unsafe.Pointer(&g.a[g.pc*g.lda+ir]), 4, uintptr(g.lda) * 4
		}
		return unsafe.Pointer(&g.a[ir*g.lda+g.pc]), uintptr(g.lda) * 4, 4
	}
	buf := g.buf.a[:g.kc*sgemmMR]
	clear(buf)
	for p := range g.kc {
		row := buf[p*sgemmMR : p*sgemmMR+mr]
		for i := range row {
			if g.transA {
				row[i] = g.a[(g.pc+p)*g.lda+ir+i]
			} else {
				row[i] = g.a[(ir+i)*g.lda+g.pc+p]
			}
		}
	}
	return unsafe.Pointer(&buf[0]), 4, sgemmMR * 4
}

// bStrip returns where the kernel reads columns [jc+jr, jc+jr+nr) of op(B)
// for the current k block and its row stride in bytes: the packed block
// for Bᵀ, B in place for a full strip, else a zero-padded copy (made once
// per strip and k block: fresh is true for the first row strip).
func (g *sgemm) bStrip(jc, jr, nr int, fresh bool) (unsafe.Pointer, uintptr) {
	if g.transB {
		return unsafe.Pointer(&g.buf.b[jr*g.kc]), sgemmNR * 4
	}
	if nr == sgemmNR {
		return unsafe.Pointer(&g.b[g.pc*g.ldb+jc+jr]), uintptr(g.ldb) * 4
	}
	buf := g.buf.bs[:g.kc*sgemmNR]
	if fresh {
		clear(buf)
		for p := range g.kc {
			copy(buf[p*sgemmNR:p*sgemmNR+nr], g.b[(g.pc+p)*g.ldb+jc+jr:][:nr])
		}
	}
	return unsafe.Pointer(&buf[0]), sgemmNR * 4
}

// storeEdge adds the mr×nr corner of a tile of sums (alpha not yet
// applied) to C at (ir, jc): C = alpha·t + beta·C, C unread when load = 0.
func (g *sgemm) storeEdge(t *[sgemmMR * sgemmNR]float32, ir, jc, mr, nr int) {
	for i := range mr {
		ci := g.c[(ir+i)*g.ldc+jc:][:nr]
		ti := t[i*sgemmNR:][:nr]
		for j := range ci {
			v := g.alpha * ti[j]
			if g.load != 0 {
				v += g.beta * ci[j]
			}
			ci[j] = v
		}
	}
}

// packBT16 packs columns [jc, jc+nc) of op(B) = Bᵀ (B stored n×k, so
// op(B)(p, j) = b[j·ldb + p]) for k steps [pc, pc+kc) into dst as
// consecutive panels of 16 columns, each kc rows of 16 floats, the last
// padded with zeros.
func packBT16(dst []float32, b []float32, ldb, pc, kc, jc, nc int) {
	for jr := 0; jr < nc; jr += sgemmNR {
		nr := min(sgemmNR, nc-jr)
		panel := dst[jr*kc : jr*kc+kc*sgemmNR]
		if nr < sgemmNR {
			clear(panel)
			for j := range nr {
				col := b[(jc+jr+j)*ldb+pc:][:kc]
				for p, v := range col {
					panel[p*sgemmNR+j] = v
				}
			}
			continue
		}
		// Full panels row by row of the panel: sixteen sequential read
		// streams and one sequential write stream (column by column, each
		// store went to a different cache line and packing cost as much
		// as the product at m = 20).
		var cols [sgemmNR][]float32
		for j := range cols {
			cols[j] = b[(jc+jr+j)*ldb+pc:][:kc]
		}
		for p := range kc {
			row := (*[sgemmNR]float32)(panel[p*sgemmNR:])
			row[0], row[1], row[2], row[3] = cols[0][p], cols[1][p], cols[2][p], cols[3][p]
			row[4], row[5], row[6], row[7] = cols[4][p], cols[5][p], cols[6][p], cols[7][p]
			row[8], row[9], row[10], row[11] = cols[8][p], cols[9][p], cols[10][p], cols[11][p]
			row[12], row[13], row[14], row[15] = cols[12][p], cols[13][p], cols[14][p], cols[15][p]
		}
	}
}
