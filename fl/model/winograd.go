package model

import (
	"math"

	"github.com/dpfl/dpfl/simd"
)

// Conv2 as Winograd's minimal filtering F(2×2, 3×3) (Lavin & Gray 2016,
// "Fast Algorithms for Convolutional Neural Networks", §4): every 2×2 tile
// of conv2's outputs, which is exactly one 2×2 pooling window, comes from
// the 4×4 tile of conv1's outputs under it as
//
//	Y = Aᵀ [ Σ_c (G g_{f,c} Gᵀ) ⊙ (Bᵀ d_c B) ] A,
//
//	Bᵀ = ⎡1  0 −1  0⎤   G = ⎡1   0   0⎤   Aᵀ = ⎡1 1  1  0⎤
//	     ⎢0  1  1  0⎥       ⎢½   ½   ½⎥        ⎣0 1 −1 −1⎦
//	     ⎢0 −1  1  0⎥       ⎢½  −½   ½⎥
//	     ⎣0  1  0 −1⎦       ⎣0   0   1⎦
//
// so that for each of the 16 transformed positions ξ the sum over input
// channels is one matrix product, M_ξ (tiles × c2) = V_ξ (tiles × c1) ·
// U_ξᵀ (c1 × c2): 16·c1·c2 multiplications per tile where the direct
// convolution takes 36·c1·c2 (2.25× fewer). The backward pass runs the
// same products transposed: ∂U_ξ = ∂M_ξᵀ·V_ξ and ∂V_ξ = ∂M_ξ·U_ξ, with
// ∂M = A ∂Y Aᵀ, ∂d = B ∂V Bᵀ (added over overlapping tiles) and
// ∂g = Gᵀ ∂U G.
//
// Numerics: the transforms only add, subtract and halve (coefficients 0,
// ±½, ±1), and each product is a sum of c1 terms instead of 9·c1, so the
// outputs differ from the exact convolution by float32 rounding of the
// same order as direct summation's. F(2×2, 3×3) is the most accurate of
// Winograd's algorithms (Barabasz et al. 2020, "Error Analysis and
// Improving the Accuracy of Winograd Convolution for Deep Neural
// Networks", TOMS 46(4)); on the full-size layer the largest error was
// 7.7·10⁻⁸ of Σ|w·a|, against 2.1·10⁻⁷ for float32 direct summation in
// window order (TestWinogradConvAccuracy). The filter transforms and
// their gradients are computed in float64 and rounded once; the gradient
// tests (cnn_test.go) check against a float64 direct convolution.
//
// Why: conv2's three im2col products were ~70% of a training step; with
// the 5×16 assembly kernel the tile-by-channel products run nearly as fast
// (≈70–85 GFLOP/s against ≈80–90), so the 2.25× fewer multiplications
// outweigh the transforms: a step at batch 20 went from 22.4 to 16.8 ms
// on the Zen 3 machine (BenchmarkStep/cnn).

// winoTile is the 4×4 transformed tile: ξ = 4a + b for row a, column b.
const winoTile = 16

// winoPad is the number of rows, Tp ≥ T, the 16 matrices of a chunk of T
// tiles have: a multiple of the assembly Gemm's 5-row tiles, so that no
// product has a partial row strip (copied into a padded buffer and
// stored element by element). The padding rows are zero in V and ∂M,
// hence in M and ∂V, and are never pooled.
func winoPad(T int) int { return (T + 4) / 5 * 5 }

