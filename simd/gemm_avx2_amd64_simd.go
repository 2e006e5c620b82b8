//go:build goexperiment.simd && amd64

package simd

import (
	"simd/archsimd"
	"sync"
	"unsafe"
)

// AVX2 + FMA SGEMM (256-bit archsimd types) for CPUs without AVX-512, in
// the layout of BLIS (Van Zee & van de Geijn 2015): a 5×16 micro-kernel
// keeps one tile of C in ten Float32x8 accumulators over a k block of at
// most avx2KC steps, reading op(A) from a micro-panel packed for it (L1)
// and op(B) from a panel of 16 columns (L2). gemmAVX2 picks one of three
// loop orders:
//
//   - m ≤ 20 and op(B) = B (NN, TN: the MLP's and dense layers' input
//     gradients at batch 20): B is read in place, strip by strip, each
//     strip reused by the up to four packed micro-panels of A.
//   - op(B) packs into the buffer whole (k·n ≤ avx2KC·avx2NC: the CNN's
//     convolutions, whose B are the filters): it is packed once and the
//     micro-panels of A, the large operand, go outermost, so A is read
//     once, in order.
//   - otherwise (NT with a large B, TN with large k·n): blocks of avx2KC ×
//     avx2NC of op(B) are packed in turn and used by every micro-panel.
//
// What the code is shaped by (measured on one Zen 3 core under KVM, whose
// register FMA loop, BenchmarkFMAPeakAVX2, gives ≈110–120 GFLOP/s):
//
//   - Legacy-SSE instructions after 256-bit ones cost ≈125 ns each time
//     unless VZEROUPPER runs in between (BenchmarkAVXTransition), and Go
//     compiles scalar float code (comparisons of beta, float32 copies) to
//     legacy SSE. So nothing in the loops below handles a float32 as a
//     scalar (beta becomes an integer store mode, packBT copies uint32s),
//     and gemmAVX2 ends with avx2Exit. With an SSE comparison of beta
//     between tiles, the whole Gemm ran at ≈6–10 GFLOP/s.
//   - The micro-panel of A is packed pre-broadcast: every element becomes a
//     full Float32x8, so the kernel loads it with one VMOVUPS. Go lowers
//     BroadcastFloat32x8 of a float in memory to VMOVSS + VBROADCASTSS (no
//     load-broadcast form, no memory operand on the FMA), and the kernel
//     with in-loop broadcasts ran at ≈50 GFLOP/s against ≈65–90 with the
//     pre-broadcast panel. The panel is 8× larger, so avx2KC keeps it at
//     15 KiB, resident in L1 while the B panels stream from L2; with the
//     whole panel in L2 instead (k block 240), the kernel lost ≈25%. Packing
//     costs one 32-byte store per element of A (≈0.75 ns here), which is
//     why the shapes with few columns (the CNN's conv2 forward, n = 64)
//     stay below the others.
//   - archsimd's MulAdd is VFMADD213PS, whose result overwrites a
//     multiplicand: the accumulators cannot stay in place, every row's
//     first FMA needs a copy of its A vector, and the accumulators rotate
//     through the register file. 5×16 (ten accumulators, two B vectors, one
//     A vector and its copy: 14 of the 15 YMM registers Go allocates) is
//     the largest tile that does not spill; 6×16 and 4×24 spilled and ran
//     at half speed, 3×24 and 4×16 were ≈10% slower. A 5×2 dot-product
//     tile along k (no packing for NT, as on the AVX-512 path) ran at
//     ≈30–40 GFLOP/s; in assembly (sgemmNT, sgemm_nt_amd64.go) dot
//     products reach ≈85–90 on the Zen 5 core, and gemmAVX2 hands NT
//     products with few rows to it.
//   - The k loop is a bottom-tested loop unrolled four times: with the FMA
//     results used in their own block, Go's scheduler keeps source order
//     (in a top-tested loop it hoists every load above the FMAs, which then
//     spill), and unrolling amortises the register rotation's moves at the
//     back edge. The kernel stores its tile to memory: returning the ten
//     accumulators as results made it ≈1.7× slower.
//
// Sums over k: each element of C is accumulated with fused multiply-adds in
// order of k within a k block (kc = ⌈k/nb⌉ steps, nb = ⌈k/avx2KC⌉ blocks),
// and the blocks are added to C in order, each after one multiplication by
// alpha (FMA). A product thus passes through at most kc + nb ≤ k + 1
// roundings and beta·C through nb + 1: per element error ≤
// γ_{k+1}·Σ|alpha·a·b| + γ_{nb+1}·|beta·c| (Higham §3.1), within the bound
// Gemm documents. Zeros of A are not skipped (0·Inf and 0·NaN give NaN),
// and the padding of partial tiles is computed but never stored.

