package simd

import "math"

//go:generate sh -c "go run wino_gen.go > wino_amd64_simd.go"

// Fused element-wise kernels of Winograd's minimal filtering F(4×4, 3×3)
// (Lavin & Gray 2016, "Fast Algorithms for Convolutional Neural Networks",
// §4 and §5), for convolutions stored channels-last whose 4×4 output
// tiles are four 2×2 max-pooling windows (fl/model's conv2). With the
// paper's matrices (interpolation points 0, ±1, ±2, ∞)
//
//	     ⎡4  0 −5  0  1  0⎤        ⎡1  1  1  1  1  0⎤
//	     ⎢0 −4 −4  1  1  0⎥   Aᵀ = ⎢0  1 −1  2 −2  0⎥
//	Bᵀ = ⎢0  4 −4 −1  1  0⎥        ⎢0  1  1  4  4  0⎥
//	     ⎢0 −2 −1  2  1  0⎥        ⎣0  1 −1  8 −8  1⎦
//	     ⎢0  2 −1 −2  1  0⎥
//	     ⎣0  4  0 −5  0  1⎦
//
// a 6×6 input tile d becomes V = Bᵀ d B and a transformed product M
// becomes the 4×4 output Y = Aᵀ M A (G, for the filters: WinoFilters).
// The kernels apply the 1-D transforms with shared subexpressions
// (winoT6, winoT6T, winoT4, winoT4T: 10–16 additions each) whose only
// multiplications are by powers of two, which are exact, so a fused
// multiply-add rounds as a multiply and an add do. Each kernel does all
// the arithmetic of one tile and one vector of channels in registers,
// where a pass of Add or Sub per coefficient (fl/model's F(2×2, 3×3)
// transforms before these) wrote and re-read every intermediate matrix:
// on the Zen 5 machine the output transform with pooling alone had been
// ≈21% of a CNN training step, the passes of Add and Sub 12–18%. Each
// kernel does, per element, the same float32 operations in the same order
// on every path (the AVX-512 and AVX2 kernels under GOEXPERIMENT=simd, the
// generic loops of this file otherwise), so the paths agree bit for bit
// (wino_test.go checks every path against the first, and that against
// the transforms as float64 matrix products).
//
// Matrices: the transformed tiles are 36 matrices ξ = 6a + b (row a,
// column b of the 6×6 tile) at stride ld in one slice, tile t of channel
// or filter k at [ξ·ld + t·c + k]: the operands of the 36 products of
// F(4×4, 3×3) (M_ξ = V_ξ·U_ξᵀ). A call handles one row of nt tiles.

// WinoTile is the number of transformed matrices, 6×6.
const WinoTile = 36

// WinoInput writes V = Bᵀ d B for the nt tiles along one row of tiles
// into v (36 matrices at stride ld, tile j at row j). Tile j covers input
// rows 0–5 and columns 4j … 4j+5; the input is given by its even and odd
// columns, e[r] and o[r] for row r, column 2i of row r at e[r][i·c:] and
// column 2i+1 at o[r][i·c:] (c channels each), so every e[r] and o[r]
// needs (2nt+1)·c floats. It panics if a slice is too short.
func WinoInput(v []float32, ld int, e, o *[6][]float32, nt, c int) {
	winoCheck(len(v), ld, nt, c)
	winoCheckRows(e, o, nt, c)
	winoInput(v, ld, e, o, nt, c)
}

// WinoInputAdjoint adds ∂d = B ∂V Bᵀ of the nt tiles along one row of
// tiles, from dv (36 matrices at stride ld, tile j at row j), onto the
// input rows they came from, given as WinoInput's e and o: WinoInput's
// adjoint. Overlapping tiles add up in tile order. dv is scratch: its
// contents are unspecified afterwards.
func WinoInputAdjoint(e, o *[6][]float32, dv []float32, ld, nt, c int) {
	winoCheck(len(dv), ld, nt, c)
	winoCheckRows(e, o, nt, c)
	winoInputAdjoint(e, o, dv, ld, nt, c)
}

