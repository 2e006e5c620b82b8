package accounting

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/accounting/pld"
)

// demoEvent is the round event of examples/demo-job.json: Poisson
// sampling at q = 0.02 of the Gaussian mechanism with z = 1.
var demoEvent = PoissonSampled{SamplingProbability: 0.02, Event: Gaussian{NoiseMultiplier: 1}}

// sameEstimate reports how a differs from b, "" when they are identical:
// same accountant, validity, note, order and ε to the bit (or both absent).
func sameEstimate(a, b Estimate) string {
	switch {
	case a.Accountant != b.Accountant || a.Valid != b.Valid || a.Note != b.Note:
		return fmt.Sprintf("%+v vs %+v", a, b)
	case math.Float64bits(a.Order) != math.Float64bits(b.Order):
		return fmt.Sprintf("%s order %v vs %v", a.Accountant, a.Order, b.Order)
	case (a.Epsilon == nil) != (b.Epsilon == nil):
		return fmt.Sprintf("%s ε %v vs %v", a.Accountant, a.Epsilon, b.Epsilon)
	case a.Epsilon != nil && math.Float64bits(*a.Epsilon) != math.Float64bits(*b.Epsilon):
		return fmt.Sprintf("%s ε %.17g vs %.17g", a.Accountant, *a.Epsilon, *b.Epsilon)
	}
	return ""
}

// sameReport reports how a differs from b, "" when they are identical.
func sameReport(a, b Report) string {
	if math.Float64bits(a.Delta) != math.Float64bits(b.Delta) {
		return fmt.Sprintf("δ %v vs %v", a.Delta, b.Delta)
	}
	for _, p := range [][2]Estimate{{a.RDP, b.RDP}, {a.PLD, b.PLD}, {a.Best, b.Best}} {
		if d := sameEstimate(p[0], p[1]); d != "" {
			return d
		}
	}
	return ""
}

// checkAgainstAccount fails unless acc's Epsilon at delta is, bit for bit,
// the frozen pre-Accountant Account's (refAccount) and today's Account's
// over events, errors included.
func checkAgainstAccount(t *testing.T, name string, acc *Accountant, events []Event, delta float64) Report {
	t.Helper()
	want, werr := refAccount(events, delta)
	now, nerr := Account(events, delta)
	got, gerr := acc.Epsilon(delta)
	if (werr != nil) != (gerr != nil) || (werr != nil) != (nerr != nil) {
		t.Fatalf("%s: errors: reference %v, Account %v, Accountant %v", name, werr, nerr, gerr)
	}
	if werr != nil {
		return got
	}
	if d := sameReport(now, want); d != "" {
		t.Fatalf("%s at δ=%g: Account drifted from the reference: %s", name, delta, d)
	}
	if d := sameReport(got, want); d != "" {
		t.Fatalf("%s at δ=%g: Accountant differs from Account: %s", name, delta, d)
	}
	// The reference predates method names: Account's and Accountant's
	// reports name PLDMethod alike.
	if now.PLDMethod != PLDMethod || got.PLDMethod != PLDMethod {
		t.Fatalf("%s at δ=%g: PLD methods %q (Account), %q (Accountant)", name, delta, now.PLDMethod, got.PLDMethod)
	}
	return got
}