const (
	avx2MR = 5    // rows of a C tile
	avx2NR = 16   // columns of a C tile (two Float32x8)
	avx2KC = 96   // most k per block: the pre-broadcast A panel is KC·MR·32 B = 15 KiB
	avx2NC = 1024 // most columns per packed B block: KC·NC·4 B = 384 KiB (L2)

	// op(B) = B (NN, TN) is packed only for more than this many rows of C:
	// with fewer, the kernel reads B in place (each row of a 16-column
	// strip is one or two cache lines), which saves a copy that cost about
	// a third of the kernel time at 20×784×200, and B is read once.
	avx2PackBMinM = 4 * avx2MR
)

// avx2APanel holds one pre-broadcast micro-panel of A (packA).
type avx2APanel = [avx2KC * avx2MR * 8]float32

// avx2GemmBuf is the packing workspace of one Gemm call (≈460 KiB). Calls
// take one from avx2GemmBufs and return it, so steady-state calls do not
// allocate (a garbage collection may empty the pool; the next call then
// allocates one buffer). new() of this size is page aligned, and every
// array in it is a multiple of 64 bytes long, so each starts on a cache
// line.
type avx2GemmBuf struct {
	a [avx2PackBMinM / avx2MR]avx2APanel // pre-broadcast A micro-panels
	b [avx2KC * avx2NC]float32           // packed op(B), panels of kc×16
	t [avx2MR * avx2NR]float32           // one tile of sums, row-major
}

var avx2GemmBufs = sync.Pool{New: func() any { return new(avx2GemmBuf) }}

