//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// The filter transforms of wino.go (WinoFilters, WinoFilterGrad) in
// archsimd float64: 8 channels a vector on the avx512 path, 4 on avx2,
// the generic loops for the channels left over and on the generic path,
// with the generic loops' operations in their order (no fused
// multiply-add), so the results are the same bits. They end with
// VZEROUPPER, like the other Winograd kernels (wino_amd64_simd.go).

func winoFilters(u, w []float32, c2, c1 int) {
	k0 := 0
	if hasAVX512 {
		k0 = winoFiltersAVX512(u, w, c2, c1)
	} else if hasAVX2 {
		k0 = winoFiltersAVX2(u, w, c2, c1)
	}
	winoFiltersGeneric(u, w, c2, c1, k0)
}

func winoFilterGrad(gw, gu []float32, c2, c1 int) {
	k0 := 0
	if hasAVX512 {
		k0 = winoFilterGradAVX512(gw, gu, c2, c1)
	} else if hasAVX2 {
		k0 = winoFilterGradAVX2(gw, gu, c2, c1)
	}
	winoFilterGradGeneric(gw, gu, c2, c1, k0)
}

// ---- AVX-512: 8 channels a vector.

func ldw8(s []float32, i int) archsimd.Float64x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(s[i : i+8])).ConvertToFloat64()
}

func stw8(x archsimd.Float64x8, s []float32, i int) {
	x.ConvertToFloat32().Store((*[8]float32)(s[i : i+8]))
}

// winoGp8 is winoGp on vectors (k2, k4: 2 and 4 broadcast).
func winoGp8(a, b, d, k2, k4 archsimd.Float64x8) (r0, r1, r2, r3, r4, r5 archsimd.Float64x8) {
	s, t, b2 := a.Add(d), a.Add(k4.Mul(d)), k2.Mul(b)
	return a, s.Add(b), s.Sub(b), t.Add(b2), t.Sub(b2), d
}

// winoGpT8 is winoGpT on vectors.
func winoGpT8(u0, u1, u2, u3, u4, u5, k2, k4 archsimd.Float64x8) (a, b, d archsimd.Float64x8) {
	p, m := u1.Add(u2), u1.Sub(u2)
	P, M := u3.Add(u4), u3.Sub(u4)
	return u0.Add(p).Add(P), m.Add(k2.Mul(M)), p.Add(k4.Mul(P)).Add(u5)
}

