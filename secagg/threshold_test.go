package secagg

import (
	"errors"
	"math/rand/v2"
	"slices"
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
			t.Fatalf("CloseAdvertise: %v", err)
		}
		if _, err := h.srv.Keys(4); !errors.Is(err, ErrTooFewSurvivors) {
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