// gemmAVX2 computes C = alpha·op(A)·op(B) + beta·C for validated arguments
// with m, n, k > 0 and alpha ≠ 0, in one of the three loop orders of the
// file comment.
func gemmAVX2(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transB && !transA && useSgemmNT(m, k) && cpuAsmGemm {
		// NT with few rows (the dense layers' forward pass): the assembly
		// dot-product kernel reads B in place, packs nothing and measured
		// ≈1.7× this kernel at 20×200×784 and 20×200×200.
		sgemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if transA && transB || transB && n <= avx2NR {
		// TT does not occur in training; gonum handles it. Nor is an NT
		// product with a single column tile worth packing: every element
		// of A would be broadcast for one tile, and gonum was faster at
		// the models' output layers (20×10×200 and 20×10×128).
		gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	g := avx2Gemm{transA: transA, transB: transB, m: m, n: n, k: k, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc}
	g.buf = avx2GemmBufs.Get().(*avx2GemmBuf)
	// Equal k blocks of at most avx2KC.
	kb := (k + avx2KC - 1) / avx2KC
	g.kc = (k + kb - 1) / kb
	g.st = newAVX2Store(alpha, beta)
	npad := (n + avx2NR - 1) / avx2NR * avx2NR
	switch {
	case !transB && m <= avx2PackBMinM:
		g.bInPlace()
	case k*npad <= len(g.buf.b):
		g.bPackedOnce(npad)
	default:
		g.bBlocked()
	}
	avx2Exit()
	avx2GemmBufs.Put(g.buf)
}

// avx2Gemm is one call of gemmAVX2: its arguments, the k block size kc,
// how tiles are stored into C, and the packing buffer.
type avx2Gemm struct {
	transA, transB bool
	m, n, k, kc    int
	a, b, c        []float32
	lda, ldb, ldc  int
	st             avx2Store
	buf            *avx2GemmBuf
}

// bInPlace is the loop order for few rows (m ≤ avx2PackBMinM, op(B) = B):
// B is read in place, once, strip by strip of 16 columns; each strip (one
// k block) stays in L1 while the up to four micro-panels of A, packed
// first, stream from L2.
func (g *avx2Gemm) bInPlace() {
	buf, m, n, k, kc, ldb, ldc, c := g.buf, g.m, g.n, g.k, g.kc, g.ldb, g.ldc, g.c
	for pc := 0; pc < k; pc += kc {
		kcur := min(kc, k-pc)
		bst := g.st.block(pc)
		for ir := 0; ir < m; ir += avx2MR {
			packA(&buf.a[ir/avx2MR], g.transA, g.a, g.lda, ir, min(avx2MR, m-ir), pc, kcur)
		}
		for jr := 0; jr < n; jr += avx2NR {
			w := min(avx2NR, n-jr)
			pb, sb := unsafe.Pointer(&g.b[pc*ldb+jr]), uintptr(ldb)*4
			if w < avx2NR {
				// The last columns of B: 16 columns would reach past its
				// end, so pack them.
				packBN(buf.b[:], g.b, ldb, pc, kcur, jr, w)
				pb, sb = unsafe.Pointer(&buf.b[0]), 64
			}
			for ir := 0; ir < m; ir += avx2MR {
				kernAVX2(kcur, unsafe.Pointer(&buf.a[ir/avx2MR][0]), pb, sb, &buf.t)
				bst.tile(c[ir*ldc+jr:], ldc, min(avx2MR, m-ir), w, &buf.t)
			}
		}
	}
}

// bPackedOnce is the loop order for an op(B) that fits the buffer whole
// (npad = n rounded up to 16 columns): it is packed once, k block after k
// block, and the micro-panels of A go outermost, so that each row of A is
// read once and in order (A is the large operand here, e.g. the CNN's
// im2col matrix).
func (g *avx2Gemm) bPackedOnce(npad int) {
	buf, m, n, k, kc, ldc, c := g.buf, g.m, g.n, g.k, g.kc, g.ldc, g.c
	pa := unsafe.Pointer(&buf.a[0][0])
	for pc := 0; pc < k; pc += kc {
		packB(buf.b[pc*npad:], g.transB, g.b, g.ldb, pc, min(kc, k-pc), 0, n)
	}
	for ir := 0; ir < m; ir += avx2MR {
		mr := min(avx2MR, m-ir)
		for pc := 0; pc < k; pc += kc {
			kcur := min(kc, k-pc)
			bst := g.st.block(pc)
			packA(&buf.a[0], g.transA, g.a, g.lda, ir, mr, pc, kcur)
			bp := buf.b[pc*npad:]
			for jr := 0; jr < n; jr += avx2NR {
				kernAVX2(kcur, pa, unsafe.Pointer(&bp[jr*kcur]), 64, &buf.t)
				bst.tile(c[ir*ldc+jr:], ldc, mr, min(avx2NR, n-jr), &buf.t)
			}
		}
	}
}

// bBlocked is the general loop order: blocks of avx2KC rows × avx2NC
// columns of op(B) are packed in turn (L2), each used by every
// micro-panel of A.
func (g *avx2Gemm) bBlocked() {
	buf, m, n, k, kc, ldc, c := g.buf, g.m, g.n, g.k, g.kc, g.ldc, g.c
	pa := unsafe.Pointer(&buf.a[0][0])
	nb := (n + avx2NC - 1) / avx2NC
	nc := ((n+nb-1)/nb + avx2NR - 1) / avx2NR * avx2NR
	for pc := 0; pc < k; pc += kc {
		kcur := min(kc, k-pc)
		bst := g.st.block(pc)
		for jc := 0; jc < n; jc += nc {
			ncur := min(nc, n-jc)
			packB(buf.b[:], g.transB, g.b, g.ldb, pc, kcur, jc, ncur)
			for ir := 0; ir < m; ir += avx2MR {
				mr := min(avx2MR, m-ir)
				packA(&buf.a[0], g.transA, g.a, g.lda, ir, mr, pc, kcur)
				for jr := 0; jr < ncur; jr += avx2NR {
					kernAVX2(kcur, pa, unsafe.Pointer(&buf.b[jr*kcur]), 64, &buf.t)
					bst.tile(c[ir*ldc+jc+jr:], ldc, mr, min(avx2NR, ncur-jr), &buf.t)
				}
			}
		}
	}
}

// newAVX2Store returns the store settings for alpha and beta. Everything
// scalar in float32 happens here, before the first tile: see avx2Exit.
func newAVX2Store(alpha, beta float32) avx2Store {
	st := avx2Store{va: archsimd.BroadcastFloat32x8(alpha), vb: archsimd.BroadcastFloat32x8(beta), one: archsimd.BroadcastFloat32x8(1), mode: storeScaled}
	if beta == 0 {
		st.mode = storeOver
	} else if beta == 1 {
		st.mode = storeAdd
	}
	return st
}

// avx2Store holds how tiles go into C: alpha and beta broadcast, and the
// store mode of the first k block.
type avx2Store struct {
	va, vb, one archsimd.Float32x8
	mode        int
}

// block returns the settings for the k block starting at pc: after the
// first, blocks add to what the first one stored (beta = 1).
func (s avx2Store) block(pc int) avx2Store {
	if pc > 0 {
		s.mode, s.vb = storeAdd, s.one
	}
	return s
}

// tile stores the top-left mr×w part of the tile t into C at c (leading
// dimension ldc).
func (s *avx2Store) tile(c []float32, ldc, mr, w int, t *[avx2MR * avx2NR]float32) {
	for r := range mr {
		storeRowAVX2(c[r*ldc:r*ldc+w], (*[16]float32)(t[r*avx2NR:]), s.va, s.vb, s.mode)
	}
}

// packB packs rows pc … pc+kc−1, columns jc … jc+nc−1 of op(B) into dst
// (packBT or packBN).
func packB(dst []float32, transB bool, b []float32, ldb, pc, kc, jc, nc int) {
	if transB {
		packBT(dst, b, ldb, pc, kc, jc, nc)
	} else {
		packBN(dst, b, ldb, pc, kc, jc, nc)
	}
}

// avx2Exit clears the upper halves of the YMM registers (VZEROUPPER) on the
// way out of code that used 256-bit instructions. Go compiles scalar
// float32 and float64 arithmetic to legacy-SSE instructions, and the first
// of those after 256-bit code without VZEROUPPER cost ≈125 ns on the Zen 3
// machine this was tuned on (BenchmarkAVXTransition), each time a loop
// alternates them. So the AVX2 kernels keep float
// scalars out of their loops (Gemm's beta becomes an integer store mode)
// and call this before returning or falling back to a scalar loop.
func avx2Exit() { archsimd.ClearAVXUpperBits() }

// Store modes of storeRowAVX2: C = alpha·t (C not read), C += alpha·t,
// C = alpha·t + beta·C.
const (
	storeOver = iota
	storeAdd
	storeScaled
)

// storeRowAVX2 writes alpha·t + beta·C into dst, a row of w = len(dst) ≤
// 16 elements whose sums are t[0:w], as mode says (storeOver does not read
// C; storeAdd takes beta = 1).
func storeRowAVX2(dst []float32, t *[16]float32, va, vb archsimd.Float32x8, mode int) {
	lo, hi := archsimd.LoadFloat32x8((*[8]float32)(t[0:8])), archsimd.LoadFloat32x8((*[8]float32)(t[8:16]))
	if len(dst) == avx2NR {
		d0, d1 := (*[8]float32)(dst[0:8]), (*[8]float32)(dst[8:16])
		switch mode {
		case storeOver:
			lo.Mul(va).Store(d0)
			hi.Mul(va).Store(d1)
		case storeAdd:
			lo.MulAdd(va, archsimd.LoadFloat32x8(d0)).Store(d0)
			hi.MulAdd(va, archsimd.LoadFloat32x8(d1)).Store(d1)
		default:
			lo.MulAdd(va, archsimd.LoadFloat32x8(d0).Mul(vb)).Store(d0)
			hi.MulAdd(va, archsimd.LoadFloat32x8(d1).Mul(vb)).Store(d1)
		}
		return
	}
	storePartAVX2(dst[:min(8, len(dst))], lo, va, vb, mode)
	if len(dst) > 8 {
		storePartAVX2(dst[8:], hi, va, vb, mode)
	}
}

// storePartAVX2 is storeRowAVX2 for the first len(dst) ≤ 8 lanes of acc.
func storePartAVX2(dst []float32, acc, va, vb archsimd.Float32x8, mode int) {
	if mode == storeOver {
		acc.Mul(va).StoreSlicePart(dst)
		return
	}
	acc.MulAdd(va, archsimd.LoadFloat32x8SlicePart(dst).Mul(vb)).StoreSlicePart(dst)
}

// packA writes rows ir … ir+mr−1 and columns pc … pc+kc−1 of op(A) into
// dst pre-broadcast: element (ir+r, pc+p) fills dst[(p·5+r)·8 : +8]. Rows
// r ≥ mr are zero. Eight (TN: five) elements at a time are loaded as one
// vector and broadcast lane by lane (VPERMPS), one 32-byte store each:
// ≈0.7–0.8 ns per element here, which is what the stores alone take, where
// a scalar load and VBROADCASTSS per element took 0.8–1 ns (TN: 3 ns).
func packA(dst *avx2APanel, transA bool, a []float32, lda, ir, mr, pc, kc int) {
	d := unsafe.Pointer(&dst[0])
	i0, i1, i2, i3 := archsimd.BroadcastUint32x8(0), archsimd.BroadcastUint32x8(1), archsimd.BroadcastUint32x8(2), archsimd.BroadcastUint32x8(3)
	i4 := archsimd.BroadcastUint32x8(4)
	if transA {
		// A is stored k×m: the mr values for one p are contiguous. Load
		// them as one vector, zero beyond mr (and beyond A's end).
		keep := archsimd.LoadInt32x8(&avx2LaneBits[mr]).ToMask()
		for p := range kc {
			row := a[(pc+p)*lda+ir:]
			var v archsimd.Float32x8
			if len(row) >= 8 {
				// Lanes mr… hold A's next columns: zero them.
				v = archsimd.LoadFloat32x8((*[8]float32)(row[:8])).Masked(keep)
			} else {
				v = archsimd.LoadFloat32x8SlicePart(row[:mr])
			}
			q := unsafe.Add(d, p*avx2MR*32)
			v.Permute(i0).Store((*[8]float32)(q))
			v.Permute(i1).Store((*[8]float32)(unsafe.Add(q, 32)))
			v.Permute(i2).Store((*[8]float32)(unsafe.Add(q, 64)))
			v.Permute(i3).Store((*[8]float32)(unsafe.Add(q, 96)))
			v.Permute(i4).Store((*[8]float32)(unsafe.Add(q, 128)))
		}
		return
	}
	i5, i6, i7 := archsimd.BroadcastUint32x8(5), archsimd.BroadcastUint32x8(6), archsimd.BroadcastUint32x8(7)
	// A is stored m×k: one row of op(A) is contiguous in p.
	for r := range avx2MR {
		q := unsafe.Add(d, r*32)
		const step = avx2MR * 32 // bytes from one p to the next
		if r >= mr {
			var z archsimd.Float32x8
			for p := range kc {
				z.Store((*[8]float32)(unsafe.Add(q, p*step)))
			}
			continue
		}
		row := a[(ir+r)*lda+pc:]
		row = row[:kc]
		p := 0
		for ; p+8 <= kc; p += 8 {
			v := archsimd.LoadFloat32x8((*[8]float32)(row[p : p+8]))
			o := unsafe.Add(q, p*step)
			v.Permute(i0).Store((*[8]float32)(o))
			v.Permute(i1).Store((*[8]float32)(unsafe.Add(o, step)))
			v.Permute(i2).Store((*[8]float32)(unsafe.Add(o, 2*step)))
			v.Permute(i3).Store((*[8]float32)(unsafe.Add(o, 3*step)))
			v.Permute(i4).Store((*[8]float32)(unsafe.Add(o, 4*step)))
			v.Permute(i5).Store((*[8]float32)(unsafe.Add(o, 5*step)))
			v.Permute(i6).Store((*[8]float32)(unsafe.Add(o, 6*step)))
			v.Permute(i7).Store((*[8]float32)(unsafe.Add(o, 7*step)))
		}
		if p < kc {
			v := archsimd.LoadFloat32x8SlicePart(row[p:])
			idx := i0
			one := archsimd.BroadcastUint32x8(1)
			for ; p < kc; p++ {
				v.Permute(idx).Store((*[8]float32)(unsafe.Add(q, p*step)))
				idx = idx.Add(one)
			}
		}
	}
}

// avx2LaneBits[i] has its first i lanes all ones: the mask of lanes 0 …
// i−1 (plain data, so that package initialisation runs no AVX2).
var avx2LaneBits = [9][8]int32{
	{}, {-1}, {-1, -1}, {-1, -1, -1}, {-1, -1, -1, -1}, {-1, -1, -1, -1, -1},
	{-1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1}, {-1, -1, -1, -1, -1, -1, -1, -1},
}

// packBN packs rows pc … pc+kc−1, columns jc … jc+nc−1 of B (op(B) = B,
// stored k×n) into dst as ⌈nc/16⌉ panels of kc×16, zero beyond nc.
func packBN(dst []float32, b []float32, ldb, pc, kc, jc, nc int) {
	for p := range kc {
		row := b[(pc+p)*ldb+jc:]
		row = row[:nc]
		j := 0
		for ; j+avx2NR <= nc; j += avx2NR {
			o := j*kc + p*avx2NR
			d := dst[o : o+avx2NR]
			archsimd.LoadFloat32x8((*[8]float32)(row[j : j+8])).Store((*[8]float32)(d[0:8]))
			archsimd.LoadFloat32x8((*[8]float32)(row[j+8 : j+16])).Store((*[8]float32)(d[8:16]))
		}
		if j < nc {
			o := j*kc + p*avx2NR
			d := dst[o : o+avx2NR]
			t := row[j:]
			archsimd.LoadFloat32x8SlicePart(t[:min(8, len(t))]).Store((*[8]float32)(d[0:8]))
			var hi archsimd.Float32x8
			if len(t) > 8 {
				hi = archsimd.LoadFloat32x8SlicePart(t[8:])
			}
			hi.Store((*[8]float32)(d[8:16]))
		}
	}
}

// packBT is packBN for op(B) = Bᵀ (B stored n×k): panel element (p, jj) is
// B[jc+j+jj, pc+p]. Groups of eight full rows are transposed 8×8 at a
// time; partial groups and the last k%8 columns go element by element.
func packBT(dst []float32, b []float32, ldb, pc, kc, jc, nc int) {
	for j := 0; j < nc; j += avx2NR {
		panel := dst[j*kc : j*kc+kc*avx2NR]
		for h := 0; h < avx2NR; h += 8 {
			rows := min(8, nc-j-h) // valid rows of B in this half panel
			p := 0
			if rows == 8 && kc >= 8 {
				// Rows jc+j+h … +7, columns pc … pc+kc−1 of B: in bounds
				// (checked once), addressed by offsets from the first.
				r0 := (jc+j+h)*ldb + pc
				_ = b[r0+7*ldb+kc-1]
				src, s := unsafe.Pointer(&b[r0]), uintptr(ldb)*4
				dp := unsafe.Pointer(&panel[h])
				for ; p+8 <= kc; p += 8 {
					r := unsafe.Add(src, p*4)
					x0 := archsimd.LoadFloat32x8((*[8]float32)(r))
					x1 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, s)))
					x2 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 2*s)))
					x3 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 3*s)))
					x4 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 4*s)))
					x5 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 5*s)))
					x6 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 6*s)))
					x7 := archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(r, 7*s)))
					y0, y1, y2, y3, y4, y5, y6, y7 := transpose8x8(x0, x1, x2, x3, x4, x5, x6, x7)
					o := unsafe.Add(dp, p*avx2NR*4)
					y0.Store((*[8]float32)(o))
					y1.Store((*[8]float32)(unsafe.Add(o, 64)))
					y2.Store((*[8]float32)(unsafe.Add(o, 128)))
					y3.Store((*[8]float32)(unsafe.Add(o, 192)))
					y4.Store((*[8]float32)(unsafe.Add(o, 256)))
					y5.Store((*[8]float32)(unsafe.Add(o, 320)))
					y6.Store((*[8]float32)(unsafe.Add(o, 384)))
					y7.Store((*[8]float32)(unsafe.Add(o, 448)))
				}
			}
			// Copied as uint32: a float32 copy would be a legacy-SSE MOVSS
			// (see avx2Exit).
			for ; p < kc; p++ {
				d := bits32(panel[p*avx2NR+h : p*avx2NR+h+8])
				for jj := range d {
					if jj < rows {
						d[jj] = *(*uint32)(unsafe.Pointer(&b[(jc+j+h+jj)*ldb+pc+p]))
					} else {
						d[jj] = 0
					}
				}
			}
		}
	}
}