func winoFiltersAVX512(u, w []float32, c2, c1 int) int {
	k2, k4 := archsimd.BroadcastFloat64x8(2), archsimd.BroadcastFloat64x8(4)
	var sc [WinoTile]archsimd.Float64x8
	for xi := range sc {
		sc[xi] = archsimd.BroadcastFloat64x8(winoFilterScale[xi])
	}
	n := c2 * c1
	for f := range c2 {
		wf := w[f*9*c1 : (f+1)*9*c1]
		for c := 0; c+8 <= c1; c += 8 {
			g00, g01, g02, g03, g04, g05 := winoGp8(ldw8(wf, c), ldw8(wf, 3*c1+c), ldw8(wf, 6*c1+c), k2, k4)
			g10, g11, g12, g13, g14, g15 := winoGp8(ldw8(wf, c1+c), ldw8(wf, 4*c1+c), ldw8(wf, 7*c1+c), k2, k4)
			g20, g21, g22, g23, g24, g25 := winoGp8(ldw8(wf, 2*c1+c), ldw8(wf, 5*c1+c), ldw8(wf, 8*c1+c), k2, k4)
			o := f*c1 + c
			for a, col := range [6][3]archsimd.Float64x8{{g00, g10, g20}, {g01, g11, g21}, {g02, g12, g22}, {g03, g13, g23}, {g04, g14, g24}, {g05, g15, g25}} {
				r0, r1, r2, r3, r4, r5 := winoGp8(col[0], col[1], col[2], k2, k4)
				stw8(r0.Mul(sc[6*a]), u, 6*a*n+o)
				stw8(r1.Mul(sc[6*a+1]), u, (6*a+1)*n+o)
				stw8(r2.Mul(sc[6*a+2]), u, (6*a+2)*n+o)
				stw8(r3.Mul(sc[6*a+3]), u, (6*a+3)*n+o)
				stw8(r4.Mul(sc[6*a+4]), u, (6*a+4)*n+o)
				stw8(r5.Mul(sc[6*a+5]), u, (6*a+5)*n+o)
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return c1 - c1%8
}

func winoFilterGradAVX512(gw, gu []float32, c2, c1 int) int {
	k2, k4 := archsimd.BroadcastFloat64x8(2), archsimd.BroadcastFloat64x8(4)
	var sc [WinoTile]archsimd.Float64x8
	for xi := range sc {
		sc[xi] = archsimd.BroadcastFloat64x8(winoFilterScale[xi])
	}
	n := c2 * c1
	for f := range c2 {
		gf := gw[f*9*c1 : (f+1)*9*c1]
		for c := 0; c+8 <= c1; c += 8 {
			o := f*c1 + c
			s := func(xi int) archsimd.Float64x8 { return ldw8(gu, xi*n+o).Mul(sc[xi]) }
			var y0, y1, y2 [6]archsimd.Float64x8
			for b := range 6 {
				y0[b], y1[b], y2[b] = winoGpT8(s(b), s(6+b), s(12+b), s(18+b), s(24+b), s(30+b), k2, k4)
			}
			for r, y := range [3]*[6]archsimd.Float64x8{&y0, &y1, &y2} {
				g0, g1, g2 := winoGpT8(y[0], y[1], y[2], y[3], y[4], y[5], k2, k4)
				stw8(g0, gf, 3*r*c1+c)
				stw8(g1, gf, (3*r+1)*c1+c)
				stw8(g2, gf, (3*r+2)*c1+c)
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return c1 - c1%8
}

// ---- AVX2: 4 channels a vector.

func ldw4(s []float32, i int) archsimd.Float64x4 {
	return archsimd.LoadFloat32x4((*[4]float32)(s[i : i+4])).ConvertToFloat64()
}

func stw4(x archsimd.Float64x4, s []float32, i int) {
	x.ConvertToFloat32().Store((*[4]float32)(s[i : i+4]))
}

func winoGp4(a, b, d, k2, k4 archsimd.Float64x4) (r0, r1, r2, r3, r4, r5 archsimd.Float64x4) {
	s, t, b2 := a.Add(d), a.Add(k4.Mul(d)), k2.Mul(b)
	return a, s.Add(b), s.Sub(b), t.Add(b2), t.Sub(b2), d
}

func winoGpT4(u0, u1, u2, u3, u4, u5, k2, k4 archsimd.Float64x4) (a, b, d archsimd.Float64x4) {
	p, m := u1.Add(u2), u1.Sub(u2)
	P, M := u3.Add(u4), u3.Sub(u4)
	return u0.Add(p).Add(P), m.Add(k2.Mul(M)), p.Add(k4.Mul(P)).Add(u5)
}

func winoFiltersAVX2(u, w []float32, c2, c1 int) int {
	k2, k4 := archsimd.BroadcastFloat64x4(2), archsimd.BroadcastFloat64x4(4)
	n := c2 * c1
	for f := range c2 {
		wf := w[f*9*c1 : (f+1)*9*c1]
		for c := 0; c+4 <= c1; c += 4 {
			g00, g01, g02, g03, g04, g05 := winoGp4(ldw4(wf, c), ldw4(wf, 3*c1+c), ldw4(wf, 6*c1+c), k2, k4)
			g10, g11, g12, g13, g14, g15 := winoGp4(ldw4(wf, c1+c), ldw4(wf, 4*c1+c), ldw4(wf, 7*c1+c), k2, k4)
			g20, g21, g22, g23, g24, g25 := winoGp4(ldw4(wf, 2*c1+c), ldw4(wf, 5*c1+c), ldw4(wf, 8*c1+c), k2, k4)
			o := f*c1 + c
			for a, col := range [6][3]archsimd.Float64x4{{g00, g10, g20}, {g01, g11, g21}, {g02, g12, g22}, {g03, g13, g23}, {g04, g14, g24}, {g05, g15, g25}} {
				r0, r1, r2, r3, r4, r5 := winoGp4(col[0], col[1], col[2], k2, k4)
				for b, r := range [6]archsimd.Float64x4{r0, r1, r2, r3, r4, r5} {
					stw4(r.Mul(archsimd.BroadcastFloat64x4(winoFilterScale[6*a+b])), u, (6*a+b)*n+o)
				}
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return c1 - c1%4
}

func winoFilterGradAVX2(gw, gu []float32, c2, c1 int) int {
	k2, k4 := archsimd.BroadcastFloat64x4(2), archsimd.BroadcastFloat64x4(4)
	n := c2 * c1
	for f := range c2 {
		gf := gw[f*9*c1 : (f+1)*9*c1]
		for c := 0; c+4 <= c1; c += 4 {
			o := f*c1 + c
			s := func(xi int) archsimd.Float64x4 {
				return ldw4(gu, xi*n+o).Mul(archsimd.BroadcastFloat64x4(winoFilterScale[xi]))
			}
			var y0, y1, y2 [6]archsimd.Float64x4
			for b := range 6 {
				y0[b], y1[b], y2[b] = winoGpT4(s(b), s(6+b), s(12+b), s(18+b), s(24+b), s(30+b), k2, k4)
			}
			for r, y := range [3]*[6]archsimd.Float64x4{&y0, &y1, &y2} {
				g0, g1, g2 := winoGpT4(y[0], y[1], y[2], y[3], y[4], y[5], k2, k4)
				stw4(g0, gf, 3*r*c1+c)
				stw4(g1, gf, (3*r+1)*c1+c)
				stw4(g2, gf, (3*r+2)*c1+c)
			}
		}
	}
	archsimd.ClearAVXUpperBits()
	return c1 - c1%4
}