// WinoPoolWords is the number of uint32 words WinoOutputPool writes per
// pooled unit for c filters: one per group of 8.
func WinoPoolWords(c int) int { return (c + 7) / 8 }

// WinoOutputPool computes the 4×4 outputs Y = Aᵀ M A of the nt tiles
// along one row of tiles from m (36 matrices at stride ld, c filters)
// and max-pools each 2×2 window, with bias and ReLU: pooled unit (a, b) of
// tile j (a, b ∈ {0, 1}) is max(0, max(window) + bias), which is the
// maximum over the window of relu(y + bias) since ReLU is monotone and the
// bias constant per filter. out[a] is pooled row a of the tile row, units
// 2j+b of c floats each, of which there are `units` (2nt or 2nt−1):
// units beyond it, and with out[1] nil the whole second row, are not
// written. For the backward pass win (nt × 4 × WinoPoolWords(c), units in
// the order (0,0), (0,1), (1,0), (1,1)) records which window input won
// where the ReLU passed it: word g of a unit holds filters 8g … 8g+7,
// byte k of the word (k = 0 … 3 for the window inputs (0,0), (0,1), (1,0),
// (1,1)) has bit l set iff filter 8g+l's maximum came from input k (the
// first one on ties) and max + bias > 0; a NaN output (Go's max keeps
// NaN, so that divergence stays visible) sets no bit, nor does a unit not
// written. m is scratch: its contents are unspecified afterwards.
func WinoOutputPool(out *[2][]float32, win []uint32, m []float32, ld int, bias []float32, nt, c, units int) {
	winoCheck(len(m), ld, nt, c)
	winoCheckUnits(out, nt, c, units)
	if len(win) < 4*nt*WinoPoolWords(c) || len(bias) < c {
		panic(errLength)
	}
	winoOutputPool(out, win, m, ld, bias, nt, c, units)
}

// WinoUnpool is WinoOutputPool's backward pass: from the pooled gradient
// dp (laid out as WinoOutputPool's out), times the dropout scales mask
// (the same layout, or nil rows for none), it writes ∂M = A ∂Y Aᵀ (36
// matrices at stride ld, rows 0 … nt−1) where ∂Y is each unit's gradient
// at the window input win marks (zero at the others, where the ReLU
// blocked it and for units not pooled), and adds the gradient that passed
// the ReLU to bias's gradient gb (c), unit by unit in win's order.
func WinoUnpool(dm []float32, ld int, dp, mask *[2][]float32, win []uint32, gb []float32, nt, c, units int) {
	winoCheck(len(dm), ld, nt, c)
	winoCheckUnits(dp, nt, c, units)
	for a := range 2 {
		if mask[a] != nil && (dp[a] == nil || len(mask[a]) < units*c) {
			panic(errLength)
		}
	}
	if len(win) < 4*nt*WinoPoolWords(c) || len(gb) < c {
		panic(errLength)
	}
	winoUnpool(dm, ld, dp, mask, win, gb, nt, c, units)
}

// winoCheck panics unless n floats hold 36 matrices at stride ld with
// rows (tiles) 0 … rows−1 of c floats.
func winoCheck(n, ld, rows, c int) {
	if rows < 0 || c < 0 || ld < rows*c || (rows*c > 0 && n < (WinoTile-1)*ld+rows*c) {
		panic(errLength)
	}
}

func winoCheckRows(e, o *[6][]float32, nt, c int) {
	for r := range 6 {
		if len(e[r]) < (2*nt+1)*c || len(o[r]) < (2*nt+1)*c {
			panic(errLength)
		}
	}
}

func winoCheckUnits(out *[2][]float32, nt, c, units int) {
	if out[0] == nil || units > 2*nt || (nt > 0 && units < 2*nt-1) {
		panic(errLength)
	}
	for a := range 2 {
		if out[a] != nil && len(out[a]) < units*c {
			panic(errLength)
		}
	}
}

