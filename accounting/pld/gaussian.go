package pld

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// constructionTail is the P-probability of the x range left out when one step
// is discretized; it goes to the +∞ mass (pessimistic). At 1e-20 per step it
// stays below 1e-15 after 10⁵ compositions.
const constructionTail = 1e-20

// maxBins bounds the length of any loss grid (single step or composed), so a
// too-fine h fails with an error instead of exhausting memory. 2²² float64
// bins are 32 MiB; an FFT of that length needs about 6 such arrays.
const maxBins = 1 << 22

// PoissonGaussian returns the PLD of one step of the Gaussian mechanism with
// L2 sensitivity 1 and noise standard deviation sigma (the noise multiplier
// z), applied to a Poisson sample with rate q, under add/remove adjacency:
//
//	remove: P = (1−q)·N(0,σ²) + q·N(1,σ²) vs Q = N(0,σ²),
//	        L(x) = log(1 − q + q·e^{(2x−1)/(2σ²)});
//	add:    P = N(0,σ²) vs Q = the same mixture, L(x) = −log(1 − q + q·e^{(2x−1)/(2σ²)}).
//
// Losses are discretized on the grid of interval h (1e-4 … 1e-2 is typical)
// by the pessimistic connect-the-dots construction of Doroshenko et al. 2022
// (§4; see the package documentation), so Delta of the result is ≥ the
// mechanism's δ(ε) for every ε. Both directions are kept (dp_accounting's
// choice): they differ for q < 1 and neither dominates the other in general.
// For q = 1 they coincide and one is stored.
//
// It returns an error if q ∉ (0, 1], sigma is not finite and > 0, h is not
// finite and > 0, or the grid would exceed 2²² bins.
func PoissonGaussian(q, sigma, h float64) (*PLD, error) {
	if !(q > 0 && q <= 1) {
		return nil, fmt.Errorf("pld: sampling rate q = %v not in (0, 1]", q)
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return nil, fmt.Errorf("pld: noise multiplier %v is not finite and > 0", sigma)
	}
	if err := checkInterval(h); err != nil {
		return nil, err
	}
	rem, err := connectDots(mixturePair{q: q, sigma: sigma}, h, constructionTail)
	if err != nil {
		return nil, err
	}
	p := &PLD{h: h, dirs: []dist{rem}}
	if q < 1 {
		add, err := connectDots(mixturePair{q: q, sigma: sigma, add: true}, h, constructionTail)
		if err != nil {
			return nil, err
		}
		p.dirs = append(p.dirs, add)
	}
	return p, nil
}

// mixturePair is one adjacency direction of the Poisson-subsampled Gaussian
// on the real line x (sensitivity 1, noise σ). The loss is monotone in x:
// increasing for remove, decreasing for add.
type mixturePair struct {
	q, sigma float64
	add      bool
}

