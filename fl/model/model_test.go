package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func mustNew(t testing.TB, name string, in, classes int) Model {
	t.Helper()
	m, err := New(name, in, classes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewAndShapes(t *testing.T) {
	if got := Names(); !slices.Equal(got, []string{"cnn", "logreg", "mlp"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, c := range []struct {
		name   string
		params int
	}{
		{"logreg", 784*10 + 10},                                         // 7,850
		{"mlp", 784*200 + 200 + 200*200 + 200 + 200*10 + 10},            // 199,210 (McMahan et al. 2017, §3)
		{"cnn", 32*9 + 32 + 64*288 + 64 + 128*9216 + 128 + 10*128 + 10}, // 1,199,882 (Reddi et al. 2021, Table 4)
	} {
		m := mustNew(t, c.name, 784, 10)
		if m.Name() != c.name || m.NumParams() != c.params || m.InputDim() != 784 || m.NumClasses() != 10 {
			t.Errorf("%s: got name %q params %d in %d classes %d", c.name, m.Name(), m.NumParams(), m.InputDim(), m.NumClasses())
		}
	}
	if m := mustNew(t, "mlp", 5, 3); m.NumParams() != 5*200+200+200*200+200+3*200+3 {
		t.Errorf("mlp 5→3 has %d params", m.NumParams())
	}
	if _, err := New("cnn", 60, 10); err == nil || !strings.Contains(err.Error(), "square") {
		t.Errorf("cnn on 60 features: %v, want an error about square images", err)
	}
	_, err := New("resnet", 784, 10)
	if err == nil || !strings.Contains(err.Error(), "logreg") || !strings.Contains(err.Error(), "mlp") {
		t.Errorf("unknown model error %v does not list the known ones", err)
	}
	for _, bad := range [][2]int{{0, 10}, {784, 1}, {784, 257}} {
		if _, err := New("logreg", bad[0], bad[1]); err == nil {
			t.Errorf("New(logreg, %d, %d) accepted", bad[0], bad[1])
		}
	}
}

func TestInit(t *testing.T) {
	lr := mustNew(t, "logreg", 784, 10)
	p := make([]float32, lr.NumParams())
	for i := range p {
		p[i] = 1
	}
	lr.Init(p, rand.New(rand.NewPCG(1, 2)))
	for i, v := range p {
		if v != 0 {
			t.Fatalf("logreg Init: param %d = %v, want 0", i, v)
		}
	}

	m := mustNew(t, "mlp", 784, 10)
	a := make([]float32, m.NumParams())
	b := make([]float32, m.NumParams())
	m.Init(a, rand.New(rand.NewPCG(7, 8)))
	m.Init(b, rand.New(rand.NewPCG(7, 8)))
	if !slices.Equal(a, b) {
		t.Fatal("mlp Init is not reproducible from the seed")
	}
	// Per layer: uniform on [−lim, lim] has variance lim²/3; He gives
	// 2/fan_in, Glorot 2/(fan_in+fan_out). Biases are zero.
	off := 0
	for l, sh := range [][2]int{{200, 784}, {200, 200}, {10, 200}} {
		out, in := sh[0], sh[1]
		lim := math.Sqrt(6 / float64(in))
		wantVar := 2 / float64(in)
		if l == 2 {
			lim = math.Sqrt(6 / float64(in+out))
			wantVar = 2 / float64(in+out)
		}
		w := a[off : off+out*in]
		var s2 float64
		for _, v := range w {
			if math.Abs(float64(v)) > lim {
				t.Fatalf("layer %d weight %v outside ±%v", l, v, lim)
			}
			s2 += float64(v) * float64(v)
		}
		got := s2 / float64(len(w))
		// Var of the sample variance of U(−a,a): (a⁴/5 − a⁴/9)/N; 6σ.
		se := lim * lim * math.Sqrt((1.0/5-1.0/9)/float64(len(w)))
		if math.Abs(got-wantVar) > 6*se {
			t.Errorf("layer %d weight variance %v, want %v ± %v", l, got, wantVar, 6*se)
		}
		for _, v := range a[off+out*in : off+out*in+out] {
			if v != 0 {
				t.Fatalf("layer %d bias %v, want 0", l, v)
			}
		}
		off += out*in + out
	}
}

// TestZeroParams: at θ = 0 every logit is 0, so the loss is log C exactly
// and δ = (1/C − onehot(y))/n for every example. For logreg this gives the
// closed forms ∂L/∂W[c,i] = Σ_k δ_k[c]·x_k[i] and ∂L/∂b[c] = Σ_k δ_k[c].
// For the mlp every activation is 0, so only the last bias has a gradient
// (same closed form), and every other gradient is 0 (ReLU′(0) = 0).
func TestZeroParams(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const D, C, n = 784, 10, 7
	x, y := randBatch(rng, n, D, C)
	delta := func(k, c int) float64 {
		d := 1.0 / C
		if int(y[k]) == c {
			d--
		}
		return d / n
	}
	for _, name := range Names() {
		m := mustNew(t, name, D, C)
		params := make([]float32, m.NumParams())
		grad := make([]float32, m.NumParams())
		loss := m.NewWorkspace(n).LossGrad(params, x, y, grad)
		if math.Abs(loss-math.Log(C)) > 1e-15 {
			t.Errorf("%s: loss at 0 = %.17g, want log 10 = %.17g", name, loss, math.Log(C))
		}
		last := m.NumParams() - C
		if name == "logreg" {
			for c := range C {
				for i := range D {
					var want float64
					for k := range n {
						want += delta(k, c) * float64(x[k*D+i])
					}
					if g := float64(grad[c*D+i]); math.Abs(g-want) > 1e-7 {
						t.Fatalf("logreg: ∂L/∂W[%d,%d] = %v, want %v", c, i, g, want)
					}
				}
			}
		} else {
			for i, g := range grad[:last] {
				if g != 0 {
					t.Fatalf("mlp: grad[%d] = %v at θ=0, want 0", i, g)
				}
			}
		}
		for c := range C {
			var want float64
			for k := range n {
				want += delta(k, c)
			}
			if g := float64(grad[last+c]); math.Abs(g-want) > 1e-7 {
				t.Errorf("%s: ∂L/∂b[%d] = %v, want %v", name, c, g, want)
			}
		}
	}
}

// randBatch returns n examples in [0,1) with about half the features 0,
// like normalised image pixels, and random labels.
func randBatch(rng *rand.Rand, n, D, C int) ([]float32, []uint8) {
	x := make([]float32, n*D)
	for i := range x {
		if rng.IntN(2) == 0 {
			x[i] = float32(rng.Float64())
		}
	}
	y := make([]uint8, n)
	for i := range y {
		y[i] = uint8(rng.IntN(C))
	}
	return x, y
}

// randParams returns parameters with non-zero biases everywhere, so that
// every bias gradient is exercised.
func randParams(m Model, rng *rand.Rand) []float32 {
	p := make([]float32, m.NumParams())
	m.Init(p, rng)
	for i := range p {
		if p[i] == 0 { // logreg's weights, and all biases
			p[i] = float32(0.05 * rng.NormFloat64())
		}
	}
	return p
}

func TestLossGradMatchesFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	for _, c := range []struct {
		name       string
		D, C, n    int
		allWeights bool
	}{
		{"logreg", 784, 10, 5, false},
		{"mlp", 784, 10, 4, false},
		{"logreg", 6, 3, 5, true},
		{"mlp", 6, 3, 3, false},
	} {
		m := mustNew(t, c.name, c.D, c.C)
		ref := refNet{refSizes(c.name, c.D, c.C)}
		params := randParams(m, rng)
		x, y := randBatch(rng, c.n, c.D, c.C)
		grad := make([]float32, m.NumParams())
		loss := m.NewWorkspace(c.n).LossGrad(params, x, y, grad)

		p64 := widen(params)
		if want := ref.meanLoss(p64, x, y); math.Abs(loss-want) > 1e-5*want {
			t.Fatalf("%s %d→%d: loss %v, float64 reference %v", c.name, c.D, c.C, loss, want)
		}

		// Coordinates: every bias of every layer, and weights sampled
		// from every layer (all of them for the tiny logreg).
		var coords []int
		off := 0
		sizes := ref.sizes
		for l := 0; l+1 < len(sizes); l++ {
			in, out := sizes[l], sizes[l+1]
			if c.allWeights {
				for i := range out * in {
					coords = append(coords, off+i)
				}
			} else {
				for range 60 {
					coords = append(coords, off+rng.IntN(out*in))
				}
			}
			for i := range out {
				coords = append(coords, off+out*in+i)
			}
			off += out*in + out
		}
		const h = 1e-5
		fd := func(i int) float64 {
			old := p64[i]
			p64[i] = old + h
			up := ref.meanLoss(p64, x, y)
			p64[i] = old - h
			down := ref.meanLoss(p64, x, y)
			p64[i] = old
			return (up - down) / (2 * h)
		}
		var nonzero int
		for _, i := range coords {
			want := fd(i)
			got := float64(grad[i])
			if math.Abs(got-want) > 1e-4*math.Abs(want)+2e-6 {
				t.Errorf("%s %d→%d: ∂L/∂θ[%d] = %v, central difference %v", c.name, c.D, c.C, i, got, want)
			}
			if math.Abs(want) > 1e-4 {
				nonzero++
			}
		}
		if nonzero < len(coords)/4 {
			t.Errorf("%s: only %d of %d checked gradients are non-negligible", c.name, nonzero, len(coords))
		}

		// The whole vector at once: directional derivative along a random v.
		v := make([]float64, len(p64))
		var gv float64
		for i := range v {
			v[i] = rng.NormFloat64()
			gv += v[i] * float64(grad[i])
		}
		at := func(t float64) float64 {
			q := make([]float64, len(p64))
			for i := range q {
				q[i] = p64[i] + t*v[i]
			}
			return ref.meanLoss(q, x, y)
		}
		if dd := (at(h) - at(-h)) / (2 * h); math.Abs(dd-gv) > 1e-4*math.Abs(dd)+1e-5 {
			t.Errorf("%s %d→%d: directional derivative %v, g·v = %v", c.name, c.D, c.C, dd, gv)
		}
	}
}