// The 1-D transforms. winoT6 is Bᵀ·d:
//
//	t₀ = (d₄ − d₂) + 4(d₀ − d₂)         t₃ = (d₄ − d₂) + 2(d₃ − d₁)
//	t₁ = (d₄ − 4d₂) + (d₃ − 4d₁)        t₄ = (d₄ − d₂) − 2(d₃ − d₁)
//	t₂ = (d₄ − 4d₂) − (d₃ − 4d₁)        t₅ = (d₅ − d₃) + 4(d₁ − d₃)
func winoT6(d0, d1, d2, d3, d4, d5 float32) (t0, t1, t2, t3, t4, t5 float32) {
	c := d4 - d2
	a, b := d4-4*d2, d3-4*d1
	e := 2 * (d3 - d1)
	return c + 4*(d0-d2), a + b, a - b, c + e, c - e, (d5 - d3) + 4*(d1-d3)
}

// winoT6T is B·∂t, winoT6's adjoint: with p = ∂t₁ + ∂t₂, m = ∂t₂ − ∂t₁,
// r = ∂t₃ + ∂t₄, s = ∂t₄ − ∂t₃,
//
//	∂d₀ = 4∂t₀                           ∂d₃ = (−4∂t₅ − (m + 2s)) − ∂t₅
//	∂d₁ = 4(m + ∂t₅) + 2s                ∂d₄ = (∂t₀ + p) + r
//	∂d₂ = −4(∂t₀ + p) − (∂t₀ + r)        ∂d₅ = ∂t₅
func winoT6T(t0, t1, t2, t3, t4, t5 float32) (d0, d1, d2, d3, d4, d5 float32) {
	p, m := t1+t2, t2-t1
	r, s := t3+t4, t4-t3
	tp := t0 + p
	ms := m + 2*s
	return 4 * t0, 4*(m+t5) + 2*s, -4*tp - (t0 + r), (-4*t5 - ms) - t5, tp + r, t5
}

// winoT4 is Aᵀ·m: with p = m₁ + m₂, d = m₁ − m₂, P = m₃ + m₄,
// D = m₃ − m₄: y₀ = (m₀ + p) + P, y₁ = d + 2D, y₂ = p + 4P,
// y₃ = (d + 8D) + m₅.
func winoT4(m0, m1, m2, m3, m4, m5 float32) (y0, y1, y2, y3 float32) {
	p, d := m1+m2, m1-m2
	P, D := m3+m4, m3-m4
	return (m0 + p) + P, d + 2*D, p + 4*P, (d + 8*D) + m5
}

// winoT4T is A·∂y, winoT4's adjoint: with E = ∂y₀ + ∂y₂,
// O = ∂y₁ + ∂y₃, F = ∂y₀ + 4∂y₂, H = 2(∂y₁ + 4∂y₃): ∂m = (∂y₀, E + O,
// E − O, F + H, F − H, ∂y₃).
func winoT4T(y0, y1, y2, y3 float32) (m0, m1, m2, m3, m4, m5 float32) {
	E, O := y0+y2, y1+y3
	F, H := y0+4*y2, 2*(y1+4*y3)
	return y0, E + O, E - O, F + H, F - H, y3
}

// The generic loops run over one 1-D transform of a tile at a time (six
// rows of channels in, six or four out), each a stage whose results go to
// the 36 matrices as scratch, with the slices cut to equal lengths so that
// the compiler drops the bounds checks: scalar code over a whole tile at
// once would not keep its 72 pointers in registers. The vector kernels do
// the same operations in the same order, a whole tile in registers.

// winoCol is input column x (0 … 5) of tile j in row r, channels
// [k0, c).
func winoCol(e, o *[6][]float32, r, j, x, c, k0 int) []float32 {
	s := e[r]
	if x%2 == 1 {
		s = o[r]
	}
	i := (2*j+x/2)*c + k0
	return s[i : i+c-k0]
}

