package secagg

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestBelowThreshold checks that every way of losing too many clients
// aborts with ErrTooFewSurvivors and yields no sum.
func TestBelowThreshold(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n, d = 10, 5
	complete := Params{Neighbors: n - 1, Threshold: 6}
	drops := func(stage dropStage, ids ...ClientID) map[ClientID]dropStage {
		m := map[ClientID]dropStage{}
		for _, id := range ids {
			m[id] = stage
		}
		return m
	}
	t.Run("U1 below MinClients", func(t *testing.T) {
		h := newHarness(t, ServerConfig{Dim: d, MinClients: 8}, testInputs(rng, n, d), drops(dropBeforeAdv, 1, 2, 3))
		if err := h.advertise(); !errors.Is(err, ErrTooFewSurvivors) {
			t.Fatalf("CloseAdvertiseKeys: %v", err)
		}
		if _, err := h.srv.ShareKeysRequest(4); !errors.Is(err, ErrTooFewSurvivors) {
			t.Fatalf("Keys after abort: %v", err)
		}
	})
	t.Run("U2 below t", func(t *testing.T) {
		h := newHarness(t, ServerConfig{Dim: d, Params: complete}, testInputs(rng, n, d), drops(dropBeforeShare, 1, 2, 3, 4, 5))
		if _, err := h.run(); !errors.Is(err, ErrTooFewSurvivors) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("U3 below t", func(t *testing.T) {
		h := newHarness(t, ServerConfig{Dim: d, Params: complete}, testInputs(rng, n, d), drops(dropBeforeMasked, 1, 2, 3, 4, 5))
		res, err := h.run()
		if !errors.Is(err, ErrTooFewSurvivors) || res.Sum != nil {
			t.Fatalf("got %v, sum %v", err, res.Sum)
		}
		if res, err := h.srv.Finish(); err == nil || res.Sum != nil {
			t.Fatal("Finish after an aborted round 2 returned a sum")
		}
	})
	t.Run("U3 below MinClients", func(t *testing.T) {
		h := newHarness(t, ServerConfig{Dim: d, MinClients: 9, Params: Params{Neighbors: n - 1, Threshold: 2}}, testInputs(rng, n, d), drops(dropBeforeMasked, 1, 2))
		if _, err := h.run(); !errors.Is(err, ErrTooFewSurvivors) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("too few unmask answers", func(t *testing.T) {
		// All ten send inputs but only five answer round 4: b_u has 5 < 6
		// shares. No sum; once a sixth answers, Finish succeeds.
		h := newHarness(t, ServerConfig{Dim: d, Params: complete}, testInputs(rng, n, d), drops(dropBeforeUnmask, 1, 2, 3, 4, 5))
		res, err := h.run()
		if !errors.Is(err, ErrTooFewSurvivors) || res.Sum != nil {
			t.Fatalf("got %v, sum %v", err, res.Sum)
		}
		req, _ := h.srv.UnmaskRequest(1)
		um, err := h.clients[1].Unmask(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.srv.Unmask(um); err != nil {
			t.Fatal(err)
		}
		res, err = h.srv.Finish()
		if err != nil || !slices.Equal(res.Sum, h.plainSum(res.Survivors)) || len(res.Survivors) != n {
			t.Fatalf("after a sixth answer: %v", err)
		}
	})
	t.Run("dropped client's key below t", func(t *testing.T) {
		// 3 drop before masked input (U3 = 7 ≥ t), but only 5 of the 7
		// answer: the dropped clients' mask keys have 5 < 6 shares.
		drop := drops(dropBeforeMasked, 1, 2, 3)
		drop[4], drop[5] = dropBeforeUnmask, dropBeforeUnmask
		h := newHarness(t, ServerConfig{Dim: d, Params: complete}, testInputs(rng, n, d), drop)
		if res, err := h.run(); !errors.Is(err, ErrTooFewSurvivors) || res.Sum != nil {
			t.Fatalf("got %v", err)
		}
	})
}

// TestBadMaskKeyShare has a holder send a well-formed but wrong share of a
// dropped client's mask key: the reconstructed key does not match the
// advertised one, so Finish fails, naming the dropped client, with no sum.
func TestBadMaskKeyShare(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n, d = 6, 4
	h := newHarness(t, ServerConfig{Dim: d, Params: Params{Neighbors: n - 1, Threshold: 3}}, testInputs(rng, n, d), map[ClientID]dropStage{6: dropBeforeMasked})
	h.hook = func(round int, open bool) {
		if round != 4 || !open {
			return
		}
		req, _ := h.srv.UnmaskRequest(1)
		um, err := h.clients[1].Unmask(req)
		if err != nil || len(um.MaskKeyShares) != 1 {
			t.Fatalf("client 1's unmask: %v, %d mask-key shares", err, len(um.MaskKeyShares))
		}
		um.MaskKeyShares[0].Value = um.SelfShares[0].Value // a valid scalar, the wrong one
		if err := h.srv.Unmask(um); err != nil {
			t.Fatal(err)
		}
		h.drop[1] = dropBeforeUnmask // its (bad) answer is in
	}
	res, err := h.run()
	if err == nil || res.Sum != nil || !strings.Contains(err.Error(), "client 6") {
		t.Fatalf("got %v with sum %v, want an error naming client 6 and no sum", err, res.Sum)
	}
}

// TestExactSumChosenSparse runs an instance on the sparse graph that
// ChooseParams picks (n = 60 without dropouts; under the long run also
// n = 300 at 10% dropout), checking the exact sum.
func TestExactSumChosenSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	cases := []struct {
		n    int
		rate float64
	}{{60, 0}}
	if !testing.Short() {
		cases = append(cases, struct {
			n    int
			rate float64
		}{300, 0.1})
	}
	for _, c := range cases {
		drop := map[ClientID]dropStage{}
		for id := 1; id <= c.n; id++ {
			if rng.Float64() < c.rate/2 {
				drop[ClientID(id)] = dropStage(2 + rng.IntN(3))
			}
		}
		h := newHarness(t, ServerConfig{Dim: 7, DropoutRate: c.rate}, testInputs(rng, c.n, 7), drop)
		res, err := h.run()
		if err != nil {
			t.Fatal(err)
		}
		if p := h.srv.Params(); p.Neighbors >= c.n-1 {
			t.Fatalf("n=%d: expected a sparse graph, got %+v", c.n, p)
		}
		if !slices.Equal(res.Sum, h.plainSum(res.Survivors)) {
			t.Fatalf("n=%d: wrong sum", c.n)
		}
		t.Logf("n=%d δ=%v: %+v, %d survivors", c.n, c.rate, h.srv.Params(), len(res.Survivors))
	}
}
