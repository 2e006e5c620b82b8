package job

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// ErrConflict: the request does not fit the job's state (an unknown job is
// storage.ErrNotFound). Both arrive wrapped with context.
var ErrConflict = errors.New("conflict")

// ErrCapacity: the server is running as many jobs as Options.MaxRunningJobs
// allows; the request may be retried later (HTTP 429).
var ErrCapacity = errors.New("server at capacity")

// errCalibrationDeadline stops calibrate's search at its deadline.
var errCalibrationDeadline = errors.New("calibration deadline exceeded")

// errCancelledByUser is the cancel cause that distinguishes a user's cancel
// (terminal) from a server shutdown (the job resumes at the next start).
var errCancelledByUser = errors.New("cancelled by user")

// Manager creates, runs, resumes and cancels jobs. Its methods are safe for
// concurrent use.
type Manager struct {
	db      *storage.DB
	dataDir string
	log     *slog.Logger
	workers int
	limits  Options

	mu      sync.Mutex
	running map[string]*run
	// live holds the open round of each running devices job.
	live map[string]*deviceRound

	// unitMu serialises budget checks and ledger appends of jobs on
	// privacy units; units caches each unit's events.
	unitMu sync.Mutex
	units  map[string]*unitCache
	data   *loaded
	wg     sync.WaitGroup

	// reserved counts the submissions admitted under MaxRunningJobs that
	// have not started yet (under mu).
	reserved int
	// terminal holds the final states whose write failed (finish): reads
	// report them instead of the stored running state (under mu).
	terminal map[string]terminalState

	// setState writes a job's final state (db.SetJobState); tests
	// replace it to inject a storage failure.
	setState func(id string, s storage.JobState, msg string) error
	// retryBackoff is the wait before the second attempt to write a final
	// state; it doubles after each failure.
	retryBackoff time.Duration
	// calibrationTimeout bounds calibrate's search at submission.
	calibrationTimeout time.Duration
	// beforeRound, when set, runs in the job's goroutine before each
	// round; tests use it to make a job panic.
	beforeRound func(jobID string, round int)
	// noiseScale, when > 0, multiplies the noise multiplier of simulated
	// rounds while the ledger still records the spec's z: a deliberate
	// privacy bug that only tests set, for the canary audit's alarm.
	noiseScale float64
	// audits caches the canary audits of ended jobs (canary.go).
	audits auditCache
}

// terminalState is a final state kept in memory because it could not be
// written, and the write's error.
type terminalState struct {
	state   storage.JobState
	message string
	err     error
}

// Defaults of the Manager's internal knobs.
const (
	// finishAttempts is how many times a final state write is tried
	// (backoff 100 ms, 200 ms, 400 ms, 800 ms in between: a full disk or
	// a brief lock has 1.5 s to clear).
	finishAttempts      = 5
	defaultRetryBackoff = 100 * time.Millisecond
	// defaultCalibrationTimeout bounds the search for z at submission,
	// inside the POST request. It runs the accountants about 40 times:
	// on a 2-core machine 0.25 s in all for 300 rounds, 0.5 s for 10^5,
	// but 17 s for 10^6 rounds, where the PLD accountant's composition
	// dominates; such a job is refused and told to set
	// dp.noise_multiplier (calibrated offline) instead.
	defaultCalibrationTimeout = 10 * time.Second
)

type run struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

type loaded struct {
	train, test *data.Dataset
}

// Options configure a Manager.
type Options struct {
	// DataDir holds the Fashion-MNIST IDX files.
	DataDir string
	// Workers is the number of clients trained in parallel per job
	// (≤ 0: GOMAXPROCS).
	Workers int
	// Logger receives progress and errors (nil: slog.Default()).
	Logger *slog.Logger
	// DataRoot is the only directory whose contents a job spec may name
	// (leaf.train_dir and leaf.test_dir are relative to it); "" refuses
	// every server-side dataset path.
	DataRoot string
	// MaxJobMemory bounds the estimated peak memory of one job, in bytes
	// (≤ 0: no bound; DefaultMaxJobMemory is a safe value). The estimate
	// (admission.go) covers the model's copies, the activations at
	// client.batch_size on every worker, the updates a round holds all at
	// once and SCAFFOLD's control variates. A job over it is refused at
	// Submit with a *ValidationError naming the field most responsible,
	// and fails at Resume before allocating.
	MaxJobMemory int64
	// MaxRunningJobs bounds the jobs running at once (≤ 0: no bound):
	// Submit beyond it returns an error wrapping ErrCapacity. Jobs that
	// Resume restarts count, but are never refused.
	MaxRunningJobs int
}