// winoMat is the run of channels [k0, c) of tile j in matrix ξ.
func winoMat(m []float32, ld, xi, j, c, k0 int) []float32 {
	i := xi*ld + j*c + k0
	return m[i : i+c-k0]
}

// winoInputGeneric is WinoInput for channels [k0, c): winoT6 down each
// input column into t (matrices 6a + x), then winoT6 along each row a of
// t, in place.
func winoInputGeneric(v []float32, ld int, e, o *[6][]float32, nt, c, k0 int) {
	if k0 >= c {
		return
	}
	for j := range nt {
		for x := range 6 {
			winoT6Run(winoMat(v, ld, x, j, c, k0), winoMat(v, ld, 6+x, j, c, k0), winoMat(v, ld, 12+x, j, c, k0),
				winoMat(v, ld, 18+x, j, c, k0), winoMat(v, ld, 24+x, j, c, k0), winoMat(v, ld, 30+x, j, c, k0),
				winoCol(e, o, 0, j, x, c, k0), winoCol(e, o, 1, j, x, c, k0), winoCol(e, o, 2, j, x, c, k0),
				winoCol(e, o, 3, j, x, c, k0), winoCol(e, o, 4, j, x, c, k0), winoCol(e, o, 5, j, x, c, k0))
		}
		for a := range 6 {
			r0, r1, r2 := winoMat(v, ld, 6*a, j, c, k0), winoMat(v, ld, 6*a+1, j, c, k0), winoMat(v, ld, 6*a+2, j, c, k0)
			r3, r4, r5 := winoMat(v, ld, 6*a+3, j, c, k0), winoMat(v, ld, 6*a+4, j, c, k0), winoMat(v, ld, 6*a+5, j, c, k0)
			winoT6Run(r0, r1, r2, r3, r4, r5, r0, r1, r2, r3, r4, r5)
		}
	}
}

// winoT6Run writes winoT6 of d into t, element by element (t may be d).
func winoT6Run(t0, t1, t2, t3, t4, t5, d0, d1, d2, d3, d4, d5 []float32) {
	n := len(t0)
	t1, t2, t3, t4, t5 = t1[:n], t2[:n], t3[:n], t4[:n], t5[:n]
	d0, d1, d2, d3, d4, d5 = d0[:n], d1[:n], d2[:n], d3[:n], d4[:n], d5[:n]
	for k := range t0 {
		t0[k], t1[k], t2[k], t3[k], t4[k], t5[k] = winoT6(d0[k], d1[k], d2[k], d3[k], d4[k], d5[k])
	}
}

// winoInputAdjointGeneric is WinoInputAdjoint for channels [k0, c):
// winoT6T along each row a of ∂V (in place), then winoT6T down each
// column x, added onto the input, tile by tile.
func winoInputAdjointGeneric(e, o *[6][]float32, dv []float32, ld, nt, c, k0 int) {
	if k0 >= c {
		return
	}
	for j := range nt {
		for a := range 6 {
			r0, r1, r2 := winoMat(dv, ld, 6*a, j, c, k0), winoMat(dv, ld, 6*a+1, j, c, k0), winoMat(dv, ld, 6*a+2, j, c, k0)
			r3, r4, r5 := winoMat(dv, ld, 6*a+3, j, c, k0), winoMat(dv, ld, 6*a+4, j, c, k0), winoMat(dv, ld, 6*a+5, j, c, k0)
			n := len(r0)
			r1, r2, r3, r4, r5 = r1[:n], r2[:n], r3[:n], r4[:n], r5[:n]
			for k := range r0 {
				r0[k], r1[k], r2[k], r3[k], r4[k], r5[k] = winoT6T(r0[k], r1[k], r2[k], r3[k], r4[k], r5[k])
			}
		}
		for x := range 6 {
			winoT6TAddRun(winoCol(e, o, 0, j, x, c, k0), winoCol(e, o, 1, j, x, c, k0), winoCol(e, o, 2, j, x, c, k0),
				winoCol(e, o, 3, j, x, c, k0), winoCol(e, o, 4, j, x, c, k0), winoCol(e, o, 5, j, x, c, k0),
				winoMat(dv, ld, x, j, c, k0), winoMat(dv, ld, 6+x, j, c, k0), winoMat(dv, ld, 12+x, j, c, k0),
				winoMat(dv, ld, 18+x, j, c, k0), winoMat(dv, ld, 24+x, j, c, k0), winoMat(dv, ld, 30+x, j, c, k0))
		}
	}
}

