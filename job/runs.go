package job

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dpfl/dpfl/storage"
)

// run is one job running in its goroutine.
type run struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// terminalState is a final state kept in memory because it could not be
// written, and the write's error.
type terminalState struct {
	state   storage.JobState
	message string
	err     error
}

// runs is the manager's running jobs: their goroutines, the places taken
// under Options.MaxRunningJobs, and the final states that could not be
// written. Its methods are safe for concurrent use.
type runs struct {
	log *slog.Logger
	// setState writes a job's final state (db.SetJobState); tests
	// replace it to inject a storage failure.
	setState func(id string, s storage.JobState, msg string) error
	// retryBackoff is the wait before the second attempt to write a final
	// state; it doubles after each failure.
	retryBackoff time.Duration

	mu      sync.Mutex
	running map[string]*run
	// reserved counts the submissions admitted under MaxRunningJobs that
	// have not started yet.
	reserved int
	// terminal holds the final states whose write failed (finish): reads
	// report them instead of the stored running state.
	terminal map[string]terminalState
	wg       sync.WaitGroup
}

func newRuns(log *slog.Logger, setState func(id string, s storage.JobState, msg string) error) *runs {
	return &runs{log: log, setState: setState, retryBackoff: defaultRetryBackoff, running: map[string]*run{}, terminal: map[string]terminalState{}}
}

// reserve takes a place for a new job under max running jobs (≤ 0: no
// bound), or returns an error wrapping ErrCapacity when every place is
// taken by a running job or a submission in progress.
func (rs *runs) reserve(max int) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if n := len(rs.running) + rs.reserved; max > 0 && n >= max {
		return fmt.Errorf("%w: %d jobs are running, the most this server runs at once (--max-running-jobs); retry when one has finished", ErrCapacity, n)
	}
	rs.reserved++
	return nil
}

// unreserve gives back a place that reserve took for a job that did not
// start.
func (rs *runs) unreserve() {
	rs.mu.Lock()
	rs.reserved--
	rs.mu.Unlock()
}

// begin registers job id as running, in the place reserve took for it if
// reserved, and returns its context and the function its goroutine calls
// when it ends.
func (rs *runs) begin(id string, reserved bool) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &run{cancel: cancel, done: make(chan struct{})}
	rs.mu.Lock()
	rs.running[id] = r
	if reserved {
		rs.reserved--
	}
	rs.mu.Unlock()
	rs.wg.Add(1)
	return ctx, func() {
		rs.mu.Lock()
		delete(rs.running, id)
		rs.mu.Unlock()
		close(r.done)
		rs.wg.Done()
	}
}

// lookup is job id's run, nil when it is not running.
func (rs *runs) lookup(id string) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.running[id]
}

// stop cancels every running job with a server shutdown's cause and
// waits until all have stopped or ctx ends.
func (rs *runs) stop(ctx context.Context) error {
	rs.mu.Lock()
	for _, r := range rs.running {
		r.cancel(context.Canceled)
	}
	rs.mu.Unlock()
	done := make(chan struct{})
	go func() { rs.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish records job id's final state. A failed write is retried
// (finishAttempts, with backoff) and logged; if it still fails, the state
// is kept in memory, so that reads report it (with a message saying it is
// not persisted) rather than running forever. The job then resumes at the
// next start, from its last committed round, unless Shutdown manages to
// write the state first.
func (rs *runs) finish(id string, s storage.JobState, msg string) {
	var err error
	for attempt := range finishAttempts {
		if attempt > 0 {
			time.Sleep(rs.retryBackoff << (attempt - 1))
		}
		if err = rs.setState(id, s, msg); err == nil {
			rs.mu.Lock()
			delete(rs.terminal, id)
			rs.mu.Unlock()
			rs.log.Info("job finished", "job", id, "state", s, "message", msg)
			return
		}
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
			// Already final (a cancel was recorded first), or gone:
			// nothing to keep.
			rs.log.Error("recording job state", "job", id, "state", s, "err", err)
			return
		}
		rs.log.Warn("recording job state failed", "job", id, "state", s, "attempt", attempt+1, "of", finishAttempts, "err", err)
	}
	rs.log.Error("recording job state failed; keeping it in memory only", "job", id, "state", s, "message", msg, "err", err)
	rs.mu.Lock()
	rs.terminal[id] = terminalState{state: s, message: msg, err: err}
	rs.mu.Unlock()
}

// overlay puts on a stored job the final state kept in memory when its
// write failed (finish).
func (rs *runs) overlay(j storage.Job) storage.Job {
	if j.State.Terminal() {
		return j
	}
	rs.mu.Lock()
	t, ok := rs.terminal[j.ID]
	rs.mu.Unlock()
	if ok {
		j.State = t.state
		j.Message = fmt.Sprintf("%s (not persisted: writing this state to the database failed: %v; if the server restarts first, the job resumes from round %d)", t.message, t.err, j.Round)
	}
	return j
}

// persist tries once more to write the final states kept in memory.
func (rs *runs) persist() {
	rs.mu.Lock()
	pending := make(map[string]terminalState, len(rs.terminal))
	for id, t := range rs.terminal {
		pending[id] = t
	}
	rs.mu.Unlock()
	for id, t := range pending {
		err := rs.setState(id, t.state, t.message)
		if err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
			rs.log.Error("recording job state failed again", "job", id, "state", t.state, "err", err)
			continue
		}
		rs.mu.Lock()
		delete(rs.terminal, id)
		rs.mu.Unlock()
	}
}
