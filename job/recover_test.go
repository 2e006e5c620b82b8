package job

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// storeRunning stores a job as a server would have left it running,
// without starting it.
func storeRunning(t *testing.T, db *storage.DB, id string, config []byte) {
	t.Helper()
	if err := db.CreateJob(storage.Job{ID: id, Config: config, State: storage.StateRunning, CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
}

func specJSON(t *testing.T, s types.Spec) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A job whose goroutine panics ends failed with a message saying so,
// and the manager goes on running other jobs (the panic used to end the
// process: finding 1 of issue 13).
func TestPanickingJobFailsAndOthersRun(t *testing.T) {
	m := manager(t)
	var boom atomic.Bool
	boom.Store(true)
	m.beforeRound = func(_ context.Context, _ string, r int) {
		if r == 2 && boom.Load() {
			panic("injected failure")
		}
	}
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 3; s.DP.Enabled = false }))
	if st.State != types.StateFailed || !strings.Contains(st.Message, "panicked") || !strings.Contains(st.Message, "injected failure") {
		t.Fatalf("%s: %q, want failed with the panic", st.State, st.Message)
	}
	if st.Round != 1 {
		t.Fatalf("committed %d rounds, want the 1 before the panic", st.Round)
	}
	// A DP job's message is released: the panic's text stays in the log.
	st = runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 3 }))
	if st.State != types.StateFailed || !strings.Contains(st.Message, "panicked") || strings.Contains(st.Message, "injected failure") {
		t.Fatalf("DP job %s: %q, want failed without the panic's text", st.State, st.Message)
	}
	boom.Store(false)
	if next := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 2 })); next.State != types.StateCompleted {
		t.Fatalf("the next job: %s: %q", next.State, next.Message)
	}
}

// Resume fails each job that cannot run, with a message naming why, and
// resumes the others; it never returns an error for one job. Before
// issue 13 the first would block nothing but the second (σ = +Inf) and
// third (a CNN at batch 100000, ~400 GB) ended the process at every
// restart.
func TestResumeFailsBadJobsAndRunsTheRest(t *testing.T) {
	db := openDB(t)
	good := small(t, func(s *types.Spec) { s.Rounds = 2 })
	infinite := good
	infinite.DP.NoiseMultiplier, infinite.DP.ClipNorm = 1e308, 1e308
	huge := good
	huge.Model, huge.Client.BatchSize = "cnn", 100_000
	panics := good
	storeRunning(t, db, "job-unreadable", []byte(`{"rounds":"many"}`))
	storeRunning(t, db, "job-infinite", specJSON(t, infinite))
	storeRunning(t, db, "job-huge", specJSON(t, huge))
	storeRunning(t, db, "job-panics", specJSON(t, panics))
	storeRunning(t, db, "job-good", specJSON(t, good))

	m := managerOn(t, db, Options{MaxJobMemory: 1 << 30})
	m.beforeRound = func(_ context.Context, id string, _ int) {
		if id == "job-panics" {
			panic("injected failure")
		}
	}
	if err := m.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	want := map[string][]string{
		"job-unreadable": {"stored configuration unreadable"},
		"job-infinite":   {"noise standard deviation", "dp.clip_norm"},
		"job-huge":       {"client.batch_size", "estimated peak memory", "1.0 GiB"},
		"job-panics":     {"panicked"},
	}
	for id, parts := range want {
		m.Wait(id)
		st, err := m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != types.StateFailed {
			t.Errorf("%s: %s (%q), want failed", id, st.State, st.Message)
		}
		for _, p := range parts {
			if !strings.Contains(st.Message, p) {
				t.Errorf("%s: message %q does not say %q", id, st.Message, p)
			}
		}
	}
	m.Wait("job-good")
	if st, err := m.Get("job-good"); err != nil || st.State != types.StateCompleted || st.Round != 2 {
		t.Fatalf("the good job: %+v, %v", st, err)
	}
	// One unreadable record does not make the list unreadable.
	if list, err := m.List(); err != nil || len(list) != 5 {
		t.Fatalf("List: %d jobs, %v", len(list), err)
	}
}

// A final state that cannot be written is retried, and while it cannot
// be, reads report it (saying it is not persisted) instead of running
// forever (finding 7); Shutdown writes it once storage works again.
func TestFinalStateWriteFailureIsRetriedAndSurfaced(t *testing.T) {
	m := manager(t)
	m.runs.retryBackoff = time.Millisecond
	var calls atomic.Int32
	diskFull := errors.New("no space left on device")
	m.runs.setState = func(string, storage.JobState, string) error {
		calls.Add(1)
		return diskFull
	}
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 2; s.DP.Enabled = false }))
	if st.State != types.StateCompleted || !strings.Contains(st.Message, "not persisted") || !strings.Contains(st.Message, diskFull.Error()) {
		t.Fatalf("%s: %q, want completed, not persisted", st.State, st.Message)
	}
	if n := calls.Load(); n != finishAttempts {
		t.Fatalf("%d attempts to write the final state, want %d", n, finishAttempts)
	}
	if stored, err := m.db.Job(st.ID); err != nil || stored.State != storage.StateRunning {
		t.Fatalf("stored %s, %v: the write was injected to fail", stored.State, err)
	}
	list, err := m.List()
	if err != nil || len(list) != 1 || list[0].State != types.StateCompleted {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if _, err := m.Cancel(st.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("cancelling a finished job: %v, want a conflict", err)
	}
	m.runs.setState = m.db.SetJobState
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if stored, err := m.db.Job(st.ID); err != nil || stored.State != storage.StateCompleted || stored.Message != "trained 2 rounds" {
		t.Fatalf("after Shutdown stored %s %q, %v", stored.State, stored.Message, err)
	}

	// A write that fails twice and then succeeds is stored, no overlay.
	calls.Store(0)
	m2 := manager(t)
	m2.runs.retryBackoff = time.Millisecond
	m2.runs.setState = func(id string, s storage.JobState, msg string) error {
		if calls.Add(1) <= 2 {
			return diskFull
		}
		return m2.db.SetJobState(id, s, msg)
	}
	st = runToEnd(t, m2, small(t, func(s *types.Spec) { s.Rounds = 1; s.DP.Enabled = false }))
	if st.State != types.StateCompleted || st.Message != "trained 1 rounds" || calls.Load() != 3 {
		t.Fatalf("%s %q after %d attempts", st.State, st.Message, calls.Load())
	}
}
