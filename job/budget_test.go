package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/storage"
)

// A shared budget is shared: jobs are admitted while their planned
// rounds fit in what is left, and the budget's spend is the union of their
// ledgers.
func TestBudgetSharesBudget(t *testing.T) {
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
	if _, err := m.CreateBudget("fmnist", budget, 1e-6); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateBudget("fmnist", 100, 1e-6); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("re-created budget: %v", err)
	}
	var ve *ValidationError
	if _, err := m.CreateBudget("x", -1, 1e-6); !errors.As(err, &ve) || ve.Field != "epsilon_budget" {
		t.Fatalf("negative budget: %v", err)
	}
	onBudget := func(budget string, rounds int) func(*types.Spec) {
		return func(s *types.Spec) { s.DP.Budget, s.Rounds = budget, rounds }
	}
	if _, err := m.Submit(small(t, onBudget("nope", 3))); !errors.As(err, &ve) || ve.Field != "dp.budget" {
		t.Fatalf("unknown budget: %v", err)
	}

	a := runToEnd(t, m, small(t, onBudget("fmnist", 10)))
	if a.State != types.StateCompleted || a.Spec.DP.Delta != 1e-6 {
		t.Fatalf("job A: %s (%s), δ %v", a.State, a.Message, a.Spec.DP.Delta)
	}
	_, err := m.Submit(small(t, onBudget("fmnist", 10)))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "remaining") {
		t.Fatalf("job B (does not fit): %v", err)
	}
	c := runToEnd(t, m, small(t, onBudget("fmnist", 5)))
	if c.State != types.StateCompleted {
		t.Fatalf("job C: %s (%s)", c.State, c.Message)
	}
	rep, err := m.Budget("fmnist")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 15 || len(rep.Jobs) != 2 || *rep.Epsilon > budget || rep.Remaining < 0 {
		t.Fatalf("budget report %+v", rep)
	}
	if want := at(15); *rep.Epsilon != want {
		t.Fatalf("budget ε %v, want the ε of its 15 events %v", *rep.Epsilon, want)
	}
	// A fresh manager (a restarted server) rebuilds the budget from the ledgers.
	m2 := restarted(t, m)
	if rep2, err := m2.Budget("fmnist"); err != nil || rep2.Events != 15 {
		t.Fatalf("after restart: %+v, %v", rep2, err)
	}
}

// unitEvent is the round event of small(): Poisson q = 0.1, z = 1.
var unitEvent = accounting.PoissonSampled{SamplingProbability: 0.1, Event: accounting.Gaussian{NoiseMultiplier: 1}}

// epsAfter is ε at δ = 1e-6 after n rounds of small().
func epsAfter(t *testing.T, n int) float64 {
	t.Helper()
	r, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: unitEvent, Count: n}}, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	return r.Epsilon()
}

// unitFor15 creates budget name with room for exactly 15 rounds of
// small() at δ = 1e-6, and returns a maker of small() jobs on it. (It
// keeps its name from before budgets were named so: transparency_test.go
// calls it.)
func unitFor15(t *testing.T, m *Manager, name string) func(rounds int) types.Spec {
	t.Helper()
	if _, err := m.CreateBudget(name, (epsAfter(t, 15)+epsAfter(t, 16))/2, 1e-6); err != nil {
		t.Fatal(err)
	}
	return func(rounds int) types.Spec {
		return small(t, func(s *types.Spec) { s.DP.Budget, s.Rounds = name, rounds })
	}
}