// bits32 views x as its bit patterns.
func bits32(x []float32) []uint32 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&x[0])), len(x))
}

// transpose8x8 returns the columns of the 8×8 matrix whose rows are
// x0 … x7.
func transpose8x8(x0, x1, x2, x3, x4, x5, x6, x7 archsimd.Float32x8) (y0, y1, y2, y3, y4, y5, y6, y7 archsimd.Float32x8) {
	// Pairs of rows interleaved within 128-bit halves: t0 = x0₀ x1₀ x0₁ x1₁ | x0₄ x1₄ x0₅ x1₅.
	t0 := x0.AsInt32x8().InterleaveLoGrouped(x1.AsInt32x8()).AsInt64x4()
	t1 := x0.AsInt32x8().InterleaveHiGrouped(x1.AsInt32x8()).AsInt64x4()
	t2 := x2.AsInt32x8().InterleaveLoGrouped(x3.AsInt32x8()).AsInt64x4()
	t3 := x2.AsInt32x8().InterleaveHiGrouped(x3.AsInt32x8()).AsInt64x4()
	t4 := x4.AsInt32x8().InterleaveLoGrouped(x5.AsInt32x8()).AsInt64x4()
	t5 := x4.AsInt32x8().InterleaveHiGrouped(x5.AsInt32x8()).AsInt64x4()
	t6 := x6.AsInt32x8().InterleaveLoGrouped(x7.AsInt32x8()).AsInt64x4()
	t7 := x6.AsInt32x8().InterleaveHiGrouped(x7.AsInt32x8()).AsInt64x4()
	// Quadruples: s0 = x0₀ x1₀ x2₀ x3₀ | x0₄ x1₄ x2₄ x3₄.
	s0 := t0.InterleaveLoGrouped(t2).AsFloat32x8()
	s1 := t0.InterleaveHiGrouped(t2).AsFloat32x8()
	s2 := t1.InterleaveLoGrouped(t3).AsFloat32x8()
	s3 := t1.InterleaveHiGrouped(t3).AsFloat32x8()
	s4 := t4.InterleaveLoGrouped(t6).AsFloat32x8()
	s5 := t4.InterleaveHiGrouped(t6).AsFloat32x8()
	s6 := t5.InterleaveLoGrouped(t7).AsFloat32x8()
	s7 := t5.InterleaveHiGrouped(t7).AsFloat32x8()
	// Halves: column q < 4 from the low halves, q+4 from the high ones.
	y0 = s0.Select128FromPair(0, 2, s4)
	y4 = s0.Select128FromPair(1, 3, s4)
	y1 = s1.Select128FromPair(0, 2, s5)
	y5 = s1.Select128FromPair(1, 3, s5)
	y2 = s2.Select128FromPair(0, 2, s6)
	y6 = s2.Select128FromPair(1, 3, s6)
	y3 = s3.Select128FromPair(0, 2, s7)
	y7 = s3.Select128FromPair(1, 3, s7)
	return
}

