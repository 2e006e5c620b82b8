package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The Winograd kernels (wino.go) on every path against the first path
// bit for bit (forEachPath runs the fastest first and generic last), and
// the first path against the transforms written as float64 matrix
// products (Lavin & Gray 2016, §4–5): Bᵀ d B, its adjoint by
// ⟨V(d), ∂V⟩ = ⟨d, V*(∂V)⟩, Aᵀ M A with the pooling, and A ∂Y Aᵀ.
// Channel counts cover a partial vector on either side of 8 and 16 and
// the CNN's 32 and 64; matrices have padding rows (ld > rows·c); rows of
// tiles cover whole and cut pooled grids.

var winoBT6 = [6][6]float64{
	{4, 0, -5, 0, 1, 0},
	{0, -4, -4, 1, 1, 0},
	{0, 4, -4, -1, 1, 0},
	{0, -2, -1, 2, 1, 0},
	{0, 2, -1, -2, 1, 0},
	{0, 4, 0, -5, 0, 1},
}

var winoAT4 = [4][6]float64{
	{1, 1, 1, 1, 1, 0},
	{0, 1, -1, 2, -2, 0},
	{0, 1, 1, 4, 4, 0},
	{0, 1, -1, 8, -8, 1},
}

var winoChannels = []int{1, 3, 8, 9, 16, 17, 24, 31, 32, 33, 64, 65}

// winoRowsIn returns the even and odd columns of six input rows for nt
// tiles of c channels (with one column of slack at the end), random with
// about half zeros, like ReLU outputs.
func winoRowsIn(rng *rand.Rand, nt, c int) (e, o [6][]float32) {
	for r := range 6 {
		e[r], o[r] = make([]float32, (2*nt+2)*c), make([]float32, (2*nt+2)*c)
		for _, s := range [][]float32{e[r], o[r]} {
			for i := range s {
				if rng.IntN(2) == 0 {
					s[i] = float32(rng.NormFloat64())
				}
			}
		}
	}
	return
}

func copyRows(x [6][]float32) (y [6][]float32) {
	for r := range x {
		y[r] = append([]float32(nil), x[r]...)
	}
	return
}

// winoInAt is input element (row r, column col, channel k).
func winoInAt(e, o *[6][]float32, r, col, k, c int) float32 {
	if col%2 == 0 {
		return e[r][col/2*c+k]
	}
	return o[r][col/2*c+k]
}

func TestWinoInputMatchesBTdB(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, nt := range []int{1, 2, 6} {
		for _, c := range winoChannels {
			e, o := winoRowsIn(rng, nt, c)
			ld := nt*c + 3
			var want []float32
			forEachPath(t, func(t *testing.T) {
				v := make([]float32, WinoTile*ld)
				WinoInput(v, ld, &e, &o, nt, c)
				if want != nil {
					sameBits(t, fmt.Sprintf("WinoInput nt %d c %d", nt, c), v, want)
					return
				}
				for j := range nt {
					for k := range c {
						for a := range 6 {
							for b := range 6 {
								var s, scale float64
								for r := range 6 {
									for x := range 6 {
										z := winoBT6[a][r] * float64(winoInAt(&e, &o, r, 4*j+x, k, c)) * winoBT6[b][x]
										s += z
										scale += math.Abs(z)
									}
								}
								if got := v[(6*a+b)*ld+j*c+k]; math.Abs(float64(got)-s) > 1e-6*scale {
									t.Fatalf("nt %d c %d: V[%d][tile %d, channel %d] = %v, Bᵀ d B = %v", nt, c, 6*a+b, j, k, got, s)
								}
							}
						}
					}
				}
				want = v
			})
		}
	}
}

func TestWinoInputAdjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, nt := range []int{1, 2, 6} {
		for _, c := range winoChannels {
			ld := nt*c + 2
			dv := make([]float32, WinoTile*ld)
			for i := range dv {
				dv[i] = float32(rng.NormFloat64())
			}
			base, baseO := winoRowsIn(rng, nt, c) // the adjoint adds onto these
			d, dO := winoRowsIn(rng, nt, c)
			var want, wantO [6][]float32
			forEachPath(t, func(t *testing.T) {
				e, o := copyRows(base), copyRows(baseO)
				WinoInputAdjoint(&e, &o, append([]float32(nil), dv...), ld, nt, c) // dv is scratch
				if want[0] != nil {
					for r := range 6 {
						sameBits(t, fmt.Sprintf("WinoInputAdjoint nt %d c %d even row %d", nt, c, r), e[r], want[r])
						sameBits(t, fmt.Sprintf("WinoInputAdjoint nt %d c %d odd row %d", nt, c, r), o[r], wantO[r])
					}
					return
				}
				// ⟨V(d), ∂V⟩ = ⟨d, added⟩, in float64.
				v := make([]float32, WinoTile*ld)
				restore := setPath(pathGeneric)
				WinoInput(v, ld, &d, &dO, nt, c)
				restore()
				var lhs, rhs, scale float64
				for xi := range WinoTile {
					for i := range nt * c {
						lhs += float64(v[xi*ld+i]) * float64(dv[xi*ld+i])
						scale += math.Abs(float64(v[xi*ld+i]) * float64(dv[xi*ld+i]))
					}
				}
				for r := range 6 {
					for i := range (2*nt + 1) * c {
						rhs += float64(d[r][i])*float64(e[r][i]-base[r][i]) + float64(dO[r][i])*float64(o[r][i]-baseO[r][i])
					}
					for i := (2*nt + 1) * c; i < len(e[r]); i++ {
						if e[r][i] != base[r][i] || o[r][i] != baseO[r][i] {
							t.Fatalf("nt %d c %d: wrote past the last column", nt, c)
						}
					}
				}
				if math.Abs(lhs-rhs) > 1e-5*scale {
					t.Fatalf("nt %d c %d: ⟨V(d), ∂V⟩ = %v, ⟨d, V*(∂V)⟩ = %v", nt, c, lhs, rhs)
				}
				want, wantO = e, o
			})
		}
	}
}

// winoY is the float64 output Y = Aᵀ M A of tile j, filter f, and the
// sum of the magnitudes of its terms.
func winoY(m []float32, ld, c, j, f int) (y, scale [4][4]float64) {
	for i := range 4 {
		for jj := range 4 {
			for a := range 6 {
				for b := range 6 {
					z := winoAT4[i][a] * float64(m[(6*a+b)*ld+j*c+f]) * winoAT4[jj][b]
					y[i][jj] += z
					scale[i][jj] += math.Abs(z)
				}
			}
		}
	}
	return
}

func winoWinner(win []uint32, c, unit, f int) int {
	w := win[unit*WinoPoolWords(c)+f/8]
	k := -1
	for b := range 4 {
		if w>>(8*b+f%8)&1 != 0 {
			if k >= 0 {
				return -2 // two winners
			}
			k = b
		}
	}
	return k
}

