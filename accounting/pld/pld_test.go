package pld

import (
	"math"
	"testing"
)

// rrPLD is the PLD of binary randomized response with parameter a = k·h:
// the loss is +a with probability e^a/(1+e^a) and −a otherwise.
func rrPLD(t *testing.T, h float64, k int) *PLD {
	t.Helper()
	a := float64(k) * h
	pmf := make([]float64, 2*k+1)
	pmf[2*k] = math.Exp(a) / (1 + math.Exp(a))
	pmf[0] = 1 / (1 + math.Exp(a))
	p, err := FromPMF(h, -k, pmf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rrComposedDelta is the exact δ(ε) of n-fold randomized response: the loss
// is (2j − n)·a with j ~ Binomial(n, e^a/(1+e^a)).
func rrComposedDelta(a float64, n int, eps float64) float64 {
	lp := a - math.Log1p(math.Exp(a)) // log P(+a)
	lm := -math.Log1p(math.Exp(a))
	s := 0.0
	for j := 0; j <= n; j++ {
		l := float64(2*j-n) * a
		if l <= eps {
			continue
		}
		g1, _ := math.Lgamma(float64(n) + 1)
		g2, _ := math.Lgamma(float64(j) + 1)
		g3, _ := math.Lgamma(float64(n-j) + 1)
		w := math.Exp(g1 - g2 - g3 + float64(j)*lp + float64(n-j)*lm)
		s += w * -math.Expm1(eps-l)
	}
	return s
}

func TestDeltaEpsilonRandomizedResponse(t *testing.T) {
	const h, k = 1e-2, 70
	a := float64(k) * h
	p := rrPLD(t, h, k)
	// One step: δ(ε) = (e^a − e^ε)/(1 + e^a) on [−a, a], 0 above.
	for _, eps := range []float64{-0.5, 0, 0.123, 0.6999, 0.7, 1} {
		want := math.Max(0, (math.Exp(a)-math.Exp(eps))/(1+math.Exp(a)))
		if got := p.Delta(eps); math.Abs(got-want) > 1e-15 {
			t.Errorf("δ(%v) = %v, want %v", eps, got, want)
		}
	}
	// Epsilon solves δ(ε) = delta exactly, also between grid points.
	for _, eps0 := range []float64{0.0123, 0.3377, 0.69} {
		delta := (math.Exp(a) - math.Exp(eps0)) / (1 + math.Exp(a))
		got, err := p.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-eps0) > 1e-12 {
			t.Errorf("Epsilon(%v) = %v, want %v", delta, got, eps0)
		}
	}
	// n-fold composition through the FFT against the binomial closed form.
	for _, n := range []int{3, 50, 2000} {
		pn, err := p.SelfCompose(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, eps := range []float64{0, 1, 5, 20, 40} {
			want := rrComposedDelta(a, n, eps)
			got := pn.Delta(eps)
			if want > 1e-12 && math.Abs(got-want) > 1e-9*want {
				t.Errorf("n=%d ε=%v: δ=%.12g, binomial %.12g", n, eps, got, want)
			}
			if got < want-1e-15 {
				t.Errorf("n=%d ε=%v: δ=%.12g below binomial %.12g", n, eps, got, want)
			}
		}
	}
}

// Epsilon returns the smallest ε with Delta(ε) ≤ delta.
func TestEpsilonIsSmallest(t *testing.T) {
	p, err := PoissonGaussian(0.05, 0.8, 2e-3)
	if err != nil {
		t.Fatal(err)
	}
	p, err = p.SelfCompose(300)
	if err != nil {
		t.Fatal(err)
	}
	for _, delta := range []float64{0.5, 1e-2, 1e-4, 1e-7, 1e-10} {
		e, err := p.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		if d := p.Delta(e); d > delta*(1+1e-9) {
			t.Errorf("δ=%v: Delta(ε=%v) = %v exceeds δ", delta, e, d)
		}
		if e > 0 {
			if d := p.Delta(e - 1e-6); d <= delta {
				t.Errorf("δ=%v: Delta(ε−1e-6) = %v already ≤ δ; ε=%v not smallest", delta, d, e)
			}
		}
	}
}

func TestIdentityAndFromPMF(t *testing.T) {
	id, err := Identity(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{-1, -0.1, 0, 1} {
		if got, want := id.Delta(eps), math.Max(0, -math.Expm1(eps)); math.Abs(got-want) > 1e-15 {
			t.Errorf("identity δ(%v) = %v, want %v", eps, got, want)
		}
	}
	if e, _ := id.Epsilon(1e-9); e != 0 {
		t.Errorf("identity ε = %v, want 0", e)
	}
	g, _ := PoissonGaussian(0.2, 1, 1e-3)
	c, err := g.Compose(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0, 0.5, 2} {
		if a, b := c.Delta(eps), g.Delta(eps); math.Abs(a-b) > 1e-15 {
			t.Errorf("compose with identity changed δ(%v): %v vs %v", eps, a, b)
		}
	}
	// The +∞ mass is a floor for δ and makes small δ unreachable.
	p, err := FromPMF(0.1, 0, []float64{0.5, 0.49}, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Delta(1e6); d != 0.01 {
		t.Errorf("δ(∞-ish) = %v, want the +∞ mass 0.01", d)
	}
	if e, _ := p.Epsilon(0.005); !math.IsInf(e, 1) {
		t.Errorf("ε(δ below +∞ mass) = %v, want +Inf", e)
	}
	if p.InfinityMass() != 0.01 || p.Interval() != 0.1 {
		t.Errorf("accessors: %v %v", p.InfinityMass(), p.Interval())
	}
	// Composition combines +∞ masses as 1 − (1−a)(1−b).
	pp, _ := p.Compose(p)
	if got := pp.InfinityMass(); math.Abs(got-(1-0.99*0.99)) > 1e-15 {
		t.Errorf("composed +∞ mass %v", got)
	}
	p3, _ := p.SelfCompose(3)
	if got := p3.InfinityMass(); math.Abs(got-(1-math.Pow(0.99, 3))) > 1e-15 {
		t.Errorf("3-fold +∞ mass %v", got)
	}
}

// SelfCompose (one FFT power) agrees with repeated Compose (direct and FFT
// convolutions) to round-off.
func TestSelfComposeMatchesRepeatedCompose(t *testing.T) {
	one, err := PoissonGaussian(0.1, 0.7, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	acc := one
	for range 6 {
		if acc, err = acc.Compose(one); err != nil {
			t.Fatal(err)
		}
	}
	self, err := one.SelfCompose(7)
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{0, 0.5, 1, 2, 4} {
		a, b := acc.Delta(eps), self.Delta(eps)
		if math.Abs(a-b) > 1e-9*b+1e-14 {
			t.Errorf("ε=%v: repeated Compose %v, SelfCompose %v", eps, a, b)
		}
	}
	zero, _ := one.SelfCompose(0)
	if d := zero.Delta(0.1); d != 0 {
		t.Errorf("SelfCompose(0) δ(0.1) = %v, want 0", d)
	}
}

// Halving h refines the grid, and connect-the-dots on a finer grid is a
// tighter dominating pair, so ε can only go down; the one-step curve at
// grid points does not depend on h at all.
func TestRefinementTightens(t *testing.T) {
	prev := math.Inf(1)
	for _, h := range []float64{8e-3, 4e-3, 2e-3, 1e-3} {
		p, _ := PoissonGaussian(0.02, 0.9, h)
		p, err := p.SelfCompose(500)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := p.Epsilon(1e-6)
		if e > prev*(1+1e-9) {
			t.Errorf("h=%v: ε=%v above coarser-grid ε=%v", h, e, prev)
		}
		prev = e
	}
}

func TestPLDErrors(t *testing.T) {
	p, _ := PoissonGaussian(0.1, 1, 1e-3)
	o, _ := PoissonGaussian(0.1, 1, 2e-3)
	if _, err := p.Compose(o); err == nil {
		t.Error("Compose with different grids: no error")
	}
	if _, err := p.Compose(nil); err == nil {
		t.Error("Compose(nil): no error")
	}
	if _, err := p.SelfCompose(-1); err == nil {
		t.Error("SelfCompose(-1): no error")
	}
	for _, d := range []float64{0, 1, -0.1, 1.5, math.NaN()} {
		if _, err := p.Epsilon(d); err == nil {
			t.Errorf("Epsilon(%v): no error", d)
		}
	}
	if !math.IsNaN(p.Delta(math.NaN())) {
		t.Error("Delta(NaN) is not NaN")
	}
	for _, tc := range []struct {
		h   float64
		pmf []float64
		inf float64
	}{
		{0, []float64{1}, 0}, {1e-3, nil, 0}, {1e-3, []float64{-0.1, 1}, 0},
		{1e-3, []float64{math.NaN()}, 0}, {1e-3, []float64{0.6, 0.6}, 0}, {1e-3, []float64{0.5}, 2},
		{1e-3, []float64{0.5}, 0}, // mass missing
	} {
		if _, err := FromPMF(tc.h, 0, tc.pmf, tc.inf); err == nil {
			t.Errorf("FromPMF(%v, %v, %v): no error", tc.h, tc.pmf, tc.inf)
		}
	}
	if _, err := Identity(-1); err == nil {
		t.Error("Identity(-1): no error")
	}
}

func TestFastLen(t *testing.T) {
	smooth := func(n int) bool {
		for _, f := range []int{2, 3, 5} {
			for n%f == 0 {
				n /= f
			}
		}
		return n == 1
	}
	for n := 1; n <= 5000; n++ {
		want := n
		for !smooth(want) {
			want++
		}
		if got := fastLen(n); got != want {
			t.Fatalf("fastLen(%d) = %d, want %d", n, got, want)
		}
	}
}