// winoFilters writes U_ξ = (G g_{f,c} Gᵀ)_ξ for every filter f and input
// channel c of W2 (c2 × 9·c1, window position-major then channel) into
// u (16 × c2 × c1: u[(ξ·c2 + f)·c1 + c], the input gradient's right
// operand) and its transpose ut (16 × c1 × c2, the forward product's).
// The transform is computed in float64 and rounded once.
func (m *cnn) winoFilters(ut, u, w2 []float32) {
	c1, c2, k2 := m.c1, m.c2, m.k2
	for f := range c2 {
		wf := w2[f*k2 : (f+1)*k2]
		g0, g1, g2 := wf[0:3*c1], wf[3*c1:6*c1], wf[6*c1:9*c1] // window rows
		for c := range c1 {
			var r [4][3]float64 // G·g
			for x := range 3 {
				a, b, d := float64(g0[x*c1+c]), float64(g1[x*c1+c]), float64(g2[x*c1+c])
				r[0][x], r[1][x], r[2][x], r[3][x] = a, (a+b+d)/2, (a-b+d)/2, d
			}
			for a := range 4 { // (G·g)·Gᵀ
				x0, x1, x2 := r[a][0], r[a][1], r[a][2]
				o := (4*a*c2+f)*c1 + c
				u[o] = float32(x0)
				u[o+c2*c1] = float32((x0 + x1 + x2) / 2)
				u[o+2*c2*c1] = float32((x0 - x1 + x2) / 2)
				u[o+3*c2*c1] = float32(x2)
			}
		}
	}
	for xi := range winoTile { // ut_ξ = u_ξᵀ
		src, dst := u[xi*c2*c1:(xi+1)*c2*c1], ut[xi*c1*c2:(xi+1)*c1*c2]
		for f := range c2 {
			row := src[f*c1 : (f+1)*c1]
			for c, v := range row {
				dst[c*c2+f] = v
			}
		}
	}
}

// winoFilterGrad writes W2's gradient (c2 × 9·c1) into gw2 from the
// gradient gu of the transformed filters (u's layout): ∂g = Gᵀ ∂U G.
func (m *cnn) winoFilterGrad(gw2, gu []float32) {
	c1, c2, k2 := m.c1, m.c2, m.k2
	for f := range c2 {
		gf := gw2[f*k2 : (f+1)*k2]
		for c := range c1 {
			var y [3][4]float64 // Gᵀ·∂U
			for b := range 4 {
				d0 := float64(gu[((0*4+b)*c2+f)*c1+c])
				d1 := float64(gu[((1*4+b)*c2+f)*c1+c])
				d2 := float64(gu[((2*4+b)*c2+f)*c1+c])
				d3 := float64(gu[((3*4+b)*c2+f)*c1+c])
				y[0][b] = d0 + (d1+d2)/2
				y[1][b] = (d1 - d2) / 2
				y[2][b] = (d1+d2)/2 + d3
			}
			for r := range 3 { // (Gᵀ·∂U)·G
				gf[(r*3+0)*c1+c] = float32(y[r][0] + (y[r][1]+y[r][2])/2)
				gf[(r*3+1)*c1+c] = float32((y[r][1] - y[r][2]) / 2)
				gf[(r*3+2)*c1+c] = float32((y[r][1]+y[r][2])/2 + y[r][3])
			}
		}
	}
}

