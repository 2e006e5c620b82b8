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
// and op(B) = B (NN, TN) by rows of 16 columns. op(B) = Bᵀ (NT) is packed,
// block by block, into panels of 16 columns (a transposition). With m ≤ 20
// rows (the models' batch), A is read by the kernel in place and B costs
// one pass.
//
// Short k and edges (2026-11-27; GFLOP/s on one Zen 5 core with
// DPFL_SIMD=avx2, BenchmarkFMAPeakAVX2 ≈125–135 in the same runs). With k = 20 (the weight gradients at batch 20) a
// tile is 200 FMAs, about 100 cycles, and a Go call per tile with its
// bookkeeping cost ≈15 ns; so sgemmKernel5x16 runs a whole row strip of
// tiles (or a column of row strips) in one call. It also reads rows past
// m in place (repeating row 0, never stored) rather than packing the last
// strip of A, and handles the last columns under VMASKMOVPS lane masks
// rather than through padded copies of B and C and a scalar store. And a
// B whose rows are a multiple of 4096 bytes apart (the CNN's fc1, ldb =
// 9216) put all kc rows of a 16-column strip in one set of the L1 cache
// (sgemmAliases), so each row strip of A fetched it again from L2 or
// memory: such a B is now copied, strip by strip, by the kernel itself as
// the first row strip reads it (sgemm.columns, with a prefetch of the next
// strip), or block by block for tall A (packBN16). Together, before →
// after (5 alternating runs each): fc1's TN 128×9216×20 55–56 → 93–94
// (≈42 → ≈72% of the peak), NN 20×9216×128 53–64 → 92–93 (≈45 → ≈70%),
// conv1's TN 9×32×676 53–54 → 86–89 and NT 676×32×9 76–79 → 85–89, the
// Winograd filter gradient TN 64×32×145 82–87 → 92–95, the MLP output
// layer's TN 10×200×20 74–81 → 86–92 and NN 20×200×10 70–76 → 88–91
// (small shapes timed over 5,000–20,000 calls); the other shapes
// unchanged or a few percent faster.
//
// Sums over k: each element of C is accumulated with fused multiply-adds
// in order of k within a k block (kc = ⌈k/nb⌉ steps, nb = ⌈k/sgemmKC⌉
// blocks), multiplied by alpha (one rounding) and added to C (FMA) block
// after block: per element error ≤ γ_{k+nb}·Σ|alpha·a·b| + γ_{nb}·|beta·c|
// (Higham 2002, §3.1), within the bound Gemm documents. Zeros of A are not
// skipped (0·Inf and 0·NaN give NaN); rows past m are computed but never
// stored, columns past n neither read nor stored;
// beta = 0 writes C without reading it.

const (
	sgemmMR = 5   // rows of a C tile (the models' batch 20 is four tiles)
	sgemmNR = 16  // columns of a C tile (two YMM registers)
	sgemmKC = 256 // most k per block: a row of 5 A strips + a 16-column B strip stay in L1
	sgemmNC = 256 // most columns per block of packed Bᵀ: KC·NC·4 B = 256 KiB (L2)

	// sgemmColsMaxA is the most elements of op(A) in a k block (m·kc)
	// for which sgemm.columns runs it: the whole block is read again for
	// every 16 columns of C, so it must stay in L1 with the copied strip
	// of B (16 + 16 KiB).
	sgemmColsMaxA = 4096
)

// cpuAsmGemm says whether this CPU runs sgemmKernel5x16: AVX2 and FMA,
// with the operating system saving the YMM state (x/sys/cpu checks it).
var cpuAsmGemm = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// sgemmKernel5x16 is implemented in sgemm_kernel_amd64.s: nt ≥ 1 tiles
// of 5×16, tile t with op(A) at a + t·aStep, op(B) at b + t·bStep and C at
// c + t·cStep; each reads kc ≥ 1 steps of 5 rows of A (rows past mr
// repeat row 0) and nr ≤ 16 columns of B (those past nr under a lane
// mask, neither read nor stored), and stores mr ≤ 5 rows of nr floats.
// With pack ≠ nil (nr = 16, bStep = 0) the first tile copies the kc rows
// of B it reads to pack, 16 floats each, and the later ones read them
// there.
//
//go:noescape
func sgemmKernel5x16(kc int, a unsafe.Pointer, rsA, csA uintptr, b unsafe.Pointer, rsB uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load, mr, nt int, aStep, bStep, cStep uintptr, pack unsafe.Pointer, nr int)

