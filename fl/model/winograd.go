package model

import "github.com/dpfl/dpfl/simd"

// Conv2 as Winograd's minimal filtering F(4×4, 3×3) (Lavin & Gray 2016,
// "Fast Algorithms for Convolutional Neural Networks", §4–5): every 4×4
// tile of conv2's outputs, which is exactly four 2×2 pooling windows,
// comes from the 6×6 tile of conv1's outputs under it as
//
//	Y = Aᵀ [ Σ_c (G g_{f,c} Gᵀ) ⊙ (Bᵀ d_c B) ] A,
//
// with the paper's matrices for the interpolation points 0, ±1, ±2, ∞
// (Bᵀ and Aᵀ are in simd/wino.go; G's rows are (¼, 0, 0), −⅙(1, 1, 1),
// −⅙(1, −1, 1), (1/24, 1/12, ⅙), (1/24, −1/12, ⅙), (0, 0, 1)), so that for
// each of the 36 transformed positions ξ the sum over input channels is
// one matrix product, M_ξ (tiles × c2) = V_ξ (tiles × c1) · U_ξᵀ
// (c1 × c2): 36·c1·c2 multiplications per tile of 16 outputs where the
// direct convolution takes 144·c1·c2 (4× fewer; F(2×2, 3×3), which this
// replaced, saved 2.25×). The backward pass runs the same products
// transposed: ∂U_ξ = ∂M_ξᵀ·V_ξ and ∂V_ξ = ∂M_ξ·U_ξ, with ∂M = A ∂Y Aᵀ,
// ∂d = B ∂V Bᵀ (added over overlapping tiles) and ∂g = Gᵀ ∂U G. The
// element-wise transforms, pooling included, are simd's fused Winograd
// kernels (simd.WinoInput, WinoOutputPool, WinoUnpool, WinoInputAdjoint),
// one row of tiles per call.
//
// Tiles: q = ⌊s2/2⌋ pooled units a side take Q = ⌈q/2⌉ tiles a side,
// whose inputs are conv1's outputs at rows and columns 0 … 4Q+1
// (cnn.sp). For an even q that is exactly what the pooling reads (s = 28:
// 6×6 tiles of conv1's 26×26 outputs); for an odd q the last row and
// column of tiles pool only their first halves, and conv1's outputs
// beyond its s−2 are zeros (im2col1 leaves their rows zero).
//
// Numerics: the transforms of F(4×4, 3×3) scale by up to 5 and 8, so its
// rounding errors are larger than F(2×2, 3×3)'s (which only added and
// halved) and than float32 direct summation's (Barabasz et al. 2020,
// "Error Analysis and Improving the Accuracy of Winograd Convolution for
// Deep Neural Networks", TOMS 46(4), analyse how the error grows with the
// tile size): on the full-size layer with He-initialised filters and
// ReLU-like inputs the largest error of a pooled output was 1.1·10⁻⁶ of
// Σ|w·a| over its window (1.5·10⁻⁶ with gonum's products on the generic
// path) and the mean 6.1·10⁻⁸, against 2.1·10⁻⁷ and 2.0·10⁻⁸ for float32
// direct summation in window order and 7.7·10⁻⁸ (largest) for
// F(2×2, 3×3) (TestWinogradConvAccuracy, which allows 2⁻¹⁸). That is
// ≈2⁻²⁰ of the terms' magnitude, 3–5× direct summation's, far below the
// gradient noise of SGD on batches of 20, let alone DP-SGD's added noise.
// The filter transforms and their gradients are computed in float64 and
// rounded once (simd.WinoFilters, WinoFilterGrad); the gradient tests
// (cnn_test.go) check against a float64 direct convolution.
//
// Why: with F(2×2, 3×3) and fused transforms, conv2's 48 products per
// image (16 forward, 32 backward) were over half of a training step on
// the Zen 5 machine; F(4×4, 3×3) does 108 per two images with 1.78× fewer
// multiplications: 149 → 86 µs of products per image on its AVX-512 path,
// 320 → 181 µs on its AVX2 path, while the transforms cost ≈20% more per
// image (4.9 + 6.2 + 10.5 + 13.5 µs for the input transform, its adjoint,
// the output transform with pooling and unpooling on AVX-512, against
// ≈3.5 + 9.6 + 8.7 + 7.7 µs; BenchmarkWino in simd). A training step
// (BenchmarkStep/cnn) got ≈6% faster on the AVX-512 path and ≈20% on the
// AVX2 path, and ≈12% and ≈25% once the filter transforms, now 36 per
// filter and channel, were vectorised.

// winoTile is the 6×6 transformed tile: ξ = 6a + b for row a, column b.
const winoTile = simd.WinoTile

// winoPad is the number of rows, Tp ≥ T, the 36 matrices of a chunk of T
// tiles have: a multiple of the AVX2 assembly Gemm's 5-row tiles, so that
// no product has a partial row strip (copied into a padded buffer and
// stored element by element). The padding rows are zero in V and ∂M,
// hence in M and ∂V, and are never pooled.
func winoPad(T int) int { return (T + 4) / 5 * 5 }

