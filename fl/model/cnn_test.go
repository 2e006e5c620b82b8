package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/simd"
)

// refCNN is the cnn's forward pass written independently in float64 with
// direct convolution loops (no im2col, no GEMM), applying the given
// dropout scales (nil: none).
func refCNN(m *cnn, p []float64, x []float32, labels []uint8, mask1, mask2 []float32) (meanLoss float64, correct int) {
	s, s1, s2, q := m.side, m.s1, m.s2, m.q
	for b, y := range labels {
		img := x[b*s*s : (b+1)*s*s]
		a1 := make([]float64, s1*s1*m.c1)
		for i := range s1 {
			for j := range s1 {
				for f := range m.c1 {
					z := p[m.b1+f]
					for dy := range 3 {
						for dx := range 3 {
							z += p[m.w1+f*9+dy*3+dx] * float64(img[(i+dy)*s+j+dx])
						}
					}
					a1[(i*s1+j)*m.c1+f] = math.Max(z, 0)
				}
			}
		}
		a2 := make([]float64, s2*s2*m.c2)
		for i := range s2 {
			for j := range s2 {
				for f := range m.c2 {
					z := p[m.b2+f]
					for dy := range 3 {
						for dx := range 3 {
							for c := range m.c1 {
								z += p[m.w2+f*m.k2+(dy*3+dx)*m.c1+c] * a1[((i+dy)*s1+j+dx)*m.c1+c]
							}
						}
					}
					a2[(i*s2+j)*m.c2+f] = math.Max(z, 0)
				}
			}
		}
		pool := make([]float64, m.flat)
		for i := range q {
			for j := range q {
				for c := range m.c2 {
					v := math.Inf(-1)
					for _, d := range [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}} {
						v = math.Max(v, a2[((2*i+d[0])*s2+2*j+d[1])*m.c2+c])
					}
					k := (i*q+j)*m.c2 + c
					if mask1 != nil {
						v *= float64(mask1[b*m.flat+k])
					}
					pool[k] = v
				}
			}
		}
		h := make([]float64, m.hidden)
		for u := range m.hidden {
			z := p[m.b3+u]
			for k, v := range pool {
				z += p[m.w3+u*m.flat+k] * v
			}
			h[u] = math.Max(z, 0)
			if mask2 != nil {
				h[u] *= float64(mask2[b*m.hidden+u])
			}
		}
		logits := make([]float64, m.classes)
		best := 0
		for c := range logits {
			z := p[m.b4+c]
			for u, v := range h {
				z += p[m.w4+c*m.hidden+u] * v
			}
			logits[c] = z
			if z > logits[best] {
				best = c
			}
		}
		var sum float64
		for _, z := range logits {
			sum += math.Exp(z - logits[best])
		}
		meanLoss += logits[best] + math.Log(sum) - logits[y]
		if best == int(y) {
			correct++
		}
	}
	return meanLoss / float64(len(labels)), correct
}

