package pld

import (
	"fmt"
	"math"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// Refinement settings of EpsilonPoissonGaussian.
const (
	// refineTol: stop when halving h changes ε by at most this fraction.
	// Connect-the-dots errors shrink like h², so the error left at the
	// finer h is about a third of the change, ≈ 0.2%.
	refineTol = 0.005
	// startTol is the relative ε error aimed at by the first guess of h.
	startTol = 0.001
	// maxRefine bounds the number of halvings.
	maxRefine = 12
	// refineBins stops refining once the one-step grid would exceed this
	// many bins, which bounds the running time in extreme regimes.
	refineBins = 1 << 20
)

// EpsilonPoissonGaussianV1 is the PLD algorithm of method "pld/1", the
// one dpfl reported ε with before "pld/2" (EpsilonPoissonGaussian). It is
// kept, unchanged, so that a verifier can recompute a figure that a
// server running it reported (accounting.AccountMethod); new figures come
// from EpsilonPoissonGaussian.
//
// It returns an upper bound on the smallest ε such that
// steps compositions of the Poisson-subsampled Gaussian mechanism (sampling
// rate q, noise multiplier z, sensitivity 1, add/remove adjacency) are
// (ε, delta)-DP, computed with PoissonGaussian, SelfCompose and Epsilon.
//
// The interval h is chosen adaptively for each steps, which is what makes
// it unsuited to a ledger that grows by one round at a time: the grid of n
// rounds is not the grid of n+1, so nothing computed for one count serves
// the next. A first h is set from the per-step
// mean μ and variance v of the privacy loss (numerical quadrature) so that
// the predicted connect-the-dots error, ≈ h²/12 per step in the mean plus
// the effect of ≈ h²/6 extra variance per step (Doroshenko et al. 2022,
// §4), is 0.1% of the Gaussian-approximation ε ≈ n·μ + z_δ·√(n·v). Then h
// is halved until ε changes by at most 0.5% between consecutive grids;
// since that error decays like h², the result is then within about 0.2%
// (measured: ≈ 0.1%, always under 1%) of the h → 0 limit. Every grid gives an upper bound, so the
// smallest value seen is returned; if the one-step grid would exceed 2²⁰
// bins, or a grid exceeds the hard limit of 2²² bins, refinement stops
// early (extreme q, z, steps) and the last bound is returned as is: still an
// upper bound, but possibly more than 1% above the limit.
//
// steps = 0 gives 0. It returns an error if q ∉ (0, 1], z is not finite and
// > 0, steps < 0, or delta ∉ (0, 1), and ε = +Inf if delta is below the
// pessimistic tail mass (about 1e-16 per composition).
func EpsilonPoissonGaussianV1(q, z float64, steps int, delta float64) (eps float64, err error) {
	if err := checkArgs(q, z, steps, delta); err != nil {
		return 0, err
	}
	if steps == 0 {
		return 0, nil
	}
	h := 2 * startInterval(q, z, steps, delta)
	span := lossSpan(q, z)
	best, prev := math.Inf(1), math.NaN()
	for range maxRefine {
		if span/h > refineBins && !math.IsInf(best, 1) {
			return best, nil
		}
		e, err := epsilonAt(q, z, steps, delta, h)
		if err != nil {
			if !math.IsInf(best, 1) {
				return best, nil
			}
			return 0, err
		}
		best = math.Min(best, e)
		if math.Abs(prev-e) <= refineTol*e+1e-9 {
			return best, nil
		}
		if math.IsInf(e, 1) {
			return e, nil
		}
		prev = e
		h /= 2
	}
	return best, nil
}

// checkArgs returns the error of EpsilonPoissonGaussian and
// EpsilonPoissonGaussianV1 for arguments outside their domain.
func checkArgs(q, z float64, steps int, delta float64) error {
	switch {
	case !(q > 0 && q <= 1):
		return fmt.Errorf("pld: sampling rate q = %v not in (0, 1]", q)
	case !(z > 0) || math.IsInf(z, 0):
		return fmt.Errorf("pld: noise multiplier %v is not finite and > 0", z)
	case steps < 0:
		return fmt.Errorf("pld: negative number of steps %d", steps)
	case !(delta > 0 && delta < 1):
		return fmt.Errorf("pld: delta %v not in (0, 1)", delta)
	}
	return nil
}

// epsilonAt computes ε(delta) on the grid of interval h.
func epsilonAt(q, z float64, steps int, delta, h float64) (float64, error) {
	p, err := PoissonGaussian(q, z, h)
	if err != nil {
		return 0, err
	}
	if p, err = p.SelfCompose(steps); err != nil {
		return 0, err
	}
	return p.Epsilon(delta)
}

// startInterval returns the first guess of h (see
// EpsilonPoissonGaussianV1; EpsilonPoissonGaussian uses it at each
// epoch's last count), using the worse of the two directions.
func startInterval(q, z float64, steps int, delta float64) float64 {
	mu, v := worseMoments(q, z)
	n := float64(steps)
	zd := -distuv.UnitNormal.Quantile(delta)
	epsPred := math.Max(n*mu+zd*math.Sqrt(n*v), 1e-3)
	h := math.Sqrt(12 * startTol * epsPred / (n + zd*math.Sqrt(n/math.Max(v, 1e-300))))
	// Keep the one-step grid within maxBins/8 bins, leaving room for the
	// composed window and two halvings; tiny q with small σ has a long,
	// light loss tail that would otherwise not fit.
	h = math.Max(h, 8*lossSpan(q, z)/maxBins)
	return math.Min(math.Max(h, 1e-7), 0.5)
}

// worseMoments returns the larger, over the two directions, of the mean
// and of the variance of the one-step privacy loss (lossMoments). They
// depend on q and z alone, not on the number of steps, and cost about
// 1 ms (8,000 quadrature points), about a tenth of a whole
// EpsilonPoissonGaussian at a few hundred steps; a ledger asks for one
// (q, z) at every round, so they are kept in momentsCache. The function
// is deterministic, so a cached pair is the computed pair, bit for bit.
func worseMoments(q, z float64) (mu, v float64) {
	k := [2]float64{q, z}
	momentsCache.Lock()
	m, ok := momentsCache.m[k]
	momentsCache.Unlock()
	if ok {
		return m[0], m[1]
	}
	for _, add := range []bool{false, true} {
		m, s := lossMoments(mixturePair{q: q, sigma: z, add: add})
		mu, v = math.Max(mu, m), math.Max(v, s)
	}
	momentsCache.Lock()
	if momentsCache.m == nil || len(momentsCache.m) >= 256 {
		momentsCache.m = map[[2]float64][2]float64{} // bounded: start over
	}
	momentsCache.m[k] = [2]float64{mu, v}
	momentsCache.Unlock()
	return mu, v
}

// momentsCache maps (q, z) to worseMoments(q, z), for at most 256 pairs.
var momentsCache struct {
	sync.Mutex
	m map[[2]float64][2]float64
}

// lossSpan returns the width of the loss range that PoissonGaussian
// discretizes, the larger over the two directions.
func lossSpan(q, z float64) float64 {
	var span float64
	for _, add := range []bool{false, true} {
		m := mixturePair{q: q, sigma: z, add: add}
		a, b := m.xRange(constructionTail)
		span = math.Max(span, math.Abs(m.loss(b)-m.loss(a)))
	}
	return span
}

// lossMoments returns the mean and variance of the privacy loss under P by
// composite Simpson quadrature over the x range holding all but 1e-20 of P.
func lossMoments(m mixturePair) (mean, variance float64) {
	const k = 4000 // even number of intervals
	a, b := m.xRange(1e-20)
	dx := (b - a) / k
	var s0, s1, s2 float64
	for i := 0; i <= k; i++ {
		x := a + float64(i)*dx
		w := 2.0
		switch {
		case i == 0 || i == k:
			w = 1
		case i%2 == 1:
			w = 4
		}
		w *= m.density(x)
		l := m.loss(x)
		s0 += w
		s1 += w * l
		s2 += w * l * l
	}
	mean = s1 / s0
	return mean, math.Max(s2/s0-mean*mean, 0)
}

// density returns the density of P at x.
func (m mixturePair) density(x float64) float64 {
	s := m.sigma
	phi := func(t float64) float64 { return math.Exp(-t*t/2) / (s * math.Sqrt(2*math.Pi)) }
	if m.add {
		return phi(x / s)
	}
	return (1-m.q)*phi(x/s) + m.q*phi((x-1)/s)
}