// sgemmBuf is one call's workspace: a block of packed op(B) and one
// strip of B copied by the kernel (sgemm.columns).
type sgemmBuf struct {
	b  [sgemmKC * sgemmNC]float32
	bs [sgemmKC * sgemmNR]float32
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
	var cols bool
	g.packB, cols = sgemmPackB(transB, m, ldb, kc0)
	g.beta, g.load = beta, 0
	if beta != 0 {
		g.load = 1
	}
	for pc := 0; pc < k; pc += kc0 {
		g.pc, g.kc = pc, min(kc0, k-pc)
		if cols {
			g.columns()
		} else {
			for jc := 0; jc < n; jc += sgemmNC {
				g.block(jc, min(sgemmNC, n-jc))
			}
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
	packB          bool // op(B) = B packed into panels (sgemmAliases)
	buf            *sgemmBuf
}

// block runs the columns [jc, jc+nc) of C for the current k block: packs
// op(B) if it is transposed or its rows alias in L1 (g.packB), then row
// strip by row strip, the full column tiles of the strip in one kernel
// call and the last partial one, under column masks, in another.
func (g *sgemm) block(jc, nc int) {
	packed := g.transB || g.packB
	if g.transB {
		packBT16(g.buf.b[:], g.b, g.ldb, g.pc, g.kc, jc, nc)
	} else if g.packB {
		packBN16(g.buf.b[:], g.b, g.ldb, g.pc, g.kc, jc, nc)
	}
	nf := nc / sgemmNR
	ldc := uintptr(g.ldc) * 4
	for ir := 0; ir < g.m; ir += sgemmMR {
		mr := min(sgemmMR, g.m-ir)
		pa, rsA, csA := g.aStrip(ir)
		if nf > 0 {
			pb, rsB := g.bStrip(jc, 0)
			bStep := uintptr(sgemmNR * 4)
			if packed {
				bStep = uintptr(g.kc * sgemmNR * 4)
			}
			pc := unsafe.Pointer(&g.c[ir*g.ldc+jc])
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, pc, ldc, g.alpha, g.beta, g.load, mr, nf, 0, bStep, sgemmNR*4, nil, sgemmNR)
		}
		if jr := nf * sgemmNR; jr < nc {
			pb, rsB := g.bStrip(jc, jr)
			pc := unsafe.Pointer(&g.c[ir*g.ldc+jc+jr])
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, pc, ldc, g.alpha, g.beta, g.load, mr, 1, 0, 0, 0, nil, nc-jr)
		}
	}
}

// columns runs the current k block column tile by column tile: for each
// 16 columns of B (read in place, kc rows), every row strip of A, the
// first strip's kernel copying the B strip into buf.bs (sgemmKernel5x16's
// pack) for the others to read from L1 (see sgemmPackB). The last partial
// column tile reads B in place under column masks.
func (g *sgemm) columns() {
	nfs := g.m / sgemmMR // full row strips (at least one: sgemmPackB)
	mrl := g.m % sgemmMR // rows of the last, partial one
	pa, rsA, csA := g.aStrip(0)
	ldc := uintptr(g.ldc) * 4
	aStep, cStep := sgemmMR*rsA, sgemmMR*ldc
	bs := unsafe.Pointer(&g.buf.bs[0])
	for jr := 0; jr < g.n; jr += sgemmNR {
		nr := min(sgemmNR, g.n-jr)
		pb, rsB := unsafe.Pointer(&g.b[g.pc*g.ldb+jr]), uintptr(g.ldb)*4
		pc := unsafe.Pointer(&g.c[jr])
		if nr < sgemmNR {
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, pc, ldc, g.alpha, g.beta, g.load, sgemmMR, nfs, aStep, 0, cStep, nil, nr)
		} else {
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, pc, ldc, g.alpha, g.beta, g.load, sgemmMR, nfs, aStep, 0, cStep, bs, nr)
			pb, rsB = bs, sgemmNR*4
		}
		if mrl > 0 {
			ir := nfs * sgemmMR
			pa, _, _ := g.aStrip(ir)
			sgemmKernel5x16(g.kc, pa, rsA, csA, pb, rsB, unsafe.Pointer(&g.c[ir*g.ldc+jr]), ldc, g.alpha, g.beta, g.load, mrl, 1, 0, 0, 0, nil, nr)
		}
	}
}