// winoInput writes V_ξ = (Bᵀ d B)_ξ for the tiles of pooled rows [i0, i1)
// of one image's conv1 output a1 into rows t0, t0+1, … of v (16 matrices
// of T rows × c1), in row-major order. The 4×4 input tile of pooled unit
// (i, j) covers rows 2i … 2i+3 and columns 2j … 2j+3 of a1, that is even
// columns j and j+1 and odd columns j and j+1: since a1 stores each row
// as its even columns, then its odd ones (see cnnWorkspace.a1), the
// transforms of all q tiles of a pooled row are a few vector operations
// over whole rows (exact, like every simd element-wise kernel), where
// calls per tile cost more than the products they feed (the first
// version spent half of a step in its transforms). tmp holds 8·(q+1)·c1
// floats.
func (m *cnn) winoInput(v, a1, tmp []float32, T, t0, i0, i1 int) {
	c, q := m.c1, m.q
	L, qc := (q+1)*c, q*c
	te, to := winoRows(tmp, L)
	for i := i0; i < i1; i++ {
		// Bᵀ·d over the four rows, for the even and the odd columns.
		y := 2 * i
		winoRowT(te, m.a1Even(a1, y)[:L], m.a1Even(a1, y+1)[:L], m.a1Even(a1, y+2)[:L], m.a1Even(a1, y+3)[:L])
		winoRowT(to, m.a1Odd(a1, y)[:L], m.a1Odd(a1, y+1)[:L], m.a1Odd(a1, y+2)[:L], m.a1Odd(a1, y+3)[:L])
		// (Bᵀ·d)·B over the columns 2j … 2j+3 = even j, odd j, even
		// j+1, odd j+1 of every tile j at once.
		o := t0*c + (i-i0)*qc
		for a := range 4 {
			e0, e1, o0, o1 := te[a][:qc], te[a][c:c+qc], to[a][:qc], to[a][c:c+qc]
			v0, v1, v2, v3 := winoRow(v, 4*a, T*c, o, qc), winoRow(v, 4*a+1, T*c, o, qc), winoRow(v, 4*a+2, T*c, o, qc), winoRow(v, 4*a+3, T*c, o, qc)
			simd.Sub(v0, e0, e1)
			copy(v1, o0)
			simd.Add(v1, e1)
			simd.Sub(v2, e1, o0)
			simd.Sub(v3, o0, o1)
		}
	}
}

// winoRows splits tmp into two sets of four rows of L floats.
func winoRows(tmp []float32, L int) (x, y [4][]float32) {
	for k := range 4 {
		x[k], y[k] = tmp[k*L:(k+1)*L], tmp[(4+k)*L:(5+k)*L]
	}
	return
}

// winoRow is the n floats at offset o of matrix ξ (of size stride) in a
// set of 16.
func winoRow(mats []float32, xi, stride, o, n int) []float32 {
	return mats[xi*stride+o : xi*stride+o+n]
}

// winoRowT writes t = Bᵀ·(r0; r1; r2; r3), row by row:
// t0 = r0 − r2, t1 = r1 + r2, t2 = r2 − r1, t3 = r1 − r3.
func winoRowT(t [4][]float32, r0, r1, r2, r3 []float32) {
	simd.Sub(t[0], r0, r2)
	copy(t[1], r1)
	simd.Add(t[1], r2)
	simd.Sub(t[2], r2, r1)
	simd.Sub(t[3], r1, r3)
}

// winoInputAdjoint adds ∂d = B ∂V Bᵀ of every tile of pooled rows
// [i0, i1), from rows t0, t0+1, … of dv (16 matrices of T rows × c1),
// onto the window of da1 (laid out as a1) the tile came from: winoInput's
// adjoint, summing overlaps, pooled row by pooled row as winoInput runs.
// tmp holds 8·(q+1)·c1 floats.
func (m *cnn) winoInputAdjoint(da1, dv, tmp []float32, T, t0, i0, i1 int) {
	c, q := m.c1, m.q
	L, qc := (q+1)*c, q*c
	de, do := winoRows(tmp, L)
	for i := i0; i < i1; i++ {
		o := t0*c + (i-i0)*qc
		for a := range 4 {
			// Adjoint of v0 = e_j − e_{j+1}, v1 = o_j + e_{j+1},
			// v2 = e_{j+1} − o_j, v3 = o_j − o_{j+1}.
			d0, d1, d2, d3 := winoRow(dv, 4*a, T*c, o, qc), winoRow(dv, 4*a+1, T*c, o, qc), winoRow(dv, 4*a+2, T*c, o, qc), winoRow(dv, 4*a+3, T*c, o, qc)
			e, od := de[a], do[a]
			copy(e, d0)
			clear(e[qc:])
			simd.Add(e[c:], d1)
			simd.Add(e[c:], d2)
			simd.Sub(e[c:], e[c:], d0)
			simd.Sub(od[:qc], d1, d2)
			simd.Add(od[:qc], d3)
			clear(od[qc:])
			simd.Sub(od[c:], od[c:], d3)
		}
		y := 2 * i
		winoRowAdj(de, m.a1Even(da1, y)[:L], m.a1Even(da1, y+1)[:L], m.a1Even(da1, y+2)[:L], m.a1Even(da1, y+3)[:L])
		winoRowAdj(do, m.a1Odd(da1, y)[:L], m.a1Odd(da1, y+1)[:L], m.a1Odd(da1, y+2)[:L], m.a1Odd(da1, y+3)[:L])
	}
}