// winoFilters writes U_ξ = (G g_{f,c} Gᵀ)_ξ for every filter f and input
// channel c of W2 (c2 × 9·c1, window position-major then channel) into
// u (36 × c2 × c1: u[(ξ·c2 + f)·c1 + c], the input gradient's right
// operand; simd.WinoFilters, in float64 rounded once) and its transpose
// ut (36 × c1 × c2, the forward product's: an NN product ran ≈20% faster
// than the NT one with u).
func (m *cnn) winoFilters(ut, u, w2 []float32) {
	c1, c2 := m.c1, m.c2
	simd.WinoFilters(u, w2, c2, c1)
	// ut_ξ = u_ξᵀ, in blocks of 8 filters × 8 channels so that both sides
	// stay in a few cache lines.
	n := c2 * c1
	for xi := range winoTile {
		src, dst := u[xi*n:(xi+1)*n], ut[xi*n:(xi+1)*n]
		for f0 := 0; f0 < c2; f0 += 8 {
			for c0 := 0; c0 < c1; c0 += 8 {
				for f := f0; f < min(f0+8, c2); f++ {
					row := src[f*c1 : (f+1)*c1]
					for c := c0; c < min(c0+8, c1); c++ {
						dst[c*c2+f] = row[c]
					}
				}
			}
		}
	}
}

// winoFilterGrad writes W2's gradient (c2 × 9·c1) into gw2 from the
// gradient gu of the transformed filters (u's layout): ∂g = Gᵀ ∂U G
// (simd.WinoFilterGrad).
func (m *cnn) winoFilterGrad(gw2, gu []float32) {
	simd.WinoFilterGrad(gw2, gu, m.c2, m.c1)
}

// winoRows are the even and the odd columns of rows y … y+5 of a1 (laid
// out as a1), 2Q+1 columns of c1 floats each, as simd's Winograd kernels
// take them.
func (m *cnn) winoRows(a1 []float32, y int) (e, o [6][]float32) {
	for r := range 6 {
		e[r], o[r] = m.a1Even(a1, y+r), m.a1Odd(a1, y+r)
	}
	return
}

// winoInput writes V_ξ = (Bᵀ d B)_ξ for the tiles of tile rows [i0, i1)
// of one image's conv1 output a1 into rows t0, t0+1, … of v (36 matrices
// of T rows × c1), in row-major order: tile (i, j) covers rows 4i … 4i+5
// and columns 4j … 4j+5 of a1, that is even and odd columns 2j … 2j+2,
// since a1 stores each row as its even columns, then its odd ones (see
// cnnWorkspace.a1), the layout simd.WinoInput takes.
func (m *cnn) winoInput(v, a1 []float32, T, t0, i0, i1 int) {
	c, Q := m.c1, m.tq
	for i := i0; i < i1; i++ {
		e, o := m.winoRows(a1, 4*i)
		simd.WinoInput(v[(t0+(i-i0)*Q)*c:], T*c, &e, &o, Q, c)
	}
}

// winoInputAdjoint adds ∂d = B ∂V Bᵀ of every tile of tile rows [i0, i1),
// from rows t0, t0+1, … of dv (36 matrices of T rows × c1), onto the
// window of da1 (laid out as a1) the tile came from: winoInput's adjoint,
// summing overlaps (simd.WinoInputAdjoint; dv is left as scratch).
func (m *cnn) winoInputAdjoint(da1, dv []float32, T, t0, i0, i1 int) {
	c, Q := m.c1, m.tq
	for i := i0; i < i1; i++ {
		e, o := m.winoRows(da1, 4*i)
		simd.WinoInputAdjoint(&e, &o, dv[(t0+(i-i0)*Q)*c:], T*c, Q, c)
	}
}

// poolRows are pooled rows 2i and 2i+1 (nil where 2i+1 = q) of one
// image's pooled units p (q × q × c2, as pool and dPool hold them), or
// nil rows for p = nil.
func (m *cnn) poolRows(p []float32, i int) (r [2][]float32) {
	if p == nil {
		return
	}
	n := m.q * m.c2
	r[0] = p[2*i*n : (2*i+1)*n]
	if 2*i+1 < m.q {
		r[1] = p[(2*i+1)*n : (2*i+2)*n]
	}
	return
}

// winoOutputPool computes the 4×4 outputs Y = Aᵀ M A of the tiles of tile
// rows [i0, i1) of one image, rows t0, t0+1, … of mm (36 matrices of Tp
// rows × c2, left as scratch), and pools them into that image's pooled
// units out (q × q × c2) with simd.WinoOutputPool: since ReLU is monotone
// and b2 is constant per channel, max(relu(y + b2)) = relu(max(y) + b2),
// so conv2's bias and ReLU apply to the q² maxima only. win (the image's
// Q² tiles × 4 units × pw words) gets which window input won where the
// ReLU passed it (the first maximum on ties; none for a NaN, which the
// max keeps so that divergence stays visible).
func (m *cnn) winoOutputPool(out []float32, win []uint32, mm, b2 []float32, Tp, t0, i0, i1 int) {
	c, Q := m.c2, m.tq
	for i := i0; i < i1; i++ {
		r := m.poolRows(out, i)
		simd.WinoOutputPool(&r, win[i*Q*4*m.pw:], mm[(t0+(i-i0)*Q)*c:], Tp*c, b2, Q, c, m.q)
	}
}

// winoUnpool is winoOutputPool's backward pass for the tiles of tile rows
// [i0, i1) of one image: it writes ∂M = A ∂Y Aᵀ into rows t0, t0+1, … of
// dm (36 matrices of Tp rows × c2) from the image's pooled gradient dp
// (q × q × c2) times its dropout mask (nil for none), which reaches the
// window input win marks, and adds b2's gradient into gb
// (simd.WinoUnpool).
func (m *cnn) winoUnpool(dm, dp, mask []float32, win []uint32, gb []float32, Tp, t0, i0, i1 int) {
	c, Q := m.c2, m.tq
	for i := i0; i < i1; i++ {
		d, mk := m.poolRows(dp, i), m.poolRows(mask, i)
		simd.WinoUnpool(dm[(t0+(i-i0)*Q)*c:], Tp*c, &d, &mk, win[i*Q*4*m.pw:], gb, Q, c, m.q)
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