func TestWinoOutputPool(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, g := range []struct{ nt, units, rows int }{{1, 2, 2}, {3, 6, 2}, {3, 5, 2}, {3, 5, 1}, {6, 12, 2}, {40, 80, 2}} {
		for _, c := range winoChannels {
			nt := g.nt
			ld := nt*c + 5
			m := make([]float32, WinoTile*ld)
			for i := range m {
				m[i] = float32(rng.NormFloat64())
			}
			bias := make([]float32, c)
			for i := range bias {
				bias[i] = float32(rng.NormFloat64())
			}
			// An exact tie in tile 0's first window, filter 0 (only M_7 ≠ 0:
			// Y = Aᵀ M A is then outer(A row 1, A row 1), whose (0,0) … (1,1)
			// are 1, 1, 1, 1), a NaN and infinities.
			for xi := range WinoTile {
				m[xi*ld] = 0
			}
			m[7*ld] = 1
			nanAt := min(3, nt*c-1)
			if nt*c > 1 {
				m[14*ld+nanAt] = float32(math.NaN())
				m[2*ld+nt*c-1] = float32(math.Inf(1))
				m[9*ld+nt*c-1] = float32(math.Inf(1))
			}
			var want [2][]float32
			var wantWin []uint32
			forEachPath(t, func(t *testing.T) {
				var out [2][]float32
				for a := range g.rows {
					out[a] = make([]float32, g.units*c)
					for i := range out[a] {
						out[a][i] = -7 // untouched where no unit
					}
				}
				win := make([]uint32, 4*nt*WinoPoolWords(c))
				for i := range win {
					win[i] = 0xdeadbeef
				}
				WinoOutputPool(&out, win, append([]float32(nil), m...), ld, bias, nt, c, g.units) // m is scratch
				if wantWin != nil {
					for a := range g.rows {
						sameBits(t, fmt.Sprintf("WinoOutputPool nt %d c %d row %d", nt, c, a), out[a], want[a])
					}
					for i := range win {
						if win[i] != wantWin[i] {
							t.Fatalf("WinoOutputPool nt %d c %d: word %d = %#x, first path %#x", nt, c, i, win[i], wantWin[i])
						}
					}
					return
				}
				for j := range nt {
					for f := range c {
						y, scale := winoY(m, ld, c, j, f)
						for u := range 4 {
							a, b := u>>1, u&1
							unit := 4*j + u
							if a >= g.rows || 2*j+b >= g.units {
								if winoWinner(win, c, unit, f) != -1 {
									t.Fatalf("nt %d c %d: unit %d of tile %d is not pooled but has a winner", nt, c, u, j)
								}
								continue
							}
							got, gotArg := out[a][(2*j+b)*c+f], winoWinner(win, c, unit, f)
							best, arg, sc := math.Inf(-1), 0, 0.0
							for k := range 4 {
								v := y[2*a+k>>1][2*b+k&1]
								sc = max(sc, scale[2*a+k>>1][2*b+k&1])
								if v > best {
									best, arg = v, k
								}
							}
							if math.IsNaN(best) || math.IsInf(best, 0) || math.IsNaN(sc) || math.IsInf(sc, 0) {
								if j == 0 && f == nanAt && a == 1 && b == 0 && !math.IsNaN(float64(got)) {
									t.Fatalf("nt %d c %d: a NaN in the window gave %v", nt, c, got)
								}
								continue // checked against the generic loop only
							}
							ref := best + float64(bias[f])
							if !(ref > 0) {
								ref, arg = 0, -1
							}
							if math.Abs(float64(got)-ref) > 1e-6*(sc+math.Abs(float64(bias[f]))) {
								t.Fatalf("nt %d c %d tile %d unit %d filter %d: pooled %v, reference %v", nt, c, j, u, f, got, ref)
							}
							if gotArg != arg && math.Abs(ref) > 1e-5*sc {
								// Ties within rounding may pick either input.
								t.Fatalf("nt %d c %d tile %d unit %d filter %d: winner %d, reference %d", nt, c, j, u, f, gotArg, arg)
							}
						}
					}
				}
				want, wantWin = out, win
			})
		}
	}
}

func TestWinoUnpool(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, g := range []struct{ nt, units, rows int }{{1, 2, 2}, {3, 6, 2}, {3, 5, 2}, {3, 5, 1}, {6, 12, 2}, {40, 80, 2}} {
		for _, c := range winoChannels {
			for _, withMask := range []bool{false, true} {
				nt := g.nt
				ld := nt*c + 4
				W := WinoPoolWords(c)
				var dp, mask [2][]float32
				for a := range g.rows {
					dp[a] = make([]float32, g.units*c)
					for i := range dp[a] {
						dp[a][i] = float32(rng.NormFloat64())
					}
					if withMask {
						mask[a] = make([]float32, g.units*c)
						for i := range mask[a] {
							mask[a][i] = float32(rng.IntN(2)) * 4 / 3
						}
					}
				}
				win := make([]uint32, 4*nt*W)
				arg := make([]int, 4*nt*c)
				for j := range nt {
					for u := range 4 {
						a, b := u>>1, u&1
						if a >= g.rows || 2*j+b >= g.units {
							continue
						}
						for f := range c {
							k := rng.IntN(5) - 1 // −1: blocked
							arg[(4*j+u)*c+f] = k
							if k >= 0 {
								win[(4*j+u)*W+f/8] |= 1 << (8*k + f%8)
							}
						}
					}
				}
				gb0 := make([]float32, c)
				for i := range gb0 {
					gb0[i] = float32(rng.NormFloat64())
				}
				var want, wantGb []float32
				forEachPath(t, func(t *testing.T) {
					dm := make([]float32, WinoTile*ld)
					for i := range dm {
						dm[i] = 13 // every element written
					}
					gb := append([]float32(nil), gb0...)
					WinoUnpool(dm, ld, &dp, &mask, win, gb, nt, c, g.units)
					if want != nil {
						sameBits(t, fmt.Sprintf("WinoUnpool nt %d c %d", nt, c), dm, want)
						sameBits(t, fmt.Sprintf("WinoUnpool nt %d c %d bias gradient", nt, c), gb, wantGb)
						return
					}
					gbRef := make([]float64, c)
					for i := range gbRef {
						gbRef[i] = float64(gb0[i])
					}
					for j := range nt {
						for f := range c {
							var dy [4][4]float64
							for u := range 4 {
								a, b := u>>1, u&1
								if a >= g.rows || 2*j+b >= g.units {
									continue
								}
								g32 := dp[a][(2*j+b)*c+f]
								if mask[a] != nil {
									g32 *= mask[a][(2*j+b)*c+f]
								}
								if k := arg[(4*j+u)*c+f]; k >= 0 {
									dy[2*a+k>>1][2*b+k&1] = float64(g32)
									gbRef[f] += float64(g32)
								}
							}
							for a := range 6 {
								for b := range 6 {
									var s, scale float64
									for i := range 4 {
										for jj := range 4 {
											z := winoAT4[i][a] * dy[i][jj] * winoAT4[jj][b]
											s += z
											scale += math.Abs(z)
										}
									}
									if got := dm[(6*a+b)*ld+j*c+f]; math.Abs(float64(got)-s) > 1e-6*scale {
										t.Fatalf("nt %d c %d: ∂M[%d][tile %d, filter %d] = %v, A ∂Y Aᵀ = %v", nt, c, 6*a+b, j, f, got, s)
									}
								}
							}
						}
					}
					for f := range c {
						if math.Abs(float64(gb[f])-gbRef[f]) > 1e-5*(1+math.Abs(gbRef[f])) {
							t.Fatalf("nt %d c %d: ∂b[%d] = %v, reference %v", nt, c, f, gb[f], gbRef[f])
						}
					}
					want, wantGb = dm, gb
				})
			}
		}
	}
}

