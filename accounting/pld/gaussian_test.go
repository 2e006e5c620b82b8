package pld

import (
	"math"
	"testing"
)

// One Gaussian step (q = 1) against Balle & Wang's exact δ(ε): never below,
// equal at grid points (connect-the-dots interpolates the exact curve), and
// within 1e-3 relative between them.
func TestGaussianOneStepAnalytic(t *testing.T) {
	const h = 1e-3
	for _, sigma := range []float64{0.5, 1, 2, 5} {
		p, err := PoissonGaussian(1, sigma, h)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.dirs) != 1 {
			t.Errorf("σ=%v: q=1 should store one direction, got %d", sigma, len(p.dirs))
		}
		for eps := -1.0; eps <= 12; eps += 0.0137 { // mostly off-grid
			got, want := p.Delta(eps), gaussianDelta(sigma, eps)
			if want < 1e-14 {
				break
			}
			if got < want*(1-1e-9) {
				t.Errorf("σ=%v ε=%.4f: δ=%.12g below exact %.12g", sigma, eps, got, want)
			}
			if got > want*(1+1e-3)+1e-15 {
				t.Errorf("σ=%v ε=%.4f: δ=%.12g too far above exact %.12g", sigma, eps, got, want)
			}
		}
		for _, delta := range []float64{1e-2, 1e-5, 1e-9} {
			got, err := p.Epsilon(delta)
			if err != nil {
				t.Fatal(err)
			}
			want := gaussianEpsilon(sigma, delta)
			if got < want*(1-1e-9) || got > want*1.001+1e-9 {
				t.Errorf("σ=%v δ=%v: ε=%.8f, exact %.8f", sigma, delta, got, want)
			}
		}
	}
}

