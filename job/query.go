package job

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/audit"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// Status is a job as the API shows it: its stored record, its spec and the
// latest round's metrics.
type Status struct {
	storage.Job
	// Config hides the stored raw configuration; Spec shows it decoded.
	Config json.RawMessage `json:"-"`
	Spec   Spec            `json:"spec"`
	// Latest is the last committed round (nil before the first).
	Latest *RoundMetrics `json:"latest,omitempty"`
	// LatestTest is the most recent evaluation on the test split.
	LatestTest *RoundMetrics `json:"latest_evaluated,omitempty"`
	// Notes are facts about the job's data that qualify its guarantee
	// (e.g. examples shared by several users of an on-demand population).
	Notes []string `json:"notes,omitempty"`
}

// Get returns job id's status. A job whose stored configuration cannot
// be decoded is still shown (with a zero Spec and a note saying so): one
// bad record must not make the job, or the list, unreadable.
func (m *Manager) Get(id string) (Status, error) {
	j, err := m.db.Job(id)
	if err != nil {
		return Status{}, err
	}
	return lenient(m.status(j, true))
}

// lenient turns an unreadable configuration into a note on the status.
func lenient(s Status, err error) (Status, error) {
	if errors.Is(err, errConfigUnreadable) {
		s.Spec, s.Notes = Spec{}, []string{err.Error()}
		return s, nil
	}
	return s, err
}

// errConfigUnreadable: a job's stored configuration does not decode.
var errConfigUnreadable = errors.New("stored configuration unreadable")

func (m *Manager) get(id string, withMetrics bool) (Status, error) {
	j, err := m.db.Job(id)
	if err != nil {
		return Status{}, err
	}
	return m.status(j, withMetrics)
}

// List returns every job, oldest first, without per-round history.
func (m *Manager) List() ([]Status, error) {
	jobs, err := m.db.Jobs()
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(jobs))
	for _, j := range jobs {
		s, err := lenient(m.status(j, false))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (m *Manager) status(j storage.Job, withMetrics bool) (Status, error) {
	s := Status{Job: m.withTerminal(j)}
	if err := json.Unmarshal(j.Config, &s.Spec); err != nil {
		return s, fmt.Errorf("job %s: %w: %v", j.ID, errConfigUnreadable, err)
	}
	s.Notes = m.dataNotes(s.Spec)
	if !withMetrics {
		return s, nil
	}
	raw, err := m.db.Metrics(j.ID)
	if err != nil {
		return s, err
	}
	// Decode from the newest round back to the latest evaluation only: a
	// watcher polls this every second, and long jobs have many rounds.
	for i := len(raw) - 1; i >= 0 && s.LatestTest == nil; i-- {
		var r RoundMetrics
		if err := json.Unmarshal(raw[i], &r); err != nil {
			return s, fmt.Errorf("job %s: metrics of round %d unreadable: %w", j.ID, i+1, err)
		}
		if s.Latest == nil {
			s.Latest = &r
		}
		if r.Test != nil {
			s.LatestTest = &r
		}
	}
	return s, nil
}

// Metrics returns every committed round's metrics of job id, in order.
func (m *Manager) Metrics(id string) ([]RoundMetrics, error) {
	raw, err := m.db.Metrics(id)
	if err != nil {
		return nil, err
	}
	out := make([]RoundMetrics, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("job %s: metrics of round %d unreadable: %w", id, i+1, err)
		}
	}
	return out, nil
}

