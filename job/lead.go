package job

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/storage"
)

// A job's leader (issue 18, docs/ha.md). With several replicas over one
// etcd store, every replica campaigns for every job that has not ended
// (internal/leader: one election per job, on the replica's lease), and
// only the winner runs the job, through a view of the store fenced on its
// term (storage.DB.Fenced): every ledger append, round commit and state
// change it makes is one etcd transaction that etcd refuses once the term
// has lapsed. A run ends without a final state (to resume, here or on
// another replica) when its term ends, when a write is fenced, or when the
// store is unavailable; the replica then campaigns again. A new leader
// reads the job after winning, so it starts after the previous leader's
// last commit, and appends its own charge for the round it runs: a charge
// left by a lost term is never adopted (it stays in the ledger, an extra
// event that only over-counts ε).

// errLeadershipLost is the cancel cause of a run whose replica no longer
// leads its job.
var errLeadershipLost = errors.New("this replica no longer leads the job")

// Leadership configures a Manager to run jobs only while it leads them,
// for several replicas over one etcd store.
type Leadership struct {
	// Elector campaigns for the jobs (one per replica; the caller closes
	// it after Manager.Shutdown).
	Elector *leader.Elector
	// URL is this replica's address for clients and other replicas
	// (dpfl-server's --advertise-url), shown as the leader's in
	// GET /v1/jobs/{id}.
	URL string
	// Scan is how often the replica looks for jobs it does not campaign
	// for yet (submitted to another replica) and for jobs that another
	// replica ended (a cancel) while this one runs them (default 1 s).
	Scan time.Duration
}

// Default timings of leadership.
const (
	defaultLeaderScan = time.Second
	// leaderRetry is the pause before campaigning again after a term
	// ended, or after an error from etcd.
	leaderRetry = 250 * time.Millisecond
	// leaderCall bounds the etcd calls that are not part of a run
	// (resigning, reading the leader for GET /v1/jobs/{id}).
	leaderCall = 2 * time.Second
)

// leadership is a Manager's state under Leadership.
type leadership struct {
	Leadership
	ctx    context.Context // ended by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	campaigning map[string]bool
	terms       map[string]*leader.Term // the jobs this replica runs now

	// participate is the devices jobs' status cache and publishers
	// (participate_status.go), started by the first use.
	participateOnce sync.Once
	participate     *participateState
}

func newLeadership(l Leadership) *leadership {
	if l.Scan <= 0 {
		l.Scan = defaultLeaderScan
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &leadership{Leadership: l, ctx: ctx, cancel: cancel, campaigning: map[string]bool{}, terms: map[string]*leader.Term{}}
}

// startLeading registers this replica's URL and starts the scan that
// campaigns for every job that has not ended (Resume, under Leadership).
func (m *Manager) startLeading() error {
	l := m.lead
	ctx, cancel := context.WithTimeout(l.ctx, leaderCall)
	err := l.Elector.Advertise(ctx, l.URL)
	cancel()
	if err != nil {
		return err
	}
	m.participation() // load the devices jobs' status before polls come
	m.scanJobs()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(l.Scan)
		defer t.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-t.C:
				m.scanJobs()
			}
		}
	}()
	return nil
}

// scanJobs campaigns for each job that has not ended and stops the local
// run of each job that has (cancelled through another replica).
func (m *Manager) scanJobs() {
	jobs, err := m.db.Jobs()
	if err != nil {
		m.log.Warn("listing jobs to lead", "err", err)
		return
	}
	for _, j := range jobs {
		if !j.State.Terminal() {
			m.campaign(j.ID)
			continue
		}
		if r := m.runs.lookup(j.ID); r != nil {
			r.cancel(errLeadershipLost)
		}
	}
}

// campaign starts job id's campaign loop unless it runs already.
func (m *Manager) campaign(id string) {
	l := m.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.campaigning[id] || l.ctx.Err() != nil {
		return
	}
	l.campaigning[id] = true
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		m.leadJob(id)
		l.mu.Lock()
		delete(l.campaigning, id)
		l.mu.Unlock()
	}()
}

// leadJob campaigns for job id and runs it during each term won, until the
// job has ended or the manager shuts down.
func (m *Manager) leadJob(id string) {
	l := m.lead
	for l.ctx.Err() == nil {
		term, err := l.Elector.Campaign(l.ctx, id)
		if err != nil {
			if l.ctx.Err() == nil {
				m.log.Warn("campaigning to lead job", "job", id, "err", err)
				sleepCtx(l.ctx, leaderRetry)
			}
			continue
		}
		over := m.runTerm(term)
		ctx, cancel := context.WithTimeout(context.Background(), leaderCall)
		if err := term.Resign(ctx); err != nil {
			m.log.Warn("resigning the lead of a job", "job", id, "err", err)
		}
		cancel()
		if over {
			return
		}
		sleepCtx(l.ctx, leaderRetry)
	}
}