// winoT6TAddRun adds winoT6T of t onto d, element by element.
func winoT6TAddRun(d0, d1, d2, d3, d4, d5, t0, t1, t2, t3, t4, t5 []float32) {
	n := len(d0)
	d1, d2, d3, d4, d5 = d1[:n], d2[:n], d3[:n], d4[:n], d5[:n]
	t0, t1, t2, t3, t4, t5 = t0[:n], t1[:n], t2[:n], t3[:n], t4[:n], t5[:n]
	for k := range d0 {
		x0, x1, x2, x3, x4, x5 := winoT6T(t0[k], t1[k], t2[k], t3[k], t4[k], t5[k])
		d0[k] += x0
		d1[k] += x1
		d2[k] += x2
		d3[k] += x3
		d4[k] += x4
		d5[k] += x5
	}
}

// winoUnits is how many pooled units (0 … 4) tile j has, as the grid
// (2 × 2 unless cut by units or a missing second row): rows and columns.
func winoUnits(out *[2][]float32, j, units int) (rows, cols int) {
	rows = 1
	if out[1] != nil {
		rows = 2
	}
	return rows, min(2, units-2*j)
}

// winoOutputPoolGeneric is WinoOutputPool for tiles [j0, j1) and filters
// [k0, k1), k0 a multiple of 8 and k1 one too or c: winoT4 along each row
// a of M (into columns 0–3), then down each column (into rows 0–3), in
// place, then the pooling of the four windows.
func winoOutputPoolGeneric(out *[2][]float32, win []uint32, m []float32, ld int, bias []float32, j0, j1, c, units, k0, k1 int) {
	W := WinoPoolWords(c)
	n := k1 - k0
	for j := j0; j < j1; j++ {
		mat := func(xi int) []float32 { return winoMat(m, ld, xi, j, c, k0)[:n] }
		for a := range 6 {
			m0, m1, m2, m3, m4, m5 := mat(6*a), mat(6*a+1), mat(6*a+2), mat(6*a+3), mat(6*a+4), mat(6*a+5)
			m1, m2, m3, m4, m5 = m1[:len(m0)], m2[:len(m0)], m3[:len(m0)], m4[:len(m0)], m5[:len(m0)]
			for k := range m0 {
				m0[k], m1[k], m2[k], m3[k] = winoT4(m0[k], m1[k], m2[k], m3[k], m4[k], m5[k])
			}
		}
		for b := range 4 {
			m0, m1, m2, m3, m4, m5 := mat(b), mat(6+b), mat(12+b), mat(18+b), mat(24+b), mat(30+b)
			m1, m2, m3, m4, m5 = m1[:len(m0)], m2[:len(m0)], m3[:len(m0)], m4[:len(m0)], m5[:len(m0)]
			for k := range m0 {
				m0[k], m1[k], m2[k], m3[k] = winoT4(m0[k], m1[k], m2[k], m3[k], m4[k], m5[k])
			}
		}
		rows, cols := winoUnits(out, j, units)
		for u := range 4 {
			a, b := u>>1, u&1
			w := win[(4*j+u)*W+k0/8 : (4*j+u)*W+(k1+7)/8]
			if a >= rows || b >= cols {
				clear(w)
				continue
			}
			i := (2*j+b)*c + k0
			winoPoolRun(out[a][i:i+n], w, mat(6*2*a+2*b), mat(6*2*a+2*b+1), mat(6*(2*a+1)+2*b), mat(6*(2*a+1)+2*b+1), bias[k0:k1])
		}
	}
}