// stored stores spec on m's database as a server stopped mid-job leaves
// it, without starting it: running, with committed rounds committed and
// one ledger event per element of events, in order (each written before
// its round commits, so [1, 2, 2, 3] means round 2 was interrupted once).
func stored(t *testing.T, m *Manager, spec types.Spec, committed int, events []int) string {
	t.Helper()
	cfg, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("job-stored-%d", time.Now().UnixNano())
	if err := m.db.CreateJob(storage.Job{ID: id, Config: cfg, State: storage.StateRunning}); err != nil {
		t.Fatal(err)
	}
	mdl, err := model.New(spec.Model, 784, 10)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := fl.NewServerOptimizer(serverOptConfig(spec.Server))
	if err != nil {
		t.Fatal(err)
	}
	state, err := opt.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	params := make([]float32, mdl.NumParams())
	mdl.Init(params, rand.New(rand.NewPCG(1, 2)))
	raw, err := accounting.MarshalEvent(roundEvent(spec))
	if err != nil {
		t.Fatal(err)
	}
	cur := 0
	commit := func() {
		cur++
		met, _ := json.Marshal(types.RoundMetrics{Round: cur})
		if err := m.db.CommitRound(id, cur, met, storage.Checkpoint{Round: cur, Params: params, OptState: state}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range events {
		for cur < r-1 {
			commit()
		}
		if _, err := m.db.AppendLedger(id, storage.LedgerEntry{Round: r, Event: raw}); err != nil {
			t.Fatal(err)
		}
	}
	for cur < committed {
		commit()
	}
	return id
}

// A running job keeps its whole planned spend reserved: a budget's position
// is its spent events plus its running jobs' remaining rounds, and a job
// is admitted only if its own rounds fit on top. The reservation follows
// from stored state alone (a restarted server sees the same), and a job
// that ends releases what it did not spend.
func TestBudgetReservesRunningJobs(t *testing.T) {
	m := manager(t)
	onBudget := unitFor15(t, m, "pop")
	// A: 10 rounds planned, 3 committed, round 3 interrupted once: 4
	// events spent and 7 rounds reserved.
	a := stored(t, m, onBudget(10), 3, []int{1, 2, 3, 3})

	_, err := m.Submit(onBudget(5)) // 4 + 7 + 5 = 16 > 15
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "remaining") || !strings.Contains(err.Error(), "reserve 7 more rounds") {
		t.Fatalf("job that does not fit beside a running one: %v", err)
	}
	m2 := restarted(t, m) // a restarted server
	if _, err := m2.Submit(onBudget(5)); !errors.Is(err, ErrBudget) {
		t.Fatalf("after a restart: %v", err)
	}
	rep, err := m.Budget("pop")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Adjacency != AdjacencyAddRemove || rep.Events != 4 || rep.ExtraEvents != 1 || rep.Running != 1 || rep.ReservedRounds != 7 ||
		rep.Committed == nil || math.Abs(*rep.Committed-epsAfter(t, 11)) > 1e-9 || rep.Available != rep.EpsilonBudget-*rep.Committed {
		t.Fatalf("budget report %+v", rep)
	}
	if *rep.Epsilon != epsAfter(t, 4) || rep.Remaining != rep.EpsilonBudget-*rep.Epsilon {
		t.Fatalf("spent ε %v, remaining %v; want ε of 4 events %v", *rep.Epsilon, rep.Remaining, epsAfter(t, 4))
	}

	b := runToEnd(t, m, onBudget(4)) // 4 + 7 + 4 = 15 fits
	if b.State != types.StateCompleted || b.Round != 4 {
		t.Fatalf("job B: %s at round %d: %s", b.State, b.Round, b.Message)
	}
	if _, err := m.Submit(onBudget(1)); !errors.Is(err, ErrBudget) { // 8 + 7 + 1
		t.Fatalf("budget full: %v", err)
	}

	// Cancelling A releases its 7 reserved rounds.
	if st, err := m.Cancel(a); err != nil || st.State != storage.StateCancelled {
		t.Fatalf("cancel A: %s, %v", st.State, err)
	}
	if rep, _ := m.Budget("pop"); rep.Running != 0 || rep.ReservedRounds != 0 || rep.Events != 8 {
		t.Fatalf("after the cancel: %+v", rep)
	}
	c := runToEnd(t, m, onBudget(7)) // 8 + 7 = 15 fits again
	if c.State != types.StateCompleted || c.Round != 7 {
		t.Fatalf("job C: %s at round %d: %s", c.State, c.Round, c.Message)
	}
	rep, err = m.Budget("pop")
	if err != nil || rep.Events != 15 || *rep.Epsilon > rep.EpsilonBudget || len(rep.Jobs) != 3 {
		t.Fatalf("final budget report %+v, %v", rep, err)
	}
}

// Two jobs that together do not fit: the second is refused at submit,
// whatever the first has spent so far, instead of being admitted and
// stopped part-way with budget_exhausted.
func TestBudgetRefusesSecondJobAtSubmit(t *testing.T) {
	m := manager(t)
	onBudget := unitFor15(t, m, "pop")
	a, err := m.Submit(onBudget(10))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Submit(onBudget(10))
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "remaining") {
		t.Fatalf("second job: %v", err)
	}
	m.Wait(a.ID)
	if st, _ := m.Get(a.ID); st.State != types.StateCompleted || st.Round != 10 {
		t.Fatalf("first job: %s at round %d: %s", st.State, st.Round, st.Message)
	}
	if jobs, _ := m.List(); len(jobs) != 1 {
		t.Fatalf("%d jobs stored; the refused one must store nothing", len(jobs))
	}
}