// TestAccountantMatchesAccountRoundByRound composes the demo event one
// round at a time, as a job's ledger does, and compares every round with
// Account over the whole ledger, at the job's δ and at one where the PLD
// accountant declines (δ < 1e-12), and the budget check's EpsilonWith
// with Account over one more event.
func TestAccountantMatchesAccountRoundByRound(t *testing.T) {
	acc := NewAccountant()
	var events []Event
	checkAgainstAccount(t, "no events", acc, events, 1e-5)
	for T := 1; T <= 40; T++ {
		if err := acc.Compose(demoEvent, 1); err != nil {
			t.Fatal(err)
		}
		events = append(events, demoEvent)
		rep := checkAgainstAccount(t, fmt.Sprintf("T=%d", T), acc, events, 1e-5)
		if !rep.PLD.Valid || rep.Best.Accountant != "pld" || rep.RDP.Order == 0 {
			t.Fatalf("T=%d: %+v: want a valid PLD estimate, tighter than RDP", T, rep)
		}
		if T%10 == 0 {
			checkAgainstAccount(t, fmt.Sprintf("T=%d", T), acc, events, 1e-13)
		}
		next, err := acc.EpsilonWith(demoEvent, 1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := refAccount(append(events[:len(events):len(events)], demoEvent), 1e-5)
		if d := sameReport(next, want); d != "" {
			t.Fatalf("T=%d: EpsilonWith differs from Account over T+1 events: %s", T, d)
		}
	}
}

// TestAccountantLongLedger checks rounds 299–301 and 1000 of the demo
// event, composed in bulk and one at a time: the demo job's last rounds,
// and a count where RDP's rounding would show if counts were summed
// round by round.
func TestAccountantLongLedger(t *testing.T) {
	acc := NewAccountant()
	if err := acc.Compose(demoEvent, 298); err != nil {
		t.Fatal(err)
	}
	events := make([]Event, 298, 1000)
	for i := range events {
		events[i] = demoEvent
	}
	for range 3 {
		acc.Compose(demoEvent, 1)
		events = append(events, demoEvent)
		checkAgainstAccount(t, fmt.Sprintf("T=%d", len(events)), acc, events, 1e-5)
	}
	// Round 300 of the demo: (2.2, 1e-5), README's figure.
	rep, _ := Account(events[:300], 1e-5)
	if math.Abs(rep.Epsilon()-2.2) > 0.005 || rep.Best.Accountant != "pld" {
		t.Fatalf("ε after 300 demo rounds = %v (%s), want 2.20 (pld)", rep.Epsilon(), rep.Best.Accountant)
	}
	acc.Compose(demoEvent, 1000-len(events))
	for len(events) < 1000 {
		events = append(events, demoEvent)
	}
	checkAgainstAccount(t, "T=1000", acc, events, 1e-5)
}

// ledgerCorpus are the events the mixed-ledger tests draw from: every
// event type, nested SelfComposed/Composed, zero counts, and the
// homogeneity scan's corner cases.
var ledgerCorpus = []Event{
	demoEvent,
	SelfComposed{Event: demoEvent, Count: 3},
	Composed{Events: []Event{demoEvent, NoOp{}, SelfComposed{Event: demoEvent, Count: 2}}},
	PoissonSampled{SamplingProbability: 0.05, Event: Gaussian{NoiseMultiplier: 1.3}},
	Gaussian{NoiseMultiplier: 4},
	SampledWithoutReplacement{SourceDatasetSize: 1000, SampleSize: 20, Event: Gaussian{NoiseMultiplier: 1.1}},
	NoOp{},
	Composed{},
	SelfComposed{Event: Composed{Events: []Event{NoOp{}, SelfComposed{Event: demoEvent, Count: 0}}}, Count: 5},
	// A zero-count Poisson event of other parameters: the scan adopts
	// its (q, z) while it has counted nothing, and refuses it after.
	SelfComposed{Event: PoissonSampled{SamplingProbability: 0.5, Event: Gaussian{NoiseMultiplier: 2}}, Count: 0},
	// RDP skips zero-count sub-events without looking at them, so this
	// unsupported sampled event is accepted under a zero count.
	SelfComposed{Event: PoissonSampled{SamplingProbability: 0.1, Event: Composed{}}, Count: 0},
	Composed{Events: []Event{SelfComposed{Event: PoissonSampled{SamplingProbability: 0.5, Event: Gaussian{NoiseMultiplier: 2}}, Count: 0}, demoEvent}},
}

// TestAccountantMatchesAccountMixed composes random ledgers drawn from
// ledgerCorpus, in bulk (Compose(e, k)) and one at a time, and compares
// Epsilon with Account over the expanded ledger at two δ.
func TestAccountantMatchesAccountMixed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		acc := NewAccountant()
		var events []Event
		var desc []string
		// Mostly homogeneous ledgers (the PLD path), some mixed.
		pool := ledgerCorpus
		if trial%3 != 0 {
			pool = []Event{demoEvent, ledgerCorpus[1], ledgerCorpus[2], NoOp{}, Composed{}, ledgerCorpus[8], ledgerCorpus[9], ledgerCorpus[11]}
		}
		for range 1 + rng.IntN(5) {
			e := pool[rng.IntN(len(pool))]
			k := rng.IntN(4)
			if err := acc.Compose(e, k); err != nil {
				t.Fatalf("trial %d: Compose(%v, %d): %v", trial, e, k, err)
			}
			for range k {
				events = append(events, e)
			}
			desc = append(desc, fmt.Sprintf("%d×%T", k, e))
		}
		name := fmt.Sprintf("trial %d (%s)", trial, strings.Join(desc, ", "))
		checkAgainstAccount(t, name, acc, events, 1e-5)
		if trial%5 == 0 {
			checkAgainstAccount(t, name, acc, events, 0.3)
		}
	}
}

