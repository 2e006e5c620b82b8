package pld

import (
	"errors"
	"fmt"
	"math"
)

// tailMass is the truncation tolerance: after a convolution, tail bins whose
// total probability is at most tailMass are folded pessimistically (upper
// tail to +∞, lower tail up to the lowest kept bin). dp_accounting uses 1e-15;
// a smaller value costs a few more bins and keeps the +∞ mass negligible for
// δ down to about 1e-12 even after thousands of compositions.
const tailMass = 1e-16

// dist is the privacy loss distribution of one adjacency direction: the
// P-probability pmf[i] of the loss (lo+i)·h, and the P-probability inf of the
// loss +∞. Invariant: len(pmf) ≥ 1, all entries ≥ 0.
type dist struct {
	lo  int
	pmf []float64
	inf float64
}

// PLD is a discretized privacy loss distribution on the grid
// {k·h : k ∈ [lo, lo+len(pmf))} plus a mass at +∞, kept separately for the
// remove and the add direction of add/remove adjacency (one copy when the
// two coincide, e.g. q = 1). The probabilities are under the first
// distribution P of each pair (Koskela, Jälkö, Honkela 2020, §2). A PLD is
// immutable: Compose and SelfCompose return new values.
type PLD struct {
	h float64
	// dirs holds the remove direction and, when it differs, the add
	// direction; δ and ε are the maximum over dirs.
	dirs []dist
}

// Identity returns the PLD of a mechanism that reveals nothing: loss 0 with
// probability 1 on the grid of interval h, so δ(ε) = (1 − e^ε)_+. It is the
// neutral element of Compose. It returns an error if h is not finite and > 0.
func Identity(h float64) (*PLD, error) {
	if err := checkInterval(h); err != nil {
		return nil, err
	}
	return &PLD{h: h, dirs: []dist{{lo: 0, pmf: []float64{1}}}}, nil
}

// FromPMF returns the PLD whose loss (lo+i)·h has probability pmf[i] and whose
// loss +∞ has probability infMass, used for both adjacency directions (right
// when the mechanism's PLD is the same in both, e.g. the Gaussian mechanism,
// or when pmf is already the worse of the two). pmf is copied. It returns an
// error if h is not finite and > 0, pmf is empty, any mass is negative or
// not finite, or the total mass exceeds 1 by more than 1e-9.
func FromPMF(h float64, lo int, pmf []float64, infMass float64) (*PLD, error) {
	if err := checkInterval(h); err != nil {
		return nil, err
	}
	if len(pmf) == 0 {
		return nil, errors.New("pld: empty pmf")
	}
	total := infMass
	if !(infMass >= 0 && infMass <= 1) {
		return nil, fmt.Errorf("pld: infinity mass %v not in [0, 1]", infMass)
	}
	for i, v := range pmf {
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("pld: pmf[%d] = %v is not a finite non-negative number", i, v)
		}
		total += v
	}
	if math.Abs(total-1) > 1e-9 {
		return nil, fmt.Errorf("pld: total mass %v is not 1", total)
	}
	d := dist{lo: lo, pmf: append([]float64(nil), pmf...), inf: infMass}
	return &PLD{h: h, dirs: []dist{d}}, nil
}

// Interval returns the discretization interval h of the loss grid.
func (p *PLD) Interval() float64 { return p.h }

// InfinityMass returns the largest, over the adjacency directions, P-mass of
// the loss +∞: δ(ε) ≥ InfinityMass for every ε, so it is the smallest δ
// with a finite ε.
func (p *PLD) InfinityMass() float64 {
	m := 0.0
	for i := range p.dirs {
		m = math.Max(m, p.dirs[i].inf)
	}
	return m
}