// The cnn's gradient equals central differences of the independent
// float64 reference, for every parameter of a small instance, with
// dropout off and with the masks LossGrad drew; with conv2 run on all
// three images at once, on groups of two and one, and on uneven chunks of
// pooled rows of one image (forwardConv's chunks).
func TestCNNGradientMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		side, chunkFloats, nb, cr int
		drop                      float64
	}{
		// Odd side: pooling drops conv2's last row and column (and
		// conv2 never reads conv1's). q = 2: an image is one tile of
		// 36·(c1 + c2) = 180 Winograd floats.
		{9, cnnChunkFloats, cnnChunkFloats / 180, 1, 0},
		{9, cnnChunkFloats, cnnChunkFloats / 180, 1, 0.3},
		{9, 2 * 180, 2, 1, 0.3},
		// q = 5 pooled rows: 3 rows of 3 tiles, the last ones pooling
		// half (conv1's outputs padded with zeros), in chunks of 2 and 1
		// rows.
		{14, 2 * 540, 1, 2, 0.3},
	} {
		saved := cnnChunkFloats
		cnnChunkFloats = c.chunkFloats
		drop := c.drop
		m := newCNN(c.side, 2, 3, 5, 4, drop, drop)
		cnnChunkFloats = saved
		if m.nb != c.nb || m.cr != c.cr {
			t.Fatalf("side %d: chunks of %d images, %d pooled rows; want %d, %d", c.side, m.nb, m.cr, c.nb, c.cr)
		}
		params := make([]float32, m.NumParams())
		m.Init(params, rng)
		for i := range params {
			params[i] += float32(0.05 * rng.NormFloat64()) // non-zero biases
		}
		const n = 3
		x, y := randBatch(rng, n, m.InputDim(), m.classes)
		ws := m.NewWorkspace(n).(*cnnWorkspace)
		grad := make([]float32, m.NumParams())
		loss := ws.LossGrad(params, x, y, grad)
		var mask1, mask2 []float32
		if drop > 0 {
			mask1, mask2 = ws.mask1[:n*m.flat], ws.mask2[:n*m.hidden]
		}
		p64 := widen(params)
		want, _ := refCNN(m, p64, x, y, mask1, mask2)
		if math.Abs(loss-want) > 1e-5*want {
			t.Fatalf("dropout %v: loss %v, reference %v", drop, loss, want)
		}
		const h = 1e-6
		nonzero := 0
		for i := range p64 {
			old := p64[i]
			p64[i] = old + h
			up, _ := refCNN(m, p64, x, y, mask1, mask2)
			p64[i] = old - h
			down, _ := refCNN(m, p64, x, y, mask1, mask2)
			p64[i] = old
			fd := (up - down) / (2 * h)
			if math.Abs(float64(grad[i])-fd) > 1e-3*math.Abs(fd)+1e-5 {
				t.Fatalf("dropout %v: ∂L/∂θ[%d] = %v, central difference %v", drop, i, grad[i], fd)
			}
			if math.Abs(fd) > 1e-4 {
				nonzero++
			}
		}
		if nonzero < m.NumParams()/4 {
			t.Fatalf("only %d of %d gradients non-negligible", nonzero, m.NumParams())
		}
	}
}

// Evaluate (no dropout) agrees with the reference on the full-size model.
func TestCNNEvaluateMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	m := mustNew(t, "cnn", 784, 10).(*cnn)
	params := make([]float32, m.NumParams())
	m.Init(params, rng)
	x, y := randBatch(rng, 7, 784, 10)
	loss, correct := m.NewWorkspace(3).Evaluate(params, x, y)
	want, wantCorrect := refCNN(m, widen(params), x, y, nil, nil)
	if math.Abs(loss/7-want) > 1e-5*want || correct != wantCorrect {
		t.Fatalf("Evaluate: mean loss %v, %d correct; reference %v, %d", loss/7, correct, want, wantCorrect)
	}
}

// Inverted dropout keeps a fraction 1−p of units, each scaled by 1/(1−p).
func TestCNNDropoutMasks(t *testing.T) {
	m := mustNew(t, "cnn", 784, 10).(*cnn)
	params := make([]float32, m.NumParams())
	m.Init(params, rand.New(rand.NewPCG(1, 1)))
	x, y := randBatch(rand.New(rand.NewPCG(2, 2)), 20, 784, 10)
	ws := m.NewWorkspace(20).(*cnnWorkspace)
	ws.LossGrad(params, x, y, make([]float32, m.NumParams()))
	for _, c := range []struct {
		mask []float32
		p    float64
	}{{ws.mask1, 0.25}, {ws.mask2, 0.5}} {
		kept := 0
		for _, v := range c.mask {
			switch v {
			case 0:
			case float32(1 / (1 - c.p)):
				kept++
			default:
				t.Fatalf("mask value %v", v)
			}
		}
		n := float64(len(c.mask))
		if sd := math.Sqrt(n * c.p * (1 - c.p)); math.Abs(float64(kept)-n*(1-c.p)) > 5*sd {
			t.Fatalf("p = %v: kept %d of %v", c.p, kept, n)
		}
	}
}

