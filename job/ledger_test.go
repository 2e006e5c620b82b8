package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// checkLedger accepts ledgers with one event per committed round plus the
// write-ahead events of interrupted rounds, and refuses any that has lost
// the event of a committed round.
func TestCheckLedger(t *testing.T) {
	for _, tc := range []struct {
		rounds []int
		round  int
		bad    string
	}{
		{nil, 0, ""},
		{[]int{1}, 0, ""},          // round 1 interrupted
		{[]int{1, 2, 3}, 3, ""},    // between rounds
		{[]int{1, 2, 3, 4}, 3, ""}, // round 4 running, or interrupted
		{[]int{1, 1, 2, 2, 2}, 1, ""},
		{nil, 2, "committed rounds without an event: at least 2"},
		{[]int{1, 2}, 3, "committed rounds without an event: at least 1"},
		{[]int{1, 3, 3}, 3, "seq 2 is of round 3 after round 1, so round 2 has no event"},
		{[]int{2}, 1, "seq 1 is of round 2 after round 0"},
		{[]int{1, 1, 1, 2}, 3, "the last event is of round 2, so rounds 3 … 3 have none"},
	} {
		entries := make([]storage.LedgerEntry, len(tc.rounds))
		for i, r := range tc.rounds {
			entries[i] = storage.LedgerEntry{Seq: uint64(i + 1), Round: r}
		}
		err := checkLedger(storage.Job{ID: "job-x", Round: tc.round}, entries)
		name := fmt.Sprintf("rounds %v at round %d", tc.rounds, tc.round)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.bad != "" && err == nil:
			t.Errorf("%s accepted", name)
		case tc.bad != "":
			want := fmt.Sprintf("job job-x: privacy ledger holds %d events for %d committed rounds", len(entries), tc.round)
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.bad) ||
				!errors.Is(err, errLedgerShort) || !errors.Is(err, storage.ErrCorrupt) {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// A job whose ledger lost the event of a committed round (a truncated
// tail) does not run on the under-counted spend: it fails, naming the
// job, its committed rounds and the events found. Its privacy report, its
// budget and the start-up check refuse it too.
func TestTruncatedLedgerFailsTheJob(t *testing.T) {
	m := manager(t)
	if _, err := m.CreateBudget("pop", 100, 1e-6); err != nil {
		t.Fatal(err)
	}
	spec := small(t, func(s *types.Spec) { s.DP.Budget, s.DP.Delta = "pop", 1e-6 })
	id := stored(t, m, spec, 3, []int{1, 2}) // round 3 committed without its event
	want := fmt.Sprintf("job %s: privacy ledger holds 2 events for 3 committed rounds", id)

	if err := m.VerifyLedgers(); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start-up check: %v", err)
	}
	if _, err := m.Privacy(id); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("privacy report: %v", err)
	}
	if _, err := m.Budget("pop"); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("unit report: %v", err)
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	m.Wait(id)
	st, err := m.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != types.StateFailed || st.Round != 3 || !strings.Contains(st.Message, want) {
		t.Fatalf("job %s at round %d: %q", st.State, st.Round, st.Message)
	}
	if l, _ := m.db.Ledger(id); len(l) != 2 {
		t.Fatalf("the refused job wrote %d events", len(l))
	}
}

// Each interruption of a running round leaves at most one extra event,
// which stays charged: a job interrupted four times (rounds 1 and 2 once
// each, round 3 twice) resumes, completes, and its ledger holds one event
// per round plus exactly those four.
func TestInterruptedRoundsLeaveOneEventEach(t *testing.T) {
	m := manager(t)
	spec := small(t, func(s *types.Spec) { s.Rounds = 5 })
	id := stored(t, m, spec, 2, []int{1, 1, 2, 2, 3, 3})
	if err := m.VerifyLedgers(); err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	m.Wait(id)
	st, _ := m.Get(id)
	if st.State != types.StateCompleted || st.Round != 5 {
		t.Fatalf("resumed job %s at round %d: %s", st.State, st.Round, st.Message)
	}
	rep, err := m.Privacy(id)
	if err != nil {
		t.Fatal(err)
	}
	var rounds []int
	for _, e := range rep.Events {
		rounds = append(rounds, e.Round)
	}
	if got, want := fmt.Sprint(rounds), fmt.Sprint([]int{1, 1, 2, 2, 3, 3, 3, 4, 5}); got != want || extraEvents(len(rep.Events), rep.Rounds) != 4 {
		t.Fatalf("ledger rounds %s, want %s (4 extra)", got, want)
	}
	full, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: roundEvent(spec), Count: 9}}, spec.DP.Delta)
	if err != nil || *rep.Epsilon != full.Epsilon() {
		t.Fatalf("ε %v, want the ε of all 9 events %v (%v)", *rep.Epsilon, full.Epsilon(), err)
	}
	// Each resumed round's ε is Account over the events charged by then
	// (the accountant rebuilt from the six stored events, then one per
	// round): rounds 3, 4 and 5 see 7, 8 and 9 events.
	met, err := m.Metrics(id)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mr := range met {
		if mr.Round < 3 {
			continue
		}
		seen++
		n := mr.Round + 4
		r, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: roundEvent(spec), Count: n}}, AccountingDelta(spec.DP))
		if err != nil || mr.Epsilon == nil || *mr.Epsilon != r.Epsilon() || mr.Accountant != r.Best.Accountant {
			got := "none"
			if mr.Epsilon != nil {
				got = fmt.Sprint(*mr.Epsilon)
			}
			t.Fatalf("round %d: ε %s by %q, want Account over %d events: %v by %q (%v)", mr.Round, got, mr.Accountant, n, r.Epsilon(), r.Best.Accountant, err)
		}
	}
	if seen != 3 {
		t.Fatalf("metrics of %d resumed rounds, want 3", seen)
	}
	if err := m.VerifyLedgers(); err != nil {
		t.Fatal(err)
	}
}

// The start-up check also names a DP job charged to a budget that does not
// exist, and reads a non-DP job's empty ledger as fine.
func TestVerifyLedgersUnknownBudget(t *testing.T) {
	m := manager(t)
	stored(t, m, small(t, func(s *types.Spec) { s.DP.Enabled = false }), 2, nil)
	if err := m.VerifyLedgers(); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(small(t, func(s *types.Spec) { s.DP.Budget = "gone" }))
	if err := m.db.CreateJob(storage.Job{ID: "job-orphan", Config: cfg, State: storage.StateCompleted}); err != nil {
		t.Fatal(err)
	}
	err := m.VerifyLedgers()
	if err == nil || !strings.Contains(err.Error(), `job job-orphan is charged to budget "gone"`) || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("orphan job: %v", err)
	}
}