// NewManager returns a manager over db. Call Resume to restart jobs that
// were running when the server last stopped.
func NewManager(db *storage.DB, opt Options) *Manager {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	m := &Manager{db: db, dataDir: opt.DataDir, log: opt.Logger, workers: opt.Workers, limits: opt, running: map[string]*run{}, live: map[string]*deviceRound{}, units: map[string]*unitCache{},
		terminal: map[string]terminalState{}, retryBackoff: defaultRetryBackoff, calibrationTimeout: defaultCalibrationTimeout}
	m.setState = db.SetJobState
	return m
}

// dataset loads Fashion-MNIST once per manager.
func (m *Manager) dataset() (*loaded, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data != nil {
		return m.data, nil
	}
	train, test, err := data.LoadFashionMNIST(m.dataDir)
	if err != nil {
		return nil, err
	}
	m.data = &loaded{train: train, test: test}
	return m.data, nil
}

// Submit validates spec, stores the job and starts it in the background. A
// spec that breaks a rule returns a *ValidationError and stores nothing.
func (m *Manager) Submit(spec Spec) (storage.Job, error) {
	ds, err := m.dataset()
	if err != nil {
		return storage.Job{}, err
	}
	if err := spec.Validate(ds.train.Len()); err != nil {
		return storage.Job{}, err
	}
	dim, classes := ds.train.Dim, ds.train.Classes
	switch spec.Dataset {
	case "synthetic":
		dim, classes = data.SyntheticDim, data.SyntheticClasses
	case "leaf":
		// Read the files now, so a bad dataset is refused at submit, and
		// the population is their users; the request waits, so the
		// reading has a deadline.
		fed, test, err := m.loadLEAF(spec, time.Now().Add(leafSubmitTimeout))
		if err != nil {
			return storage.Job{}, leafRefusal(err)
		}
		spec.Population.Clients, dim, classes = fed.NumClients(), test.Base().Dim, test.Base().Classes
		if spec.Sampling.Scheme == "fixed" && spec.Sampling.CohortSize > spec.Population.Clients {
			return storage.Job{}, &ValidationError{Field: "sampling.cohort_size", Rule: fmt.Sprintf("must not exceed the dataset's %d users", spec.Population.Clients)}
		}
	}
	// A dataset's own population (leaf) is known only now.
	if err := spec.checkExpectedCohort(); err != nil {
		return storage.Job{}, err
	}
	mdl, err := model.New(spec.Model, dim, classes)
	if err != nil {
		return storage.Job{}, &ValidationError{Field: "model", Rule: err.Error()}
	}
	if err := spec.checkSecureEncoding(mdl.NumParams()); err != nil {
		return storage.Job{}, err
	}
	if err := m.checkMemory(spec, mdl); err != nil {
		return storage.Job{}, err
	}
	// From here the job holds a place under MaxRunningJobs, given back
	// unless it starts.
	if err := m.reserve(); err != nil {
		return storage.Job{}, err
	}
	started := false
	defer func() {
		if !started {
			m.unreserve()
		}
	}()
	if err := m.joinUnit(&spec); err != nil {
		return storage.Job{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.calibrationTimeout)
	spec, err = calibrate(ctx, spec)
	cancel()
	if err != nil {
		return storage.Job{}, err
	}
	if spec.DP.AbortDelta, err = abortDelta(spec); err != nil {
		return storage.Job{}, err
	}
	if spec.DP.AbortDelta > 0 && spec.DP.PrivacyUnit != "" {
		return storage.Job{}, &ValidationError{Field: "dp.privacy_unit", Rule: fmt.Sprintf("cannot share a budget: this job's secure aggregation aborts cost δ = %.3g of its own (abort_delta), which a shared budget's δ does not provide for", spec.DP.AbortDelta)}
	}
	if err := checkFirstRoundFits(spec); err != nil {
		return storage.Job{}, err
	}
	cfg, err := json.Marshal(spec)
	if err != nil {
		return storage.Job{}, err
	}
	id, err := newJobID()
	if err != nil {
		return storage.Job{}, err
	}
	j := storage.Job{ID: id, Config: cfg, State: storage.StateRunning, CreatedAt: time.Now().UTC()}
	// Admission and the write are one step under the unit's lock, so the
	// stored job is its reservation.
	if err := m.admitToUnit(spec, func() error { return m.db.CreateJob(j) }); err != nil {
		return storage.Job{}, err
	}
	started = true
	m.start(j, spec, true)
	return m.db.Job(id)
}

// reserve takes a place for a new job under Options.MaxRunningJobs, or
// returns an error wrapping ErrCapacity when every place is taken by a
// running job or a submission in progress.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if max := m.limits.MaxRunningJobs; max > 0 && len(m.running)+m.reserved >= max {
		return fmt.Errorf("%w: %d jobs are running, the most this server runs at once (--max-running-jobs); retry when one has finished", ErrCapacity, len(m.running)+m.reserved)
	}
	m.reserved++
	return nil
}