// logMix returns log(1 − q + q·e^u): by log1p/expm1 while the mixture is
// close to 1 (tiny q, small u), by factoring out e^u for large u, and as a
// log-sum-exp when it is small (q near 1, u very negative), where
// 1 + q·expm1(u) would round to 0.
func logMix(q, u float64) float64 {
	switch {
	case u > 30:
		return u + math.Log(q) + math.Log1p((1-q)/q*math.Exp(-u))
	case -q*math.Expm1(u) < 0.5:
		return math.Log1p(q * math.Expm1(u))
	}
	a, b := math.Log1p(-q), math.Log(q)+u
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// invLogMix returns u with logMix(q, u) = l, or −Inf if l ≤ log(1−q), the
// infimum of logMix. The three branches mirror those of logMix.
func invLogMix(q, l float64) float64 {
	switch {
	case l > 1:
		return l + math.Log1p(-(1-q)*math.Exp(-l)) - math.Log(q)
	case l < -0.5:
		d := math.Exp(l) - (1 - q) // q·e^u, no cancellation against 1 for q = 1
		if d <= 0 {
			return math.Inf(-1)
		}
		return math.Log(d) - math.Log(q)
	}
	v := math.Expm1(l) / q // e^u − 1
	if v <= -1 {
		return math.Inf(-1)
	}
	return math.Log1p(v)
}

// loss returns the privacy loss at x.
func (m mixturePair) loss(x float64) float64 {
	l := logMix(m.q, (2*x-1)/(2*m.sigma*m.sigma))
	if m.add {
		return -l
	}
	return l
}

// inverse returns the x with loss(x) = l, ±Inf beyond the loss range.
func (m mixturePair) inverse(l float64) float64 {
	if m.add {
		l = -l
	}
	return m.sigma*m.sigma*invLogMix(m.q, l) + 0.5
}

// xRange returns an x interval outside which P has mass at most tail.
func (m mixturePair) xRange(tail float64) (lo, hi float64) {
	z := -distuv.UnitNormal.Quantile(tail / 2)
	if m.add {
		return -m.sigma * z, m.sigma * z
	}
	// Each mixture component puts at most tail/2 outside [−σz, 1+σz].
	return -m.sigma * z, 1 + m.sigma*z
}

// cut is a point x with its standardized positions under N(0,σ²) and
// N(1,σ²) and the normal tail on the near side of each, so that interval
// masses are differences of small numbers (erfc, not 1 − Φ) and each grid
// point costs two erfc evaluations, shared by its two segments.
type cut struct{ z0, t0, z1, t1 float64 }

func (m mixturePair) cut(x float64) cut {
	z0, z1 := x/m.sigma, (x-1)/m.sigma
	return cut{z0, nearTail(z0), z1, nearTail(z1)}
}

// masses returns the P- and Q-probabilities between two cuts, in either
// order.
func (m mixturePair) masses(a, b cut) (pm, qm float64) {
	if a.z0 > b.z0 {
		a, b = b, a
	}
	n0 := normMass(a.z0, a.t0, b.z0, b.t0)
	n1 := normMass(a.z1, a.t1, b.z1, b.t1)
	mix := (1-m.q)*n0 + m.q*n1
	if m.add {
		return n0, mix
	}
	return mix, n0
}

// connectDots discretizes one direction on the grid of interval h with the
// connect-the-dots construction (Doroshenko et al. 2022, §4). The loss
// values in (ε_i, ε_{i+1}] are split between ε_i and ε_{i+1} so that both
// the P-mass and the Q-mass are preserved; the share of ε_{i+1} is
//
//	b = (P_seg − e^{ε_i}·Q_seg) / (1 − e^{−h}),
//
// where P_seg, Q_seg are the probabilities of the x interval mapped to the
// segment. Summed over segments this is the piecewise-linear interpolation
// of the convex curve t ↦ δ(log t) at the grid, hence an upper bound. Loss
// below the lowest grid point goes to it, loss above the highest to +∞.
func connectDots(m mixturePair, h, tail float64) (dist, error) {
	xlo, xhi := m.xRange(tail)
	llo, lhi := m.loss(xlo), m.loss(xhi)
	if llo > lhi {
		llo, lhi = lhi, llo
	}
	ilo := math.Floor(llo / h)
	ihi := math.Ceil(lhi / h)
	if ihi-ilo+1 > maxBins {
		return dist{}, fmt.Errorf("pld: interval h = %v needs %.0f bins for one step (limit %d)", h, ihi-ilo+1, maxBins)
	}
	lo, n := int(ilo), int(ihi-ilo)+1
	pmf := make([]float64, n)

	// Mass with loss ≤ ε_lo, moved up to ε_lo.
	prev := m.cut(m.inverse(float64(lo) * h))
	pmf[0], _ = m.masses(m.cut(m.inverse(math.Inf(-1))), prev)
	omeh := -math.Expm1(-h)
	for i := 0; i+1 < n; i++ {
		ei := float64(lo+i) * h
		next := m.cut(m.inverse(float64(lo+i+1) * h))
		ps, qs := m.masses(prev, next)
		prev = next
		if ps <= 0 {
			continue
		}
		eq := 0.0 // e^{ε_i}·Q_seg, computed in log space: ε_i may be large
		if qs > 0 {
			eq = math.Exp(ei + math.Log(qs))
		}
		up := (ps - eq) / omeh
		// Round-off can push the share outside [0, P_seg]; clamping keeps
		// the masses non-negative, and failures (e.g. Q_seg underflow)
		// err towards the upper point, the pessimistic side.
		if !(up <= ps) {
			up = ps
		}
		if up < 0 {
			up = 0
		}
		pmf[i] += ps - up
		pmf[i+1] += up
	}
	inf, _ := m.masses(prev, m.cut(m.inverse(math.Inf(1))))
	return trim(dist{lo: lo, pmf: pmf, inf: inf}, tail), nil
}

// normMass returns P(a < Z ≤ b), a ≤ b, for a standard normal Z from the
// near-side tails ta = nearTail(a), tb = nearTail(b), without cancellation
// against 1 in either tail.
func normMass(a, ta, b, tb float64) float64 {
	switch {
	case a >= 0:
		return ta - tb
	case b <= 0:
		return tb - ta
	default:
		return 1 - ta - tb
	}
}

// nearTail returns min(Φ(z), 1 − Φ(z)) = Φ(−|z|) via erfc.
func nearTail(z float64) float64 { return 0.5 * math.Erfc(math.Abs(z)/math.Sqrt2) }