// kernAVX2 writes into t (row-major) the 5×16 tile Σ_p A(r, p)·B(p, 0:16)
// for kc ≥ 1 steps of a pre-broadcast A micro-panel at pa (five Float32x8
// per p) and 16 floats of B per p at pb + p·sb: a packed panel (sb = 64)
// or B itself (sb = 4·ldb). The callers make sure that all kc steps lie in
// the panel or in B, so every access is in bounds. The loops
// are bottom-tested (see the file comment). The sums go to memory rather
// than back as ten results: returning them in registers made the whole
// kernel ≈1.7× slower (measured; the caller's reloads forward from these
// stores).
//
// The loops call no function, not even one that inlines. Go's scheduler
// breaks ties by source position, and an inlined body's positions sort
// by call site in an order of their own, so with a load helper the tile
// spilled; and an inlined call whose line keeps no instruction of the
// caller leaves a NOP (an inline mark) in the loop: with a helper per row
// (24 NOPs per iteration) the kernel ran ≈10% slower on the Zen 3 machine.
func kernAVX2(kc int, pa, pb unsafe.Pointer, sb uintptr, t *[avx2MR * avx2NR]float32) {
	var c00, c01, c10, c11, c20, c21, c30, c31, c40, c41 archsimd.Float32x8
	if r := kc & 3; r != 0 {
		for {
			b0, b1 := archsimd.LoadFloat32x8((*[8]float32)(pb)), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
			x := archsimd.LoadFloat32x8((*[8]float32)(pa))
			c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 32)))
			c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 64)))
			c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 96)))
			c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 128)))
			c40, c41 = x.MulAdd(b0, c40), x.MulAdd(b1, c41)
			pa, pb = unsafe.Add(pa, 160), unsafe.Add(pb, sb)
			if r--; r == 0 {
				break
			}
		}
	}
	if n := kc >> 2; n != 0 {
		for {
			b0, b1 := archsimd.LoadFloat32x8((*[8]float32)(pb)), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
			x := archsimd.LoadFloat32x8((*[8]float32)(pa))
			c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 32)))
			c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 64)))
			c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 96)))
			c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 128)))
			c40, c41 = x.MulAdd(b0, c40), x.MulAdd(b1, c41)
			pb = unsafe.Add(pb, sb)
			b0, b1 = archsimd.LoadFloat32x8((*[8]float32)(pb)), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 160)))
			c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 192)))
			c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 224)))
			c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 256)))
			c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 288)))
			c40, c41 = x.MulAdd(b0, c40), x.MulAdd(b1, c41)
			pb = unsafe.Add(pb, sb)
			b0, b1 = archsimd.LoadFloat32x8((*[8]float32)(pb)), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 320)))
			c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 352)))
			c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 384)))
			c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 416)))
			c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 448)))
			c40, c41 = x.MulAdd(b0, c40), x.MulAdd(b1, c41)
			pb = unsafe.Add(pb, sb)
			b0, b1 = archsimd.LoadFloat32x8((*[8]float32)(pb)), archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pb, 32)))
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 480)))
			c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 512)))
			c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 544)))
			c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 576)))
			c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
			x = archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(pa, 608)))
			c40, c41 = x.MulAdd(b0, c40), x.MulAdd(b1, c41)
			pa, pb = unsafe.Add(pa, 640), unsafe.Add(pb, sb)
			if n--; n == 0 {
				break
			}
		}
	}
	storeTileAVX2(t, c00, c01, c10, c11, c20, c21, c30, c31, c40, c41)
}

// storeTileAVX2 stores the ten accumulators of kernAVX2 into t, row by row.
func storeTileAVX2(t *[avx2MR * avx2NR]float32, c00, c01, c10, c11, c20, c21, c30, c31, c40, c41 archsimd.Float32x8) {
	c00.Store((*[8]float32)(t[0:8]))
	c01.Store((*[8]float32)(t[8:16]))
	c10.Store((*[8]float32)(t[16:24]))
	c11.Store((*[8]float32)(t[24:32]))
	c20.Store((*[8]float32)(t[32:40]))
	c21.Store((*[8]float32)(t[40:48]))
	c30.Store((*[8]float32)(t[48:56]))
	c31.Store((*[8]float32)(t[56:64]))
	c40.Store((*[8]float32)(t[64:72]))
	c41.Store((*[8]float32)(t[72:80]))
}