// aOff is the index in a of op(A)(ir, pc), the current k block's first
// element of row ir.
func (g *sgemm) aOff(ir int) int {
	if g.transA {
		return g.pc*g.lda + ir
	}
	return ir*g.lda + g.pc
}

// aStrip returns where the kernel reads rows [ir, ir+5) of op(A) for the
// current k block, in place, and its strides in bytes (rows past m are
// not read: the kernel repeats row 0 for them).
func (g *sgemm) aStrip(ir int) (unsafe.Pointer, uintptr, uintptr) {
	pa := unsafe.Pointer(&g.a[g.aOff(ir)])
	if g.transA {
		return pa, 4, uintptr(g.lda) * 4
	}
	return pa, uintptr(g.lda) * 4, 4
}

// bStrip returns where the kernel reads columns [jc+jr, jc+jr+16) of
// op(B) for the current k block (the last ones under column masks) and
// its row stride in bytes: the packed block for Bᵀ or an aliasing B, else
// B in place.
func (g *sgemm) bStrip(jc, jr int) (unsafe.Pointer, uintptr) {
	if g.transB || g.packB {
		return unsafe.Pointer(&g.buf.b[jr*g.kc]), sgemmNR * 4
	}
	return unsafe.Pointer(&g.b[g.pc*g.ldb+jc+jr]), uintptr(g.ldb) * 4
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

// sgemmPackB says how sgemmPacked reads op(B) = B (NN, TN) for m rows
// and k blocks of kc0 steps: in place (both false), unless its rows
// alias in L1 (sgemmAliases) and there is more than one row strip to
// reuse it; then column tile by column tile, each strip copied by the
// kernel as the first row strip reads it (cols, sgemm.columns), where the
// k block of op(A) fits sgemmColsMaxA, else packed block by block (packB,
// packBN16). Bᵀ (NT) is always packed block by block.
func sgemmPackB(transB bool, m, ldb, kc0 int) (packB, cols bool) {
	if transB || m <= sgemmMR || !sgemmAliases(ldb, kc0) {
		return false, false
	}
	if m*kc0 <= sgemmColsMaxA {
		return false, true
	}
	return true, false
}

// sgemmAliases reports whether a strip of 16 columns of B read in place,
// kc rows ldb floats apart, would put more than eight rows in some set of
// the L1 data cache (64 sets of 64-byte lines, 12 ways on Zen 5 and 8 on
// Zen 3): rows whose byte offsets agree modulo 4096 fall into the same
// set, and a stride of ldb·4 bytes spreads kc rows over only
// 4096/gcd(ldb·4, 4096) offsets (one for ldb = 9216, the CNN's fc1: all
// kc rows in one set, so every row was fetched again from L2 for each row
// strip of A).
func sgemmAliases(ldb, kc int) bool {
	s, t := ldb*4%4096, 4096
	for s != 0 {
		s, t = t%s, s
	}
	sets := min(64, 4096/t)
	return kc > 8*sets
}

// packBN16 packs columns [jc, jc+nc) of op(B) = B for k steps [pc,
// pc+kc) into dst as packBT16 does: consecutive panels of 16 columns, each
// kc rows of 16 floats, the last padded with zeros. Each row of B is read
// once, in order.
func packBN16(dst []float32, b []float32, ldb, pc, kc, jc, nc int) {
	nf := nc / sgemmNR * sgemmNR
	for p := range kc {
		row := b[(pc+p)*ldb+jc:][:nc]
		for jr := 0; jr < nf; jr += sgemmNR {
			*(*[sgemmNR]float32)(dst[jr*kc+p*sgemmNR:]) = *(*[sgemmNR]float32)(row[jr:])
		}
		if nf < nc {
			d := (*[sgemmNR]float32)(dst[nf*kc+p*sgemmNR:])
			n := copy(d[:], row[nf:])
			clear(d[n:])
		}
	}
}
