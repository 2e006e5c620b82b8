package job

import (
	"errors"
	"sync"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// storedBudgetEpsilon is ε at δ over every event stored in the ledgers of
// jobs ids, computed from the store alone (accounting.Account over the
// decoded entries), and the number of those events.
func storedBudgetEpsilon(t *testing.T, db *storage.DB, delta float64, ids ...string) (float64, int) {
	t.Helper()
	var events []accounting.Event
	for _, id := range ids {
		led, err := db.Ledger(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range led {
			ev, err := accounting.UnmarshalEvent(e.Event)
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev)
		}
	}
	if len(events) == 0 {
		return 0, 0
	}
	r, err := accounting.Account(events, delta)
	if err != nil {
		t.Fatal(err)
	}
	return r.Epsilon(), len(events)
}

// Two servers sharing one store (two Managers over one *storage.DB, each
// with its own lock and cache of the budget, as replicas on etcd have)
// charge jobs on one budget at once. Each checks against its own cache,
// which the other's charges make stale; the store's compare on the
// budget's revision makes the stale one reload, so the budget's ε over
// all stored events never passes ε_max, and it is spent to the last
// round that fits.
func TestBudgetReplicasShareBudget(t *testing.T) {
	const fit = 6 // rounds of small() that the budget has room for
	db := openDB(t)
	mA := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
	mB := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
	epsMax := (epsAfter(t, fit) + epsAfter(t, fit+1)) / 2
	if _, err := mA.CreateBudget("shared", epsMax, 1e-6); err != nil {
		t.Fatal(err)
	}
	spec := small(t, func(s *types.Spec) { s.DP.Budget, s.DP.Delta, s.Rounds = "shared", 1e-6, 10 })
	// Both jobs are stored before either charges (admission, which
	// reserves planned rounds, would refuse the second): the budget's
	// guarantee then rests on the charges alone.
	ids := []string{stored(t, mA, spec, 0, nil), stored(t, mB, spec, 0, nil)}
	managers := []*Manager{mA, mB}
	for _, m := range managers { // both caches loaded, at revision 0
		if rep, err := m.Budget("shared"); err != nil || rep.Events != 0 {
			t.Fatalf("budget before the charges: %+v, %v", rep, err)
		}
	}

	var wg sync.WaitGroup
	charged := make([]int, 2)
	stops := make([]string, 2)
	lost := make([]int, 2)
	errs := make(chan error, 2)
	for i, m := range managers {
		l, err := m.openLedger(db, ids[i], spec)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			// Round 1 again and again: each charge is one more event
			// (as when round 1 is interrupted and retried), so no round
			// needs committing between charges and they race tightly.
			for {
				stop, err := m.charge(l, spec, 1)
				switch {
				case errors.Is(err, storage.ErrUnavailable):
					lost[i]++ // lost chargeTries races in a row: a resumed job charges again
					continue
				case err != nil:
					errs <- err
					return
				case stop != "":
					stops[i] = stop
					return
				}
				charged[i]++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	eps, n := storedBudgetEpsilon(t, db, 1e-6, ids...)
	t.Logf("charges per manager %v, lost races %v, %d events stored, ε = %.4g of ε_max %.4g", charged, lost, n, eps, epsMax)
	if eps > epsMax {
		t.Fatalf("the budget's stored events spend ε = %v, past ε_max = %v (%d events; room for %d)", eps, epsMax, n, fit)
	}
	if n != fit || charged[0]+charged[1] != fit {
		t.Fatalf("%d events stored, %v charged; want the budget spent to its last round, %d", n, charged, fit)
	}
	for i, stop := range stops {
		if stop == "" {
			t.Fatalf("manager %d stopped without a reason", i)
		}
	}
	// Each manager's report now agrees with the store.
	for i, m := range managers {
		rep, err := m.Budget("shared")
		if err != nil || rep.Events != fit || rep.Epsilon == nil || *rep.Epsilon > epsMax {
			t.Fatalf("manager %d's report %+v, %v", i, rep, err)
		}
	}
}

// A manager whose cache of a budget is stale (another server charged the
// budget since it was loaded) reloads it when the store refuses its
// charge, and then refuses the round that no longer fits, instead of
// charging it on the stale spend.
func TestBudgetStaleCacheReloads(t *testing.T) {
	db := openDB(t)
	mA := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
	mB := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
	epsMax := (epsAfter(t, 3) + epsAfter(t, 4)) / 2
	if _, err := mA.CreateBudget("shared", epsMax, 1e-6); err != nil {
		t.Fatal(err)
	}
	spec := small(t, func(s *types.Spec) { s.DP.Budget, s.DP.Delta, s.Rounds = "shared", 1e-6, 10 })
	a, b := stored(t, mA, spec, 0, nil), stored(t, mB, spec, 0, nil)
	la, err := mA.openLedger(db, a, spec)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := mB.openLedger(db, b, spec)
	if err != nil {
		t.Fatal(err)
	}
	// B charges once, loading its cache; A spends the rest.
	if stop, err := mB.charge(lb, spec, 1); stop != "" || err != nil {
		t.Fatalf("B's first charge: %q, %v", stop, err)
	}
	for range 2 {
		if stop, err := mA.charge(la, spec, 1); stop != "" || err != nil {
			t.Fatalf("A's charge: %q, %v", stop, err)
		}
	}
	// B's cache holds one event; the budget has three.
	stop, err := mB.charge(lb, spec, 1)
	if err != nil || stop == "" {
		t.Fatalf("B's charge on a stale cache: %q, %v; want it refused", stop, err)
	}
	if eps, n := storedBudgetEpsilon(t, db, 1e-6, a, b); n != 3 || eps > epsMax {
		t.Fatalf("%d events stored, ε = %v of %v", n, eps, epsMax)
	}
	if c := mB.units["shared"]; c == nil || len(c.events) != 3 || c.rev != 3 {
		t.Fatalf("B's cache after the reload: %+v", c)
	}
}
