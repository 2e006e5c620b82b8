package accounting

// A frozen copy of Account as it was before Accountant existed (commit
// f62bcdd: report.go's Account, homogeneousPoisson and ComposeAll, rdp.go's
// RDPAccountant.Compose, eventRDP and Epsilon), renamed ref*. It is the
// independent truth that TestAccountantMatchesAccount holds both Account
// (now sharing code with Accountant) and Accountant to, bit for bit: a
// change to the shared code that moves ε in its last bit fails there.
// Do not edit it to follow the package.

import (
	"fmt"
	"math"

	"github.com/dpfl/dpfl/accounting/pld"
)

// refRDP is RDPAccountant over DefaultOrders, without leaf caching.
type refRDP struct{ orders, rdp []float64 }

func newRefRDP() *refRDP {
	o := DefaultOrders()
	return &refRDP{orders: o, rdp: make([]float64, len(o))}
}

func refAccount(events []Event, delta float64) (Report, error) {
	rep := Report{Delta: delta, RDP: Estimate{Accountant: "rdp"}, PLD: Estimate{Accountant: "pld"}}
	if !(delta > 0 && delta < 1) {
		return rep, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	r := newRefRDP()
	if err := refComposeAll(r, events); err != nil {
		return rep, err
	}
	eps, order, err := r.Epsilon(delta)
	if err != nil {
		return rep, err
	}
	rep.RDP.Valid, rep.RDP.Order = true, order
	if math.IsInf(eps, 1) {
		rep.RDP.Note = "a non-private release makes ε infinite"
	} else {
		rep.RDP.Epsilon = &eps
	}

	q, z, steps, ok := refHomogeneousPoisson(events)
	switch {
	case !ok:
		rep.PLD.Note = "PLD accountant covers only ledgers of one repeated Poisson-sampled Gaussian event, at most 2⁶³−1 times; RDP used"
	case delta < 1e-12:
		rep.PLD.Note = "δ below 1e-12 is beyond the PLD accountant's floating-point resolution; RDP used"
	case steps == 0:
		zero := 0.0
		rep.PLD.Valid, rep.PLD.Epsilon = true, &zero
	default:
		e, err := pld.EpsilonPoissonGaussian(q, z, steps, delta)
		if err != nil || math.IsInf(e, 0) || math.IsNaN(e) {
			rep.PLD.Note = fmt.Sprintf("PLD accountant could not certify a finite ε (%v); RDP used", err)
		} else {
			rep.PLD.Valid, rep.PLD.Epsilon = true, &e
		}
	}

	rep.Best = rep.RDP
	if rep.PLD.Valid && rep.PLD.Epsilon != nil && (rep.RDP.Epsilon == nil || *rep.PLD.Epsilon < *rep.RDP.Epsilon) {
		rep.Best = rep.PLD
	}
	return rep, nil
}

func refHomogeneousPoisson(events []Event) (q, z float64, n int, ok bool) {
	var walk func(e Event, times int) bool
	walk = func(e Event, times int) bool {
		switch e := e.(type) {
		case NoOp:
			return true
		case SelfComposed:
			// A hostile or corrupt ledger can nest counts whose product
			// overflows int, e.g. 2³² × 2³² = 2⁶⁴ ≡ 0, which would read as
			// zero rounds and ε = 0; such a ledger is left to RDP, whose
			// float arithmetic saturates to +Inf instead.
			if e.Count != 0 && times > math.MaxInt/e.Count {
				return false
			}
			return walk(e.Event, times*e.Count)
		case Composed:
			for _, s := range e.Events {
				if !walk(s, times) {
					return false
				}
			}
			return true
		case PoissonSampled:
			g, isG := e.Event.(Gaussian)
			if !isG {
				return false
			}
			if n > 0 && (e.SamplingProbability != q || g.NoiseMultiplier != z) {
				return false
			}
			if n > math.MaxInt-times { // the total would overflow
				return false
			}
			q, z = e.SamplingProbability, g.NoiseMultiplier
			n += times
			return true
		}
		return false
	}
	for _, e := range events {
		if !walk(e, 1) {
			return 0, 0, 0, false
		}
	}
	return q, z, n, true
}

func refComposeAll(a *refRDP, events []Event) error {
	type group struct {
		e Event
		n int
	}
	var order []string
	groups := map[string]*group{}
	for i, e := range events {
		key, err := MarshalEvent(e)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		g := groups[string(key)]
		if g == nil {
			g = &group{e: e}
			groups[string(key)] = g
			order = append(order, string(key))
		}
		g.n++
	}
	for _, k := range order {
		if err := a.Compose(groups[k].e, groups[k].n); err != nil {
			return err
		}
	}
	return nil
}
func (a *refRDP) Compose(e Event, count int) error {
	if count < 0 {
		return fmt.Errorf("accounting: count must be ≥ 0, got %d", count)
	}
	if err := Validate(e); err != nil {
		return err
	}
	add := make([]float64, len(a.orders))
	if err := a.eventRDP(add, e, float64(count)); err != nil {
		return err
	}
	for i := range a.rdp {
		a.rdp[i] += add[i]
	}
	return nil
}

// eventRDP adds scale × RDP(e) at every order into dst.
func (a *refRDP) eventRDP(dst []float64, e Event, scale float64) error {
	if scale == 0 {
		return nil
	}
	switch e := e.(type) {
	case NoOp:
	case NonPrivate:
		for i := range dst {
			dst[i] = math.Inf(1)
		}
	case Gaussian:
		for i, alpha := range a.orders {
			dst[i] += scale * gaussianRDP(alpha, e.NoiseMultiplier)
		}
	case PoissonSampled:
		g, ok := e.Event.(Gaussian)
		if !ok {
			return fmt.Errorf("accounting: RDP of PoissonSampledDpEvent over %s is not supported", e.Event.dpEventType())
		}
		for i, alpha := range a.orders {
			dst[i] += scale * poissonGaussianRDP(e.SamplingProbability, g.NoiseMultiplier, alpha)
		}
	case SampledWithoutReplacement:
		g, ok := e.Event.(Gaussian)
		if !ok {
			return fmt.Errorf("accounting: RDP of SampledWithoutReplacementDpEvent over %s is not supported", e.Event.dpEventType())
		}
		q := float64(e.SampleSize) / float64(e.SourceDatasetSize)
		for i, alpha := range a.orders {
			dst[i] += scale * worGaussianRDP(q, g.NoiseMultiplier, alpha)
		}
	case SelfComposed:
		return a.eventRDP(dst, e.Event, scale*float64(e.Count))
	case Composed:
		for _, sub := range e.Events {
			if err := a.eventRDP(dst, sub, scale); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("accounting: unknown event %T", e)
	}
	return nil
}

func (a *refRDP) Epsilon(delta float64) (eps, order float64, err error) {
	if !(delta > 0 && delta < 1) {
		return 0, 0, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	eps, order = math.Inf(1), 0 // order 0, not NaN: reports are JSON
	for i, alpha := range a.orders {
		r := a.rdp[i]
		var e float64
		switch {
		case math.IsInf(r, 1) || math.IsNaN(r):
			continue
		case delta*delta+math.Expm1(-r) > 0:
			e = 0
		default:
			e = r + math.Log1p(-1/alpha) - (math.Log(delta)+math.Log(alpha))/(alpha-1)
		}
		if e < eps {
			eps, order = e, alpha
		}
	}
	return math.Max(0, eps), order, nil
}
