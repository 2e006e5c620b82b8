package pld

import (
	"math"
	"testing"
)

// dp_accounting's own test (pld_privacy_accountant_test.py,
// test_poisson_subsampled_gaussian and test_self_composed_subsampled_gaussian):
// three steps of PoissonSampled(0.2, Gaussian(0.5)) give δ(1) = 0.15594.
func TestPublishedDPAccounting(t *testing.T) {
	const want = 0.15594
	one, err := PoissonGaussian(0.2, 0.5, 1e-4)
	if err != nil {
		t.Fatal(err)
	}
	two, _ := one.SelfCompose(2)
	three, err := one.Compose(two)
	if err != nil {
		t.Fatal(err)
	}
	if d := three.Delta(1); math.Abs(d-want) > 0.01*want {
		t.Errorf("δ(1) = %v, dp_accounting %v", d, want)
	}
	if e, _ := three.Epsilon(want); math.Abs(e-1) > 0.01 {
		t.Errorf("ε(%v) = %v, dp_accounting 1", want, e)
	}
}

// Regression values of Koskela, Jälkö, Honkela's Fourier accountant
// (github.com/DPBayes/PLD-Accountant, tests/test_compute_delta.py,
// get_delta_R with nx = 1e6, L = 20): remove/add relation. That method
// approximates rather than bounds δ, so agreement is asserted within 1%.
func TestPublishedKoskela(t *testing.T) {
	for _, tc := range []struct {
		eps, sigma, q float64
		n             int
		want          float64
	}{
		{1, 2, 0.01, 10000, 0.010224911209191894},
		{0.8, 2, 0.01, 10000, 0.022850339595771204},
		{1, 1, 0.01, 10000, 0.2391763947364977},
		{1, 2, 0.02, 10000, 0.14991732969314892},
		{1, 2, 0.01, 100000, 0.39205728853284305},
	} {
		if testing.Short() && tc.n > 10000 {
			continue
		}
		one, err := PoissonGaussian(tc.q, tc.sigma, 1e-4)
		if err != nil {
			t.Fatal(err)
		}
		p, err := one.SelfCompose(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		if d := p.Delta(tc.eps); math.Abs(d-tc.want) > 0.01*tc.want {
			t.Errorf("%+v: δ = %v", tc, d)
		}
	}
}

// The TensorFlow Federated DP tutorial setting (q = 120/3383, z = 1.2,
// 100 rounds, δ = 1e-5) is ε ≈ 2 under RDP. PLD must not exceed the RDP
// bound (both are upper bounds, PLD the tighter) and must exceed the
// rigorous sum-statistic lower bound.
func TestTFFTutorial(t *testing.T) {
	q, z, n, delta := 120.0/3383, 1.2, 100, 1e-5
	eps, err := EpsilonPoissonGaussian(q, z, n, delta)
	if err != nil {
		t.Fatal(err)
	}
	rdp := rdpEpsilon(q, z, n, delta)
	lb := sumStatLowerBound(q, z, n, delta)
	t.Logf("PLD ε = %.4f, RDP ε = %.4f (ratio %.3f), lower bound %.4f", eps, rdp, eps/rdp, lb)
	if rdp < 1.7 || rdp > 2.3 {
		t.Errorf("RDP reference ε = %v, expected ≈ 2", rdp)
	}
	if !(eps < rdp && eps > 0.6*rdp) {
		t.Errorf("PLD ε = %v not in (0.6, 1)·RDP ε %v", eps, rdp)
	}
	if eps < lb {
		t.Errorf("PLD ε = %v below the lower bound %v", eps, lb)
	}
}

// q = 0.5, z = 0.5, 1000 steps: ε in the hundreds, where e^ε overflows.
func TestLargeEpsilonStable(t *testing.T) {
	q, z, n, delta := 0.5, 0.5, 1000, 1e-5
	eps, err := EpsilonPoissonGaussian(q, z, n, delta)
	if err != nil {
		t.Fatal(err)
	}
	lb := sumStatLowerBound(q, z, n, delta)
	rdp := rdpEpsilon(q, z, n, delta)
	t.Logf("ε = %.3f, sum-statistic lower bound %.3f, RDP upper bound %.3f", eps, lb, rdp)
	if math.IsNaN(eps) || math.IsInf(eps, 0) {
		t.Fatalf("ε = %v", eps)
	}
	if eps < lb || eps > rdp {
		t.Errorf("ε = %v outside [lower %v, RDP %v]", eps, lb, rdp)
	}
	// The q = 1 mechanism at the expected number of sampled steps, n·q,
	// would be ε ≈ gaussianEpsilon(z/√(nq)); subsampling keeps ε of that order.
	if g := gaussianEpsilon(z/math.Sqrt(float64(n)*q), delta); eps < 0.5*g || eps > 2*g {
		t.Errorf("ε = %v far from the Gaussian-at-nq scale %v", eps, g)
	}
}

// With q = 1 the answer is the analytic Gaussian ε with σ/√n: never below
// it and within 1%.
func TestEpsilonPoissonGaussianAnalytic(t *testing.T) {
	for _, tc := range []struct {
		z     float64
		n     int
		delta float64
	}{{1, 1, 1e-5}, {0.5, 1, 1e-6}, {4, 10, 1e-5}, {20, 10000, 1e-5}, {2, 100, 1e-9}, {0.3, 100, 1e-10}, {3, 10000, 1e-10}} {
		got, err := EpsilonPoissonGaussian(1, tc.z, tc.n, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		want := gaussianEpsilon(tc.z/math.Sqrt(float64(tc.n)), tc.delta)
		if got < want || got > 1.01*want {
			t.Errorf("%+v: ε = %.6f, exact %.6f", tc, got, want)
		}
	}
}

// The adaptive answer is an upper bound within 1% of a much finer grid.
func TestEpsilonPoissonGaussianConverged(t *testing.T) {
	for _, tc := range []struct {
		q, z  float64
		n     int
		delta float64
	}{{0.01, 1, 1000, 1e-5}, {0.001, 0.8, 5000, 1e-6}, {0.2, 2, 50, 1e-5}} {
		got, err := EpsilonPoissonGaussian(tc.q, tc.z, tc.n, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		h := startInterval(tc.q, tc.z, tc.n, tc.delta) / 8
		fine, err := epsilonAt(tc.q, tc.z, tc.n, tc.delta, h)
		if err != nil {
			t.Fatal(err)
		}
		if got < fine*(1-1e-9) || got > 1.01*fine {
			t.Errorf("%+v: ε = %.6f, fine grid (h=%.2g) %.6f", tc, got, h, fine)
		}
	}
}

func TestEpsilonMonotone(t *testing.T) {
	const delta = 1e-5
	e := func(q, z float64, n int) float64 {
		t.Helper()
		v, err := EpsilonPoissonGaussian(q, z, n, delta)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// In steps on a fixed grid: exact monotonicity (more releases can be
	// post-processed into fewer).
	one, _ := PoissonGaussian(0.05, 1, 2e-3)
	prev := 0.0
	for _, n := range []int{1, 3, 10, 30, 100, 300, 1000} {
		p, err := one.SelfCompose(n)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := p.Epsilon(delta)
		if v <= prev {
			t.Errorf("steps=%d: ε=%v not above %v", n, v, prev)
		}
		prev = v
	}
	// In q and σ, adaptive grids differ, so compare across clear gaps.
	prev = 0
	for _, q := range []float64{1e-3, 4e-3, 0.016, 0.064, 0.256, 1} {
		v := e(q, 1, 200)
		if v <= prev {
			t.Errorf("q=%v: ε=%v not above %v", q, v, prev)
		}
		prev = v
	}
	prev = math.Inf(1)
	for _, z := range []float64{0.5, 0.7, 1, 1.4, 2, 4, 8} {
		v := e(0.05, z, 200)
		if v >= prev {
			t.Errorf("z=%v: ε=%v not below %v", z, v, prev)
		}
		prev = v
	}
}

// Edge cases of the convenience function.
func TestEpsilonPoissonGaussianEdges(t *testing.T) {
	if e, err := EpsilonPoissonGaussian(0.1, 1, 0, 1e-5); err != nil || e != 0 {
		t.Errorf("0 steps: ε=%v err=%v", e, err)
	}
	// Tiny q with many steps is close to the small-q regime limit and
	// stays above the lower bound.
	e, err := EpsilonPoissonGaussian(1e-4, 1, 10000, 1e-5)
	if err != nil || !(e > 0 && e < 0.1) {
		t.Errorf("q=1e-4: ε=%v err=%v", e, err)
	}
	// Tiny q with small σ: a long, light loss tail; the grid is capped and
	// the answer stays a finite bound.
	if e, err := EpsilonPoissonGaussian(1e-6, 0.3, 10, 1e-5); err != nil || !(e >= 0 && e < 1) {
		t.Errorf("q=1e-6 σ=0.3: ε=%v err=%v", e, err)
	}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		q, z  float64
		n     int
		delta float64
	}{
		{0, 1, 10, 1e-5}, {1.5, 1, 10, 1e-5}, {nan, 1, 10, 1e-5},
		{0.1, 0, 10, 1e-5}, {0.1, -1, 10, 1e-5}, {0.1, inf, 10, 1e-5}, {0.1, nan, 10, 1e-5},
		{0.1, 1, -1, 1e-5},
		{0.1, 1, 10, 0}, {0.1, 1, 10, 1}, {0.1, 1, 10, nan},
	} {
		if _, err := EpsilonPoissonGaussian(tc.q, tc.z, tc.n, tc.delta); err == nil {
			t.Errorf("%+v: no error", tc)
		}
	}
}