// runTerm runs job id while term lasts and reports whether the job has
// ended (it is terminal in the store, or gone).
func (m *Manager) runTerm(term *leader.Term) (over bool) {
	id := term.JobID()
	f := term.Fence()
	db := m.db.Fenced(id, storage.Fence{Key: f.Key, Rev: f.Rev})
	// Read after winning: the previous leader's last commit is visible.
	j, err := m.db.Job(id)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return true
	case err != nil:
		m.log.Warn("reading a job to lead", "job", id, "err", err)
		return false
	case j.State.Terminal():
		return true
	}
	m.log.Info("leading job", "job", id, "epoch", term.Epoch(), "after_round", j.Round)
	var spec types.Spec
	if err := json.Unmarshal(j.Config, &spec); err != nil {
		return m.finishLed(term, db, id, storage.StateFailed, "stored configuration unreadable: "+err.Error())
	}
	if m.lead.ctx.Err() != nil {
		return false // shutting down: the term was won as Shutdown began
	}
	ctx, end := m.runs.begin(id, false)
	defer end() // after the final state is written: Cancel waits for it
	m.lead.setTerm(id, term)
	defer m.lead.setTerm(id, nil)
	stopOnLoss := context.AfterFunc(term.Context(), func() {
		if r := m.runs.lookup(id); r != nil {
			r.cancel(errLeadershipLost)
		}
	})
	// A run begun after Shutdown stopped the others stops too.
	stopOnShutdown := context.AfterFunc(m.lead.ctx, func() {
		if r := m.runs.lookup(id); r != nil {
			r.cancel(context.Canceled)
		}
	})
	state, msg := m.runRecovered(ctx, db, j, spec)
	stopOnLoss()
	stopOnShutdown()
	if state == "" {
		// Stopped without an end: see whether another replica ended it.
		j, err := m.db.Job(id)
		return err == nil && j.State.Terminal() || errors.Is(err, storage.ErrNotFound)
	}
	return m.finishLed(term, db, id, state, msg)
}

// finishLed writes a led job's final state through its fenced view db,
// retrying while the store is unavailable and term lasts. It reports
// whether the job has ended: false when the term ended first, so that the
// next leader runs the job again from its last commit and ends it.
func (m *Manager) finishLed(term *leader.Term, db *storage.DB, id string, s storage.JobState, msg string) bool {
	for {
		err := db.SetJobState(id, s, msg)
		switch {
		case err == nil:
			m.log.Info("job finished", "job", id, "state", s, "message", msg)
			return true
		case errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound):
			return true // ended already (a cancel through another replica), or gone
		case errors.Is(err, storage.ErrFenced) || term.Err() != nil || m.lead.ctx.Err() != nil:
			m.log.Warn("job's final state not written: no longer its leader", "job", id, "state", s, "err", err)
			return false
		}
		m.log.Warn("recording job state failed; retrying", "job", id, "state", s, "err", err)
		sleepCtx(term.Context(), leaderRetry)
	}
}

func (l *leadership) setTerm(id string, t *leader.Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t == nil {
		delete(l.terms, id)
	} else {
		l.terms[id] = t
	}
}

// term is the live term under which this replica runs job id, or nil
// (not leading it, or no Leadership). Writes for the job outside its run
// (e.g. the participate status that followers serve) carry its fence or
// lease.
func (m *Manager) term(id string) *leader.Term {
	if m.lead == nil {
		return nil
	}
	m.lead.mu.Lock()
	defer m.lead.mu.Unlock()
	if t := m.lead.terms[id]; t != nil && t.Err() == nil {
		return t
	}
	return nil
}

// stopLeading ends every campaign and waits for them to resign (Shutdown,
// after the runs have stopped).
func (m *Manager) stopLeading(ctx context.Context) error {
	l := m.lead
	l.cancel()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jobLeader is who leads job id now, or nil (no leader, no Leadership, or
// etcd not answering: the field is informative and never fails a read).
func (m *Manager) jobLeader(id string) *types.JobLeader {
	if m.lead == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaderCall)
	defer cancel()
	replica, epoch, err := m.lead.Elector.Leader(ctx, id)
	if err != nil {
		return nil
	}
	url, _ := m.lead.Elector.URL(ctx, replica)
	return &types.JobLeader{Replica: replica, Epoch: epoch, URL: url}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// FencedWrites is the number of this replica's writes that etcd refused
// because their fence no longer held (storage.DB.FencedWrites): each is
// a stale leader's write stopped, not a fault. 0 with a bbolt store.
func (m *Manager) FencedWrites() uint64 { return m.db.FencedWrites() }

// PhantomWins is how many election wins this replica refused because
// etcd disagreed (leader.Elector.Phantoms); 0 without Leadership.
func (m *Manager) PhantomWins() uint64 {
	if m.lead == nil {
		return 0
	}
	return m.lead.Elector.Phantoms()
}
