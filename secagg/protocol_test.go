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
			if d := h.drop[id]; (d == stay || d > min) && !h.aborted[id] {
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

// TestExactSum runs random instances (random n, graph, threshold, d and
// dropout schedule) and checks the unmasked sum against the plaintext sum
// of U3's inputs mod 2^32, bit for bit, and the reported survivors and
// dropouts against the schedule.
func TestExactSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	trials, maxN := 40, 40
	if testing.Short() {
		trials = 16
	} else {
		maxN = 120
	}
	dims := []int{0, 1, 7, 17, 1000}
	succeeded := 0
	for trial := range trials {
		n := 2 + rng.IntN(maxN-1)
		d := dims[rng.IntN(len(dims))]
		cfg := ServerConfig{Session: fmt.Appendf(nil, "exact %d", trial), Dim: d, DropoutRate: 0.1}
		if trial%2 == 0 {
			cfg.Params = randomParams(rng, n)
		}
		drop := map[ClientID]dropStage{}
		rate := []float64{0, 0.05, 0.15}[rng.IntN(3)]
		for id := 1; id <= n; id++ {
			if rng.Float64() < rate {
				drop[ClientID(id)] = dropStage(1 + rng.IntN(4))
			}
		}
		// Keep U1 large enough for the forced params.
		for id := 1; id <= n; id++ {
			if drop[ClientID(id)] == dropBeforeAdv {
				delete(drop, ClientID(id))
			}
		}
		if trial%4 == 1 && n > 3 {
			drop[ClientID(n)] = dropBeforeAdv // U1 = n−1 clients, ChooseParams
		}
		h := newHarness(t, cfg, testInputs(rng, n, d), drop)
		name := fmt.Sprintf("trial %d: n=%d d=%d", trial, n, d)
		if err := h.advertise(); err != nil {
			t.Fatalf("%s: CloseAdvertise: %v", name, err)
		}
		name += fmt.Sprintf(" params=%+v", h.srv.params)
		var res Result
		err := h.shareKeys()
		if err == nil {
			if err = h.maskedInput(); err == nil {
				h.unmask()
				res, err = h.srv.Finish()
			}
		}
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
			if d := drop[id]; (d == stay || d == dropBeforeUnmask) && !h.aborted[id] {
				u3 = append(u3, id)
			} else {
				dropped = append(dropped, id)
			}
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
}