func TestWinoKernelsPanicOnShortSlices(t *testing.T) {
	const nt, c = 2, 4
	e, o := winoRowsIn(rand.New(rand.NewPCG(9, 10)), nt, c)
	short := e
	short[5] = short[5][:2*nt*c]
	ld := nt * c
	n := WinoTile * ld
	two := func(l0, l1 int) *[2][]float32 { return &[2][]float32{make([]float32, l0), make([]float32, l1)} }
	for name, f := range map[string]func(){
		"WinoInput v":         func() { WinoInput(make([]float32, n-1), ld, &e, &o, nt, c) },
		"WinoInput rows":      func() { WinoInput(make([]float32, n), ld, &short, &o, nt, c) },
		"WinoInputAdjoint ld": func() { WinoInputAdjoint(&e, &o, make([]float32, n), ld-1, nt, c) },
		"WinoOutputPool win": func() {
			WinoOutputPool(two(4*c, 4*c), make([]uint32, 4*nt-1), make([]float32, n), ld, make([]float32, c), nt, c, 4)
		},
		"WinoOutputPool bias": func() {
			WinoOutputPool(two(4*c, 4*c), make([]uint32, 4*nt), make([]float32, n), ld, make([]float32, c-1), nt, c, 4)
		},
		"WinoOutputPool out": func() {
			WinoOutputPool(two(4*c, 4*c-1), make([]uint32, 4*nt), make([]float32, n), ld, make([]float32, c), nt, c, 4)
		},
		"WinoOutputPool units": func() {
			WinoOutputPool(two(4*c, 4*c), make([]uint32, 4*nt), make([]float32, n), ld, make([]float32, c), nt, c, 2)
		},
		"WinoUnpool mask": func() {
			WinoUnpool(make([]float32, n), ld, two(4*c, 4*c), two(4*c, 4*c-1), make([]uint32, 4*nt), make([]float32, c), nt, c, 4)
		},
		"WinoUnpool gradients": func() {
			WinoUnpool(make([]float32, n), ld, two(4*c-1, 4*c), &[2][]float32{}, make([]uint32, 4*nt), make([]float32, c), nt, c, 4)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkWino(b *testing.B) {
	// The CNN's conv2 on one 28×28 image: 6 rows of 6 tiles (36 tiles, 40
	// rows), c1 = 32, c2 = 64, 12×12 pooled units.
	const nt, Tp, c1, c2 = 6, 40, 32, 64
	rng := rand.New(rand.NewPCG(11, 12))
	e, o := winoRowsIn(rng, nt, c1)
	v := make([]float32, WinoTile*Tp*c1)
	m := make([]float32, WinoTile*Tp*c2)
	for i := range m {
		m[i] = float32(rng.NormFloat64())
	}
	m0 := append([]float32(nil), m...)
	var out [2][]float32
	out[0], out[1] = make([]float32, 2*nt*c2), make([]float32, 2*nt*c2)
	bias := make([]float32, c2)
	win := make([]uint32, 4*nt*WinoPoolWords(c2))
	for _, p := range cpuPaths() {
		restore := setPath(p)
		b.Run("input/"+p, func(b *testing.B) {
			for b.Loop() {
				for r := range nt {
					WinoInput(v[r*nt*c1:], Tp*c1, &e, &o, nt, c1)
				}
			}
		})
		b.Run("inputAdjoint/"+p, func(b *testing.B) {
			for b.Loop() {
				for r := range nt {
					WinoInputAdjoint(&e, &o, v[r*nt*c1:], Tp*c1, nt, c1)
				}
			}
		})
		b.Run("outputPool/"+p, func(b *testing.B) {
			for b.Loop() {
				copy(m, m0) // m is scratch (≈4 µs of the time on the Zen 5 machine)
				for r := range nt {
					WinoOutputPool(&out, win, m[r*nt*c2:], Tp*c2, bias, nt, c2, 2*nt)
				}
			}
		})
		b.Run("unpool/"+p, func(b *testing.B) {
			for b.Loop() {
				for r := range nt {
					WinoUnpool(m[r*nt*c2:], Tp*c2, &out, &[2][]float32{}, win, bias, nt, c2, 2*nt)
				}
			}
		})
		restore()
	}
}

var winoG6 = [6][3]float64{{1. / 4, 0, 0}, {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6}, {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}}

func TestWinoFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, c2 := range []int{1, 3, 64} {
		for _, c1 := range []int{1, 3, 4, 5, 8, 9, 17, 32} {
			w := make([]float32, 9*c2*c1)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			gu := make([]float32, WinoTile*c2*c1)
			for i := range gu {
				gu[i] = float32(rng.NormFloat64())
			}
			n := c2 * c1
			var wantU, wantG []float32
			forEachPath(t, func(t *testing.T) {
				u, gw := make([]float32, WinoTile*n), make([]float32, 9*n)
				WinoFilters(u, w, c2, c1)
				WinoFilterGrad(gw, gu, c2, c1)
				if wantU != nil {
					sameBits(t, fmt.Sprintf("WinoFilters c2 %d c1 %d", c2, c1), u, wantU)
					sameBits(t, fmt.Sprintf("WinoFilterGrad c2 %d c1 %d", c2, c1), gw, wantG)
					return
				}
				var lhs, rhs, scale float64
				for f := range c2 {
					for c := range c1 {
						g := func(dy, dx int) float64 { return float64(w[f*9*c1+(3*dy+dx)*c1+c]) }
						for a := range 6 {
							for b := range 6 {
								var s float64
								for dy := range 3 {
									for dx := range 3 {
										s += winoG6[a][dy] * g(dy, dx) * winoG6[b][dx]
									}
								}
								got := u[(6*a+b)*n+f*c1+c]
								if math.Abs(float64(got)-s) > 1e-7*math.Abs(s)+1e-12 {
									t.Fatalf("c2 %d c1 %d: U[%d][%d, %d] = %v, G g Gᵀ = %v", c2, c1, 6*a+b, f, c, got, s)
								}
								lhs += s * float64(gu[(6*a+b)*n+f*c1+c])
								scale += math.Abs(s * float64(gu[(6*a+b)*n+f*c1+c]))
							}
						}
						for t9 := range 9 {
							rhs += g(t9/3, t9%3) * float64(gw[f*9*c1+t9*c1+c])
						}
					}
				}
				// ⟨U(g), ∂U⟩ = ⟨g, U*(∂U)⟩: the gradient is the adjoint.
				if math.Abs(lhs-rhs) > 1e-6*scale {
					t.Fatalf("c2 %d c1 %d: ⟨U(g), ∂U⟩ = %v, ⟨g, Gᵀ ∂U G⟩ = %v", c2, c1, lhs, rhs)
				}
				wantU, wantG = u, gw
			})
		}
	}
}

func BenchmarkWinoFilters(b *testing.B) {
	const c2, c1 = 64, 32
	w, u := make([]float32, 9*c2*c1), make([]float32, WinoTile*c2*c1)
	for _, p := range cpuPaths() {
		restore := setPath(p)
		b.Run("filters/"+p, func(b *testing.B) {
			for b.Loop() {
				WinoFilters(u, w, c2, c1)
			}
		})
		b.Run("grad/"+p, func(b *testing.B) {
			for b.Loop() {
				WinoFilterGrad(w, u, c2, c1)
			}
		})
		restore()
	}
}
