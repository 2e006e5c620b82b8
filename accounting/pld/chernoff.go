package pld

import "math"

// chernoff evaluates Chernoff bounds for the n-fold sum S of independent
// copies of the bin offset I with P(I = i) = pmf[i] (a sub-probability: the
// +∞ mass is handled separately, and only makes the bounds looser):
//
//	P(S ≥ u) ≤ e^{−t·u}·M(t)^n  (t > 0),   P(S ≤ v) ≤ e^{t·v}·M(−t)^n  (t > 0),
//
// with M(t) = Σ_i pmf[i]·e^{t·i}. Any t > 0 gives a valid bound, so the
// optimal t is searched on a coarsened copy of the pmf (at most coarseBins
// blocks, each at its centre) and the bound itself is always evaluated on
// the full pmf.
type chernoff struct {
	logp       []float64 // log pmf[i], −Inf for empty bins
	clogp, pos []float64 // coarsened copy: log block mass, block centre
	n          float64
}

const coarseBins = 4096

func newChernoff(pmf []float64, n int) *chernoff {
	c := &chernoff{logp: make([]float64, len(pmf)), n: float64(n)}
	for i, v := range pmf {
		c.logp[i] = math.Log(v)
	}
	b := (len(pmf) + coarseBins - 1) / coarseBins
	for lo := 0; lo < len(pmf); lo += b {
		hi := min(lo+b, len(pmf))
		s := 0.0
		for _, v := range pmf[lo:hi] {
			s += v
		}
		c.clogp = append(c.clogp, math.Log(s))
		c.pos = append(c.pos, float64(lo+hi-1)/2)
	}
	return c
}

// logMGF returns log Σ_i e^{logp[i] + t·pos[i]} (pos[i] = i when pos is
// nil), an upper bound tight to a relative 1e-17. A first pass finds the
// largest term m, so e^{t·i} never overflows; the second exponentiates only
// terms within skipNats of m and bounds each of the others by e^{−skipNats},
// which keeps the bound rigorous while skipping exp calls on light tails.
func logMGF(logp, pos []float64, t float64) float64 {
	const skipNats = 40
	at := func(i int) float64 {
		if pos == nil {
			return float64(i)
		}
		return pos[i]
	}
	m := math.Inf(-1)
	for i, lp := range logp {
		if v := lp + t*at(i); v > m {
			m = v
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	s, skipped := 0.0, 0
	for i, lp := range logp {
		if v := lp + t*at(i) - m; v > -skipNats {
			s += math.Exp(v)
		} else {
			skipped++
		}
	}
	return m + math.Log(s+float64(skipped)*math.Exp(-skipNats))
}

// minimize returns t* > 0 and the value at t* of (n·log M(sign·t) − log tau)/t,
// with t* (approximately) minimizing it. For sign = +1 the value u satisfies
// P(S ≥ u) ≤ tau; for sign = −1 it is −v with P(S ≤ v) ≤ tau. The objective
// G(t)/t with G convex and G(0) > 0 is unimodal (its derivative has the sign
// of t·G'(t) − G(t), which is increasing), so a coarse scan in log t
// followed by a golden-section search finds the minimum.
func (c *chernoff) minimize(sign, tau float64) (tStar, val float64) {
	f := func(lt float64) float64 {
		t := math.Exp(lt)
		return (c.n*logMGF(c.clogp, c.pos, sign*t) - math.Log(tau)) / t
	}
	const (
		lmin, lmax = -30.0, 5.0 // t from 1e-13 to 150 per bin
		steps      = 24
	)
	dl := (lmax - lmin) / steps
	best, bv := lmin, f(lmin)
	for k := 1; k <= steps; k++ {
		lt := lmin + float64(k)*dl
		if v := f(lt); v < bv {
			best, bv = lt, v
		}
	}
	a, b := best-dl, best+dl
	g := (math.Sqrt(5) - 1) / 2
	x1, x2 := b-g*(b-a), a+g*(b-a)
	f1, f2 := f(x1), f(x2)
	for range 16 {
		if f1 < f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - g*(b-a)
			f1 = f(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + g*(b-a)
			f2 = f(x2)
		}
	}
	for _, cand := range [][2]float64{{x1, f1}, {x2, f2}} {
		if cand[1] < bv {
			best, bv = cand[0], cand[1]
		}
	}
	tStar = math.Exp(best)
	return tStar, (c.n*logMGF(c.logp, nil, sign*tStar) - math.Log(tau)) / tStar
}

// upperTail returns the bound e^{n·log M(t) − t·u} ≥ P(S ≥ u) for t > 0.
func (c *chernoff) upperTail(t float64, u int) float64 {
	return math.Min(1, math.Exp(c.n*logMGF(c.logp, nil, t)-t*float64(u)))
}
