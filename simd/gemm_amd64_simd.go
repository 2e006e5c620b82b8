//go:build goexperiment.simd && amd64

package simd

import (
	"simd/archsimd"
	"unsafe"
)

// AVX-512 SGEMM for the small-M shapes of minibatch training. Go's
// register allocator uses Z0–Z14 only, so the micro-kernels keep at most
// eight accumulators live next to their operands (a 16-accumulator kernel
// spills and runs 3× slower).
//
// NN and TN (op(B) rows contiguous): C tiles of 4 rows × 32 columns, eight
// Float32x16 accumulators, per k step two loads of op(B) and four
// broadcasts of op(A) (outer-product form). 5-row tiles (ten accumulators)
// and a 5×2 NT tile were measured too and were slower once the loops
// address memory through byte offsets (they spill). The hot loops use
// unsafe.Add on offsets from a slice's first element, after the slices
// were cut to exactly the elements read: advancing several slices per
// iteration kept too many slice words live and spilled (perf annotate
// showed more scalar work than FMAs). NT (op(B) = Bᵀ, rows of A and
// B both contiguous in k): C tiles of 4 rows × 2 columns as eight dot
// products along k, reduced horizontally at the end of the tile.
//
// Sums over k are in float32 with fused multiply-adds. NN/TN add the k
// terms of each element in order of k; NT adds them in 16 interleaved
// partial sums combined pairwise, so the error of each element is at most
// γ_{k+4}·Σ|a·b| either way (Higham §3.1), and alpha, beta add at most two
// more roundings. Zeros of A are not skipped: 0·Inf and 0·NaN give NaN.