// Winograd's conv2 (winograd.go) stays within a few dozen float32 units
// in the last place of the exact convolution: on the full-size layer with
// He-initialised filters and ReLU-like inputs, every pooled output is
// within 2⁻¹⁸ (64 u) of the float64 direct convolution, relative to
// Σ|w·a| over its window, the scale of the products' rounding. For
// comparison the test logs the error of float32 direct summation in
// window order (measured, largest and mean over the outputs the ReLU
// passes: F(4×4, 3×3) 1.1·10⁻⁶ and 6.1·10⁻⁸ with the assembly Gemm,
// 1.5·10⁻⁶ and 6.4·10⁻⁸ with gonum's (DPFL_SIMD=generic); direct
// summation 2.1·10⁻⁷ and 2.0·10⁻⁸; F(2×2, 3×3) had 7.7·10⁻⁸ largest).
func TestWinogradConvAccuracy(t *testing.T) {
	m := mustNew(t, "cnn", 784, 10).(*cnn)
	rng := rand.New(rand.NewPCG(25, 26))
	params := make([]float32, m.NumParams())
	m.Init(params, rng)
	ws := m.NewWorkspace(1).(*cnnWorkspace)
	a1 := make([]float32, m.p1*m.c1) // a1's layout: even columns first
	for i := range a1 {
		if rng.IntN(2) == 0 {
			a1[i] = float32(rng.Float64())
		}
	}
	at := func(y, x, c int) float32 { // a1 at row y, column x, channel c
		col := x / 2
		if x%2 == 1 {
			col = m.ne + x/2
		}
		return a1[(y*m.sp+col)*m.c1+c]
	}
	w2, b2 := params[m.w2:m.b2], make([]float32, m.c2)
	m.winoFilters(ws.ut, ws.u, w2)
	T := m.tq * m.tq
	v, mm := ws.wv[:winoTile*T*m.c1], ws.wm[:winoTile*T*m.c2]
	m.winoInput(v, a1, T, 0, 0, m.tq)
	for xi := range winoTile {
		simd.Gemm(false, false, T, m.c2, m.c1, 1, v[xi*T*m.c1:], m.c1, ws.ut[xi*m.c1*m.c2:], m.c2, 0, mm[xi*T*m.c2:], m.c2)
	}
	out, win := make([]float32, m.flat), make([]uint32, m.winFlat())
	m.winoOutputPool(out, win, mm, b2, T, 0, 0, m.tq)
	var worstWino, worstDirect, sumWino, sumDirect float64
	passed := 0
	for i := range m.q {
		for j := range m.q {
			for f := range m.c2 {
				best, best32, scale := math.Inf(-1), float32(math.Inf(-1)), 0.0
				for k := range 4 {
					y, x := 2*i+k>>1, 2*j+k&1
					var z, abs float64
					var z32 float32
					for t := range 9 {
						for c := range m.c1 {
							w, a := w2[f*m.k2+t*m.c1+c], at(y+t/3, x+t%3, c)
							z += float64(w) * float64(a)
							z32 += w * a
							abs += math.Abs(float64(w) * float64(a))
						}
					}
					best, best32, scale = max(best, z), max(best32, z32), max(scale, abs)
				}
				o := (i*m.q+j)*m.c2 + f
				ew := math.Abs(float64(out[o])-max(best, 0)) / scale
				ed := math.Abs(float64(max(best32, 0))-max(best, 0)) / scale
				worstWino, worstDirect = max(worstWino, ew), max(worstDirect, ed)
				if best > 0 {
					sumWino, sumDirect, passed = sumWino+ew, sumDirect+ed, passed+1
				}
			}
		}
	}
	t.Logf("error relative to Σ|w·a|, largest and mean over the %d outputs the ReLU passes: Winograd %.2g, %.2g; float32 direct summation %.2g, %.2g",
		passed, worstWino, sumWino/float64(passed), worstDirect, sumDirect/float64(passed))
	if worstWino > 1.0/(1<<18) {
		t.Errorf("Winograd's conv2 is off by %.3g of Σ|w·a|", worstWino)
	}
}
