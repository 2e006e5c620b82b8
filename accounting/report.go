package accounting

import (
	"fmt"
	"math"

	"github.com/dpfl/dpfl/accounting/pld"
)

// Estimate is ε at some δ from one accountant.
type Estimate struct {
	// Accountant is "rdp" or "pld".
	Accountant string `json:"accountant"`
	// Epsilon is the upper bound on ε (absent when not Valid or infinite).
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Order is the RDP order α attaining Epsilon (RDP only).
	Order float64 `json:"order,omitempty"`
	// Valid says the accountant certified Epsilon for these events.
	Valid bool `json:"valid"`
	// Note explains an invalid or infinite estimate.
	Note string `json:"note,omitempty"`
}

// The PLD algorithms that have computed reported ε, by the names
// Report.PLDMethod and audit claims carry. A verifier recomputes a claim
// with the method it names; a claim from before the names existed was
// computed by PLDMethodV1. Both give proven upper bounds (pessimistic
// discretization, truncated mass counted against δ), differing by the
// order of 0.01% of ε.
const (
	// PLDMethodV1 is pld.EpsilonPoissonGaussianV1: a grid refined for
	// each count of rounds (dpfl's reports before PLDMethodV2).
	PLDMethodV1 = "pld/1"
	// PLDMethodV2 is pld.EpsilonPoissonGaussian: one grid per doubling
	// of the count, the n-fold composition as a product of cached
	// spectral powers, and a floor at earlier epochs' last counts, so a
	// ledger's next round costs one inverse FFT.
	PLDMethodV2 = "pld/2"
	// PLDMethod is the method Account and Accountant use.
	PLDMethod = PLDMethodV2
)

// pldMethods maps each method name to its function.
var pldMethods = map[string]func(q, z float64, steps int, delta float64) (float64, error){
	PLDMethodV1: pld.EpsilonPoissonGaussianV1,
	PLDMethodV2: pld.EpsilonPoissonGaussian,
}

// Report is ε at δ under both accountants, and the tighter valid one.
type Report struct {
	Delta float64  `json:"delta"`
	RDP   Estimate `json:"rdp"`
	PLD   Estimate `json:"pld"`
	// Best is the smaller valid ε of the two: both are upper bounds on the
	// true ε, so the smaller is the better bound.
	Best Estimate `json:"best"`
	// PLDMethod names the algorithm of the PLD estimate (PLDMethod, or
	// the one given to AccountMethod); RDP's has not changed and has no
	// name. Two builds that report the same method compute the same
	// number from the same events, up to floating-point differences
	// between machines.
	PLDMethod string `json:"pld_method,omitempty"`
}

// Epsilon is Best's ε, +Inf when no accountant gives a finite bound.
func (r Report) Epsilon() float64 {
	if r.Best.Epsilon == nil {
		return math.Inf(1)
	}
	return *r.Best.Epsilon
}

// Account computes the Report of the composition of events at δ.
//
// The PLD accountant (package pld: Koskela et al. 2020; Doroshenko et al.
// 2022) covers ledgers whose events are all the same Poisson-sampled
// Gaussian, the shape of every DP-FedAvg job with Poisson sampling; for
// anything else, or where it cannot certify (δ below its float resolution,
// an infinite result), it is marked invalid with a note and Best falls
// back to RDP.
//
// The PLD estimate is computed by PLDMethod (see AccountMethod).
// Accountant computes the same Report incrementally, round by round.
//
// Its cost is one MarshalEvent per event (grouping identical events: about
// 20 ms for 10,000 events on one core of an AMD EPYC, Zen 3), the RDP
// curve of each distinct event (cached), and one PLD evaluation: under a
// millisecond at 10,000 rounds once the grid is built, about 15 ms from
// cold (pld.EpsilonPoissonGaussian; BenchmarkAccountantRound "account").
func Account(events []Event, delta float64) (Report, error) {
	return AccountMethod(events, delta, PLDMethod)
}

