// Package empirical estimates ε from samples of a test statistic, the way
// the one-shot empirical privacy estimation of Andrew, Kairouz, Oh, Oprea,
// McMahan and Suriyakumar (ICLR 2024, "One-shot Empirical Privacy
// Estimation for Federated Learning", §3–4) does: fit a Gaussian to the
// statistic of the canaries that were inserted and another to that of
// canaries that were not (the null), and report the ε at which the two
// Gaussians are (ε, δ)-indistinguishable.
//
// The ε of two Gaussians is computed exactly (up to float64 rounding)
// from the hockey-stick divergence, whose optimal rejection region is
// bounded by the roots of a quadratic (Steinke 2022, "Composition of
// Differential Privacy & Privacy Amplification by Subsampling", §7, for
// the pair of Gaussians with unequal variances; Balle & Wang 2018,
// "Improving the Gaussian Mechanism for Differential Privacy", Thm. 8, for
// the closed form with equal variances). The confidence interval is the
// range of ε over a Bonferroni box of seeded percentile bootstrap
// intervals (Efron & Tibshirani 1993, §13.3) for the two numbers ε
// depends on (EstimateEpsilon).
//
// The estimate is an empirical check, not a guarantee: it measures what
// one particular statistic reveals about one canary, under a Gaussian
// fit. It neither bounds ε from above (the accountants do) nor is it a
// proven lower bound.
package empirical

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// MaxEpsilon is the largest ε Epsilon resolves; two Gaussians further
// apart give +Inf.
const MaxEpsilon = 1e4

// Gaussian is the normal distribution N(Mean, Std²).
type Gaussian struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
}

// Fit returns the sample mean and the sample standard deviation (with
// the n − 1 denominator) of xs. It needs at least two finite values that
// are not all equal.
func Fit(xs []float64) (Gaussian, error) {
	if len(xs) < 2 {
		return Gaussian{}, fmt.Errorf("empirical: fitting a Gaussian needs at least 2 values, got %d", len(xs))
	}
	var sum float64
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Gaussian{}, errors.New("empirical: non-finite value in the sample")
		}
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	std := math.Sqrt(ss / float64(len(xs)-1))
	if !(std > 0) {
		return Gaussian{}, errors.New("empirical: the sample has no spread (all values equal)")
	}
	return Gaussian{Mean: mean, Std: std}, nil
}

// valid reports whether g is a proper normal distribution.
func (g Gaussian) valid() bool {
	return g.Std > 0 && !math.IsInf(g.Std, 0) && !math.IsNaN(g.Mean) && !math.IsInf(g.Mean, 0)
}

// Delta is the hockey-stick divergence H_{e^ε}(P ‖ Q) = sup_S P(S) −
// e^ε·Q(S) of P = p and Q = q at ε ≥ 0: the smallest δ for which the pair
// (P, Q) satisfies the (ε, δ) inequality in this direction. The supremum
// is attained on S = {x : log P(x)/Q(x) > ε}. After standardising by p
// (an affine bijection, which leaves the divergence unchanged) P = N(0, 1)
// and Q = N(m, s²) with m = (μ_q − μ_p)/σ_p and s = σ_q/σ_p, and
//
//	log P(x)/Q(x) = a·x² + b·x + c,  a = (1/s² − 1)/2,  b = −m/s²,  c = m²/(2s²) + log s,
//
// so S is an interval, the complement of one, a half-line, or empty, and
// P(S), Q(S) are normal tail probabilities (computed with erfc, so that
// δ down to 1e−300 keeps its relative precision).
func Delta(p, q Gaussian, eps float64) float64 {
	m, s := (q.Mean-p.Mean)/p.Std, q.Std/p.Std
	a, b, c := (1/(s*s)-1)/2, -m/(s*s), m*m/(2*s*s)+math.Log(s)
	// P(S) and Q(S) for S = {a x² + b x + c − ε > 0}.
	var pS, qS float64
	std := func(x, mean, sd float64) float64 { return (x - mean) / sd }
	k := c - eps
	switch {
	case a == 0 && b == 0:
		if k > 0 { // S = ℝ
			pS, qS = 1, 1
		}
	case a == 0: // a half-line
		t := -k / b
		if b > 0 { // x > t
			pS, qS = upper(t), upper(std(t, m, s))
		} else { // x < t
			pS, qS = lower(t), lower(std(t, m, s))
		}
	default:
		disc := b*b - 4*a*k
		if disc <= 0 {
			// The quadratic keeps the sign of a (touching 0 at most at
			// one point, a null set).
			if a > 0 {
				pS, qS = 1, 1
			}
			break
		}
		// Roots by the cancellation-free form (Numerical Recipes §5.6):
		// w = −(b + sign(b)√disc)/2, roots w/a and k/w.
		w := -(b + math.Copysign(math.Sqrt(disc), b)) / 2
		// w ≠ 0: disc > 0, and w = ∓√disc/2 when b = 0.
		r1, r2 := w/a, k/w
		lo, hi := math.Min(r1, r2), math.Max(r1, r2)
		if a > 0 { // outside the roots
			pS = lower(lo) + upper(hi)
			qS = lower(std(lo, m, s)) + upper(std(hi, m, s))
		} else { // between the roots
			pS = between(lo, hi)
			qS = between(std(lo, m, s), std(hi, m, s))
		}
	}
	// e^ε·Q(S) in log space: e^ε alone overflows past ε ≈ 709.
	d := pS
	if qS > 0 {
		d -= math.Exp(eps + math.Log(qS))
	}
	if !(d > 0) {
		return 0
	}
	return min(d, 1)
}