// winoRowAdj is winoRowT's adjoint: it adds Bᵀᵀ·dt onto the rows r:
// r0 += dt0, r1 += dt1 − dt2 + dt3, r2 += dt1 + dt2 − dt0, r3 −= dt3.
func winoRowAdj(dt [4][]float32, r0, r1, r2, r3 []float32) {
	simd.Add(r0, dt[0])
	simd.Add(r1, dt[1])
	simd.Sub(r1, r1, dt[2])
	simd.Add(r1, dt[3])
	simd.Add(r2, dt[1])
	simd.Add(r2, dt[2])
	simd.Sub(r2, r2, dt[0])
	simd.Sub(r3, r3, dt[3])
}

// winoOutputPool computes the 2×2 outputs Y = Aᵀ M A of the T tiles in
// mm (16 × T × c2) in place (matrix by matrix, each over all tiles and
// filters at once) and pools them into out and arg (T × c2, the tiles'
// pooled units in the same order): since ReLU is monotone and b2 is constant per channel,
// max(relu(y + b2)) = relu(max(y) + b2), so conv2's bias and ReLU apply to
// the q² maxima only. arg gets which window input won (0–3 in row-major
// window order, the first maximum on ties), plus 4 where the ReLU passed
// no gradient (max + b2 ≤ 0, or NaN, which the max keeps so that
// divergence stays visible).
//
// The pooling loop has no data-dependent branch: on real activations
// every comparison goes either way at random, and with branches it took
// ≈20 ns per output (mispredictions) against ≈6 without.
func (m *cnn) winoOutputPool(out []float32, arg []uint8, mm, b2 []float32, T, Tp int) {
	c := m.c2
	n := Tp * c
	mat := func(xi int) []float32 { return mm[xi*n : (xi+1)*n] }
	// Over each row a of M: s0 = m0 + m1 + m2 into m0, s1 = m1 − (m2 +
	// m3) into m3; then over the rows: y0 = s0 + s1 + s2 into row 0,
	// y1 = s1 − (s2 + s3) into row 3.
	for _, k := range [6][2]int{{0, 1}, {4, 1}, {8, 1}, {12, 1}, {0, 4}, {3, 4}} {
		x0, x1, x2, x3 := mat(k[0]), mat(k[0]+k[1]), mat(k[0]+2*k[1]), mat(k[0]+3*k[1])
		simd.Add(x0, x1)
		simd.Add(x0, x2)
		simd.Add(x3, x2)
		simd.Sub(x3, x1, x3)
	}
	y00, y01, y10, y11 := mat(0), mat(3), mat(12), mat(15)
	out, arg = out[:T*c], arg[:T*c]
	b2 = b2[:c]
	for t := range T {
		z00, z01, z10, z11 := y00[t*c:t*c+c], y01[t*c:t*c+c], y10[t*c:t*c+c], y11[t*c:t*c+c]
		po, pa := out[t*c:t*c+c], arg[t*c:t*c+c]
		z01, z10, z11, b2, po, pa := z01[:len(z00)], z10[:len(z00)], z11[:len(z00)], b2[:len(z00)], po[:len(z00)], pa[:len(z00)]
		for f, v0 := range z00 {
			v1, v2, v3 := z01[f], z10[f], z11[f]
			up, down := max(v0, v1), max(v2, v3)
			au, ad := b2u(v1 > v0), 2+b2u(v3 > v2)
			lower := -b2u(down > up) // 0xff: the bottom pair wins
			v := max(up, down) + b2[f]
			pa[f] = (au ^ (au^ad)&lower) | 4*b2u(!(v > 0))
			po[f] = max(v, 0)
		}
	}
}