// unreserve gives back a place that reserve took for a job that did not
// start.
func (m *Manager) unreserve() {
	m.mu.Lock()
	m.reserved--
	m.mu.Unlock()
}

func newJobID() (string, error) {
	var b [6]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	return "job-" + hex.EncodeToString(b[:]), nil
}

// Resume restarts every job left in a non-terminal state, from its last
// committed round, each in its own goroutine. It returns an error only
// when the job list cannot be read: a job that cannot resume (an
// unreadable configuration, one that no longer passes the memory bound,
// a failure or panic while it loads or trains) ends in state failed with
// a message saying why, and the others run. Resumed jobs count towards
// Options.MaxRunningJobs (they were admitted before) even beyond it.
func (m *Manager) Resume() error {
	jobs, err := m.db.Jobs()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State.Terminal() {
			continue
		}
		var spec Spec
		if err := json.Unmarshal(j.Config, &spec); err != nil {
			m.finish(j.ID, storage.StateFailed, "stored configuration unreadable: "+err.Error())
			continue
		}
		m.log.Info("resuming job", "job", j.ID, "after_round", j.Round)
		m.start(j, spec, false)
	}
	return nil
}

// start runs j in the background; reserved says it holds a place taken
// by reserve.
func (m *Manager) start(j storage.Job, spec Spec, reserved bool) {
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &run{cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.running[j.ID] = r
	if reserved {
		m.reserved--
	}
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		defer func() {
			m.mu.Lock()
			delete(m.running, j.ID)
			m.mu.Unlock()
		}()
		state, msg := m.runRecovered(ctx, j, spec)
		if state == "" { // server shutdown: leave it running, to resume
			return
		}
		m.finish(j.ID, state, msg)
	}()
}

// runRecovered is runJob under recover: a panic in the job's goroutine
// (or one that fl re-raises there from a worker) fails this job, with
// the panic and its stack in the log, instead of ending the process and
// every other job with it.
func (m *Manager) runRecovered(ctx context.Context, j storage.Job, spec Spec) (state storage.JobState, msg string) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		stack := debug.Stack()
		if pe, ok := p.(*fl.PanicError); ok {
			p, stack = pe.Value, pe.Stack
		}
		m.log.Error("job panicked", "job", j.ID, "panic", fmt.Sprint(p), "stack", string(stack))
		state, msg = storage.StateFailed, "internal error: the job panicked"+panicDetail(spec, p)+"; the server logged the panic and its stack and goes on running the other jobs"
	}()
	return m.runJob(ctx, j, spec)
}

// panicDetail is the panic value for the job's message, " (value)", or
// nothing for a DP job: its message is released, and a panic's text may
// describe a user's data (a length, an index), so it stays in the log.
func panicDetail(spec Spec, p any) string {
	if spec.DP.Enabled {
		return ""
	}
	return fmt.Sprintf(" (%v)", p)
}

// finish records job id's final state. A failed write is retried
// (finishAttempts, with backoff) and logged; if it still fails, the state
// is kept in memory, so that reads report it (with a message saying it is
// not persisted) rather than running forever. The job then resumes at the
// next start, from its last committed round, unless Shutdown manages to
// write the state first.
func (m *Manager) finish(id string, s storage.JobState, msg string) {
	var err error
	for attempt := range finishAttempts {
		if attempt > 0 {
			time.Sleep(m.retryBackoff << (attempt - 1))
		}
		if err = m.setState(id, s, msg); err == nil {
			m.mu.Lock()
			delete(m.terminal, id)
			m.mu.Unlock()
			m.log.Info("job finished", "job", id, "state", s, "message", msg)
			return
		}
		if errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrNotFound) {
			// Already final (a cancel was recorded first), or gone:
			// nothing to keep.
			m.log.Error("recording job state", "job", id, "state", s, "err", err)
			return
		}
		m.log.Warn("recording job state failed", "job", id, "state", s, "attempt", attempt+1, "of", finishAttempts, "err", err)
	}
	m.log.Error("recording job state failed; keeping it in memory only", "job", id, "state", s, "message", msg, "err", err)
	m.mu.Lock()
	m.terminal[id] = terminalState{state: s, message: msg, err: err}
	m.mu.Unlock()
}

