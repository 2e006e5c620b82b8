package empirical

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/accounting/pld"
)

// hockeyStick integrates max(0, p(x) − e^ε q(x)) numerically (composite
// Simpson over ±40 standard deviations of both): an independent truth for
// Delta.
func hockeyStick(p, q Gaussian, eps float64) float64 {
	pdf := func(g Gaussian, x float64) float64 {
		z := (x - g.Mean) / g.Std
		return math.Exp(-z*z/2) / (g.Std * math.Sqrt(2*math.Pi))
	}
	lo := math.Min(p.Mean-40*p.Std, q.Mean-40*q.Std)
	hi := math.Max(p.Mean+40*p.Std, q.Mean+40*q.Std)
	const n = 2_000_000
	h := (hi - lo) / n
	f := func(x float64) float64 { return math.Max(0, pdf(p, x)-math.Exp(eps)*pdf(q, x)) }
	sum := f(lo) + f(hi)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(lo+float64(i)*h)
	}
	return sum * h / 3
}

// Delta agrees with numerical integration of the hockey-stick divergence
// for equal and unequal variances, in both directions.
func TestDeltaMatchesIntegration(t *testing.T) {
	cases := []struct {
		p, q Gaussian
		eps  float64
	}{
		{Gaussian{0, 1}, Gaussian{1, 1}, 0.5},
		{Gaussian{0, 1}, Gaussian{1, 1}, 0},
		{Gaussian{0, 1}, Gaussian{0.5, 1.3}, 0.2},
		{Gaussian{0, 1}, Gaussian{0.5, 1.3}, 1},
		{Gaussian{0.5, 1.3}, Gaussian{0, 1}, 1},
		{Gaussian{0, 1}, Gaussian{2, 0.7}, 1.5},
		{Gaussian{2, 0.7}, Gaussian{0, 1}, 1.5},
		{Gaussian{0.01, 0.011}, Gaussian{0.013, 0.0115}, 0.3}, // cosine scale
		{Gaussian{0, 1}, Gaussian{0, 1.2}, 0.1},               // equal means
	}
	for _, c := range cases {
		got, want := Delta(c.p, c.q, c.eps), hockeyStick(c.p, c.q, c.eps)
		if math.Abs(got-want) > 1e-9+1e-6*want {
			t.Errorf("Delta(%+v, %+v, %v) = %.12g, integration gives %.12g", c.p, c.q, c.eps, got, want)
		}
	}
}

// With equal variances Delta is the Gaussian mechanism's closed form
// (Balle & Wang 2018, Thm. 8), Epsilon inverts it, and the PLD
// accountant's pessimistic ε for the same mechanism (q = 1, noise
// multiplier 1/μ) is an upper bound within 1%.
func TestEqualVariancesIsTheGaussianMechanism(t *testing.T) {
	const delta = 1e-5
	for _, mu := range []float64{0.05, 0.3, 1, 2, 5} {
		for _, eps := range []float64{0, 0.3, 1, 4} {
			got, want := Delta(Gaussian{0, 1}, Gaussian{mu, 1}, eps), GaussianMechanismDelta(mu, eps)
			if math.Abs(got-want) > 1e-14+1e-9*want {
				t.Errorf("μ = %v, ε = %v: Delta %.15g, closed form %.15g", mu, eps, got, want)
			}
		}
		// Location and scale do not matter.
		eps, err := Epsilon(Gaussian{3, 0.02}, Gaussian{3 + 0.02*mu, 0.02}, delta)
		if err != nil {
			t.Fatal(err)
		}
		if d := GaussianMechanismDelta(mu, eps); math.Abs(d-delta) > 1e-6*delta {
			t.Errorf("μ = %v: ε = %v gives δ = %v, want %v", mu, eps, d, delta)
		}
		p, err := pld.PoissonGaussian(1, 1/mu, 1e-4)
		if err != nil {
			t.Fatal(err)
		}
		upper, err := p.Epsilon(delta)
		if err != nil {
			t.Fatal(err)
		}
		if eps > upper+1e-9 || eps < upper*0.99-1e-3 {
			t.Errorf("μ = %v: ε = %v, PLD accountant %v (an upper bound within 1%%)", mu, eps, upper)
		}
	}
}

// For unequal variances ε is where the larger direction's divergence
// crosses δ, and it exceeds the ε of equal variances with the same means.
func TestEpsilonUnequalVariances(t *testing.T) {
	const delta = 1e-5
	p, q := Gaussian{0, 1}, Gaussian{0.5, 1.2}
	eps, err := Epsilon(p, q, delta)
	if err != nil {
		t.Fatal(err)
	}
	d := math.Max(Delta(p, q, eps), Delta(q, p, eps))
	if math.Abs(d-delta) > 1e-6*delta {
		t.Fatalf("ε = %v: max divergence %v, want %v", eps, d, delta)
	}
	if want := hockeyStick(q, p, eps); math.Abs(math.Max(want, hockeyStick(p, q, eps))-delta) > 1e-3*delta {
		t.Fatalf("integration at ε = %v gives %v, want %v", eps, want, delta)
	}
	same, _ := Epsilon(p, Gaussian{0.5, 1}, delta)
	if !(eps > same) {
		t.Fatalf("unequal variances ε %v ≤ equal variances ε %v", eps, same)
	}
	// Symmetric in the pair.
	if back, _ := Epsilon(q, p, delta); back != eps {
		t.Fatalf("Epsilon(q, p) = %v, Epsilon(p, q) = %v", back, eps)
	}
	// Identical Gaussians: ε = 0. Far apart: +Inf.
	if e, _ := Epsilon(p, p, delta); e != 0 {
		t.Fatalf("ε of identical Gaussians %v", e)
	}
	if e, _ := Epsilon(p, Gaussian{1e4, 1}, delta); !math.IsInf(e, 1) {
		t.Fatalf("ε of Gaussians 10⁴ σ apart %v, want +Inf", e)
	}
	for _, bad := range []struct {
		p, q  Gaussian
		delta float64
	}{{p, q, 0}, {p, q, 1}, {p, Gaussian{0, 0}, delta}, {Gaussian{math.NaN(), 1}, q, delta}} {
		if _, err := Epsilon(bad.p, bad.q, bad.delta); err == nil {
			t.Errorf("Epsilon(%+v, %+v, %v): no error", bad.p, bad.q, bad.delta)
		}
	}
}