// gemmAVX512 computes C = alpha·op(A)·op(B) + beta·C for validated
// arguments with m, n, k > 0 and alpha ≠ 0.
func gemmAVX512(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transB {
		if transA {
			// TT does not occur in training; gonum handles it.
			gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			return
		}
		gemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		archsimd.ClearAVXUpperBits() // VZEROUPPER once, as the level-1 kernels
		return
	}
	gemmXN(transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	archsimd.ClearAVXUpperBits()
}

// storeTile16 writes alpha·acc + beta·C into the first min(16, len(dst))
// elements of dst (beta = 0: C is not read).
func storeTile16(dst []float32, acc, va, vb archsimd.Float32x16, beta float32) {
	if beta == 0 {
		acc.Mul(va).StoreSlicePart(dst)
		return
	}
	acc.MulAdd(va, archsimd.LoadFloat32x16SlicePart(dst).Mul(vb)).StoreSlicePart(dst)
}

// gemmXN handles op(B) = B (k×n, rows contiguous) with op(A) = A (m×k) or
// Aᵀ (A stored k×m).
func gemmXN(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	va, vb := archsimd.BroadcastFloat32x16(alpha), archsimd.BroadcastFloat32x16(beta)
	// Column panels of 32, then one of ≤ 16 or ≤ 32 with partial loads.
	for j := 0; j < n; j += 32 {
		w := min(32, n-j)
		// bp: the k×w panel of B at column j, as a slice ending at its
		// last element so that the kernels can advance it row by row.
		bp := b[j : (k-1)*ldb+j+w]
		i := 0
		for ; i+4 <= m; i += 4 {
			var c0, c1, c2, c3, c4, c5, c6, c7 archsimd.Float32x16
			if transA {
				c0, c1, c2, c3, c4, c5, c6, c7 = kernTN4x32(a[i:(k-1)*lda+i+4], lda, bp, ldb, w)
			} else {
				c0, c1, c2, c3, c4, c5, c6, c7 = kernNN4x32(a[i*lda:], lda, k, bp, ldb, w)
			}
			r := c[i*ldc+j:]
			storePair(r[:w], c0, c1, va, vb, beta)
			r = r[ldc:]
			storePair(r[:w], c2, c3, va, vb, beta)
			r = r[ldc:]
			storePair(r[:w], c4, c5, va, vb, beta)
			r = r[ldc:]
			storePair(r[:w], c6, c7, va, vb, beta)
		}
		for ; i < m; i++ {
			var c0, c1 archsimd.Float32x16
			if transA {
				c0, c1 = kern1x32(a[i:], lda, k, bp, ldb, w)
			} else {
				c0, c1 = kern1x32(a[i*lda:], 1, k, bp, ldb, w)
			}
			storePair(c[i*ldc+j:i*ldc+j+w], c0, c1, va, vb, beta)
		}
	}
}

// storePair stores a row of up to 32 results held in lo (0–15) and hi.
func storePair(dst []float32, lo, hi, va, vb archsimd.Float32x16, beta float32) {
	if len(dst) > 16 {
		storeTile16(dst[:16], lo, va, vb, beta)
		storeTile16(dst[16:], hi, va, vb, beta)
		return
	}
	storeTile16(dst, lo, va, vb, beta)
}

// loadRow32 loads the first w ≤ 32 elements of p into two vectors, zero
// beyond w.
func loadRow32(p []float32, w int) (lo, hi archsimd.Float32x16) {
	if w == 32 {
		return archsimd.LoadFloat32x16((*[16]float32)(p[0:16])), archsimd.LoadFloat32x16((*[16]float32)(p[16:32]))
	}
	if w > 16 {
		return archsimd.LoadFloat32x16((*[16]float32)(p[0:16])), archsimd.LoadFloat32x16SlicePart(p[16:w])
	}
	return archsimd.LoadFloat32x16SlicePart(p[:w]), lo
}

// kernNN4x32 returns Σ_p A[r, p]·B[p, 0:32] for rows r = 0…3 of a (leading
// dimension lda), p < k. bp is the B panel ending at its last used element.
func kernNN4x32(a []float32, lda, k int, bp []float32, ldb, w int) (c0, c1, c2, c3, c4, c5, c6, c7 archsimd.Float32x16) {
	a0 := a[:k]
	a1 := a[lda : lda+k]
	a2 := a[2*lda : 2*lda+k]
	a3 := a[3*lda : 3*lda+k]
	if w == 32 {
		// As in kernTN4x32: byte offsets instead of advancing slices
		// (a_r hold exactly k elements, bp ends at its last element).
		pa0, pa1, pa2, pa3 := unsafe.Pointer(&a0[0]), unsafe.Pointer(&a1[0]), unsafe.Pointer(&a2[0]), unsafe.Pointer(&a3[0])
		pb := unsafe.Pointer(&bp[0])
		offA, offB := uintptr(0), uintptr(0)
		for range k {
			b0 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, offB)))
			b1 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, offB+64)))
			x := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa0, offA)))
			c0 = x.MulAdd(b0, c0)
			c1 = x.MulAdd(b1, c1)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa1, offA)))
			c2 = x.MulAdd(b0, c2)
			c3 = x.MulAdd(b1, c3)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa2, offA)))
			c4 = x.MulAdd(b0, c4)
			c5 = x.MulAdd(b1, c5)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa3, offA)))
			c6 = x.MulAdd(b0, c6)
			c7 = x.MulAdd(b1, c7)
			offA += 4
			offB += uintptr(ldb) * 4
		}
		return
	}
	for p := range a0 {
		b0, b1 := loadRow32(bp, w)
		x := archsimd.BroadcastFloat32x16(a0[p])
		c0 = x.MulAdd(b0, c0)
		c1 = x.MulAdd(b1, c1)
		x = archsimd.BroadcastFloat32x16(a1[p])
		c2 = x.MulAdd(b0, c2)
		c3 = x.MulAdd(b1, c3)
		x = archsimd.BroadcastFloat32x16(a2[p])
		c4 = x.MulAdd(b0, c4)
		c5 = x.MulAdd(b1, c5)
		x = archsimd.BroadcastFloat32x16(a3[p])
		c6 = x.MulAdd(b0, c6)
		c7 = x.MulAdd(b1, c7)
		if len(bp) < ldb+w {
			break
		}
		bp = bp[ldb:]
	}
	return
}

