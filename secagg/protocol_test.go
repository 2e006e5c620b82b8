package secagg

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// testInputs draws n full-range random input vectors of length d for IDs
// 1..n (test data only, so PCG is fine).
func testInputs(rng *rand.Rand, n, d int) map[ClientID][]uint32 {
	in := make(map[ClientID][]uint32, n)
	for id := 1; id <= n; id++ {
		x := make([]uint32, d)
		for i := range x {
			x[i] = rng.Uint32()
		}
		in[ClientID(id)] = x
	}
	return in
}

// randomParams draws a valid (k, t) for n clients: the complete graph or
// an even k ≤ n−2, and t in [2, k+1].
func randomParams(rng *rand.Rand, n int) Params {
	k := n - 1
	if n >= 4 && rng.IntN(2) == 0 {
		k = 2 + 2*rng.IntN((n-2)/2)
	}
	return Params{Neighbors: k, Threshold: 2 + rng.IntN(k)}
}

// expectSuccess predicts from the schedule and the drawn graph whether the
// instance must finish: every round keeps enough clients, and every secret
// the server needs has t holders that answer the unmask request. It
// mirrors the protocol's rules, not its code.
func expectSuccess(h *harness) bool {
	s := h.srv
	t := s.params.Threshold
	need := max(h.cfg.MinClients, t, 2)
	count := func(min dropStage) (ids []ClientID) {
		for _, id := range s.g.ids {
			if d := h.drop[id]; (d == stay || d > min) && !h.aborted(id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	u2, u3 := count(dropBeforeShare), count(dropBeforeMasked)
	if len(u2) < need || len(u3) < need {
		return false
	}
	for _, u := range u2 {
		holders := 0
		for _, v := range u3 {
			if h.drop[v] == stay && (v == u || s.g.adjacent(s.g.index[u], s.g.index[v])) {
				holders++
			}
		}
		if holders < t {
			return false
		}
	}
	return true
}

// exactSumTrial is one random instance of TestExactSum: n clients, the
// params (zero: ChooseParams), the dimension and the dropout schedule.
type exactSumTrial struct {
	n, d   int
	params Params
	drop   map[ClientID]dropStage
}

// newExactSumTrial draws trial number trial. Every other trial forces
// random params; the others let ChooseParams pick them for U1. Large n
// (up to maxN) come only with a sparse graph of at most 16 neighbours:
// the sum's exactness depends on the graph, the threshold and who drops
// when, not on n, while the cost of an instance grows as n·k key
// agreements (n² on the complete graph).
func newExactSumTrial(rng *rand.Rand, trial, maxN int) exactSumTrial {
	tr := exactSumTrial{n: 2 + rng.IntN(39), d: []int{0, 1, 7, 17, 1000}[rng.IntN(5)], drop: map[ClientID]dropStage{}}
	if trial%2 == 0 {
		tr.params = randomParams(rng, tr.n)
	}
	if maxN > 40 && trial%4 == 2 {
		tr.n = 41 + rng.IntN(maxN-40)
		k := 2 + 2*rng.IntN(8)
		tr.params = Params{Neighbors: k, Threshold: 2 + rng.IntN(k)}
	}
	rate := []float64{0, 0.05, 0.15}[rng.IntN(3)]
	for id := 1; id <= tr.n; id++ {
		if rng.Float64() < rate {
			// After advertising: U1 keeps the size the forced params need.
			tr.drop[ClientID(id)] = dropStage(2 + rng.IntN(3))
		}
	}
	if trial%4 == 1 && tr.n > 3 {
		tr.drop[ClientID(tr.n)] = dropBeforeAdv // U1 = n−1 clients, ChooseParams
	}
	return tr
}

// TestExactSum runs random instances (random n, graph, threshold, d and
// dropout schedule) and checks the unmasked sum against the plaintext sum
// of U3's inputs mod 2^32, bit for bit, and the reported survivors and
// dropouts against the schedule; every other trial's clients share a
// PairCache, as simulated ones do (a dropped client's pairwise masks,
// which the server rebuilds with uncached agreements, cancel only if the
// cached keys are the true ones). It also checks that the finished
// instances covered, on the complete and on a sparse graph, a client
// dropping at each stage, so that fewer or smaller trials cannot quietly
// prove less.
func TestExactSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trials, maxN := 40, 120
	if testing.Short() {
		trials, maxN = 24, 40
	}
	succeeded := 0
	covered := map[[2]int]bool{} // {sparse, drop stage} of finished instances
	for trial := range trials {
		tr := newExactSumTrial(rng, trial, maxN)
		cfg := ServerConfig{Session: fmt.Appendf(nil, "exact %d", trial), Dim: tr.d, DropoutRate: 0.1, Params: tr.params, Workers: 2}
		h := newHarness(t, cfg, testInputs(rng, tr.n, tr.d), tr.drop)
		name := fmt.Sprintf("trial %d: n=%d d=%d", trial, tr.n, tr.d)
		if trial%2 == 1 {
			pairs := new(PairCache)
			for _, c := range h.mem.Clients {
				c.Pairs = pairs
			}
			name += " (pair cache)"
		}
		if err := h.advertise(); err != nil {
			t.Fatalf("%s: CloseAdvertiseKeys: %v", name, err)
		}
		name += fmt.Sprintf(" params=%+v", h.srv.Params())
		res, err := h.finishRun()
		want := expectSuccess(h)
		if err != nil {
			if !errors.Is(err, ErrTooFewSurvivors) || want {
				t.Fatalf("%s: got error %v, want success = %v", name, err, want)
			}
			if res.Sum != nil {
				t.Fatalf("%s: sum returned on abort", name)
			}
			continue
		}
		if !want {
			t.Fatalf("%s: finished although a secret lacked t answering holders", name)
		}
		succeeded++
		var u3, dropped []ClientID
		for _, id := range h.srv.g.ids {
			if d := tr.drop[id]; (d == stay || d == dropBeforeUnmask) && !h.aborted(id) {
				u3 = append(u3, id)
			} else {
				dropped = append(dropped, id)
			}
			sparse := 0
			if !h.srv.g.complete() {
				sparse = 1
			}
			covered[[2]int{sparse, int(tr.drop[id])}] = true
		}
		if !slices.Equal(res.Survivors, u3) || !slices.Equal(res.Dropped, dropped) {
			t.Fatalf("%s: survivors %v dropped %v, want %v and %v", name, res.Survivors, res.Dropped, u3, dropped)
		}
		if w := h.plainSum(u3); !slices.Equal(res.Sum, w) {
			t.Fatalf("%s: sum differs from the plaintext sum of U3", name)
		}
	}
	t.Logf("%d of %d instances finished, the others aborted as predicted", succeeded, trials)
	if succeeded < trials/2 {
		t.Fatalf("only %d of %d instances finished; the schedules are too harsh to test much", succeeded, trials)
	}
	for _, sparse := range []int{0, 1} {
		for _, d := range []dropStage{dropBeforeShare, dropBeforeMasked, dropBeforeUnmask} {
			if !covered[[2]int{sparse, int(d)}] {
				t.Errorf("no finished instance (sparse graph: %v) had a client with drop stage %d", sparse == 1, d)
			}
		}
	}
}

// finishRun runs the stages after advertise_keys and Finish, stopping at
// the first error.
func (h *harness) finishRun() (Result, error) {
	for _, st := range Stages[1:] {
		if err := h.stage(st); err != nil {
			return Result{}, err
		}
	}
	return h.srv.Finish()
}
