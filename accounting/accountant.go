package accounting

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Accountant is the stateful form of Account: events are composed into it
// one round at a time and Epsilon reports, at any δ, exactly the Report
// that Account gives for the same events in the same order, bit for bit
// (both estimates, the tighter one, the RDP order, the PLD method and
// the notes). Compose and the RDP estimate cost microseconds whatever the
// number of events composed; the PLD estimate, where it applies, costs
// one pld.EpsilonPoissonGaussian per new count, under a millisecond at
// 10,000 rounds (see PLD below).
//
// # What it keeps
//
// The events composed, grouped as Account groups them (ComposeAll): one
// group per distinct event, keyed by its canonical JSON (MarshalEvent),
// with its count, in order of first appearance. A ledger of 10,000 rounds
// of one event is one group of count 10,000. Beside the groups it keeps
// the state of the scan that decides whether the PLD accountant applies
// (one repeated Poisson-sampled Gaussian: poissonWalk), advanced as
// events arrive.
//
// # RDP
//
// Epsilon composes each group's count into a fresh RDPAccountant, as
// Account does, with the RDP curve of every leaf mechanism at the order
// grid computed once and then cached (leafCache): O(orders) per group and
// no JSON work. The accumulated curve is not kept as a running sum
// across Compose calls on purpose: Account computes count × curve per
// group, and a sum of T single-event curves rounds differently (T
// additions, not one multiplication), which would change ε in its last
// bits; the promise is Account's ε, not one near it.
//
// # PLD
//
// The PLD estimate is pld.EpsilonPoissonGaussian (method PLDMethod,
// "pld/2"), which Account calls too, so the two agree bit for bit by
// construction. That function is itself incremental: it keeps, per
// discretization grid, the one-step PLD and the spectral powers S^(2^k)
// of its n-fold composition, and per window length the products of the
// last count, so the ε of a ledger's next round, n+1, costs one product
// of spectra and one inverse FFT of the window of the (n+1)-fold loss
// (about 16,000 bins at n = 10,000 for q = 0.02, z = 1, δ = 1e-5),
// whatever the rounds before it; its value depends on (q, z, n, δ) only,
// never on what was computed before. The grid changes only when n
// passes a power of two (and then only if the interval it calls for
// moves by more than 2^(1/8)), which costs that round a few milliseconds
// more. Its results also pass through a process-wide cache (pldCache): a
// ledger's budget check for round T+1 and its ε after round T+1 are one
// computation, and its budget's and its report's at the same δ reuse it.
// Costs are measured by BenchmarkAccountantRound.
//
// An Accountant is not safe for concurrent use; Clone gives an
// independent copy.
type Accountant struct {
	// groups are the distinct events in order of first appearance;
	// index maps each one's canonical JSON to its position.
	groups []group
	index  map[string]int
	// walk is homogeneousPoisson's scan over every event composed.
	walk poissonWalk
}

// group is one distinct event and the number of times it was composed.
type group struct {
	e Event
	n int
}

// NewAccountant returns an Accountant holding no events: Epsilon reports
// ε = 0 from both accountants, as Account(nil, δ) does.
func NewAccountant() *Accountant {
	return &Accountant{index: map[string]int{}}
}

// Compose appends count copies of e, as if the ledger given to Account
// held count more entries equal to e. count = 0 appends nothing (but e is
// still checked). It returns an error, and leaves the Accountant
// unchanged, if count < 0, e is invalid (Validate), the RDP accountant
// cannot bound e (a sampled event over anything but a Gaussian: Account
// fails on such a ledger too), or e's count would exceed math.MaxInt.
// The cost is one MarshalEvent of e, plus one RDP curve per leaf
// mechanism never seen before in this process.
func (a *Accountant) Compose(e Event, count int) error {
	key, err := a.check(e, count)
	if err != nil {
		return err
	}
	if count == 0 {
		return nil
	}
	if i, ok := a.index[key]; ok {
		a.groups[i].n += count
	} else {
		a.index[key] = len(a.groups)
		a.groups = append(a.groups, group{e: e, n: count})
	}
	a.walk.addCopies(e, count)
	return nil
}

// check validates Compose(e, count) without changing a and returns e's
// canonical JSON.
func (a *Accountant) check(e Event, count int) (string, error) {
	if count < 0 {
		return "", fmt.Errorf("accounting: count must be ≥ 0, got %d", count)
	}
	b, err := MarshalEvent(e)
	if err != nil {
		return "", err
	}
	key := string(b)
	if count == 0 {
		return key, nil
	}
	if i, ok := a.index[key]; ok {
		if a.groups[i].n > math.MaxInt-count {
			return "", fmt.Errorf("accounting: %d more copies of an event composed %d times overflow int", count, a.groups[i].n)
		}
		return key, nil
	}
	// A new event: fail now, as Account would, if RDP cannot bound it.
	// Scale 1 reaches the same leaves as any count ≥ 1 (eventRDP skips
	// only zero-count sub-events), and fills leafCache.
	r := NewRDPAccountant(nil)
	if err := r.eventRDP(make([]float64, len(r.orders)), e, 1); err != nil {
		return "", err
	}
	return key, nil
}

// Epsilon returns the Report at delta over the events composed so far:
// the same value as Account(events, delta) for the same events in the
// same order. It is an error if delta ∉ (0, 1). It does not change a.
func (a *Accountant) Epsilon(delta float64) (Report, error) {
	return report(a.groups, a.walk, delta)
}