// withTerminal overlays on a stored job the final state kept in memory
// when its write failed (finish).
func (m *Manager) withTerminal(j storage.Job) storage.Job {
	if j.State.Terminal() {
		return j
	}
	m.mu.Lock()
	t, ok := m.terminal[j.ID]
	m.mu.Unlock()
	if ok {
		j.State = t.state
		j.Message = fmt.Sprintf("%s (not persisted: writing this state to the database failed: %v; if the server restarts first, the job resumes from round %d)", t.message, t.err, j.Round)
	}
	return j
}

// persistTerminal tries once more to write the final states kept in
// memory.
func (m *Manager) persistTerminal() {
	m.mu.Lock()
	pending := make(map[string]terminalState, len(m.terminal))
	for id, t := range m.terminal {
		pending[id] = t
	}
	m.mu.Unlock()
	for id, t := range pending {
		err := m.setState(id, t.state, t.message)
		if err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
			m.log.Error("recording job state failed again", "job", id, "state", t.state, "err", err)
			continue
		}
		m.mu.Lock()
		delete(m.terminal, id)
		m.mu.Unlock()
	}
}

// Cancel stops a running job; it ends in state cancelled once its current
// client finishes (the round in flight is not committed). Cancelling a
// finished job is ErrConflict.
func (m *Manager) Cancel(id string) (storage.Job, error) {
	j, err := m.db.Job(id)
	if err != nil {
		return j, err
	}
	if j = m.withTerminal(j); j.State.Terminal() {
		return j, fmt.Errorf("%w: job %s is already %s", ErrConflict, id, j.State)
	}
	m.mu.Lock()
	r := m.running[id]
	m.mu.Unlock()
	if r == nil {
		if err := m.db.SetJobState(id, storage.StateCancelled, "cancelled by user"); err != nil {
			return j, err
		}
	} else {
		r.cancel(errCancelledByUser)
		<-r.done
	}
	j, err = m.db.Job(id)
	return m.withTerminal(j), err
}

// Shutdown stops every running job without ending it: each resumes from its
// last committed round at the next Resume. It waits for the jobs to stop or
// ctx to expire.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	for _, r := range m.running {
		r.cancel(context.Canceled)
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		m.persistTerminal()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait blocks until job id is no longer running in this manager.
func (m *Manager) Wait(id string) {
	m.mu.Lock()
	r := m.running[id]
	m.mu.Unlock()
	if r != nil {
		<-r.done
	}
}

// calibrate resolves dp.target_epsilon: it sets z to the smallest noise
// multiplier whose ε after spec.Rounds rounds stays within the target
// (accounting.CalibrateNoise over accounting.Account, so the tighter valid
// accountant decides), raised to MinNoiseMultiplier if below it (more
// noise only lowers ε), and makes the target the job's budget. The search
// runs inside the submission request, so it stops when ctx ends (a
// deadline): each of its accountant runs checks ctx first. Errors are
// *ValidationErrors naming dp.target_epsilon.
func calibrate(ctx context.Context, spec Spec) (Spec, error) {
	target := spec.DP.TargetEpsilon
	if !spec.DP.Enabled || target == 0 {
		return spec, nil
	}
	epsOf := func(_, z float64, steps int, delta float64) (float64, error) {
		if err := ctx.Err(); err != nil {
			return 0, errCalibrationDeadline
		}
		s := spec
		s.DP.NoiseMultiplier = z
		rep, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: roundEvent(s), Count: steps}}, delta)
		return rep.Epsilon(), err
	}
	// Under secure aggregation part of δ may pay for aborts (abort.go):
	// calibrate at δ/2, the least the accountant is left with.
	delta := spec.DP.Delta
	if spec.SecureAggregation && abortProbability(spec) > 0 {
		delta /= 2
	}
	z, err := accounting.CalibrateNoise(epsOf, target, delta, 0, spec.Rounds)
	if errors.Is(err, errCalibrationDeadline) {
		return spec, &ValidationError{Field: "dp.target_epsilon", Rule: "calibrating the noise multiplier for this target took longer than the server allows a submission; set dp.noise_multiplier instead (dpfl-client privacy calibrate finds it offline), or use fewer rounds"}
	}
	if err != nil {
		return spec, &ValidationError{Field: "dp.target_epsilon", Rule: err.Error()}
	}
	spec.DP.NoiseMultiplier = max(z, MinNoiseMultiplier)
	if err := spec.DP.checkNoise("dp.target_epsilon"); err != nil {
		return spec, err
	}
	if spec.DP.EpsilonBudget == 0 || spec.DP.EpsilonBudget > target {
		spec.DP.EpsilonBudget = target
	}
	return spec, nil
}