// lower is Φ(x), upper 1 − Φ(x), and between Φ(hi) − Φ(lo) for lo ≤ hi,
// each from the tail that keeps its precision.
func lower(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
func upper(x float64) float64 { return 0.5 * math.Erfc(x/math.Sqrt2) }
func between(lo, hi float64) float64 {
	switch {
	case lo >= 0:
		return max(0, upper(lo)-upper(hi))
	case hi <= 0:
		return max(0, lower(hi)-lower(lo))
	default:
		return max(0, 1-lower(lo)-upper(hi))
	}
}

// Epsilon is the smallest ε ≥ 0 at which N(p) and N(q) are (ε, δ)
// indistinguishable in both directions: Delta(p, q, ε) ≤ δ and
// Delta(q, p, ε) ≤ δ. The divergence decreases in ε, so ε is found by
// bracketing and bisection to a relative precision of 1e−10. It returns
// +Inf past MaxEpsilon, and an error for δ ∉ (0, 1) or a Gaussian without
// a finite mean and positive, finite standard deviation.
func Epsilon(p, q Gaussian, delta float64) (float64, error) {
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("empirical: δ must be in (0, 1), got %v", delta)
	}
	if !p.valid() || !q.valid() {
		return 0, fmt.Errorf("empirical: Gaussians need a finite mean and a finite standard deviation > 0, got %+v and %+v", p, q)
	}
	above := func(eps float64) bool { return Delta(p, q, eps) > delta || Delta(q, p, eps) > delta }
	if !above(0) {
		return 0, nil
	}
	lo, hi := 0.0, 1.0
	for above(hi) {
		if hi >= MaxEpsilon {
			return math.Inf(1), nil
		}
		lo, hi = hi, min(2*hi, MaxEpsilon)
	}
	for hi-lo > 1e-10*hi {
		mid := (lo + hi) / 2
		if above(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// GaussianMechanismDelta is the exact δ(ε) of the Gaussian mechanism
// whose sensitivity is mu standard deviations of its noise (Balle & Wang
// 2018, Thm. 8): Φ(μ/2 − ε/μ) − e^ε·Φ(−μ/2 − ε/μ), for μ > 0 and ε ≥ 0.
// It equals Delta of N(0, 1) and N(μ, 1).
func GaussianMechanismDelta(mu, eps float64) float64 {
	return max(0, lower(mu/2-eps/mu)-math.Exp(eps)*lower(-mu/2-eps/mu))
}

// Estimate is an empirical ε: the point estimate from the fitted
// Gaussians and its confidence interval.
type Estimate struct {
	// Epsilon is Epsilon(Null, Canary, δ), the paper's estimate. Lower and
	// Upper bound its interval at Confidence (below). Any of them may be
	// +Inf (canaries separated beyond MaxEpsilon).
	Epsilon, Lower, Upper float64
	// Confidence is the interval's nominal coverage, e.g. 0.95.
	Confidence float64
	// Canary and Null are the Gaussians fitted to the inserted and the
	// held-out canaries' statistics.
	Canary, Null Gaussian
	// Shift is the standardised mean shift (μ_canary − μ_null)/σ_null and
	// Ratio the standard deviation ratio σ_canary/σ_null, the two numbers
	// ε depends on; [ShiftLower, ShiftUpper] and [RatioLower, RatioUpper]
	// are their bootstrap intervals, each at coverage (1 + Confidence)/2.
	Shift, ShiftLower, ShiftUpper float64
	Ratio, RatioLower, RatioUpper float64
	// Resamples is the number of bootstrap resamples.
	Resamples int
}

// Options configure EstimateEpsilon.
type Options struct {
	// Delta is the δ at which ε is estimated, in (0, 1).
	Delta float64
	// Confidence is the coverage of the interval, in (0, 1) (0: 0.95).
	Confidence float64
	// Resamples is the number of bootstrap resamples (0: 2000).
	Resamples int
	// Rand draws the resamples; seed it for a reproducible interval. It
	// must not be nil.
	Rand *rand.Rand
}

// boxGrid is the number of grid points per side of the parameter box
// that the interval's extremes are searched over.
const boxGrid = 41

// EstimateEpsilon fits a Gaussian to the inserted canaries' statistics
// (canary) and one to the held-out canaries' (null), and returns the ε of
// the pair at opt.Delta (Andrew et al. 2024, §4, the Gaussian-fit
// estimate) with a confidence interval.
//
// ε depends on the fit only through the standardised shift m and the
// ratio s of the standard deviations. The interval is the range of ε
// over the box of their two percentile bootstrap intervals (each sample
// resampled with replacement, independently), each at coverage
// 1 − (1 − Confidence)/2, so that by Bonferroni's inequality the box
// holds the true (m, s) with probability at least Confidence, and then
// the interval holds the true Gaussians' ε. Bootstrapping ε itself
// would not do: ε has a kink at s = 1 (a ratio off 1 either way raises
// it), so sampling error in the fitted ratio biases the estimate upward
// and a percentile interval of ε can miss the truth from above. The
// range is found on a grid of boxGrid × boxGrid points that includes the
// box's corners, m = 0 and s = 1 where the box holds them, and it always
// includes the point estimate. Each sample needs at least 2 values with
// some spread.
func EstimateEpsilon(canary, null []float64, opt Options) (Estimate, error) {
	conf, b := opt.Confidence, opt.Resamples
	if conf == 0 {
		conf = 0.95
	}
	if b == 0 {
		b = 2000
	}
	switch {
	case !(conf > 0 && conf < 1):
		return Estimate{}, fmt.Errorf("empirical: confidence must be in (0, 1), got %v", conf)
	case b < 1:
		return Estimate{}, fmt.Errorf("empirical: resamples must be ≥ 1, got %d", b)
	case opt.Rand == nil:
		return Estimate{}, errors.New("empirical: no random source for the bootstrap")
	}
	gc, err := Fit(canary)
	if err != nil {
		return Estimate{}, fmt.Errorf("inserted canaries: %w", err)
	}
	gn, err := Fit(null)
	if err != nil {
		return Estimate{}, fmt.Errorf("held-out canaries: %w", err)
	}
	eps, err := Epsilon(gn, gc, opt.Delta)
	if err != nil {
		return Estimate{}, err
	}
	est := Estimate{Epsilon: eps, Confidence: conf, Canary: gc, Null: gn,
		Shift: (gc.Mean - gn.Mean) / gn.Std, Ratio: gc.Std / gn.Std}
	shifts, ratios := make([]float64, 0, b), make([]float64, 0, b)
	rc, rn := make([]float64, len(canary)), make([]float64, len(null))
	for range b {
		for i := range rc {
			rc[i] = canary[opt.Rand.IntN(len(canary))]
		}
		for i := range rn {
			rn[i] = null[opt.Rand.IntN(len(null))]
		}
		c, errc := Fit(rc)
		n, errn := Fit(rn)
		if errc != nil || errn != nil {
			// A resample without spread (tiny samples only) has no ratio
			// and is left out.
			continue
		}
		shifts, ratios = append(shifts, (c.Mean-n.Mean)/n.Std), append(ratios, c.Std/n.Std)
	}
	if len(shifts) == 0 {
		return Estimate{}, errors.New("empirical: every bootstrap resample lacked spread")
	}
	est.Resamples = len(shifts)
	slices.Sort(shifts)
	slices.Sort(ratios)
	tail := (1 - conf) / 4 // two intervals, two tails each
	est.ShiftLower, est.ShiftUpper = quantile(shifts, tail), quantile(shifts, 1-tail)
	est.RatioLower, est.RatioUpper = quantile(ratios, tail), quantile(ratios, 1-tail)
	est.Lower, est.Upper = eps, eps
	ms := grid(est.ShiftLower, est.ShiftUpper, 0, false)
	ss := grid(est.RatioLower, est.RatioUpper, 1, true)
	for _, m := range ms {
		for _, s := range ss {
			e, err := Epsilon(Gaussian{0, 1}, Gaussian{m, s}, opt.Delta)
			if err != nil {
				return Estimate{}, err
			}
			est.Lower, est.Upper = min(est.Lower, e), max(est.Upper, e)
		}
	}
	return est, nil
}

// grid is boxGrid points from lo to hi (geometrically spaced when geo),
// with special added when it lies strictly inside.
func grid(lo, hi, special float64, geo bool) []float64 {
	out := make([]float64, 0, boxGrid+1)
	for i := range boxGrid {
		t := float64(i) / (boxGrid - 1)
		if geo {
			out = append(out, lo*math.Pow(hi/lo, t))
		} else {
			out = append(out, lo+t*(hi-lo))
		}
	}
	out[boxGrid-1] = hi
	if lo < special && special < hi {
		out = append(out, special)
	}
	return out
}

// quantile is the p-quantile of sorted xs by linear interpolation between
// order statistics (Hyndman & Fan 1996, definition 7).
func quantile(xs []float64, p float64) float64 {
	h := p * float64(len(xs)-1)
	i := int(math.Floor(h))
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[i] + (h-float64(i))*(xs[i+1]-xs[i])
}
