package job

import (
	"errors"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/storage"
)

// A privacy unit's budget is shared: jobs are admitted while their planned
// rounds fit in what is left, and the unit's spend is the union of their
// ledgers.
func TestPrivacyUnitSharesBudget(t *testing.T) {
	m := manager(t)
	ev := accounting.PoissonSampled{SamplingProbability: 0.1, Event: accounting.Gaussian{NoiseMultiplier: 1}}
	at := func(n int) float64 {
		r, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: ev, Count: n}}, 1e-6)
		if err != nil {
			t.Fatal(err)
		}
		return r.Epsilon()
	}
	budget := (at(15) + at(16)) / 2 // room for exactly 15 rounds
	if _, err := m.CreateUnit("fmnist", budget, 1e-6); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateUnit("fmnist", 100, 1e-6); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("re-created unit: %v", err)
	}
	var ve *ValidationError
	if _, err := m.CreateUnit("x", -1, 1e-6); !errors.As(err, &ve) || ve.Field != "epsilon_budget" {
		t.Fatalf("negative budget: %v", err)
	}
	onUnit := func(unit string, rounds int) func(*Spec) {
		return func(s *Spec) { s.DP.PrivacyUnit, s.Rounds = unit, rounds }
	}
	if _, err := m.Submit(small(t, onUnit("nope", 3))); !errors.As(err, &ve) || ve.Field != "dp.privacy_unit" {
		t.Fatalf("unknown unit: %v", err)
	}

	a := runToEnd(t, m, small(t, onUnit("fmnist", 10)))
	if a.State != storage.StateCompleted || a.Spec.DP.Delta != 1e-6 {
		t.Fatalf("job A: %s (%s), δ %v", a.State, a.Message, a.Spec.DP.Delta)
	}
	_, err := m.Submit(small(t, onUnit("fmnist", 10)))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "remaining") {
		t.Fatalf("job B (does not fit): %v", err)
	}
	c := runToEnd(t, m, small(t, onUnit("fmnist", 5)))
	if c.State != storage.StateCompleted {
		t.Fatalf("job C: %s (%s)", c.State, c.Message)
	}
	rep, err := m.Unit("fmnist")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 15 || len(rep.Jobs) != 2 || *rep.Epsilon > budget || rep.Remaining < 0 {
		t.Fatalf("unit report %+v", rep)
	}
	if want := at(15); *rep.Epsilon != want {
		t.Fatalf("unit ε %v, want the ε of its 15 events %v", *rep.Epsilon, want)
	}
	// A fresh manager (a restarted server) rebuilds the unit from the ledgers.
	m2 := NewManager(m.db, Options{DataDir: m.dataDir, Logger: m.log})
	if rep2, err := m2.Unit("fmnist"); err != nil || rep2.Events != 15 {
		t.Fatalf("after restart: %+v, %v", rep2, err)
	}
}