// checkFirstRoundFits refuses a DP job whose budget cannot pay for even one
// round, rather than creating a job that stops before it starts.
func checkFirstRoundFits(spec Spec) error {
	if !spec.DP.Enabled || spec.DP.EpsilonBudget == 0 {
		return nil
	}
	rep, err := accounting.Account([]accounting.Event{roundEvent(spec)}, spec.DP.AccountingDelta())
	if err != nil {
		return err
	}
	eps := rep.Epsilon()
	if eps > spec.DP.EpsilonBudget {
		return &ValidationError{Field: "dp.epsilon_budget", Rule: fmt.Sprintf(
			"one round already costs ε = %.4g at δ = %g, more than the budget %g; raise the budget or the noise multiplier, or lower the sampling rate",
			eps, spec.DP.Delta, spec.DP.EpsilonBudget)}
	}
	return nil
}

// roundEvent is the DP event of one round of spec, from fl.RoundEvent:
// the Gaussian sum query with noise multiplier z under the sampling the
// server performs (Spec.sampler: Poisson at q·(1+o), or a fixed cohort of
// ⌈K·(1+o)⌉, replace-one). Under Poisson sampling a Target of reports
// (over-selection) lets one user's report push another's out: the sum's
// sensitivity is 2C and the Gaussian's multiplier z/2. Dropouts,
// availability, stragglers and deadlines decide each user's inclusion
// from its own data and seeded draws only, so they keep C.
//
// Devices join rounds of their own accord, so no sampling is credited,
// and the first cohort_size devices to join fill the round: a user can
// displace another, so the round is the plain Gaussian mechanism at
// sensitivity 2C (replace-one adjacency over enrolled devices, each of
// which joins a round at most once).
func roundEvent(spec Spec) accounting.Event {
	z := spec.DP.NoiseMultiplier
	if spec.Population.Source == "devices" {
		return fl.RoundEvent(nil, 0, z, fl.TwoClips)
	}
	s, target := spec.sampler(spec.Population.Clients)
	return fl.RoundEvent(s, spec.Population.Clients, z, fl.TargetSensitivity(target))
}

// RoundMetrics is what a job records for each committed round.
type RoundMetrics struct {
	Round  int `json:"round"`
	Cohort int `json:"cohort,omitempty"`
	// Reported is the number of clients whose updates the aggregate holds.
	Reported        int     `json:"reported,omitempty"`
	Examples        int     `json:"examples,omitempty"`
	TrainLoss       float64 `json:"train_loss,omitempty"`
	MeanUpdateNorm  float64 `json:"mean_update_norm,omitempty"`
	ClippedFraction float64 `json:"clipped_fraction,omitempty"`
	Rejected        int     `json:"rejected,omitempty"`
	// Stragglers counts the cohort's simulated stragglers.
	Stragglers int `json:"stragglers,omitempty"`
	// Unavailable, DroppedOut and Late count selected users that could not
	// take part, dropped out, or reported past the deadline or target
	// (participation).
	Unavailable int `json:"unavailable,omitempty"`
	DroppedOut  int `json:"dropped_out,omitempty"`
	Late        int `json:"late,omitempty"`
	// EstimatedSeconds is the round's estimated time on real devices
	// (round_time), EstimatedTotalSeconds the job's so far.
	EstimatedSeconds      float64 `json:"estimated_seconds,omitempty"`
	EstimatedTotalSeconds float64 `json:"estimated_total_seconds,omitempty"`
	// Test is the global model on the dataset's test split, on evaluation
	// rounds only.
	Test *fl.Metrics `json:"test,omitempty"`
	// EvalUsers is the global model on up to 1,000 users that never train
	// (population.eval_user_fraction), on evaluation rounds only.
	EvalUsers *fl.ClientMetrics `json:"eval_users,omitempty"`
	// Clients is the global model on the clients' held-out examples, when
	// the partition holds some out and on evaluation rounds only.
	Clients *fl.ClientMetrics `json:"clients,omitempty"`
	// SecAgg describes the round's secure aggregation instance (with
	// secure_aggregation only).
	SecAgg *fl.SecAggStats `json:"secagg,omitempty"`
	// Epsilon is ε at the job's δ after this round (absent without DP).
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Accountant names the accountant whose bound Epsilon is.
	Accountant string    `json:"accountant,omitempty"`
	Seconds    float64   `json:"seconds,omitempty"`
	Time       time.Time `json:"time"`
}