// winoPoolRun pools one unit's windows (inputs v0 … v3 in row-major
// order) for a run of filters into out and its words of win. The pooling
// has no data-dependent branch: on real activations every comparison goes
// either way at random, and with branches it took ≈20 ns per output
// (mispredictions) against ≈6 without.
func winoPoolRun(out []float32, win []uint32, v0, v1, v2, v3, bias []float32) {
	for g := range win {
		n := min(8, len(out)-8*g)
		o, b := out[8*g:8*g+n], bias[8*g:8*g+n]
		y0, y1, y2, y3 := v0[8*g:8*g+n], v1[8*g:8*g+n], v2[8*g:8*g+n], v3[8*g:8*g+n]
		var word uint32
		for l := range o {
			up, down := max(y0[l], y1[l]), max(y2[l], y3[l])
			au, ad := winoB2U(y1[l] > y0[l]), 2+winoB2U(y3[l] > y2[l])
			lower := -winoB2U(down > up) // all ones: the bottom pair wins
			vb := max(up, down) + b[l]
			k := au ^ (au^ad)&lower
			word |= winoB2U(vb > 0) << (8*k + uint32(l))
			o[l] = max(vb, 0)
		}
		win[g] = word
	}
}

// winoUnpoolGeneric is WinoUnpool for filters [k0, c), k0 a multiple of
// 8: ∂Y routed into rows 0–3, columns 0–3 of the matrices (zero
// elsewhere in them), winoT4T along each row i (into columns 0–5), then
// down each column (into rows 0–5), in place.
func winoUnpoolGeneric(dm []float32, ld int, dp, mask *[2][]float32, win []uint32, gb []float32, nt, c, units, k0 int) {
	if k0 >= c {
		return
	}
	W := WinoPoolWords(c)
	n := c - k0
	for j := range nt {
		mat := func(xi int) []float32 { return winoMat(dm, ld, xi, j, c, k0)[:n] }
		rows, cols := winoUnits(dp, j, units)
		for u := range 4 {
			a, b := u>>1, u&1
			d0, d1, d2, d3 := mat(6*2*a+2*b), mat(6*2*a+2*b+1), mat(6*(2*a+1)+2*b), mat(6*(2*a+1)+2*b+1)
			if a >= rows || b >= cols {
				clear(d0)
				clear(d1)
				clear(d2)
				clear(d3)
				continue
			}
			i := (2*j+b)*c + k0
			var mk []float32
			if mask[a] != nil {
				mk = mask[a][i : i+n]
			}
			winoRouteRun(d0, d1, d2, d3, dp[a][i:i+n], mk, win[(4*j+u)*W+k0/8:(4*j+u)*W+W], gb[k0:c])
		}
		for i := range 4 {
			m0, m1, m2, m3, m4, m5 := mat(6*i), mat(6*i+1), mat(6*i+2), mat(6*i+3), mat(6*i+4), mat(6*i+5)
			m1, m2, m3, m4, m5 = m1[:len(m0)], m2[:len(m0)], m3[:len(m0)], m4[:len(m0)], m5[:len(m0)]
			for k := range m0 {
				m0[k], m1[k], m2[k], m3[k], m4[k], m5[k] = winoT4T(m0[k], m1[k], m2[k], m3[k])
			}
		}
		for b := range 6 {
			m0, m1, m2, m3, m4, m5 := mat(b), mat(6+b), mat(12+b), mat(18+b), mat(24+b), mat(30+b)
			m1, m2, m3, m4, m5 = m1[:len(m0)], m2[:len(m0)], m3[:len(m0)], m4[:len(m0)], m5[:len(m0)]
			for k := range m0 {
				m0[k], m1[k], m2[k], m3[k], m4[k], m5[k] = winoT4T(m0[k], m1[k], m2[k], m3[k])
			}
		}
	}
}