// Delta returns the hockey-stick divergence
//
//	δ(ε) = inf_mass + Σ_k pmf_k·(1 − e^{ε − k·h})_+
//
// maximized over the two adjacency directions (Koskela, Jälkö, Honkela 2020,
// Eq. (5); Sommer, Meiser, Mohammadi 2019, Thm. 1). eps may be any real;
// Delta(NaN) is NaN. By construction of the PLD it is ≥ the δ(ε) of the
// mechanism it approximates.
func (p *PLD) Delta(eps float64) float64 {
	if math.IsNaN(eps) {
		return math.NaN()
	}
	m := 0.0
	for i := range p.dirs {
		m = math.Max(m, p.dirs[i].delta(p.h, eps))
	}
	return m
}

// delta evaluates δ(ε) of one direction, summing from the largest loss down
// so that the small terms are added first.
func (d *dist) delta(h, eps float64) float64 {
	s := 0.0
	for i := len(d.pmf) - 1; i >= 0; i-- {
		l := float64(d.lo+i) * h
		if l <= eps {
			break
		}
		s += d.pmf[i] * -math.Expm1(eps-l)
	}
	return d.inf + s
}

// Epsilon returns the smallest ε ≥ 0 with Delta(ε) ≤ delta, maximized over
// the two adjacency directions. Between grid points the discrete δ(ε) has
// the closed form A − B·e^ε, so the crossing is solved exactly rather than
// rounded up to the next grid point; because the discrete curve lies above
// the true one everywhere (see the package documentation), the result is
// still an upper bound on the true ε. It returns +Inf when delta is below
// the +∞ mass, and an error if delta is not in (0, 1).
func (p *PLD) Epsilon(delta float64) (float64, error) {
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("pld: delta %v not in (0, 1)", delta)
	}
	eps := 0.0
	for i := range p.dirs {
		eps = math.Max(eps, p.dirs[i].epsilon(p.h, delta))
	}
	return eps, nil
}

// epsilon walks down the grid from the largest loss. Before visiting grid
// point l_j it holds, for the bins k > j referenced at l_{j+1},
//
//	m = Σ p_k,  e = Σ p_k(1 − e^{l_{j+1} − l_k}) = δ(l_{j+1}) − inf,  c = Σ p_k e^{l_{j+1} − l_k}.
//
// Re-referencing to l_j uses 1 − e^{l_j−l_k} = (1 − e^{−h}) + e^{−h}(1 − e^{l_{j+1}−l_k}),
// a sum of non-negative terms, so δ on the grid is computed without
// cancellation. The result is clamped at 0.
func (d *dist) epsilon(h, delta float64) float64 {
	if d.inf > delta {
		return math.Inf(1)
	}
	eh := math.Exp(-h)
	omeh := -math.Expm1(-h)
	var m, e, c float64
	for j := len(d.pmf) - 1; j >= 0; j-- {
		lj := float64(d.lo+j) * h
		ej := omeh*m + eh*e // δ(l_j) − inf
		cj := eh * c
		if d.inf+ej > delta {
			// δ(l_j) > delta ≥ δ(l_{j+1}): on (l_j, l_{j+1}],
			// δ(l_j + s) = inf + m − e^s·cj, so
			// e^s = 1 + (δ(l_j) − delta)/cj (using m − cj = ej).
			s := math.Log1p((d.inf + ej - delta) / cj)
			if !(s <= h) { // also catches NaN: never past l_{j+1}, where δ ≤ delta is known
				s = h
			}
			return math.Max(0, lj+math.Max(s, 0))
		}
		if lj <= 0 {
			return 0
		}
		m, e, c = m+d.pmf[j], ej, cj+d.pmf[j]
	}
	// δ(l_0) ≤ delta with l_0 > 0: below l_0 every bin counts and
	// δ(ε) = inf + m − e^{ε−l_0}·c.
	r := (d.inf + m - delta) / c
	if !(r <= math.MaxFloat64) { // underflow of c or NaN: fall back to l_0, where δ ≤ delta is known
		return math.Max(0, float64(d.lo)*h)
	}
	if r <= 0 {
		return 0
	}
	return math.Max(0, float64(d.lo)*h+math.Log(r))
}

func checkInterval(h float64) error {
	if !(h > 0) || math.IsInf(h, 0) {
		return fmt.Errorf("pld: discretization interval %v is not finite and > 0", h)
	}
	return nil
}