// runJob trains j from its last committed round. It returns the terminal
// state and message, or "" when stopped by a server shutdown.
func (m *Manager) runJob(ctx context.Context, j storage.Job, spec Spec) (storage.JobState, string) {
	fail := func(format string, a ...any) (storage.JobState, string) {
		msg := fmt.Sprintf(format, a...)
		m.log.Error("job failed", "job", j.ID, "err", msg)
		return storage.StateFailed, msg
	}
	stopped := func() (storage.JobState, string) {
		if errors.Is(context.Cause(ctx), errCancelledByUser) {
			return storage.StateCancelled, "cancelled by user"
		}
		return "", ""
	}
	devices := spec.Population.Source == "devices"
	// A job stored before the numeric bounds (limits.go) may carry a
	// noise σ that overflows the release and panics.
	if spec.DP.Enabled {
		if sigma := spec.DP.NoiseMultiplier * spec.DP.ClipNorm; !(sigma > 0 && sigma <= MaxNoiseStd) {
			return fail("not started: the noise standard deviation σ = dp.noise_multiplier × dp.clip_norm = %g must be in (0, %g]", sigma, MaxNoiseStd)
		}
	}
	fed, test, err := m.population(spec)
	if err != nil {
		return fail("%v", err)
	}
	var evalIDs []int
	if od, ok := fed.(*data.OnDemand); ok {
		evalIDs = evalUsers(od, 1000)
	}
	mdl, err := model.New(spec.Model, test.Dim, test.Classes)
	if err != nil {
		return fail("%v", err)
	}
	// Again at every (re)start, before the job allocates its buffers: a
	// job resumed under a lower limit must fail, not take the process's
	// memory.
	if err := m.checkMemory(spec, mdl); err != nil {
		return fail("not started: %v", err)
	}
	server, err := fl.NewServerOptimizer(spec.Server.OptConfig())
	if err != nil {
		return fail("%v", err)
	}
	var scaffold *fl.Scaffold
	if spec.Algorithm == "scaffold" {
		scaffold = &fl.Scaffold{N: fed.NumClients()}
	}
	params := make([]float32, mdl.NumParams())
	ck, ok, err := m.db.Checkpoint(j.ID)
	switch {
	case err != nil:
		return fail("reading checkpoint: %v", err)
	case ok && ck.Round == j.Round && len(ck.Params) == len(params):
		copy(params, ck.Params)
		if err := unmarshalAlgState(ck.OptState, server, scaffold); err != nil {
			return fail("restoring server optimizer: %v", err)
		}
	case j.Round == 0:
		initParams(mdl, params, spec.Seed)
	default:
		return fail("checkpoint of round %d missing or mismatched", j.Round)
	}

	secure, err := dp.NewSecureRand()
	if err != nil {
		return fail("%v", err)
	}
	// The server samples at the analysed rate (over-selection included)
	// and the round keeps at most the target of reports.
	_, size := spec.analysed()
	n := spec.Population.Clients
	if fed != nil { // devices jobs have no simulated population
		n = fed.NumClients()
	}
	sampler, _ := spec.sampler(n)
	part := spec.Participation.Model(spec.Seed)
	alg := spec.fedAvg(mdl, server, m.workers, n)
	alg.Scaffold = scaffold
	estimatedTotal, err := m.estimatedSoFar(j)
	if err != nil {
		return fail("%v", err)
	}
	var ledger *ledgerState
	alg.Aggregate = spec.aggregator(spec.DP.NoiseMultiplier*m.noiseFactor(), n, secure, m.workers)
	sa, _ := alg.Aggregate.(*fl.SecureAggregator)
	if spec.Audit.Canaries > 0 && fed != nil {
		if alg.Canaries, err = m.canaries(j.ID, spec, n); err != nil {
			return fail("%v", err)
		}
	}
	if spec.DP.Enabled {
		if ledger, err = m.openLedger(j.ID, spec); err != nil {
			return fail("%v", err)
		}
	}
	eval := fl.NewEvaluator(mdl, m.workers)
	var unavailable, dropped int
	runRound := func(r int) (fl.RoundStats, error) {
		n := fed.NumClients()
		var cohort []int
		if spec.Participation.AmongAvailable {
			cohort = part.SampleAvailable(n, size, r, secure)
		} else {
			cohort = sampler.Sample(n, secure)
		}
		selected := len(cohort)
		cohort, unavailable, dropped = part.Filter(trainingUsers(fed, cohort), r)
		st, err := alg.Round(ctx, r, params, fed, cohort, sampler.ExpectedSize(n))
		st.Cohort = selected
		return st, err
	}
	if devices {
		dev := &deviceRunner{m: m, jobID: j.ID, spec: spec, server: server, secure: secure, noise: dp.Params{ClipNorm: spec.DP.ClipNorm}}
		if spec.DP.Enabled {
			dev.noise.NoiseMultiplier = spec.DP.NoiseMultiplier
		}
		runRound = func(r int) (fl.RoundStats, error) { return dev.round(ctx, r, sa.Attempt, params) }
	}

	for r := j.Round + 1; r <= spec.Rounds; r++ {
		if ctx.Err() != nil {
			return stopped()
		}
		if m.beforeRound != nil {
			m.beforeRound(j.ID, r)
		}
		start := time.Now()
		var eps *float64
		var accountant string
		if ledger != nil {
			// Write-ahead: the event is durable before any noisy output exists.
			stop, err := m.charge(ledger, spec, r)
			if err != nil {
				return fail("appending privacy event: %v", err)
			}
			if stop != "" {
				return storage.StateBudgetExhausted, stop
			}
			e := ledger.current.Epsilon()
			if math.IsNaN(e) || math.IsInf(e, 0) {
				return fail("round %d: the accountants give no finite ε for this job (ε = %v); nothing was released", r, e)
			}
			eps, accountant = &e, ledger.current.Best.Accountant
		}
		// An attempt that secure aggregation aborts below its threshold
		// reveals no sum, so a retry with a fresh cohort is still the one
		// release that the round's single ledger event covers.
		var st fl.RoundStats
		for attempt := 1; ; attempt++ {
			if sa != nil {
				sa.Attempt = attempt
			}
			st, err = runRound(r)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return stopped()
			}
			if errors.Is(err, secagg.ErrTooFewSurvivors) && attempt < spec.SecAgg.MaxAttempts {
				m.log.Warn("secure aggregation aborted; retrying the round", "job", j.ID, "round", r, "attempt", attempt, "err", err)
				continue
			}
			var pe *fl.PanicError
			if errors.As(err, &pe) {
				m.log.Error("job panicked", "job", j.ID, "round", r, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
				return fail("internal error in round %d: a worker panicked%s; the server logged the panic and its stack and goes on running the other jobs", r, panicDetail(spec, pe.Value))
			}
			return fail("round %d: %v", r, err)
		}
		met := RoundMetrics{
			Round: r, Cohort: st.Cohort, Reported: st.Clients, Examples: st.Examples, TrainLoss: st.TrainLoss,
			MeanUpdateNorm: st.MeanNorm, ClippedFraction: st.ClippedFraction, Rejected: st.Rejected, Stragglers: st.Stragglers,
			Epsilon: eps, Accountant: accountant, SecAgg: st.SecAgg,
		}
		met.Unavailable, met.DroppedOut, met.Late = unavailable, dropped, st.Late
		if st.EstimatedSeconds > 0 {
			estimatedTotal += st.EstimatedSeconds
			met.EstimatedSeconds, met.EstimatedTotalSeconds = st.EstimatedSeconds, estimatedTotal
		}
		if r%spec.EvalEvery == 0 || r == spec.Rounds {
			t := eval.Dataset(params, test)
			met.Test = &t
			// Devices keep their data: only the server's test split is scored.
			switch pop := fed.(type) {
			case *data.Federated:
				if c, ok := eval.Clients(params, pop, nil); ok {
					met.Clients = &c
				}
			case *data.OnDemand:
				if c, ok := eval.Users(params, pop, evalIDs); ok {
					met.EvalUsers = &c
				}
			}
		}
		met.Seconds = time.Since(start).Seconds()
		met.Time = time.Now().UTC()
		if spec.DP.Enabled {
			met = met.released(spec)
		}
		// Nothing non-finite is stored: JSON cannot hold it, and every
		// read of the job would fail. Under DP only released values are
		// looked at, so that the failure itself releases nothing else.
		if why := diverged(params, met, st, spec.DP.Enabled); why != "" {
			return fail("training diverged at round %d: %s; nothing of this round was stored: lower client.lr or server.lr", r, why)
		}
		if name, v := met.nonFinite(); name != "" {
			return fail("round %d: metric %s is %v and cannot be stored", r, name, v)
		}
		mj, err := json.Marshal(met)
		if err != nil {
			return fail("encoding metrics: %v", err)
		}
		state, err := marshalAlgState(server, scaffold)
		if err != nil {
			return fail("saving server optimizer: %v", err)
		}
		if err := m.db.CommitRound(j.ID, r, mj, storage.Checkpoint{Round: r, Params: params, OptState: state}); err != nil {
			return fail("committing round %d: %v", r, err)
		}
		if met.Test != nil {
			m.log.Info("round", "job", j.ID, "round", r, "of", spec.Rounds, "test_accuracy", met.Test.Accuracy, "epsilon", valueOr(eps, math.Inf(1)))
		}
	}
	return storage.StateCompleted, fmt.Sprintf("trained %d rounds", spec.Rounds)
}