// TestAccountantSpecialLedgers covers the ledgers whose Report is fixed
// by rule: none (ε = 0 from both), NoOps only, a NonPrivate release
// (ε = +Inf, no PLD), and events the PLD accountant does not cover.
func TestAccountantSpecialLedgers(t *testing.T) {
	cases := []struct {
		name    string
		events  []Event
		eps     float64
		best    string
		pldNote string
	}{
		{"empty", nil, 0, "rdp", ""}, // a tie keeps RDP
		{"no-ops", []Event{NoOp{}, Composed{}, SelfComposed{Event: demoEvent, Count: 0}}, 0, "rdp", ""},
		{"non-private", []Event{demoEvent, NonPrivate{}}, math.Inf(1), "rdp", "covers only"},
		{"gaussian", []Event{Gaussian{NoiseMultiplier: 4}}, -1, "rdp", "covers only"},
		{"two rates", []Event{demoEvent, ledgerCorpus[3]}, -1, "rdp", "covers only"},
	}
	for _, c := range cases {
		acc := NewAccountant()
		for _, e := range c.events {
			if err := acc.Compose(e, 1); err != nil {
				t.Fatal(err)
			}
		}
		rep := checkAgainstAccount(t, c.name, acc, c.events, 1e-5)
		if c.eps >= 0 && rep.Epsilon() != c.eps || rep.Best.Accountant != c.best || !strings.Contains(rep.PLD.Note, c.pldNote) {
			t.Fatalf("%s: ε %v by %s, PLD note %q; want %v by %s, note containing %q", c.name, rep.Epsilon(), rep.Best.Accountant, rep.PLD.Note, c.eps, c.best, c.pldNote)
		}
	}
}

// TestAccountantGaussianClosedForm checks the RDP path against the closed
// form of the Gaussian mechanism: T rounds at noise z have RDP
// T·α/(2z²) (Mironov 2017, Prop. 7), converted at each order by the
// bound of Canonne, Kamath, Steinke 2020, Prop. 12, minimised over the
// orders by brute force here.
func TestAccountantGaussianClosedForm(t *testing.T) {
	const z, T, delta = 4.0, 37, 1e-6
	acc := NewAccountant()
	for range T {
		acc.Compose(Gaussian{NoiseMultiplier: z}, 1)
	}
	rep, err := acc.Epsilon(delta)
	if err != nil {
		t.Fatal(err)
	}
	want, wantOrder := math.Inf(1), 0.0
	for _, a := range DefaultOrders() {
		r := T * a / (2 * z * z)
		if e := r + math.Log((a-1)/a) - (math.Log(delta)+math.Log(a))/(a-1); e < want {
			want, wantOrder = e, a
		}
	}
	if math.Abs(*rep.RDP.Epsilon-want) > 1e-12*want || rep.RDP.Order != wantOrder {
		t.Fatalf("RDP ε %v at α = %v, want %v at α = %v", *rep.RDP.Epsilon, rep.RDP.Order, want, wantOrder)
	}
}

