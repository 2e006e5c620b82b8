package job

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/storage"
)

// ErrConflict: the request does not fit the job's state (an unknown job is
// storage.ErrNotFound). Both arrive wrapped with context.
var ErrConflict = errors.New("conflict")

// ErrCapacity: the server is running as many jobs as Options.MaxRunningJobs
// allows; the request may be retried later (HTTP 429).
var ErrCapacity = errors.New("server at capacity")

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
	// fmnist gives jobs Fashion-MNIST (source.go).
	fmnist *fashionSource

	// runs are the jobs running in this manager (runs.go).
	runs *runs

	// mu guards live, the open round of each running devices job
	// (devices.go).
	mu   sync.Mutex
	live map[string]*deviceRound

	// unitMu serialises budget checks and ledger appends of jobs on
	// shared budgets; units caches each budget's events (budget.go).
	unitMu sync.Mutex
	units  map[string]*unitCache

	// calibrationTimeout bounds calibrate's search at submission.
	calibrationTimeout time.Duration
	// beforeRound, when set, runs in the job's goroutine before each
	// round, with the job's context; tests use it to make a job panic or
	// to hold it between two rounds.
	beforeRound func(ctx context.Context, jobID string, round int)
	// noiseScale, when > 0, multiplies the noise multiplier of simulated
	// rounds while the ledger still records the spec's z: a deliberate
	// privacy bug that only tests set, for the canary audit's alarm.
	noiseScale float64
	// audits caches the canary audits of ended jobs (canary.go).
	audits auditCache

	// monitor holds the observers and ε caches of GET /metrics (metrics.go).
	monitor monitor

	// lead is the per-job leadership of a replica over a shared etcd
	// store (lead.go); nil: this manager runs every job it has.
	lead *leadership
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

// Options configure a Manager.
type Options struct {
	// DataDir holds the Fashion-MNIST IDX files.
	DataDir string
	// FashionMNIST, when set, loads Fashion-MNIST's training and test
	// splits instead of reading the IDX files in DataDir. The manager
	// calls it once, when a job first needs the dataset (dataset
	// fashion-mnist, or a devices job, scored on its test split);
	// synthetic and LEAF jobs never do. Tests inject small data of the
	// same shape (784 features, 10 classes) here.
	FashionMNIST func() (train, test *data.Dataset, err error)
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
	// Leadership, when set, runs each job only while this replica leads
	// it (lead.go; issue 18): for several replicas over one etcd store.
	Leadership *Leadership
}

// NewManager returns a manager over db. Call Resume to restart jobs that
// were running when the server last stopped.
func NewManager(db *storage.DB, opt Options) *Manager {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	m := &Manager{db: db, dataDir: opt.DataDir, log: opt.Logger, workers: opt.Workers, limits: opt,
		fmnist: newFashionSource(opt.DataDir, opt.FashionMNIST), runs: newRuns(opt.Logger, db.SetJobState),
		live: map[string]*deviceRound{}, units: map[string]*unitCache{}, calibrationTimeout: defaultCalibrationTimeout}
	if opt.Leadership != nil {
		m.lead = newLeadership(*opt.Leadership)
	}
	return m
}

// Submit validates spec, stores the job and starts it in the background. A
// spec that breaks a rule returns a *ValidationError and stores nothing.
func (m *Manager) Submit(spec types.Spec) (storage.Job, error) {
	spec, err := m.admit(spec)
	if err != nil {
		return storage.Job{}, err
	}
	// From here the job holds a place under MaxRunningJobs, given back
	// unless it starts.
	if err := m.runs.reserve(m.limits.MaxRunningJobs); err != nil {
		return storage.Job{}, err
	}
	j, spec, err := m.create(spec)
	if err != nil {
		m.runs.unreserve()
		return storage.Job{}, err
	}
	if m.lead != nil {
		// Run by whichever replica wins its election (most often this one).
		m.runs.unreserve()
		m.campaign(j.ID)
	} else {
		m.start(j, spec, true)
	}
	return m.db.Job(j.ID)
}