// AccountMethod is Account with the PLD estimate computed by the named
// method (PLDMethodV1 or PLDMethodV2): the way to recompute, bit for bit,
// a report that a server running that method produced. An unknown method
// is an error.
func AccountMethod(events []Event, delta float64, method string) (Report, error) {
	rep := Report{Delta: delta, RDP: Estimate{Accountant: "rdp"}, PLD: Estimate{Accountant: "pld"}, PLDMethod: method}
	if _, ok := pldMethods[method]; !ok {
		return rep, fmt.Errorf("accounting: unknown PLD method %q (this build knows %q and %q)", method, PLDMethodV1, PLDMethodV2)
	}
	if !(delta > 0 && delta < 1) {
		return rep, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	r := NewRDPAccountant(nil)
	if err := ComposeAll(r, events); err != nil {
		return rep, err
	}
	var w poissonWalk
	for _, e := range events {
		w.add(e)
	}
	return finish(rep, r, w, method)
}

// finish completes rep (δ checked, accountant names set) from the RDP of
// the events in r and their homogeneity scan w: both estimates, the PLD
// one by method (a key of pldMethods), then Best. Account and Accountant
// share it, so the two give the same Report.
func finish(rep Report, r *RDPAccountant, w poissonWalk, method string) (Report, error) {
	delta := rep.Delta
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

	switch {
	case w.bad:
		rep.PLD.Note = "PLD accountant covers only ledgers of one repeated Poisson-sampled Gaussian event, at most 2⁶³−1 times; RDP used"
	case delta < 1e-12:
		rep.PLD.Note = "δ below 1e-12 is beyond the PLD accountant's floating-point resolution; RDP used"
	case w.n == 0:
		zero := 0.0
		rep.PLD.Valid, rep.PLD.Epsilon = true, &zero
	default:
		e, err := pldEpsilon(method, w.q, w.z, w.n, delta)
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

// pldKey is the input of one PLD method's call.
type pldKey struct {
	method string
	q, z   float64
	n      int
	delta  float64
}

// pldResult is the output of one PLD method's call.
type pldResult struct {
	eps float64
	err error
}

// pldCache holds the latest PLD results, at most pldCacheSize (it starts
// over when full). The methods are deterministic (no randomness; their
// own caches hold values computed the same way whoever asked first), so
// a cached result is the result, bit for bit: a job's ledger asks for
// round T+1 to check its budget, then for the same T+1 as its ε; its
// unit and its privacy report ask again. Safe for concurrent use.
var pldCache = memo[pldKey, pldResult]{max: pldCacheSize}

// pldCacheSize bounds pldCache. Entries are about 64 bytes; 4096 of them
// cover the current and next round of thousands of concurrent jobs.
const pldCacheSize = 4096

// pldEpsilon is method's function (pldMethods) at (q, z, n, delta)
// through pldCache.
func pldEpsilon(method string, q, z float64, n int, delta float64) (float64, error) {
	k := pldKey{method, q, z, n, delta}
	if r, ok := pldCache.get(k); ok {
		return r.eps, r.err
	}
	eps, err := pldMethods[method](q, z, n, delta)
	pldCache.put(k, pldResult{eps, err})
	return eps, err
}

// homogeneousPoisson reports whether events (with SelfComposed and
// Composed flattened, NoOps dropped) are n copies of one
// PoissonSampled(q, Gaussian(z)), n ≤ math.MaxInt: a count that
// overflows int is not ok.
func homogeneousPoisson(events []Event) (q, z float64, n int, ok bool) {
	var w poissonWalk
	for _, e := range events {
		if w.add(e); w.bad {
			return 0, 0, 0, false
		}
	}
	return w.q, w.z, w.n, true
}

// poissonWalk is homogeneousPoisson's scan, one event at a time: after
// add(e₁), …, add(eₖ) it holds what homogeneousPoisson(e₁, …, eₖ) returns
// (bad for not ok).
type poissonWalk struct {
	q, z float64
	n    int
	bad  bool
}

// add scans one more event.
func (w *poissonWalk) add(e Event) {
	if w.bad {
		return
	}
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
			if w.n > 0 && (e.SamplingProbability != w.q || g.NoiseMultiplier != w.z) {
				return false
			}
			if w.n > math.MaxInt-times { // the total would overflow
				return false
			}
			w.q, w.z = e.SamplingProbability, g.NoiseMultiplier
			w.n += times
			return true
		}
		return false
	}
	w.bad = !walk(e, 1)
}

// ComposeAll composes events into a, computing the RDP of each distinct
// event once (composition is commutative), so a ledger of 10,000 identical
// rounds costs one RDP evaluation, not 10,000. On error a may hold a part
// of the events.
func ComposeAll(a *RDPAccountant, events []Event) error {
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