// b2u is 1 for true, 0 for false; the compiler makes it a SETcc, not a
// branch.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// winoUnpool is winoOutputPool's backward pass for T tiles: it writes
// ∂M = A ∂Y Aᵀ (16 × T × c2) from the pooled gradient dp (T × c2) times
// the dropout mask (nil for none), which reaches the window input that
// won if the ReLU passed it, and adds b2's gradient into gb. The four
// matrices Q_k of the gradient that reached input k (zero elsewhere) are
// written first, then combined matrix by matrix with A's columns
// (1, 1, 1, 0) and (0, 1, −1, −1).
func (m *cnn) winoUnpool(dm, dp, mask []float32, arg []uint8, gb []float32, T, Tp int) {
	c := m.c2
	n := Tp * c
	mat := func(xi int) []float32 { return dm[xi*n : (xi+1)*n] }
	// Q_00, Q_01 go where A's first row leaves them (matrices 0, 1), Q_10,
	// Q_11 where its last row does (12, 13).
	q00, q01, q10, q11 := mat(0), mat(1), mat(12), mat(13)
	g, pa := dp[:T*c], arg[:T*c]
	mk := g // no dropout: unused
	if mask != nil {
		mk = mask[:T*c]
	}
	for _, q := range [4][]float32{q00, q01, q10, q11} {
		clear(q[T*c:]) // padding rows (winoRows' doc)
	}
	gb = gb[:c]
	for t := range T {
		gt, pt, mt := g[t*c:t*c+c], pa[t*c:t*c+c], mk[t*c:t*c+c]
		d00, d01, d10, d11 := q00[t*c:t*c+c], q01[t*c:t*c+c], q10[t*c:t*c+c], q11[t*c:t*c+c]
		pt, mt, gb, d00, d01, d10, d11 := pt[:len(gt)], mt[:len(gt)], gb[:len(gt)], d00[:len(gt)], d01[:len(gt)], d10[:len(gt)], d11[:len(gt)]
		for f, v := range gt {
			if mask != nil {
				v *= mt[f]
			}
			a := pt[f]
			bits := math.Float32bits(v) & -uint32(b2u(a < 4)) // 0 where the ReLU blocked it
			gb[f] += math.Float32frombits(bits)
			d00[f] = math.Float32frombits(bits & -uint32(b2u(a == 0)))
			d01[f] = math.Float32frombits(bits & -uint32(b2u(a == 1)))
			d10[f] = math.Float32frombits(bits & -uint32(b2u(a == 2)))
			d11[f] = math.Float32frombits(bits & -uint32(b2u(a == 3)))
		}
	}
	// A·∂Y over the rows: P_0 = Q_0·, P_1 = Q_0· + Q_1·, P_2 = Q_0· − Q_1·,
	// P_3 = −Q_1·, in matrices 4a and 4a+1.
	copy(mat(4), q00)
	simd.Add(mat(4), q10)
	copy(mat(5), q01)
	simd.Add(mat(5), q11)
	simd.Sub(mat(8), q00, q10)
	simd.Sub(mat(9), q01, q11)
	simd.Scale(q10, -1)
	simd.Scale(q11, -1)
	// (A·∂Y)·Aᵀ over the columns: ∂M_a0 = P_a0, ∂M_a1 = P_a0 + P_a1,
	// ∂M_a2 = P_a0 − P_a1, ∂M_a3 = −P_a1.
	for a := range 4 {
		p0, p1, x2, x3 := mat(4*a), mat(4*a+1), mat(4*a+2), mat(4*a+3)
		simd.Sub(x2, p0, p1)
		copy(x3, p1)
		simd.Scale(x3, -1)
		simd.Add(p1, p0)
	}
}