// kernTN4x32 is kernNN4x32 for A stored k×m: ap starts at A[0, i] and ends
// at A[k−1, i+3].
func kernTN4x32(ap []float32, lda int, bp []float32, ldb, w int) (c0, c1, c2, c3, c4, c5, c6, c7 archsimd.Float32x16) {
	if w == 32 {
		// Full panels: one byte offset per operand (unsafe.Add; ap and
		// bp end exactly at the last element read, so every access is
		// in bounds) instead of advancing slices, which cost bounds
		// checks and spills in the loop.
		k := (len(ap)-4)/lda + 1
		pa, pb := unsafe.Pointer(&ap[0]), unsafe.Pointer(&bp[0])
		offA, offB := uintptr(0), uintptr(0)
		for range k {
			b0 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, offB)))
			b1 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, offB+64)))
			x := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, offA+0)))
			c0 = x.MulAdd(b0, c0)
			c1 = x.MulAdd(b1, c1)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, offA+4)))
			c2 = x.MulAdd(b0, c2)
			c3 = x.MulAdd(b1, c3)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, offA+8)))
			c4 = x.MulAdd(b0, c4)
			c5 = x.MulAdd(b1, c5)
			x = archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, offA+12)))
			c6 = x.MulAdd(b0, c6)
			c7 = x.MulAdd(b1, c7)
			offA += uintptr(lda) * 4
			offB += uintptr(ldb) * 4
		}
		return
	}
	for {
		b0, b1 := loadRow32(bp, w)
		x := archsimd.BroadcastFloat32x16(ap[0])
		c0 = x.MulAdd(b0, c0)
		c1 = x.MulAdd(b1, c1)
		x = archsimd.BroadcastFloat32x16(ap[1])
		c2 = x.MulAdd(b0, c2)
		c3 = x.MulAdd(b1, c3)
		x = archsimd.BroadcastFloat32x16(ap[2])
		c4 = x.MulAdd(b0, c4)
		c5 = x.MulAdd(b1, c5)
		x = archsimd.BroadcastFloat32x16(ap[3])
		c6 = x.MulAdd(b0, c6)
		c7 = x.MulAdd(b1, c7)
		if len(ap) < lda+4 {
			return
		}
		ap, bp = ap[lda:], bp[ldb:]
	}
}

// kern1x32 returns Σ_p A(p)·B[p, 0:w] where A(p) = a[p·stride].
func kern1x32(a []float32, stride, k int, bp []float32, ldb, w int) (c0, c1 archsimd.Float32x16) {
	for p := range k {
		b0, b1 := loadRow32(bp[p*ldb:], w)
		x := archsimd.BroadcastFloat32x16(a[p*stride])
		c0 = x.MulAdd(b0, c0)
		c1 = x.MulAdd(b1, c1)
	}
	return
}

// gemmNT handles op(A) = A (m×k) and op(B) = Bᵀ (B stored n×k): element
// (i, j) is the dot product of row i of A and row j of B.
func gemmNT(m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	// Pairs of B rows outer: they stay in L1 while the 4-row blocks of A
	// (the minibatch side, small enough for L2) stream past, so B (the
	// weights, which the SGD step between passes evicts from L2) is read
	// from memory once rather than once per 4-row block.
	m4 := m - m%4
	j := 0
	for ; j+2 <= n; j += 2 {
		b0, b1 := b[j*ldb:j*ldb+k], b[(j+1)*ldb:(j+1)*ldb+k]
		for i := 0; i < m4; i += 4 {
			s0, s1 := dot4x2(a[i*lda:i*lda+k], a[(i+1)*lda:(i+1)*lda+k], a[(i+2)*lda:(i+2)*lda+k], a[(i+3)*lda:(i+3)*lda+k], b0, b1)
			putNT(c[i*ldc+j:], ldc, 4, 2, s0, s1, alpha, beta)
		}
	}
	if j < n {
		bj := b[j*ldb : j*ldb+k]
		for i := 0; i < m4; i += 4 {
			s0, _ := dot4x2(a[i*lda:i*lda+k], a[(i+1)*lda:(i+1)*lda+k], a[(i+2)*lda:(i+2)*lda+k], a[(i+3)*lda:(i+3)*lda+k], bj, bj)
			putNT(c[i*ldc+j:], ldc, 4, 1, s0, s0, alpha, beta)
		}
	}
	i := m4
	for ; i < m; i++ {
		ai := a[i*lda : i*lda+k]
		j := 0
		for ; j+4 <= n; j += 4 {
			s0, _ := dot4x2(b[j*ldb:j*ldb+k], b[(j+1)*ldb:(j+1)*ldb+k], b[(j+2)*ldb:(j+2)*ldb+k], b[(j+3)*ldb:(j+3)*ldb+k], ai, ai)
			putRow(c[i*ldc+j:i*ldc+j+4], s0, alpha, beta)
		}
		for ; j < n; j++ {
			bj := b[j*ldb : j*ldb+k]
			s0, _ := dot4x2(bj, bj, bj, bj, ai, ai)
			putRow(c[i*ldc+j:i*ldc+j+1], s0, alpha, beta)
		}
	}
}