// n Gaussian steps compose to one Gaussian with σ/√n.
func TestGaussianCompositionAnalytic(t *testing.T) {
	for _, tc := range []struct {
		sigma float64
		n     int
		h     float64
	}{{1, 2, 1e-3}, {1, 10, 1e-3}, {2, 100, 1e-3}, {1, 1000, 1e-2}, {10, 10000, 1e-3}} {
		one, err := PoissonGaussian(1, tc.sigma, tc.h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := one.SelfCompose(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		se := tc.sigma / math.Sqrt(float64(tc.n))
		for _, delta := range []float64{1e-3, 1e-5, 1e-8} {
			got, _ := p.Epsilon(delta)
			want := gaussianEpsilon(se, delta)
			if got < want || got > want*1.005 {
				t.Errorf("σ=%v n=%d δ=%v: ε=%.6f, exact %.6f", tc.sigma, tc.n, delta, got, want)
			}
			// δ at the exact ε is above delta but not by much.
			d := p.Delta(want)
			if d < delta*(1-1e-9) || d > delta*1.05 {
				t.Errorf("σ=%v n=%d: δ(ε*)=%.6g, exact %v", tc.sigma, tc.n, d, delta)
			}
		}
	}
}

// One subsampled step, each direction, against direct numerical integration
// of the hockey-stick divergence of the mixture: equal at grid points (up to
// quadrature error), and between grid points above the exact curve but
// below its value at the grid point beneath.
func TestSubsampledOneStepBruteForce(t *testing.T) {
	const h = 1e-3
	for _, tc := range []struct{ q, sigma float64 }{{0.01, 1}, {0.1, 0.5}, {0.5, 2}, {1e-4, 1}, {0.9, 0.3}} {
		p, err := PoissonGaussian(tc.q, tc.sigma, h)
		if err != nil {
			t.Fatal(err)
		}
		for i, add := range []bool{false, true} {
			c := newBruteCurve(tc.q, tc.sigma, add)
			for _, k := range []int{-300, -11, -1, 0, 1, 3, 10, 50, 200, 600, 1500, 4000} {
				eps := float64(k) * h
				want := c.delta(eps)
				if want < 1e-13 {
					continue
				}
				got := p.dirs[i].delta(h, eps)
				if math.Abs(got-want) > 1e-8*want {
					t.Errorf("q=%v σ=%v add=%v ε=%v (grid): δ=%.12g, integral %.12g", tc.q, tc.sigma, add, eps, got, want)
				}
				mid := eps + 0.37*h
				wantMid := c.delta(mid)
				gotMid := p.dirs[i].delta(h, mid)
				if gotMid < wantMid*(1-1e-8) || gotMid > want*(1+1e-8) {
					t.Errorf("q=%v σ=%v add=%v ε=%v: δ=%.12g not in [exact %.12g, grid value %.12g]", tc.q, tc.sigma, add, mid, gotMid, wantMid, want)
				}
			}
		}
	}
}

// Two subsampled steps, through both Compose and SelfCompose, against the
// exact two-step curve E_P[δ₁(ε − L)], the maximum over directions.
func TestSubsampledTwoStepsExact(t *testing.T) {
	const h = 1e-3
	q, sigma := 0.1, 1.0
	one, err := PoissonGaussian(q, sigma, h)
	if err != nil {
		t.Fatal(err)
	}
	viaCompose, err := one.Compose(one)
	if err != nil {
		t.Fatal(err)
	}
	viaSelf, err := one.SelfCompose(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, eps := range []float64{-0.1, 0, 0.1, 0.5, 1, 2} {
		want := math.Max(twoStepDelta(q, sigma, eps, false), twoStepDelta(q, sigma, eps, true))
		for name, p := range map[string]*PLD{"Compose": viaCompose, "SelfCompose": viaSelf} {
			got := p.Delta(eps)
			if got < want*(1-1e-6) || got > want*(1+2e-3) {
				t.Errorf("%s ε=%v: δ=%.10g, exact %.10g", name, eps, got, want)
			}
		}
	}
}

// Both directions matter: below ε = 0 the add direction is the larger one,
// and Delta must follow it.
func TestBothDirections(t *testing.T) {
	p, err := PoissonGaussian(0.3, 1, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.dirs) != 2 {
		t.Fatalf("q<1 should keep two directions, got %d", len(p.dirs))
	}
	eps := -0.2
	rem, add := oneStepDelta(0.3, 1, eps, false), oneStepDelta(0.3, 1, eps, true)
	if !(add > rem*1.01) {
		t.Fatalf("test premise: add %v should exceed remove %v", add, rem)
	}
	if got := p.Delta(eps); got < add*(1-1e-9) {
		t.Errorf("Delta(%v) = %v is below the add-direction δ %v", eps, got, add)
	}
}

// Extreme parameters stay finite and ordered.
func TestSmallSigmaLargeEpsilon(t *testing.T) {
	for _, tc := range []struct{ q, sigma float64 }{{1, 0.1}, {0.5, 0.2}, {1e-4, 0.3}} {
		p, err := PoissonGaussian(tc.q, tc.sigma, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		prev := 1.0
		for eps := 0.0; eps < 80; eps += 0.5 {
			d := p.Delta(eps)
			if math.IsNaN(d) || d < 0 || d > prev+1e-15 {
				t.Fatalf("q=%v σ=%v: δ(%v)=%v not in [0, %v]", tc.q, tc.sigma, eps, d, prev)
			}
			prev = d
		}
		e, err := p.Epsilon(1e-6)
		if err != nil || math.IsNaN(e) || math.IsInf(e, 0) {
			t.Errorf("q=%v σ=%v: ε=%v err=%v", tc.q, tc.sigma, e, err)
		}
		if tc.q == 1 {
			if want := gaussianEpsilon(tc.sigma, 1e-6); e < want || e > want*1.001 {
				t.Errorf("σ=%v: ε=%v, exact %v", tc.sigma, e, want)
			}
		}
	}
}

func TestPoissonGaussianErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct{ q, sigma, h float64 }{
		{0, 1, 1e-3}, {-0.1, 1, 1e-3}, {1.1, 1, 1e-3}, {nan, 1, 1e-3},
		{0.1, 0, 1e-3}, {0.1, -1, 1e-3}, {0.1, nan, 1e-3}, {0.1, inf, 1e-3},
		{0.1, 1, 0}, {0.1, 1, -1e-3}, {0.1, 1, nan}, {0.1, 1, inf},
		{0.1, 1, 1e-9}, // grid too large
	} {
		if _, err := PoissonGaussian(tc.q, tc.sigma, tc.h); err == nil {
			t.Errorf("PoissonGaussian(%v, %v, %v): no error", tc.q, tc.sigma, tc.h)
		}
	}
}