// Concurrent submissions cannot both take a budget's last ε: of eight
// simultaneous jobs of 10 rounds on a budget with room for 15, exactly one
// is admitted.
func TestBudgetConcurrentSubmits(t *testing.T) {
	m := manager(t)
	onBudget := unitFor15(t, m, "pop")
	if _, err := m.dataset(); err != nil { // load once, so the submits race
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	var ids sync.Map
	for range n {
		go func() {
			j, err := m.Submit(onBudget(10))
			if err == nil {
				ids.Store(j.ID, true)
			}
			errs <- err
		}()
	}
	admitted := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			admitted++
		case !errors.Is(err, ErrBudget):
			t.Fatal(err)
		}
	}
	if admitted != 1 {
		t.Fatalf("%d of %d jobs admitted to a budget with room for one", admitted, n)
	}
	ids.Range(func(id, _ any) bool {
		m.Wait(id.(string))
		st, _ := m.Get(id.(string))
		if st.State != types.StateCompleted {
			t.Errorf("admitted job %s: %s: %s", id, st.State, st.Message)
		}
		return true
	})
}

// A budget's neighbouring relation is fixed by its first job: a job under
// the other relation is refused at submit, naming both, even after the
// first job has ended.
func TestBudgetRefusesMixedAdjacency(t *testing.T) {
	m := manager(t)
	fixed := func(s *types.Spec) { s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 30} }
	for _, tc := range []struct {
		budget        string
		first, second func(*types.Spec)
		adj           string
	}{
		{"poisson-first", func(*types.Spec) {}, fixed, AdjacencyAddRemove},
		{"fixed-first", fixed, func(*types.Spec) {}, AdjacencyReplaceOne},
	} {
		if _, err := m.CreateBudget(tc.budget, 100, 1e-6); err != nil {
			t.Fatal(err)
		}
		onBudget := func(edit func(*types.Spec)) types.Spec {
			return small(t, func(s *types.Spec) { s.DP.Budget, s.Rounds = tc.budget, 3; edit(s) })
		}
		if st := runToEnd(t, m, onBudget(tc.first)); st.State != types.StateCompleted {
			t.Fatalf("%s: first job %s: %s", tc.budget, st.State, st.Message)
		}
		before, _ := m.List()
		_, err := m.Submit(onBudget(tc.second))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "dp.budget" || !strings.Contains(ve.Rule, AdjacencyAddRemove) || !strings.Contains(ve.Rule, AdjacencyReplaceOne) {
			t.Fatalf("%s: mixed job: %v", tc.budget, err)
		}
		if after, _ := m.List(); len(after) != len(before) {
			t.Fatalf("%s: the refused job was stored", tc.budget)
		}
		// The same relation is still welcome.
		if st := runToEnd(t, m, onBudget(tc.first)); st.State != types.StateCompleted {
			t.Fatalf("%s: same-relation job %s: %s", tc.budget, st.State, st.Message)
		}
		rep, err := m.Budget(tc.budget)
		if err != nil || rep.Adjacency != tc.adj || len(rep.Jobs) != 2 || rep.Note != "" {
			t.Fatalf("%s: report %+v, %v", tc.budget, rep, err)
		}
		if b, _ := json.Marshal(rep); !strings.Contains(string(b), `"adjacency":"`+tc.adj+`"`) {
			t.Fatalf("%s: report JSON %s", tc.budget, b)
		}
	}
}

// A job without DP is never charged, so naming a budget is refused
// rather than silently ignored.
func TestBudgetRefusesNonPrivateJob(t *testing.T) {
	m := manager(t)
	if _, err := m.CreateBudget("pop", 8, 1e-6); err != nil {
		t.Fatal(err)
	}
	_, err := m.Submit(small(t, func(s *types.Spec) { s.DP.Enabled, s.DP.Budget = false, "pop" }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "dp.budget" || !strings.Contains(ve.Rule, "dp.enabled false") {
		t.Fatalf("non-DP job on a budget: %v", err)
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("%d jobs stored", len(jobs))
	}
}
