package model

import (
	"math"
	"math/rand/v2"
	"testing"
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
// dropout off and with the masks LossGrad drew.
func TestCNNGradientMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, drop := range []float64{0, 0.3} {
		m := newCNN(9, 2, 3, 5, 4, drop, drop) // odd side: pooling drops the last row/column
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