// diverged says why a round's result is unusable ("" when it is not):
// non-finite parameters of the global model, a non-finite test loss, or,
// without DP, a non-finite training loss or update norm, or every client's
// update rejected as non-finite. Under DP (private) it looks only at
// what the job releases: the model and its score on public data.
func diverged(params []float32, met RoundMetrics, st fl.RoundStats, private bool) string {
	if !simd.AllFinite(params) {
		return "the global model has non-finite parameters"
	}
	if t := met.Test; t != nil && !isFinite(t.Loss) {
		return fmt.Sprintf("the test loss is %v", t.Loss)
	}
	if private {
		return ""
	}
	switch {
	case !isFinite(st.TrainLoss):
		return fmt.Sprintf("the clients' training loss is %v", st.TrainLoss)
	case !isFinite(st.MeanNorm):
		return fmt.Sprintf("the mean update norm is %v", st.MeanNorm)
	case st.Rejected > 0 && st.Clients == 0:
		return fmt.Sprintf("every client's update (%d) was non-finite", st.Rejected)
	}
	return ""
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// nonFinite names the first field of met that is NaN or ±Inf, and its
// value ("" when all are finite).
func (met RoundMetrics) nonFinite() (string, float64) {
	type field struct {
		name string
		v    float64
	}
	fields := []field{
		{"train_loss", met.TrainLoss}, {"mean_update_norm", met.MeanUpdateNorm}, {"clipped_fraction", met.ClippedFraction},
		{"estimated_seconds", met.EstimatedSeconds}, {"estimated_total_seconds", met.EstimatedTotalSeconds},
		{"seconds", met.Seconds}, {"epsilon", valueOr(met.Epsilon, 0)},
	}
	if t := met.Test; t != nil {
		fields = append(fields, field{"test.loss", t.Loss}, field{"test.accuracy", t.Accuracy})
	}
	if c := met.EvalUsers; c != nil {
		fields = append(fields, field{"eval_users.weighted.loss", c.Weighted.Loss})
	}
	if c := met.Clients; c != nil {
		fields = append(fields, field{"clients.weighted.loss", c.Weighted.Loss})
	}
	for _, f := range fields {
		if !isFinite(f.v) {
			return f.name, f.v
		}
	}
	return "", 0
}

func valueOr(p *float64, d float64) float64 {
	if p == nil {
		return d
	}
	return *p
}

// marshalAlgState is the checkpoint's optimizer state: the server
// optimizer's, followed for SCAFFOLD by the control variates.
func marshalAlgState(server fl.ServerOptimizer, scaffold *fl.Scaffold) ([]byte, error) {
	st, err := server.MarshalState()
	if err != nil || scaffold == nil {
		return st, err
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(st)))
	return append(append(b, st...), scaffold.MarshalState()...), nil
}

func unmarshalAlgState(b []byte, server fl.ServerOptimizer, scaffold *fl.Scaffold) error {
	if scaffold == nil {
		return server.UnmarshalState(b)
	}
	if len(b) < 8 || binary.LittleEndian.Uint64(b) > uint64(len(b)-8) {
		return fmt.Errorf("scaffold checkpoint state malformed (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if err := server.UnmarshalState(b[8 : 8+n]); err != nil {
		return err
	}
	return scaffold.UnmarshalState(b[8+n:])
}

// estimatedSoFar is the estimated deployment time of j's committed rounds,
// from the last one's metrics (0 before the first).
func (m *Manager) estimatedSoFar(j storage.Job) (float64, error) {
	if j.Round == 0 {
		return 0, nil
	}
	raw, err := m.db.Metrics(j.ID)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	var last RoundMetrics
	if err := json.Unmarshal(raw[len(raw)-1], &last); err != nil {
		return 0, fmt.Errorf("job %s: last metrics unreadable: %w", j.ID, err)
	}
	return last.EstimatedTotalSeconds, nil
}