// admit checks spec against its dataset, its model and the server's
// limits, and fills in what only the dataset knows (a LEAF dataset's
// population). Only a fashion-mnist job loads Fashion-MNIST.
func (m *Manager) admit(spec types.Spec) (types.Spec, error) {
	trainSize := 0 // synthetic and LEAF populations are not carved from it
	if spec.Dataset == "fashion-mnist" {
		ds, err := m.dataset()
		if err != nil {
			return spec, err
		}
		trainSize = ds.train.Len()
	}
	if err := Validate(spec, trainSize); err != nil {
		return spec, err
	}
	spec, mdl, err := m.submittedModel(spec)
	if err != nil {
		return spec, err
	}
	// A dataset's own population (leaf) is known only now.
	if err := checkExpectedCohort(spec); err != nil {
		return spec, err
	}
	if err := checkSecureEncoding(spec, mdl.NumParams()); err != nil {
		return spec, err
	}
	spec = withDistributedDimension(spec, mdl.NumParams())
	return spec, m.checkMemory(spec, mdl)
}

// submittedModel is the model of a job being submitted, over its
// dataset's dimensions. A LEAF dataset is read now, so that a bad one is
// refused at submission, and its users become the population; the
// request waits, so the reading has a deadline.
func (m *Manager) submittedModel(spec types.Spec) (types.Spec, model.Model, error) {
	var dim, classes int
	switch spec.Dataset {
	case "synthetic":
		dim, classes = data.SyntheticDim, data.SyntheticClasses
	case "leaf":
		fed, test, err := m.loadLEAF(spec, time.Now().Add(leafSubmitTimeout))
		if err != nil {
			return spec, nil, leafRefusal(err)
		}
		spec.Population.Size, dim, classes = fed.NumClients(), test.Base().Dim, test.Base().Classes
		if spec.Sampling.Scheme == "fixed" && spec.Sampling.CohortSize > spec.Population.Size {
			return spec, nil, NewValidationError("sampling.cohort_size", types.RuleRange, fmt.Sprintf("must not exceed the dataset's %d users", spec.Population.Size))
		}
	default:
		ds, err := m.dataset()
		if err != nil {
			return spec, nil, err
		}
		dim, classes = ds.train.Dim, ds.train.Classes
	}
	mdl, err := model.New(spec.Model, dim, classes)
	if err != nil {
		return spec, nil, NewValidationError("model", types.RuleConflict, err.Error())
	}
	return spec, mdl, nil
}

// create plans the admitted job's privacy (its shared budget's δ, the
// calibrated noise, the δ its secure aggregation aborts cost) and stores
// it, admitted to its shared budget in the same step.
func (m *Manager) create(spec types.Spec) (storage.Job, types.Spec, error) {
	spec, err := m.planPrivacy(spec)
	if err != nil {
		return storage.Job{}, spec, err
	}
	cfg, err := json.Marshal(spec)
	if err != nil {
		return storage.Job{}, spec, err
	}
	id, err := newJobID()
	if err != nil {
		return storage.Job{}, spec, err
	}
	j := storage.Job{ID: id, Config: cfg, State: storage.StateRunning, CreatedAt: time.Now().UTC()}
	// Admission and the write are one step under the budgets' lock, so the
	// stored job is its reservation.
	if err := m.admitToUnit(spec, func() error { return m.db.CreateJob(j) }); err != nil {
		return storage.Job{}, spec, err
	}
	return j, spec, nil
}

