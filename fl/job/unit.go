package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/storage"
)

// ErrBudget: a job does not fit in what is left of its privacy unit's
// budget. The message names the remaining ε.
var ErrBudget = errors.New("privacy budget exceeded")

// CreateUnit creates a privacy unit: a named budget (ε_max, δ) shared by
// every job that trains on it (dp.privacy_unit). Bad values are a
// *ValidationError; an existing name is storage.ErrExists.
func (m *Manager) CreateUnit(name string, epsilon, delta float64) (storage.Unit, error) {
	switch {
	case name == "" || len(name) > 128:
		return storage.Unit{}, &ValidationError{Field: "name", Rule: "must have 1..128 characters"}
	case !(epsilon > 0) || math.IsInf(epsilon, 0):
		return storage.Unit{}, &ValidationError{Field: "epsilon_budget", Rule: fmt.Sprintf("must be a finite number > 0, got %v", epsilon)}
	case !(delta > 0 && delta < 1):
		return storage.Unit{}, &ValidationError{Field: "delta", Rule: fmt.Sprintf("must be in (0, 1), got %v", delta)}
	}
	u := storage.Unit{Name: name, EpsilonBudget: epsilon, Delta: delta}
	if err := m.db.CreateUnit(u); err != nil {
		return u, err
	}
	return m.db.Unit(name)
}

// UnitReport is a privacy unit's budget, the jobs charged to it and its
// spend over all their ledgers.
type UnitReport struct {
	storage.Unit
	Jobs []string `json:"jobs"`
	// Events is the number of ledger events over all the unit's jobs.
	Events     int                `json:"events"`
	Epsilon    *float64           `json:"epsilon,omitempty"`
	Accountant string             `json:"accountant,omitempty"`
	Accounting *accounting.Report `json:"accounting,omitempty"`
	Remaining  float64            `json:"remaining"`
}

// Unit reports privacy unit name.
func (m *Manager) Unit(name string) (UnitReport, error) {
	u, err := m.db.Unit(name)
	if err != nil {
		return UnitReport{}, err
	}
	m.unitMu.Lock()
	events, jobs, err := m.unitEvents(name)
	m.unitMu.Unlock()
	if err != nil {
		return UnitReport{}, err
	}
	rep := UnitReport{Unit: u, Jobs: jobs, Events: len(events), Remaining: u.EpsilonBudget}
	if len(events) == 0 {
		return rep, nil
	}
	acc, err := accounting.Account(events, u.Delta)
	if err != nil {
		return rep, err
	}
	rep.Accounting, rep.Epsilon, rep.Accountant = &acc, acc.Best.Epsilon, acc.Best.Accountant
	rep.Remaining = u.EpsilonBudget - acc.Epsilon()
	return rep, nil
}

// unitEvents returns the cached events of every job on unit name, loading
// them from the jobs' ledgers on first use. m.unitMu must be held.
func (m *Manager) unitEvents(name string) ([]accounting.Event, []string, error) {
	if c, ok := m.units[name]; ok {
		return c.events, c.jobs, nil
	}
	jobs, err := m.db.Jobs()
	if err != nil {
		return nil, nil, err
	}
	c := &unitCache{jobs: []string{}}
	for _, j := range jobs {
		var s Spec
		if err := json.Unmarshal(j.Config, &s); err != nil {
			return nil, nil, fmt.Errorf("job %s: stored configuration unreadable: %w", j.ID, err)
		}
		if !s.DP.Enabled || s.DP.PrivacyUnit != name {
			continue
		}
		ev, err := ledgerEvents(m.db, j.ID)
		if err != nil {
			return nil, nil, err
		}
		c.events = append(c.events, ev...)
		c.jobs = append(c.jobs, j.ID)
	}
	m.units[name] = c
	return c.events, c.jobs, nil
}

type unitCache struct {
	events []accounting.Event
	jobs   []string
}

// joinUnit gives a job on a privacy unit the unit's δ; an unknown unit is
// a *ValidationError.
func (m *Manager) joinUnit(spec *Spec) error {
	name := spec.DP.PrivacyUnit
	if !spec.DP.Enabled || name == "" {
		return nil
	}
	u, err := m.db.Unit(name)
	if errors.Is(err, storage.ErrNotFound) {
		return &ValidationError{Field: "dp.privacy_unit", Rule: fmt.Sprintf("unknown privacy unit %q; create it with PUT /v1/budgets/%s", name, name)}
	}
	if err != nil {
		return err
	}
	spec.DP.Delta = u.Delta
	return nil
}

// admitToUnit checks, at submission, that the job's full planned spend fits
// in what is left of its unit's budget. Jobs admitted together can still
// exhaust a unit; the per-round check in charge then stops the later one.
func (m *Manager) admitToUnit(spec Spec) error {
	name := spec.DP.PrivacyUnit
	if !spec.DP.Enabled || name == "" {
		return nil
	}
	u, err := m.db.Unit(name)
	if err != nil {
		return err
	}
	m.unitMu.Lock()
	defer m.unitMu.Unlock()
	events, _, err := m.unitEvents(name)
	if err != nil {
		return err
	}
	spent, err := accounting.Account(events, u.Delta)
	if err != nil {
		return err
	}
	planned := append(events[:len(events):len(events)], accounting.SelfComposed{Event: roundEvent(spec), Count: spec.Rounds})
	after, err := accounting.Account(planned, u.Delta)
	if err != nil {
		return err
	}
	if after.Epsilon() > u.EpsilonBudget {
		return fmt.Errorf("%w: privacy unit %q has ε_max = %g at δ = %g and has spent ε = %.4g (remaining %.4g); this job's %d rounds would raise it to %.4g",
			ErrBudget, name, u.EpsilonBudget, u.Delta, spent.Epsilon(), u.EpsilonBudget-spent.Epsilon(), spec.Rounds, after.Epsilon())
	}
	return nil
}

// charge records round r's DP event write-ahead, after checking the job's
// own budget and its unit's. It returns a non-empty reason when the round
// must not run.
func (m *Manager) charge(l *ledgerState, spec Spec, r int) (stop string, err error) {
	if next := l.next.Epsilon(); spec.DP.EpsilonBudget > 0 && next > spec.DP.EpsilonBudget {
		return fmt.Sprintf("round %d would raise ε from %.4g to %.4g at δ=%g, past the budget ε_max=%g; %d rounds completed",
			r, l.current.Epsilon(), next, spec.DP.Delta, spec.DP.EpsilonBudget, r-1), nil
	}
	name := spec.DP.PrivacyUnit
	if name == "" {
		return "", l.append(r)
	}
	// One lock for check and append, so concurrent jobs on a unit cannot
	// both take its last ε.
	m.unitMu.Lock()
	defer m.unitMu.Unlock()
	u, err := m.db.Unit(name)
	if err != nil {
		return "", err
	}
	events, _, err := m.unitEvents(name)
	if err != nil {
		return "", err
	}
	rep, err := accounting.Account(append(events[:len(events):len(events)], l.event), u.Delta)
	if err != nil {
		return "", err
	}
	if rep.Epsilon() > u.EpsilonBudget {
		return fmt.Sprintf("round %d would raise privacy unit %q to ε = %.4g at δ=%g, past its budget ε_max=%g; %d rounds completed",
			r, name, rep.Epsilon(), u.Delta, u.EpsilonBudget, r-1), nil
	}
	if err := l.append(r); err != nil {
		return "", err
	}
	c := m.units[name]
	c.events = append(c.events, l.event)
	if !slices.Contains(c.jobs, l.jobID) {
		c.jobs = append(c.jobs, l.jobID)
	}
	return "", nil
}