// EpsilonWith returns the Report at delta that Epsilon would give after
// Compose(e, count), without composing: the question a write-ahead
// ledger asks before it charges a round. Errors are Compose's and
// Epsilon's; a is never changed. Its cost is Compose's plus Epsilon's,
// plus a copy of the group list (one entry per distinct event).
func (a *Accountant) EpsilonWith(e Event, count int, delta float64) (Report, error) {
	gs, w, err := a.with(e, count)
	if err != nil {
		return Report{Delta: delta, RDP: Estimate{Accountant: "rdp"}, PLD: Estimate{Accountant: "pld"}, PLDMethod: PLDMethod}, err
	}
	return report(gs, w, delta)
}

// FitsWith reports whether EpsilonWith(e, count, delta).Epsilon() ≤
// budget, the decision of a budget check, computing the PLD estimate only
// when the RDP estimate does not settle it: Best is the smaller valid ε
// of the two, so Best ≤ RDP's ε, and RDP's ε ≤ budget means it fits. The
// answer is always EpsilonWith's; only its cost differs (microseconds
// instead of a PLD computation while a budget is far from spent). Errors
// are EpsilonWith's.
func (a *Accountant) FitsWith(e Event, count int, delta, budget float64) (bool, error) {
	gs, w, err := a.with(e, count)
	if err != nil {
		return false, err
	}
	if !(delta > 0 && delta < 1) {
		return false, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	r := NewRDPAccountant(nil)
	for _, g := range gs {
		if err := r.Compose(g.e, g.n); err != nil {
			return false, err
		}
	}
	if eps, _, err := r.Epsilon(delta); err != nil {
		return false, err
	} else if eps <= budget { // an infinite ε fits only an infinite budget, as Best's would
		return true, nil
	}
	rep, err := report(gs, w, delta)
	if err != nil {
		return false, err
	}
	return !(rep.Epsilon() > budget), nil
}

// with returns the groups and scan that Compose(e, count) would leave,
// without changing a; callers must only read the groups (with count = 0
// they are a's own).
func (a *Accountant) with(e Event, count int) ([]group, poissonWalk, error) {
	key, err := a.check(e, count)
	if err != nil {
		return nil, poissonWalk{}, err
	}
	if count == 0 {
		return a.groups, a.walk, nil
	}
	gs := slices.Clone(a.groups)
	if i, ok := a.index[key]; ok {
		gs[i].n += count
	} else {
		gs = append(gs, group{e: e, n: count})
	}
	w := a.walk
	w.addCopies(e, count)
	return gs, w, nil
}

// Clone returns an independent copy of a, in time proportional to the
// number of distinct events (not of events) composed.
func (a *Accountant) Clone() *Accountant {
	c := &Accountant{groups: slices.Clone(a.groups), index: make(map[string]int, len(a.index)), walk: a.walk}
	for k, v := range a.index {
		c.index[k] = v
	}
	return c
}

// report is Account's computation over grouped events: ComposeAll's
// per-group RDP composition, in the same order and with the same counts,
// then finish.
func report(groups []group, w poissonWalk, delta float64) (Report, error) {
	rep := Report{Delta: delta, RDP: Estimate{Accountant: "rdp"}, PLD: Estimate{Accountant: "pld"}, PLDMethod: PLDMethod}
	if !(delta > 0 && delta < 1) {
		return rep, fmt.Errorf("accounting: δ must be in (0, 1), got %v", delta)
	}
	r := NewRDPAccountant(nil)
	for _, g := range groups {
		if err := r.Compose(g.e, g.n); err != nil {
			return rep, err
		}
	}
	return finish(rep, r, w, PLDMethod)
}

// addCopies scans count copies of e in O(size of e), whatever count: it
// walks the first two copies and adds what the others would.
//
// Why that is exact. A copy's walk reaches the same leaves and adds the
// same number k of Poisson-sampled Gaussians (the sum of their
// multiplicities) whatever the state, if it passes; its SelfComposed
// overflow checks depend on e alone. Each Poisson leaf is compared with
// (q, z) when n > 0, then assigns (q, z). If copies 1 and 2 passed:
//   - k > 0: n ≥ k > 0 before every leaf of copy 2 and later, so copy 2
//     checked every leaf against (q, z) and its assignments changed
//     nothing; copies 3, 4, … meet the same (q, z), pass the same checks
//     and only add k to n.
//   - k = 0: n never moves; copy 2 started from the state copy 1 left
//     and made the same comparisons and assignments, so it left that
//     state again, and so does every later copy.
//
// A leaf's check n > MaxInt − times fails exactly when the running total
// would pass math.MaxInt; totals only grow, so some check of copies 3 …
// count fails iff n₂ + (count − 2)·k > math.MaxInt.
func (w *poissonWalk) addCopies(e Event, count int) {
	if count <= 0 {
		return
	}
	w.add(e)
	if count == 1 || w.bad {
		return
	}
	n1 := w.n
	w.add(e)
	if count == 2 || w.bad {
		return
	}
	k, rest := w.n-n1, count-2
	if k > 0 && rest > (math.MaxInt-w.n)/k {
		w.bad = true
		return
	}
	w.n += rest * k
}

// memo is a bounded map from the inputs of a deterministic function to
// its output, safe for concurrent use. When it holds max entries, the
// next put empties it first: callers keep what they need themselves, so
// a lost entry costs one recomputation, never a different answer.
type memo[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int
}

// get returns the value stored for k, if any.
func (c *memo[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// put stores v for k, first emptying a full memo.
func (c *memo[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
}