// TestAccountantOrderIndependence composes one multiset of events in
// several orders. Each order gives Account's Report for that order
// exactly. Across orders the PLD estimate is identical (it sees only the
// count) and RDP equal up to the rounding of the sum over distinct
// events, which Account has too (≤ 1e-12 relative).
func TestAccountantOrderIndependence(t *testing.T) {
	base := []Event{demoEvent, ledgerCorpus[1], ledgerCorpus[2], demoEvent, ledgerCorpus[8], Composed{}, demoEvent}
	mixed := []Event{demoEvent, Gaussian{NoiseMultiplier: 4}, ledgerCorpus[5], ledgerCorpus[3], demoEvent, ledgerCorpus[1]}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, events := range [][]Event{base, mixed} {
		var first Report
		for p := range 6 {
			perm := append([]Event(nil), events...)
			if p > 0 {
				rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			}
			acc := NewAccountant()
			for _, e := range perm {
				acc.Compose(e, 1)
			}
			rep := checkAgainstAccount(t, fmt.Sprintf("permutation %d", p), acc, perm, 1e-5)
			if p == 0 {
				first = rep
				continue
			}
			if d := sameEstimate(rep.PLD, first.PLD); d != "" {
				t.Fatalf("permutation %d: PLD %s", p, d)
			}
			if a, b := *rep.RDP.Epsilon, *first.RDP.Epsilon; math.Abs(a-b) > 1e-12*b || rep.RDP.Order != first.RDP.Order {
				t.Fatalf("permutation %d: RDP ε %v at α %v, first order %v at α %v", p, a, rep.RDP.Order, b, first.RDP.Order)
			}
		}
	}
}