// PrivacyReport is a job's privacy ledger and the ε it amounts to. Events
// are in dp_accounting's DpEvent JSON form (see accounting.MarshalEvent),
// so ε can be recomputed independently from them (docs/auditing.md).
type PrivacyReport struct {
	JobID   string `json:"job_id"`
	Private bool   `json:"private"`
	// Delta is the job's δ: the guarantee is (Epsilon, Delta)-DP under
	// Adjacency.
	Delta float64 `json:"delta,omitempty"`
	// Adjacency is the neighbouring relation of the guarantee:
	// "add_remove" (one user more or less) or "replace_one" (one user's
	// data replaced by anything; README, "What is protected").
	Adjacency string `json:"adjacency,omitempty"`
	// AbortDelta is the part of Delta that secure aggregation's aborts
	// cost (abort.go); the accountants run at Delta − AbortDelta.
	AbortDelta float64 `json:"abort_delta,omitempty"`
	// Epsilon is the tighter valid upper bound on ε at Delta over every
	// recorded event; absent when there are none.
	Epsilon *float64 `json:"epsilon,omitempty"`
	// Accountant names the accountant that produced Epsilon.
	Accountant string `json:"accountant,omitempty"`
	// Accounting holds both accountants' estimates.
	Accounting *accounting.Report `json:"accounting,omitempty"`
	// EpsilonBudget is ε_max (0: none); Remaining is ε_max − ε.
	EpsilonBudget float64  `json:"epsilon_budget,omitempty"`
	Remaining     *float64 `json:"remaining,omitempty"`
	// Rounds is the number of committed rounds; Events holds at least one
	// per committed round, and one more for each round that an
	// interruption (kill, shutdown, cancel, failure) stopped after its
	// write-ahead event: ExtraEvents, which ε includes.
	Rounds      int                   `json:"rounds"`
	ExtraEvents int                   `json:"extra_events"`
	Events      []storage.LedgerEntry `json:"events"`
	Note        string                `json:"note,omitempty"`
	// Uncovered, when set, says why ε is not a proven bound for this
	// job's configuration (Spec.Uncovered).
	Uncovered string `json:"uncovered,omitempty"`
	// EmpiricalEpsilon is the canary audit's empirical ε, to set beside
	// Epsilon (audit.canaries > 0 only; canary.go).
	EmpiricalEpsilon *EmpiricalEpsilon `json:"empirical_epsilon,omitempty"`
}

// Privacy recomputes job id's ε from its stored ledger.
func (m *Manager) Privacy(id string) (PrivacyReport, error) {
	// The job and its ledger in one read, so that the check below sees
	// a ledger and a committed round count of the same moment.
	j, entries, err := m.db.JobLedger(id)
	if err != nil {
		return PrivacyReport{}, err
	}
	s, err := m.status(j, false)
	if err != nil {
		return PrivacyReport{}, err
	}
	rep := PrivacyReport{JobID: id, Private: s.Spec.DP.Enabled, Rounds: s.Round, Events: entries}
	if rep.Events == nil {
		rep.Events = []storage.LedgerEntry{}
	}
	if !s.Spec.DP.Enabled {
		rep.Note = "job trained without differential privacy: no (ε, δ) guarantee"
		return rep, nil
	}
	rep.Delta, rep.EpsilonBudget = s.Spec.DP.Delta, s.Spec.DP.EpsilonBudget
	rep.Adjacency, rep.AbortDelta = s.Spec.Adjacency(), s.Spec.DP.AbortDelta
	rep.Uncovered = s.Spec.Uncovered()
	rep.ExtraEvents = extraEvents(len(entries), s.Round)
	// Checked even when empty: a DP job with committed rounds and no
	// events has lost its ledger.
	events, err := decodeLedger(j, entries)
	if err != nil {
		return rep, err
	}
	if len(entries) == 0 {
		return rep, nil
	}
	acc, err := accounting.Account(events, s.Spec.DP.AccountingDelta())
	if err != nil {
		return rep, err
	}
	rep.Accounting, rep.Epsilon, rep.Accountant = &acc, acc.Best.Epsilon, acc.Best.Accountant
	if rep.Epsilon != nil && rep.EpsilonBudget > 0 {
		left := rep.EpsilonBudget - *rep.Epsilon
		rep.Remaining = &left
	}
	if rep.EmpiricalEpsilon, err = m.empiricalEpsilon(s, rep.Epsilon); err != nil {
		return rep, err
	}
	return rep, nil
}

// ModelExport is a job's latest global model.
type ModelExport struct {
	JobID     string `json:"job_id"`
	Model     string `json:"model"`
	Round     int    `json:"round"`
	NumParams int    `json:"num_params"`
	// Params is the flat parameter vector; fl/model documents its layout.
	Params []float32 `json:"params"`
	// Certificate ties the model to the transparency log: its (ε, δ),
	// adjacency and accountant, its hash, the release leaf with its
	// inclusion proof, and the signed checkpoint (transparency.go;
	// audit.VerifyModel checks it). Absent when the server does not sign
	// its log.
	Certificate *audit.ModelCertificate `json:"certificate,omitempty"`
}