// On samples from two known Gaussians with equal variances the estimator
// recovers the closed-form ε, within its interval, and the interval
// narrows with more samples.
func TestEstimateRecoversKnownEpsilon(t *testing.T) {
	const delta = 1e-5
	rng := rand.New(rand.NewPCG(1, 2))
	sample := func(g Gaussian, n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = g.Mean + g.Std*rng.NormFloat64()
		}
		return xs
	}
	const sd = 0.01 // the scale of cosines in d = 10⁴
	var lastWidth float64
	for _, n := range []int{2000, 20000} {
		for _, mu := range []float64{0.5, 1, 2} {
			truth, err := Epsilon(Gaussian{0, 1}, Gaussian{mu, 1}, delta)
			if err != nil {
				t.Fatal(err)
			}
			est, err := EstimateEpsilon(sample(Gaussian{mu * sd, sd}, n), sample(Gaussian{0, sd}, n),
				Options{Delta: delta, Resamples: 300, Rand: rand.New(rand.NewPCG(3, uint64(n)))})
			if err != nil {
				t.Fatal(err)
			}
			if !(est.Lower <= truth && truth <= est.Upper) || !(est.Lower <= est.Epsilon && est.Epsilon <= est.Upper) {
				t.Errorf("n = %d, μ = %v: truth %.4f, estimate %.4f [%.4f, %.4f]", n, mu, truth, est.Epsilon, est.Lower, est.Upper)
			}
			if rel := math.Abs(est.Epsilon-truth) / truth; n == 20000 && rel > 0.1 {
				t.Errorf("n = %d, μ = %v: estimate %.4f off the truth %.4f by %.0f%%", n, mu, est.Epsilon, truth, 100*rel)
			}
			if est.Confidence != 0.95 || est.Resamples != 300 {
				t.Errorf("confidence %v, resamples %d", est.Confidence, est.Resamples)
			}
			if mu == 1 {
				w := est.Upper - est.Lower
				if lastWidth > 0 && !(w < lastWidth/2) {
					t.Errorf("interval width %v at n = %d, %v at n/10: not narrower by √10", w, n, lastWidth)
				}
				lastWidth = w
			}
		}
	}
}

// The same inputs and seed give the same estimate; bad inputs are errors.
func TestEstimateDeterministicAndChecked(t *testing.T) {
	c, n := []float64{1, 2, 3, 4, 5}, []float64{0, 1, 0, 1, 2}
	est := func() Estimate {
		e, err := EstimateEpsilon(c, n, Options{Delta: 1e-5, Resamples: 50, Rand: rand.New(rand.NewPCG(7, 7))})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if a, b := est(), est(); a != b {
		t.Fatalf("same seed, different estimates: %+v, %+v", a, b)
	}
	for name, o := range map[string]Options{
		"no rand":    {Delta: 1e-5},
		"delta 0":    {Rand: rand.New(rand.NewPCG(1, 1))},
		"confidence": {Delta: 1e-5, Confidence: 1, Rand: rand.New(rand.NewPCG(1, 1))},
	} {
		if _, err := EstimateEpsilon(c, n, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := EstimateEpsilon([]float64{1}, n, Options{Delta: 1e-5, Rand: rand.New(rand.NewPCG(1, 1))}); err == nil {
		t.Error("one canary: no error")
	}
	if _, err := Fit([]float64{2, 2, 2}); err == nil {
		t.Error("Fit of a constant sample: no error")
	}
	if g, _ := Fit([]float64{1, 2, 3}); g.Mean != 2 || g.Std != 1 {
		t.Errorf("Fit(1, 2, 3) = %+v, want mean 2 std 1", g)
	}
}

// Over repeated experiments the interval holds the true ε at least about
// as often as its confidence says (it is conservative by construction),
// and the point estimate lies inside it.
func TestIntervalCoverage(t *testing.T) {
	const delta, reps, n = 1e-5, 60, 1000
	truth, err := Epsilon(Gaussian{0, 1}, Gaussian{1, 1}, delta)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	covered := 0
	for r := range reps {
		c, nl := make([]float64, n), make([]float64, n)
		for i := range c {
			c[i], nl[i] = 1+rng.NormFloat64(), rng.NormFloat64()
		}
		est, err := EstimateEpsilon(c, nl, Options{Delta: delta, Resamples: 400, Rand: rand.New(rand.NewPCG(13, uint64(r)))})
		if err != nil {
			t.Fatal(err)
		}
		if est.Lower <= truth && truth <= est.Upper {
			covered++
		}
		if !(est.Lower <= est.Epsilon && est.Epsilon <= est.Upper) {
			t.Fatalf("estimate %v outside [%v, %v]", est.Epsilon, est.Lower, est.Upper)
		}
	}
	// Nominal 95%; 54 of 60 has probability < 3% if the true coverage is
	// 80%, and ≈ 98% if it is 95%.
	if covered < 54 {
		t.Fatalf("interval covered the true ε = %.3f in %d of %d experiments", truth, covered, reps)
	}
	t.Logf("coverage %d/%d", covered, reps)
}