// winoRouteRun writes one unit's gradient (dp times mask, if any) to the
// window input its word marks, 0 to the others (q0 … q3 in row-major
// order), for a run of filters, and adds what passed to gb.
func winoRouteRun(q0, q1, q2, q3, dp, mask []float32, win []uint32, gb []float32) {
	n := len(q0)
	q1, q2, q3, dp, gb = q1[:n], q2[:n], q3[:n], dp[:n], gb[:n]
	for f := range q0 {
		g := dp[f]
		if mask != nil {
			g *= mask[f]
		}
		word := win[f/8] >> uint(f%8)
		bits := math.Float32bits(g)
		q0[f] = math.Float32frombits(bits & -(word & 1))
		q1[f] = math.Float32frombits(bits & -(word >> 8 & 1))
		q2[f] = math.Float32frombits(bits & -(word >> 16 & 1))
		q3[f] = math.Float32frombits(bits & -(word >> 24 & 1))
		gb[f] += math.Float32frombits(bits & -(word&1 | word>>8&1 | word>>16&1 | word>>24&1))
	}
}

func winoB2U(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// The filter transform U = G g Gᵀ of F(4×4, 3×3) and its adjoint. With
// G = D·G′, D = diag(¼, −⅙, −⅙, 1/24, 1/24, 1) and G′'s rows (1, 0, 0),
// (1, 1, 1), (1, −1, 1), (1, 2, 4), (1, −2, 4), (0, 0, 1), U_ab =
// D_a·D_b·(G′ g G′ᵀ)_ab: the kernels apply G′ (additions and exact
// doublings) and scale by winoFilterScale, in float64, rounding once to
// float32; the gradient ∂g = Gᵀ ∂U G = G′ᵀ (D ∂U D) G′ scales first.

// winoFilterScale is D_a·D_b for ξ = 6a + b, each rounded once from the
// exact product.
var winoFilterScale = [WinoTile]float64{
	1. / 4 * (1. / 4), 1. / 4 * (-1. / 6), 1. / 4 * (-1. / 6), 1. / 4 * (1. / 24), 1. / 4 * (1. / 24), 1. / 4,
	-1. / 6 * (1. / 4), -1. / 6 * (-1. / 6), -1. / 6 * (-1. / 6), -1. / 6 * (1. / 24), -1. / 6 * (1. / 24), -1. / 6,
	-1. / 6 * (1. / 4), -1. / 6 * (-1. / 6), -1. / 6 * (-1. / 6), -1. / 6 * (1. / 24), -1. / 6 * (1. / 24), -1. / 6,
	1. / 24 * (1. / 4), 1. / 24 * (-1. / 6), 1. / 24 * (-1. / 6), 1. / 24 * (1. / 24), 1. / 24 * (1. / 24), 1. / 24,
	1. / 24 * (1. / 4), 1. / 24 * (-1. / 6), 1. / 24 * (-1. / 6), 1. / 24 * (1. / 24), 1. / 24 * (1. / 24), 1. / 24,
	1. / 4, -1. / 6, -1. / 6, 1. / 24, 1. / 24, 1,
}

// WinoFilters writes the transformed filters U = G g Gᵀ of F(4×4, 3×3)
// (Lavin & Gray 2016, §5; G's rows (¼, 0, 0), −⅙(1, 1, 1), −⅙(1, −1, 1),
// (1/24, 1/12, ⅙), (1/24, −1/12, ⅙), (0, 0, 1)) of the c2 × c1 3×3
// filters in w (c2 rows of 9·c1: w[f·9c1 + (3dy+dx)·c1 + c], window
// position-major then channel) into u (36 matrices of c2 × c1 at stride
// c2·c1, U_ξ of filter f, channel c at [ξ·c2·c1 + f·c1 + c]), computed
// in float64 and rounded once. It panics if a slice is too short.
func WinoFilters(u, w []float32, c2, c1 int) {
	if c2 < 0 || c1 < 0 || len(w) < 9*c2*c1 || len(u) < WinoTile*c2*c1 {
		panic(errLength)
	}
	winoFilters(u, w, c2, c1)
}

// WinoFilterGrad writes the filters' gradient ∂g = Gᵀ ∂U G (w's layout)
// into gw from the transformed filters' gradient gu (u's layout):
// WinoFilters' adjoint, in float64 rounded once.
func WinoFilterGrad(gw, gu []float32, c2, c1 int) {
	if c2 < 0 || c1 < 0 || len(gw) < 9*c2*c1 || len(gu) < WinoTile*c2*c1 {
		panic(errLength)
	}
	winoFilterGrad(gw, gu, c2, c1)
}

// winoGp is G′ applied to (a, b, d): a, s + b, s − b, t + 2b, t − 2b, d
// with s = a + d, t = a + 4d.
func winoGp(a, b, d float64) (r0, r1, r2, r3, r4, r5 float64) {
	s, t, b2 := a+d, a+4*d, 2*b
	return a, s + b, s - b, t + b2, t - b2, d
}

// winoGpT is G′ᵀ applied to six values, winoGp's adjoint: with
// p = u₁ + u₂, m = u₁ − u₂, P = u₃ + u₄, M = u₃ − u₄: ((u₀ + p) + P,
// m + 2M, (p + 4P) + u₅).
func winoGpT(u0, u1, u2, u3, u4, u5 float64) (a, b, d float64) {
	p, m := u1+u2, u1-u2
	P, M := u3+u4, u3-u4
	return (u0 + p) + P, m + 2*M, (p + 4*P) + u5
}

// winoFiltersGeneric is WinoFilters for channels [k0, c1).
func winoFiltersGeneric(u, w []float32, c2, c1, k0 int) {
	n := c2 * c1
	for f := range c2 {
		wf := w[f*9*c1 : (f+1)*9*c1]
		for c := k0; c < c1; c++ {
			var g [3][6]float64 // G′·g, by window column x
			for x := range 3 {
				g[x][0], g[x][1], g[x][2], g[x][3], g[x][4], g[x][5] = winoGp(float64(wf[x*c1+c]), float64(wf[(3+x)*c1+c]), float64(wf[(6+x)*c1+c]))
			}
			o := f*c1 + c
			for a := range 6 { // (G′·g)·G′ᵀ, row a, scaled
				var r [6]float64
				r[0], r[1], r[2], r[3], r[4], r[5] = winoGp(g[0][a], g[1][a], g[2][a])
				for b, v := range r {
					u[(6*a+b)*n+o] = float32(v * winoFilterScale[6*a+b])
				}
			}
		}
	}
}

// winoFilterGradGeneric is WinoFilterGrad for channels [k0, c1).
func winoFilterGradGeneric(gw, gu []float32, c2, c1, k0 int) {
	n := c2 * c1
	for f := range c2 {
		gf := gw[f*9*c1 : (f+1)*9*c1]
		for c := k0; c < c1; c++ {
			o := f*c1 + c
			var s [WinoTile]float64
			for xi := range s {
				s[xi] = float64(float64(gu[xi*n+o]) * winoFilterScale[xi]) // rounded: not fused into winoGpT's additions
			}
			var y [3][6]float64 // G′ᵀ·(D ∂U D), by column b
			for b := range 6 {
				y[0][b], y[1][b], y[2][b] = winoGpT(s[b], s[6+b], s[12+b], s[18+b], s[24+b], s[30+b])
			}
			for r := range 3 { // (G′ᵀ·D ∂U D)·G′
				g0, g1, g2 := winoGpT(y[r][0], y[r][1], y[r][2], y[r][3], y[r][4], y[r][5])
				gf[(3*r)*c1+c], gf[(3*r+1)*c1+c], gf[(3*r+2)*c1+c] = float32(g0), float32(g1), float32(g2)
			}
		}
	}
}