// planPrivacy gives a job on a shared budget the budget's δ, calibrates z
// for a target ε (within the calibration deadline), sets the δ that
// secure aggregation's aborts cost (abort.go) and checks that the budget
// pays for the first round.
func (m *Manager) planPrivacy(spec types.Spec) (types.Spec, error) {
	if err := m.joinUnit(&spec); err != nil {
		return spec, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.calibrationTimeout)
	spec, err := calibrate(ctx, spec)
	cancel()
	if err != nil {
		return spec, err
	}
	spec = withAdaptiveDefaults(spec)
	if spec, err = withDistributedPlan(spec); err != nil {
		return spec, err
	}
	zField := "dp.noise_multiplier"
	if spec.DP.TargetEpsilon > 0 {
		zField = "dp.target_epsilon"
	}
	if err := checkAdaptiveNoise(spec, zField); err != nil {
		return spec, err
	}
	if spec.DP.AbortDelta, err = abortDelta(spec); err != nil {
		return spec, err
	}
	if spec.DP.AbortDelta > 0 && spec.DP.Budget != "" {
		return spec, NewValidationError("dp.budget", types.RuleConflict, fmt.Sprintf("cannot share a budget: this job's secure aggregation aborts cost δ = %.3g of its own (abort_delta), which a shared budget's δ does not provide for", spec.DP.AbortDelta))
	}
	return spec, checkFirstRoundFits(spec)
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
//
// Under Options.Leadership it instead campaigns for every job that has not
// ended, and keeps looking for new ones (lead.go); it returns an error
// when this replica's address cannot be registered.
func (m *Manager) Resume() error {
	if m.lead != nil {
		return m.startLeading()
	}
	jobs, err := m.db.Jobs()
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State.Terminal() {
			continue
		}
		var spec types.Spec
		if err := json.Unmarshal(j.Config, &spec); err != nil {
			m.runs.finish(j.ID, storage.StateFailed, "stored configuration unreadable: "+err.Error())
			continue
		}
		m.log.Info("resuming job", "job", j.ID, "after_round", j.Round)
		m.start(j, spec, false)
	}
	return nil
}

// start runs j in the background; reserved says it holds a place taken
// by reserve.
func (m *Manager) start(j storage.Job, spec types.Spec, reserved bool) {
	ctx, end := m.runs.begin(j.ID, reserved)
	go func() {
		defer end()
		state, msg := m.runRecovered(ctx, m.db, j, spec)
		if state == "" { // server shutdown: leave it running, to resume
			return
		}
		m.runs.finish(j.ID, state, msg)
	}()
}

// runRecovered is runJob under recover: a panic in the job's goroutine
// (or one that fl re-raises there from a worker) fails this job, with
// the panic and its stack in the log, instead of ending the process and
// every other job with it.
func (m *Manager) runRecovered(ctx context.Context, db *storage.DB, j storage.Job, spec types.Spec) (state storage.JobState, msg string) {
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
	return m.runJob(ctx, db, j, spec)
}

// panicDetail is the panic value for the job's message, " (value)", or
// nothing for a DP job: its message is released, and a panic's text may
// describe a user's data (a length, an index), so it stays in the log.
func panicDetail(spec types.Spec, p any) string {
	if spec.DP.Enabled {
		return ""
	}
	return fmt.Sprintf(" (%v)", p)
}

// withTerminal overlays on a stored job the final state kept in memory
// when its write failed (runs.finish).
func (m *Manager) withTerminal(j storage.Job) storage.Job { return m.runs.overlay(j) }

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
	if r := m.runs.lookup(id); r == nil {
		// Not running here: under Leadership its leader, if any, sees
		// the state at its next write (refused) or scan, and stops.
		if err := m.db.SetJobState(id, storage.StateCancelled, "cancelled by user"); err != nil {
			return j, err
		}
	} else {
		r.cancel(errCancelledByUser)
		<-r.done
		// The run writes cancelled through its leader's fence; if the
		// term lapsed first, that write was refused and the next leader
		// would resume the job. The cancel is the user's, not the
		// leader's: write it as for a job not running here.
		if j, err = m.db.Job(id); err != nil {
			return j, err
		}
		if !m.withTerminal(j).State.Terminal() {
			if err := m.db.SetJobState(id, storage.StateCancelled, "cancelled by user"); err != nil {
				return j, err
			}
		}
	}
	j, err = m.db.Job(id)
	return m.withTerminal(j), err
}

// Shutdown stops every running job without ending it: each resumes from its
// last committed round at the next Resume. It waits for the jobs to stop or
// ctx to expire.
func (m *Manager) Shutdown(ctx context.Context) error {
	if m.lead != nil {
		m.lead.cancel() // no new campaign or term
	}
	if err := m.runs.stop(ctx); err != nil {
		return err
	}
	if m.lead != nil {
		return m.stopLeading(ctx) // each campaign resigns its term
	}
	m.runs.persist()
	return nil
}

// Wait blocks until job id is no longer running in this manager.
func (m *Manager) Wait(id string) {
	if r := m.runs.lookup(id); r != nil {
		<-r.done
	}
}