// TestAccountantEpsilonWith checks that EpsilonWith(e, k) is Compose(e, k)
// then Epsilon, on a clone, and that neither it nor a clone's Compose
// changes the original.
func TestAccountantEpsilonWith(t *testing.T) {
	acc := NewAccountant()
	acc.Compose(demoEvent, 5)
	acc.Compose(NoOp{}, 1)
	before, _ := acc.Epsilon(1e-5)
	for _, c := range []struct {
		e Event
		k int
	}{{demoEvent, 1}, {demoEvent, 0}, {demoEvent, 3}, {ledgerCorpus[3], 1}, {SelfComposed{Event: demoEvent, Count: 2}, 2}, {NonPrivate{}, 1}, {ledgerCorpus[9], 4}} {
		with, err := acc.EpsilonWith(c.e, c.k, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		clone := acc.Clone()
		if err := clone.Compose(c.e, c.k); err != nil {
			t.Fatal(err)
		}
		composed, _ := clone.Epsilon(1e-5)
		if d := sameReport(with, composed); d != "" {
			t.Fatalf("EpsilonWith(%v, %d) differs from Compose then Epsilon: %s", c.e, c.k, d)
		}
		after, _ := acc.Epsilon(1e-5)
		if d := sameReport(after, before); d != "" {
			t.Fatalf("EpsilonWith(%v, %d) or a clone's Compose changed the accountant: %s", c.e, c.k, d)
		}
	}
	events := []Event{demoEvent, demoEvent, demoEvent, demoEvent, demoEvent, NoOp{}}
	checkAgainstAccount(t, "after EpsilonWith", acc, events, 1e-5)
}

// TestAccountantErrors checks that refused compositions are refused as
// Account refuses the ledger, and change nothing.
func TestAccountantErrors(t *testing.T) {
	acc := NewAccountant()
	acc.Compose(demoEvent, 2)
	before, _ := acc.Epsilon(1e-5)
	bad := []struct {
		e Event
		k int
	}{
		{demoEvent, -1},
		{Gaussian{NoiseMultiplier: 0}, 1},
		{PoissonSampled{SamplingProbability: 1.5, Event: Gaussian{NoiseMultiplier: 1}}, 1},
		{nil, 1},
		{PoissonSampled{SamplingProbability: 0.1, Event: SelfComposed{Event: Gaussian{NoiseMultiplier: 1}, Count: 2}}, 1},
		{demoEvent, math.MaxInt},
	}
	for _, c := range bad {
		if err := acc.Compose(c.e, c.k); err == nil {
			t.Fatalf("Compose(%v, %d) accepted", c.e, c.k)
		}
		if _, err := acc.EpsilonWith(c.e, c.k, 1e-5); err == nil {
			t.Fatalf("EpsilonWith(%v, %d) accepted", c.e, c.k)
		}
		if c.k == 1 && c.e != nil {
			if _, err := Account([]Event{demoEvent, c.e}, 1e-5); err == nil {
				t.Fatalf("Account accepts %v, which Compose refuses", c.e)
			}
		}
		after, _ := acc.Epsilon(1e-5)
		if d := sameReport(after, before); d != "" {
			t.Fatalf("refused Compose(%v, %d) changed the accountant: %s", c.e, c.k, d)
		}
	}
	for _, d := range []float64{0, 1, -1, math.NaN()} {
		if _, err := acc.Epsilon(d); err == nil {
			t.Fatalf("Epsilon(%v) accepted", d)
		}
	}
}

// TestPoissonWalkCopies checks addCopies(e, k) against k separate adds
// for every corpus event after every corpus prefix, and its overflow
// rule against the count that first overflows int.
func TestPoissonWalkCopies(t *testing.T) {
	for _, pre := range ledgerCorpus {
		for _, e := range ledgerCorpus {
			for k := range 7 {
				var fast, slow poissonWalk
				fast.add(pre)
				slow.add(pre)
				fast.addCopies(e, k)
				for range k {
					slow.add(e)
				}
				if fast.bad != slow.bad || !fast.bad && fast != slow {
					t.Fatalf("after %v, %d × %v: addCopies %+v, one by one %+v", pre, k, e, fast, slow)
				}
			}
		}
	}
	// SelfComposed(demo, 3) adds 3 per copy: starting from n = 1, c
	// copies reach 1 + 3c, which fits iff c ≤ (MaxInt − 1)/3.
	limit := (math.MaxInt - 1) / 3
	for _, c := range []int{limit, limit + 1} {
		var w poissonWalk
		w.add(demoEvent)
		w.addCopies(ledgerCorpus[1], c)
		if w.bad != (c > limit) || !w.bad && w.n != 1+3*c {
			t.Fatalf("%d copies of 3: %+v", c, w)
		}
	}
}

// BenchmarkAccountantRound is the accounting of one round of a job's
// ledger at round T (δ = 1e-5): compose the round's event, then the
// write-ahead budget check for round T+1 (EpsilonWith), whose Report
// becomes round T+1's ε (ledgerState.append). Iteration i runs round
// T + i mod 64 from an accountant holding that many events (Compose(e, n)
// costs the same as n Compose(e, 1) calls' state, not their time) with
// pldCache emptied, so every iteration computes a PLD at a new count near
// T, as each round of a running job does, and the ledger does not drift
// past T as b.N grows; pld's own grids and spectra stay warm, as they do
// for a running job.
//
//   - pld: the demo event (Poisson q = 0.02, z = 1), where both
//     accountants run;
//   - rdp: a fixed-cohort event (SampledWithoutReplacement), RDP only;
//   - account: Account over the whole ledger plus the next event, what an
//     auditor's recomputation costs (mostly MarshalEvent of each event),
//     with pld warm; pld.BenchmarkEpsilonPoissonGaussian has its cold
//     cost.
func BenchmarkAccountantRound(b *testing.B) {
	const delta = 1e-5
	wor := SampledWithoutReplacement{SourceDatasetSize: 6000, SampleSize: 120, Event: Gaussian{NoiseMultiplier: 1}}
	for _, T := range []int{300, 1000, 10000} {
		for _, c := range []struct {
			name string
			e    Event
		}{{"pld", demoEvent}, {"rdp", wor}} {
			b.Run(fmt.Sprintf("%s/T=%d", c.name, T), func(b *testing.B) {
				var rep Report
				i := 0
				for b.Loop() {
					b.StopTimer()
					pldCache.mu.Lock()
					pldCache.m = nil
					pldCache.mu.Unlock()
					acc := NewAccountant()
					acc.Compose(c.e, T+i%64)
					i++
					b.StartTimer()
					acc.Compose(c.e, 1)
					var err error
					if rep, err = acc.EpsilonWith(c.e, 1, delta); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(rep.Epsilon(), "ε")
			})
		}
		b.Run(fmt.Sprintf("account/T=%d", T), func(b *testing.B) {
			events := make([]Event, T+66)
			for i := range events {
				events[i] = demoEvent
			}
			var rep Report
			i := 0
			for b.Loop() {
				b.StopTimer()
				pldCache.mu.Lock()
				pldCache.m = nil
				pldCache.mu.Unlock()
				b.StartTimer()
				n := T + 1 + i%64
				i++
				var err error
				if rep, err = Account(events[:n+1], delta); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rep.Epsilon(), "ε")
		})
	}
}

// BenchmarkAccountantRoundRDP is the RDP part alone at T = 10,000:
// "pld-known" repeats a count whose PLD is in pldCache, so only RDP and
// the report are computed.
func BenchmarkAccountantRoundRDP(b *testing.B) {
	const T, delta = 10000, 1e-5
	b.Run(fmt.Sprintf("pld-known/T=%d", T), func(b *testing.B) {
		acc := NewAccountant()
		acc.Compose(demoEvent, T)
		acc.EpsilonWith(demoEvent, 1, delta)
		for b.Loop() {
			if _, err := acc.EpsilonWith(demoEvent, 1, delta); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAccountantMonotone composes the demo event round by round to 1,100
// rounds, across the PLD grid's changes at powers of two, and checks that
// ε never decreases: a composition of more releases can be
// post-processed into one of fewer.
func TestAccountantMonotone(t *testing.T) {
	acc := NewAccountant()
	prev := 0.0
	for T := 1; T <= 1100; T++ {
		acc.Compose(demoEvent, 1)
		rep, err := acc.Epsilon(1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Epsilon() < prev || !rep.PLD.Valid {
			t.Fatalf("T=%d: ε = %.17g below ε(T−1) = %.17g", T, rep.Epsilon(), prev)
		}
		prev = rep.Epsilon()
	}
}

// TestAccountMethod checks that AccountMethod's PLD estimate is the named
// method's function, bit for bit, and names it; that Account is
// AccountMethod with PLDMethod; and that an unknown method is an error.
func TestAccountMethod(t *testing.T) {
	ledger := []Event{SelfComposed{Event: demoEvent, Count: 299}, demoEvent}
	for _, c := range []struct {
		method string
		fn     func(q, z float64, n int, delta float64) (float64, error)
	}{{PLDMethodV1, pld.EpsilonPoissonGaussianV1}, {PLDMethodV2, pld.EpsilonPoissonGaussian}} {
		rep, err := AccountMethod(ledger, 1e-5, c.method)
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.fn(0.02, 1, 300, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.PLD.Valid || math.Float64bits(*rep.PLD.Epsilon) != math.Float64bits(want) || rep.PLDMethod != c.method {
			t.Errorf("%s: PLD estimate %+v (%s), want ε = %.17g", c.method, rep.PLD, rep.PLDMethod, want)
		}
		// Both are upper bounds near the limit: the demo's published
		// 2.200 (README of commit 671ea47), and the Best is PLD.
		if rep.Best.Accountant != "pld" || math.Abs(want-2.2) > 0.0005 {
			t.Errorf("%s: demo ε = %v (%s), published 2.200 (pld)", c.method, want, rep.Best.Accountant)
		}
	}
	a, _ := Account(ledger, 1e-5)
	b, _ := AccountMethod(ledger, 1e-5, PLDMethod)
	if d := sameReport(a, b); d != "" || a.PLDMethod != PLDMethod || b.PLDMethod != PLDMethod {
		t.Errorf("Account differs from AccountMethod(PLDMethod): %s (methods %q, %q)", d, a.PLDMethod, b.PLDMethod)
	}
	if _, err := AccountMethod(ledger, 1e-5, "pld/0"); err == nil {
		t.Error("unknown method: no error")
	}
}

// TestAccountantFitsWith checks FitsWith against EpsilonWith's ε for
// budgets below, at and between the two estimates and above both, for a
// ledger where PLD is tighter, one where only RDP applies, and one with
// a non-private release.
func TestAccountantFitsWith(t *testing.T) {
	ledgers := map[string][]Event{
		"demo":        {SelfComposed{Event: demoEvent, Count: 50}},
		"mixed":       {demoEvent, Gaussian{NoiseMultiplier: 6}},
		"non-private": {demoEvent, NonPrivate{}},
	}
	for name, events := range ledgers {
		acc := NewAccountant()
		for _, e := range events {
			acc.Compose(e, 1)
		}
		rep, err := acc.EpsilonWith(demoEvent, 1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		budgets := []float64{0, 0.1, rep.Epsilon(), math.Nextafter(rep.Epsilon(), 0), 100, math.Inf(1), math.NaN()}
		if rep.RDP.Epsilon != nil {
			r := *rep.RDP.Epsilon
			budgets = append(budgets, r, math.Nextafter(r, 0), (r+rep.Epsilon())/2)
		}
		for _, b := range budgets {
			got, err := acc.FitsWith(demoEvent, 1, 1e-5, b)
			if want := !(rep.Epsilon() > b); err != nil || got != want {
				t.Fatalf("%s, budget %v: FitsWith %v (%v), want %v (ε = %v, RDP %v)", name, b, got, err, want, rep.Epsilon(), rep.RDP.Epsilon)
			}
		}
	}
	if _, err := NewAccountant().FitsWith(demoEvent, 1, 0, 1); err == nil {
		t.Fatal("FitsWith accepted δ = 0")
	}
}

// TestAccountantConcurrentCaches runs accountants in several goroutines
// at once over overlapping counts, so the shared caches (leafCache,
// pldCache) are read and written concurrently (run with -race), and
// checks every answer against the frozen Account.
func TestAccountantConcurrentCaches(t *testing.T) {
	pldCache.mu.Lock()
	pldCache.m = nil
	pldCache.mu.Unlock()
	errs := make(chan string, 8)
	for g := range 4 {
		go func() {
			acc := NewAccountant()
			events := []Event{}
			for T := 1; T <= 6; T++ {
				e := Event(demoEvent)
				if g%2 == 1 && T == 3 {
					e = Gaussian{NoiseMultiplier: 5}
				}
				acc.Compose(e, 1)
				events = append(events, e)
				got, _ := acc.Epsilon(1e-5)
				want, _ := refAccount(events, 1e-5)
				if d := sameReport(got, want); d != "" {
					errs <- fmt.Sprintf("goroutine %d, T=%d: %s", g, T, d)
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if d := <-errs; d != "" {
			t.Fatal(d)
		}
	}
}
