package job

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/simd"
	"github.com/dpfl/dpfl/storage"
)

// Get returns job id's status. A job whose stored configuration cannot
// be decoded is still shown (with a zero Spec and a note saying so): one
// bad record must not make the job, or the list, unreadable.
func (m *Manager) Get(id string) (types.Status, error) {
	j, err := m.db.Job(id)
	if err != nil {
		return types.Status{}, err
	}
	st, err := lenient(m.status(j, true))
	if err == nil && !j.State.Terminal() {
		st.Leader = m.jobLeader(id)
	}
	return st, err
}

// lenient turns an unreadable configuration into a note on the status.
func lenient(s types.Status, err error) (types.Status, error) {
	if errors.Is(err, errConfigUnreadable) {
		s.Spec, s.Notes = types.Spec{}, []string{err.Error()}
		return s, nil
	}
	return s, err
}

// errConfigUnreadable: a job's stored configuration does not decode.
var errConfigUnreadable = errors.New("stored configuration unreadable")

func (m *Manager) get(id string, withMetrics bool) (types.Status, error) {
	j, err := m.db.Job(id)
	if err != nil {
		return types.Status{}, err
	}
	return m.status(j, withMetrics)
}

// List returns every job, oldest first, without per-round history.
func (m *Manager) List() ([]types.Status, error) {
	jobs, err := m.db.Jobs()
	if err != nil {
		return nil, err
	}
	out := make([]types.Status, 0, len(jobs))
	for _, j := range jobs {
		s, err := lenient(m.status(j, false))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (m *Manager) status(j storage.Job, withMetrics bool) (types.Status, error) {
	s := wireStatus(m.withTerminal(j))
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
		var r types.RoundMetrics
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
func (m *Manager) Metrics(id string) ([]types.RoundMetrics, error) {
	raw, err := m.db.Metrics(id)
	if err != nil {
		return nil, err
	}
	out := make([]types.RoundMetrics, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("job %s: metrics of round %d unreadable: %w", id, i+1, err)
		}
	}
	return out, nil
}

// Privacy recomputes job id's ε from its stored ledger.
func (m *Manager) Privacy(id string) (types.PrivacyReport, error) {
	// The job and its ledger in one read, so that the check below sees
	// a ledger and a committed round count of the same moment.
	j, entries, err := m.db.JobLedger(id)
	if err != nil {
		return types.PrivacyReport{}, err
	}
	s, err := m.status(j, false)
	if err != nil {
		return types.PrivacyReport{}, err
	}
	rep := types.PrivacyReport{JobID: id, Private: s.Spec.DP.Enabled, Rounds: s.Round, Events: wireLedger(entries)}
	if !s.Spec.DP.Enabled {
		rep.Note = "job trained without differential privacy: no (ε, δ) guarantee"
		return rep, nil
	}
	rep.Delta, rep.EpsilonBudget = s.Spec.DP.Delta, s.Spec.DP.EpsilonBudget
	rep.Adjacency, rep.AbortDelta = Adjacency(s.Spec), s.Spec.DP.AbortDelta
	rep.Uncovered = Uncovered(s.Spec)
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
	acc, err := accounting.Account(events, AccountingDelta(s.Spec.DP))
	if err != nil {
		return rep, err
	}
	rep.Accounting, rep.Epsilon, rep.Accountant = wireAccounting(acc), acc.Best.Epsilon, acc.Best.Accountant
	if rep.Epsilon != nil && rep.EpsilonBudget > 0 {
		left := rep.EpsilonBudget - *rep.Epsilon
		rep.Remaining = &left
	}
	if rep.EmpiricalEpsilon, err = m.empiricalEpsilon(s, rep.Epsilon); err != nil {
		return rep, err
	}
	return rep, nil
}

// Model returns the checkpoint of job id's last committed round. A job
// without one, or whose parameters are not all finite, is ErrConflict.
func (m *Manager) Model(id string) (types.ModelExport, error) {
	s, err := m.get(id, false)
	if err != nil {
		return types.ModelExport{}, err
	}
	ck, ok, err := m.db.Checkpoint(id)
	if err != nil {
		return types.ModelExport{}, err
	}
	if !ok {
		return types.ModelExport{}, fmt.Errorf("%w: job %s has no committed round yet", ErrConflict, id)
	}
	// Runners check every round's model before committing it, but a
	// database written before that check may hold a diverged one, which
	// JSON cannot carry.
	if !simd.AllFinite(ck.Params) {
		return types.ModelExport{}, fmt.Errorf("%w: job %s's model of round %d has non-finite parameters (training diverged) and cannot be exported", ErrConflict, id, ck.Round)
	}
	cert, err := m.modelCertificate(id, s.Spec, ck.Round)
	if err != nil {
		return types.ModelExport{}, err
	}
	me := types.ModelExport{JobID: id, Model: s.Spec.Model, Round: ck.Round, NumParams: len(ck.Params), Params: ck.Params}
	if cert != nil {
		if me.Certificate, err = json.Marshal(cert); err != nil {
			return types.ModelExport{}, err
		}
	}
	return me, nil
}

// Rounds returns every committed round's participation and timing: the
// counts of its metrics, under the same names.
func (m *Manager) Rounds(id string) ([]types.RoundRecord, error) {
	met, err := m.Metrics(id)
	if err != nil {
		return nil, err
	}
	out := make([]types.RoundRecord, len(met))
	for i, r := range met {
		out[i] = types.RoundRecord{
			Round: r.Round, Selected: r.Selected, Unavailable: r.Unavailable, Reported: r.Reported,
			DroppedOut: r.DroppedOut, Late: r.Late, Stragglers: r.Stragglers, Rejected: r.Rejected, SecAgg: r.SecAgg,
			EstimatedSeconds: r.EstimatedSeconds, EstimatedTotalSeconds: r.EstimatedTotalSeconds,
			Seconds: r.Seconds, Epsilon: r.Epsilon,
		}
		if r.Test != nil {
			acc := r.Test.Accuracy
			out[i].TestAccuracy = &acc
		}
	}
	return out, nil
}

// wireStatus is a stored job as the API shows it, without its spec and
// metrics. The states are the same strings in both packages.
func wireStatus(j storage.Job) types.Status {
	return types.Status{ID: j.ID, State: types.JobState(j.State), Message: j.Message, Round: j.Round, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
}

// wireLedger is a stored ledger as the API shows it (never nil, so that
// JSON shows an empty ledger as []).
func wireLedger(entries []storage.LedgerEntry) []types.LedgerEntry {
	out := make([]types.LedgerEntry, len(entries))
	for i, e := range entries {
		out[i] = types.LedgerEntry(e)
	}
	return out
}

// wireAccounting is an accounting report as the API shows it.
func wireAccounting(r accounting.Report) *types.AccountingReport {
	return &types.AccountingReport{Delta: r.Delta, RDP: types.Estimate(r.RDP), PLD: types.Estimate(r.PLD), Best: types.Estimate(r.Best), PLDMethod: r.PLDMethod}
}

// wireMetrics, wireClientMetrics and wireSecAgg are fl's round statistics
// as the API shows them (nil stays nil).
func wireMetrics(m *fl.Metrics) *types.Metrics {
	if m == nil {
		return nil
	}
	w := types.Metrics(*m)
	return &w
}

func wireClientMetrics(m *fl.ClientMetrics) *types.ClientMetrics {
	if m == nil {
		return nil
	}
	return &types.ClientMetrics{Weighted: types.Metrics(m.Weighted), MeanAccuracy: m.MeanAccuracy, P10Accuracy: m.P10Accuracy, MinAccuracy: m.MinAccuracy, Clients: m.Clients}
}

func wireSecAgg(s *fl.SecAggStats) *types.SecAggStats {
	if s == nil {
		return nil
	}
	w := types.SecAggStats(*s)
	return &w
}
