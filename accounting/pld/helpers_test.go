package pld

import (
	"math"
	"testing"
)

// Independent reference computations for the tests. None of them uses the
// package's discretization, inverse-loss or convolution code.

// stdCDF is Φ.
func stdCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// logStdCDF is log Φ(x), by the asymptotic series of Mills' ratio below
// x = −30 (relative error < 2e-12 there), where Φ underflows.
func logStdCDF(x float64) float64 {
	if x > -30 {
		return math.Log(stdCDF(x))
	}
	x2 := x * x
	s := 1 - 1/x2 + 3/(x2*x2) - 15/(x2*x2*x2) + 105/(x2*x2*x2*x2)
	return -x2/2 - math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log(s)
}

// gaussianDelta is the exact δ(ε) of the Gaussian mechanism with sensitivity
// 1 and noise σ (Balle & Wang 2018, "Improving the Gaussian mechanism for
// differential privacy", Thm. 8), with e^ε·Φ(·) formed in log space.
func gaussianDelta(sigma, eps float64) float64 {
	a := 1/(2*sigma) - eps*sigma
	b := -1/(2*sigma) - eps*sigma
	return stdCDF(a) - math.Exp(eps+logStdCDF(b))
}

// gaussianEpsilon inverts gaussianDelta by bisection.
func gaussianEpsilon(sigma, delta float64) float64 {
	lo, hi := 0.0, 1.0
	for gaussianDelta(sigma, hi) > delta {
		hi *= 2
	}
	for range 200 {
		mid := (lo + hi) / 2
		if gaussianDelta(sigma, mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// oneStepDelta is the exact δ(ε) of one step of the Poisson-subsampled
// Gaussian, from the threshold x* at which the monotone privacy loss equals
// ε (the set {L > ε} is a half-line):
//
//	remove: δ = P(x > x*) − e^ε·Q(x > x*), P the mixture, Q = N(0, σ²)
//	add:    δ = P(x < x*) − e^ε·Q(x < x*), P = N(0, σ²), Q the mixture.
func oneStepDelta(q, sigma, eps float64, add bool) float64 {
	s := sigma
	if !add {
		r := (math.Exp(eps) - 1 + q) / q
		if r <= 0 {
			return 1 - math.Exp(eps)
		}
		x := s*s*math.Log(r) + 0.5
		sf0, sf1 := stdCDF(-x/s), stdCDF(-(x-1)/s)
		return (1-q)*sf0 + q*sf1 - math.Exp(eps)*sf0
	}
	r := (math.Exp(-eps) - 1 + q) / q
	if r <= 0 {
		return 0
	}
	x := s*s*math.Log(r) + 0.5
	c0, c1 := stdCDF(x/s), stdCDF((x-1)/s)
	return c0 - math.Exp(eps)*((1-q)*c0+q*c1)
}

// bruteCurve tabulates the densities p and q of one step on a fine x grid,
// so that δ(ε) = ∫ (p − e^ε q)_+ dx can be integrated directly (trapezoid).
type bruteCurve struct {
	dx   float64
	p, q []float64
}

func newBruteCurve(q, sigma float64, add bool) *bruteCurve {
	const n = 1 << 20
	a, b := -14*sigma, 1+14*sigma
	c := &bruteCurve{dx: (b - a) / n, p: make([]float64, n+1), q: make([]float64, n+1)}
	norm := 1 / (sigma * math.Sqrt(2*math.Pi))
	for i := range c.p {
		x := a + float64(i)*c.dx
		n0 := norm * math.Exp(-x*x/(2*sigma*sigma))
		n1 := norm * math.Exp(-(x-1)*(x-1)/(2*sigma*sigma))
		mix := (1-q)*n0 + q*n1
		if add {
			c.p[i], c.q[i] = n0, mix
		} else {
			c.p[i], c.q[i] = mix, n0
		}
	}
	return c
}

func (c *bruteCurve) delta(eps float64) float64 {
	e := math.Exp(eps)
	s := 0.0
	for i := range c.p {
		v := c.p[i] - e*c.q[i]
		if v > 0 {
			if i == 0 || i == len(c.p)-1 {
				v /= 2
			}
			s += v
		}
	}
	return s * c.dx
}

// twoStepDelta is the exact δ(ε) of two steps of one direction:
// δ₂(ε) = E_{x~P}[δ₁(ε − L(x))], integrated over x (trapezoid), with δ₁ the
// closed form oneStepDelta.
func twoStepDelta(q, sigma, eps float64, add bool) float64 {
	const n = 200000
	a, b := -14*sigma, 1+14*sigma
	dx := (b - a) / n
	norm := 1 / (sigma * math.Sqrt(2*math.Pi))
	s := 0.0
	for i := 0; i <= n; i++ {
		x := a + float64(i)*dx
		n0 := norm * math.Exp(-x*x/(2*sigma*sigma))
		n1 := norm * math.Exp(-(x-1)*(x-1)/(2*sigma*sigma))
		mix := (1-q)*n0 + q*n1
		p, l := mix, math.Log(mix/n0)
		if add {
			p, l = n0, math.Log(n0/mix)
		}
		w := p * dx
		if i == 0 || i == n {
			w /= 2
		}
		s += w * oneStepDelta(q, sigma, eps-l, add)
	}
	return s
}

// rdpEpsilon is an independent upper bound on ε: the Rényi DP of the
// sampled Gaussian mechanism at integer orders α (Mironov, Talwar, Zhang
// 2019, "Rényi Differential Privacy of the Sampled Gaussian Mechanism",
// §3.3: A_α = Σ_k C(α,k)(1−q)^{α−k} q^k e^{(k²−k)/(2σ²)}), composed over n
// steps and converted with Balle et al. 2020 ("Hypothesis testing
// interpretations and Rényi differential privacy", Thm. 21):
// ε = n·ε_α + log((α−1)/α) − (log δ + log α)/(α−1).
func rdpEpsilon(q, sigma float64, n int, delta float64) float64 {
	best := math.Inf(1)
	for alpha := 2; alpha <= 1024; alpha++ {
		a := float64(alpha)
		terms := make([]float64, alpha+1)
		m := math.Inf(-1)
		for k := 0; k <= alpha; k++ {
			lg1, _ := math.Lgamma(a + 1)
			lg2, _ := math.Lgamma(float64(k) + 1)
			lg3, _ := math.Lgamma(a - float64(k) + 1)
			t := lg1 - lg2 - lg3 + float64(k)*math.Log(q) + float64(k*k-k)/(2*sigma*sigma)
			if k < alpha {
				t += (a - float64(k)) * math.Log1p(-q)
			}
			terms[k] = t
			m = math.Max(m, t)
		}
		s := 0.0
		for _, t := range terms {
			s += math.Exp(t - m)
		}
		rdp := (m + math.Log(s)) / (a - 1)
		eps := float64(n)*rdp + math.Log((a-1)/a) - (math.Log(delta)+math.Log(a))/(a-1)
		best = math.Min(best, eps)
	}
	return best
}

// sumStatLowerBound is a rigorous lower bound on the true ε of n steps in
// the remove direction: for any threshold t, the event {Σᵢ xᵢ > t} gives
// δ(ε) ≥ P(S > t) − e^ε·Q(S > t), where under Q, S ~ N(0, nσ²) and under P,
// S | K ~ N(K, nσ²) with K ~ Binomial(n, q) the number of sampled steps.
// So ε ≥ log((P(S>t) − δ)/Q(S>t)) for every t with P(S > t) > δ.
func sumStatLowerBound(q, sigma float64, n int, delta float64) float64 {
	sd := sigma * math.Sqrt(float64(n))
	logBinom := make([]float64, n+1)
	for k := 0; k <= n; k++ {
		l1, _ := math.Lgamma(float64(n) + 1)
		l2, _ := math.Lgamma(float64(k) + 1)
		l3, _ := math.Lgamma(float64(n-k) + 1)
		logBinom[k] = l1 - l2 - l3 + float64(k)*math.Log(q)
		if k < n {
			logBinom[k] += float64(n-k) * math.Log1p(-q)
		}
	}
	best := 0.0
	for t := 0.0; ; t += sd / 50 {
		qs := stdCDF(-t / sd)
		if qs < 1e-300 {
			break
		}
		ps := 0.0
		for k, lb := range logBinom {
			ps += math.Exp(lb) * stdCDF((float64(k)-t)/sd)
		}
		if ps > delta {
			best = math.Max(best, math.Log(ps-delta)-math.Log(qs))
		}
	}
	return best
}

// TestReferences checks the reference helpers against each other and
// against known values, so that the tests below rest on verified truths.
func TestReferences(t *testing.T) {
	// The closed form of one step agrees with direct integration.
	for _, add := range []bool{false, true} {
		c := newBruteCurve(0.1, 1, add)
		for _, eps := range []float64{-0.5, 0, 0.05, 0.3, 1, 2} {
			want, got := c.delta(eps), oneStepDelta(0.1, 1, eps, add)
			if math.Abs(got-want) > 1e-9*want+1e-15 {
				t.Errorf("add=%v ε=%v: closed form %v, integral %v", add, eps, got, want)
			}
		}
	}
	// q = 1 reduces to the Balle–Wang formula.
	for _, eps := range []float64{0, 1, 3} {
		if a, b := oneStepDelta(1, 0.8, eps, false), gaussianDelta(0.8, eps); math.Abs(a-b) > 1e-12 {
			t.Errorf("ε=%v: q=1 closed form %v, Balle–Wang %v", eps, a, b)
		}
	}
	// Two steps at q = 1 is a Gaussian with σ/√2.
	if a, b := twoStepDelta(1, 1, 1, false), gaussianDelta(1/math.Sqrt2, 1); math.Abs(a-b) > 1e-7*b {
		t.Errorf("two-step q=1: %v, Gaussian σ/√2: %v", a, b)
	}
	// Large ε: the closed form inverted, against the same closed form
	// evaluated with 60-digit arithmetic (mpmath): σ = 0.03, δ = 1e-10.
	if e := gaussianEpsilon(0.03, 1e-10); math.Abs(e-766.6852294008482) > 1e-6 {
		t.Errorf("gaussianEpsilon(0.03, 1e-10) = %.10f, want 766.6852294008", e)
	}
	// RDP at q = 1: ε_α = α/(2σ²), the classical Gaussian bound.
	if e, g := rdpEpsilon(1, 1, 1, 1e-5), gaussianEpsilon(1, 1e-5); !(e > g && e < 1.3*g) {
		t.Errorf("RDP bound %v vs exact Gaussian ε %v", e, g)
	}
	// The sum statistic is optimal at q = 1: the bound is the exact ε.
	if lb, g := sumStatLowerBound(1, 2, 4, 1e-3), gaussianEpsilon(1, 1e-3); math.Abs(lb-g) > 0.01*g {
		t.Errorf("sum-statistic bound %v vs exact %v", lb, g)
	}
}