// Model returns the checkpoint of job id's last committed round. A job
// without one, or whose parameters are not all finite, is ErrConflict.
func (m *Manager) Model(id string) (ModelExport, error) {
	s, err := m.get(id, false)
	if err != nil {
		return ModelExport{}, err
	}
	ck, ok, err := m.db.Checkpoint(id)
	if err != nil {
		return ModelExport{}, err
	}
	if !ok {
		return ModelExport{}, fmt.Errorf("%w: job %s has no committed round yet", ErrConflict, id)
	}
	// Runners check every round's model before committing it, but a
	// database written before that check may hold a diverged one, which
	// JSON cannot carry.
	if !simd.AllFinite(ck.Params) {
		return ModelExport{}, fmt.Errorf("%w: job %s's model of round %d has non-finite parameters (training diverged) and cannot be exported", ErrConflict, id, ck.Round)
	}
	cert, err := m.modelCertificate(id, s.Spec, ck.Round)
	if err != nil {
		return ModelExport{}, err
	}
	return ModelExport{JobID: id, Model: s.Spec.Model, Round: ck.Round, NumParams: len(ck.Params), Params: ck.Params, Certificate: cert}, nil
}

// RoundRecord is one round's participation and timing, as
// GET /v1/jobs/{id}/rounds shows it.
type RoundRecord struct {
	Round int `json:"round"`
	// Selected is the sampled cohort; Unavailable those not online in
	// the round; Reported the clients whose updates the aggregate holds;
	// Dropped those that dropped out (after selection or of secure
	// aggregation), reported late or were discarded as stragglers;
	// Straggled the stragglers, kept or not.
	// Under DP all of these are private and absent, except Selected for
	// a fixed cohort (the configured K).
	Selected    int `json:"selected,omitempty"`
	Unavailable int `json:"unavailable,omitempty"`
	Reported    int `json:"reported,omitempty"`
	Dropped     int `json:"dropped,omitempty"`
	Straggled   int `json:"straggled,omitempty"`
	Rejected    int `json:"rejected,omitempty"`
	// EstimatedSeconds and EstimatedTotalSeconds are the round-time
	// model's deployment estimates (absent when the job has none, and
	// under DP, where they follow the cohort's largest dataset).
	EstimatedSeconds      float64 `json:"estimated_seconds,omitempty"`
	EstimatedTotalSeconds float64 `json:"estimated_total_seconds,omitempty"`
	// Seconds is the simulation's own wall time for the round (absent
	// under DP).
	Seconds float64 `json:"seconds,omitempty"`
	// TestAccuracy is set on evaluation rounds; Epsilon under DP.
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	Epsilon      *float64 `json:"epsilon,omitempty"`
}

// Rounds returns every committed round's participation and timing.
func (m *Manager) Rounds(id string) ([]RoundRecord, error) {
	s, err := m.get(id, false)
	if err != nil {
		return nil, err
	}
	met, err := m.Metrics(id)
	if err != nil {
		return nil, err
	}
	out := make([]RoundRecord, len(met))
	for i, r := range met {
		rec := RoundRecord{
			Round: r.Round, Selected: r.Cohort, Reported: r.Reported, Straggled: r.Stragglers, Rejected: r.Rejected,
			EstimatedSeconds: r.EstimatedSeconds, EstimatedTotalSeconds: r.EstimatedTotalSeconds,
			Seconds: r.Seconds, Epsilon: r.Epsilon,
		}
		if r.SecAgg != nil {
			rec.Dropped = r.SecAgg.Dropped
		}
		if s.Spec.Client.DropStragglers {
			rec.Dropped += r.Stragglers
		}
		rec.Dropped += r.DroppedOut + r.Late
		rec.Unavailable = r.Unavailable
		if r.Test != nil {
			acc := r.Test.Accuracy
			rec.TestAccuracy = &acc
		}
		out[i] = rec
	}
	return out, nil
}