// putRow writes alpha·s[t] + beta·dst[t] for t < len(dst) ≤ 4.
func putRow(dst []float32, s archsimd.Float32x4, alpha, beta float32) {
	var v [4]float32
	s.Store(&v)
	for t := range dst {
		if beta == 0 {
			dst[t] = alpha * v[t]
		} else {
			dst[t] = alpha*v[t] + beta*dst[t]
		}
	}
}

// putNT writes the 4×cols tile (cols ≤ 2) whose column t sums are s_t
// (rows 0–3 in lanes 0–3) into C at c with leading dimension ldc.
func putNT(c []float32, ldc, rows, cols int, s0, s1 archsimd.Float32x4, alpha, beta float32) {
	var v [2][4]float32
	s0.Store(&v[0])
	s1.Store(&v[1])
	for r := range rows {
		row := c[r*ldc : r*ldc+cols]
		for t := range row {
			if beta == 0 {
				row[t] = alpha * v[t][r]
			} else {
				row[t] = alpha*v[t][r] + beta*row[t]
			}
		}
	}
}

// dot4x2 returns the dot products of a0…a3 with b0 (lanes 0–3 of s0) and
// with b1 (s1). All six slices have the same length k. The main loop
// addresses the six rows through one byte offset from their first
// elements (unsafe.Add, in bounds: off+64 ≤ 4·⌊k/16⌋·16 ≤ 4·len): six
// advancing slices kept 18 slice words live, which spilled to the stack
// and cost more instructions than the eight FMAs (perf annotate).
func dot4x2(a0, a1, a2, a3, b0, b1 []float32) (s0, s1 archsimd.Float32x4) {
	var c00, c10, c20, c30, c01, c11, c21, c31 archsimd.Float32x16
	k := len(a0)
	a1, a2, a3, b0, b1 = a1[:k], a2[:k], a3[:k], b0[:k], b1[:k]
	if n := uintptr(k/16) * 64; n > 0 {
		p0, p1, p2, p3 := unsafe.Pointer(&a0[0]), unsafe.Pointer(&a1[0]), unsafe.Pointer(&a2[0]), unsafe.Pointer(&a3[0])
		q0, q1 := unsafe.Pointer(&b0[0]), unsafe.Pointer(&b1[0])
		for off := uintptr(0); off < n; off += 64 {
			y0 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(q0, off)))
			y1 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(q1, off)))
			x := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p0, off)))
			c00 = x.MulAdd(y0, c00)
			c01 = x.MulAdd(y1, c01)
			x = archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p1, off)))
			c10 = x.MulAdd(y0, c10)
			c11 = x.MulAdd(y1, c11)
			x = archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p2, off)))
			c20 = x.MulAdd(y0, c20)
			c21 = x.MulAdd(y1, c21)
			x = archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(p3, off)))
			c30 = x.MulAdd(y0, c30)
			c31 = x.MulAdd(y1, c31)
		}
		t := k / 16 * 16
		a0, a1, a2, a3, b0, b1 = a0[t:], a1[t:], a2[t:], a3[t:], b0[t:], b1[t:]
	}
	if len(a0) > 0 {
		y0 := archsimd.LoadFloat32x16SlicePart(b0)
		y1 := archsimd.LoadFloat32x16SlicePart(b1)
		x := archsimd.LoadFloat32x16SlicePart(a0)
		c00 = x.MulAdd(y0, c00)
		c01 = x.MulAdd(y1, c01)
		x = archsimd.LoadFloat32x16SlicePart(a1)
		c10 = x.MulAdd(y0, c10)
		c11 = x.MulAdd(y1, c11)
		x = archsimd.LoadFloat32x16SlicePart(a2)
		c20 = x.MulAdd(y0, c20)
		c21 = x.MulAdd(y1, c21)
		x = archsimd.LoadFloat32x16SlicePart(a3)
		c30 = x.MulAdd(y0, c30)
		c31 = x.MulAdd(y1, c31)
	}
	return hsum4(c00, c10, c20, c30), hsum4(c01, c11, c21, c31)
}

// hsum4 returns the horizontal sums of v0…v3 in lanes 0–3.
func hsum4(v0, v1, v2, v3 archsimd.Float32x16) archsimd.Float32x4 {
	w0 := v0.GetLo().Add(v0.GetHi())
	w1 := v1.GetLo().Add(v1.GetHi())
	w2 := v2.GetLo().Add(v2.GetHi())
	w3 := v3.GetLo().Add(v3.GetHi())
	h := w0.AddPairsGrouped(w1).AddPairsGrouped(w2.AddPairsGrouped(w3))
	return h.GetLo().Add(h.GetHi())
}
