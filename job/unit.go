package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/storage"
)

// ErrBudget: a job does not fit in what is left of its privacy unit's
// budget once the unit's spent events and its running jobs' reserved
// rounds are counted. The message names the remaining ε.
var ErrBudget = errors.New("privacy budget exceeded")

// MaxNameLen bounds a name the API stores (a privacy unit's).
const MaxNameLen = 64

// CheckName checks a name that the API stores and that appears in paths
// (PUT /v1/budgets/{name}) and logs: 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], starting with a letter or digit. So no name carries a
// control character, a path separator, or a look-alike of another, and
// "." and ".." are not names. A bad name is a *ValidationError for field.
func CheckName(field, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return &ValidationError{Field: field, Rule: fmt.Sprintf("must have 1 to %d characters, got %d", MaxNameLen, len(name))}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return &ValidationError{Field: field, Rule: fmt.Sprintf("may hold only letters, digits, '.', '_' and '-', starting with a letter or digit; byte %d is %q", i, c)}
		}
	}
	return nil
}

// CreateUnit creates a privacy unit: a named budget (ε_max, δ) shared by
// every job that trains on it (dp.privacy_unit). Bad values are a
// *ValidationError; an existing name is storage.ErrExists.
func (m *Manager) CreateUnit(name string, epsilon, delta float64) (storage.Unit, error) {
	if err := CheckName("name", name); err != nil {
		return storage.Unit{}, err
	}
	switch {
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

// UnitReport is a privacy unit's budget, the jobs charged to it, its spend
// over all their ledgers and what its running jobs have reserved.
type UnitReport struct {
	storage.Unit
	// Adjacency is the neighbouring relation the unit's ε is stated under,
	// AdjacencyAddRemove or AdjacencyReplaceOne: that of its first job,
	// which every later job must share. "" until a job is admitted.
	Adjacency string `json:"adjacency"`
	// Jobs are the IDs of the DP jobs charged to the unit, oldest first.
	Jobs []string `json:"jobs"`
	// Events is the number of ledger events over all the unit's jobs.
	Events int `json:"events"`
	// ExtraEvents is how many of Events are beyond one per committed
	// round: write-ahead events of rounds that did not commit (at most one
	// per interruption of a running round; docs/auditing.md) and of
	// rounds running now. They are charged.
	ExtraEvents int `json:"extra_events"`
	// Epsilon is ε at the unit's δ over the Events (absent with none),
	// from Accountant; Accounting holds both accountants' estimates.
	Epsilon    *float64           `json:"epsilon,omitempty"`
	Accountant string             `json:"accountant,omitempty"`
	Accounting *accounting.Report `json:"accounting,omitempty"`
	// Remaining is ε_max − Epsilon: the budget not yet spent.
	Remaining float64 `json:"remaining"`
	// Running is the number of the unit's jobs that have not ended;
	// ReservedRounds is the rounds they have yet to run, each reserved at
	// the job's round event.
	Running        int `json:"running"`
	ReservedRounds int `json:"reserved_rounds"`
	// Committed is ε at the unit's δ over the Events and the reserved
	// rounds: the position a new job is admitted against (absent when
	// nothing is spent or reserved). Available is ε_max − Committed, the
	// most a new job can be admitted for.
	Committed *float64 `json:"committed_epsilon,omitempty"`
	Available float64  `json:"available"`
	// Note, when set, says why the unit's ε is not a proven bound.
	Note string `json:"note,omitempty"`
}

// Unit reports privacy unit name.
func (m *Manager) Unit(name string) (UnitReport, error) {
	m.unitMu.Lock()
	pos, err := m.unitPosition(name)
	m.unitMu.Unlock()
	if err != nil {
		return UnitReport{}, err
	}
	u := pos.unit
	rep := UnitReport{
		Unit: u, Adjacency: pos.adjacency, Jobs: pos.jobs, Events: len(pos.spent), ExtraEvents: pos.extra,
		Remaining: u.EpsilonBudget, Running: pos.running, ReservedRounds: pos.reservedRounds, Available: u.EpsilonBudget,
	}
	if len(pos.mixed) > 0 {
		rep.Note = mixedNote(name, pos)
	}
	if len(pos.spent) > 0 {
		acc, err := pos.acc.Epsilon(u.Delta)
		if err != nil {
			return rep, err
		}
		rep.Accounting, rep.Epsilon, rep.Accountant = &acc, acc.Best.Epsilon, acc.Best.Accountant
		rep.Remaining = u.EpsilonBudget - acc.Epsilon()
	}
	if len(pos.spent)+len(pos.reserved) > 0 {
		ca, err := pos.committedAccountant()
		if err != nil {
			return rep, err
		}
		acc, err := ca.Epsilon(u.Delta)
		if err != nil {
			return rep, err
		}
		c := acc.Epsilon()
		rep.Committed, rep.Available = &c, u.EpsilonBudget-c
	}
	return rep, nil
}

// unitCache is what the manager keeps of a privacy unit between calls,
// under m.unitMu: the events of its jobs' ledgers, loaded once and then
// extended by charge (the only writer of those ledgers).
type unitCache struct {
	events []accounting.Event
	// acc has composed events, in order: its reports are
	// accounting.Account(events, ·)'s, at a cost per charge that does not
	// grow with the unit's ledgers.
	acc *accounting.Accountant
	// count is the number of events of each job in events.
	count map[string]int
}

// unitJob is a stored DP job charged to a unit.
type unitJob struct {
	job  storage.Job
	spec Spec
}

// position is a privacy unit's committed position, computed from stored
// state only (the unit record, job specs, states and rounds, and
// ledgers), so a restarted server sees the same one.
type position struct {
	unit storage.Unit
	// stored are the unit's DP jobs, oldest first; jobs their IDs.
	stored []unitJob
	jobs   []string
	// spent is every event of their ledgers; acc has composed them.
	spent []accounting.Event
	acc   *accounting.Accountant
	// reserved holds, per job that has not ended, SelfComposed(round
	// event, rounds it has yet to run).
	reserved       []accounting.Event
	reservedRounds int
	running        int
	// adjacency is the first job's relation; mixed lists the jobs whose
	// relation differs from it.
	adjacency string
	mixed     []string
	// extra counts the ledger events of rounds that did not commit.
	extra int
}

// committedAccountant returns a new accountant holding the position's
// committed events: spent, then reserved (a clone of acc with the
// reserved events composed after them).
func (p position) committedAccountant() (*accounting.Accountant, error) {
	a := p.acc.Clone()
	for _, e := range p.reserved {
		if err := a.Compose(e, 1); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// unitPosition computes unit name's position. m.unitMu must be held.
//
// A job that has not ended reserves its remaining
// rounds, Spec.Rounds − Job.Round, at its round event. While a round runs,
// its write-ahead event is already in the ledger and the round is still
// counted as remaining, so the position over-counts by one event per
// running round: exactly the event an interruption of that round would
// waste. A job that ends for any reason (completed, cancelled, failed,
// budget_exhausted) stops reserving, which releases what it did not spend.
func (m *Manager) unitPosition(name string) (position, error) {
	u, err := m.db.Unit(name)
	if err != nil {
		return position{}, err
	}
	jobs, err := m.unitJobs(name)
	if err != nil {
		return position{}, err
	}
	c, err := m.unitCache(name, jobs)
	if err != nil {
		return position{}, err
	}
	// A clone, not the cache's accountant: Unit reads the position after
	// releasing m.unitMu, while charge composes into the cache's.
	p := position{unit: u, stored: jobs, jobs: []string{}, spent: c.events, acc: c.acc.Clone()}
	for _, uj := range jobs {
		j, s := uj.job, uj.spec
		p.jobs = append(p.jobs, j.ID)
		p.extra += extraEvents(c.count[j.ID], j.Round)
		if adj := s.Adjacency(); p.adjacency == "" {
			p.adjacency = adj
		} else if adj != p.adjacency {
			p.mixed = append(p.mixed, j.ID)
		}
		if j.State.Terminal() {
			continue
		}
		p.running++
		if left := s.Rounds - j.Round; left > 0 {
			p.reserved = append(p.reserved, accounting.SelfComposed{Event: roundEvent(s), Count: left})
			p.reservedRounds += left
		}
	}
	return p, nil
}

// unitCache returns unit name's cache, loading the ledgers of its DP jobs
// on first use; a ledger that does not cover its job's committed rounds
// (checkLedger) is an error naming the job. m.unitMu must be held.
func (m *Manager) unitCache(name string, jobs []unitJob) (*unitCache, error) {
	if c, ok := m.units[name]; ok {
		return c, nil
	}
	c := &unitCache{acc: accounting.NewAccountant(), count: map[string]int{}}
	for _, uj := range jobs {
		ev, err := ledgerEvents(m.db, uj.job.ID)
		if err != nil {
			return nil, fmt.Errorf("privacy unit %q: %w", name, err)
		}
		for _, e := range ev {
			if err := c.acc.Compose(e, 1); err != nil {
				return nil, fmt.Errorf("privacy unit %q: job %s: %w", name, uj.job.ID, err)
			}
		}
		c.events = append(c.events, ev...)
		c.count[uj.job.ID] = len(ev)
	}
	m.units[name] = c
	return c, nil
}

// unitJobs lists the stored DP jobs charged to unit name, oldest first.
func (m *Manager) unitJobs(name string) ([]unitJob, error) {
	all, err := m.db.Jobs()
	if err != nil {
		return nil, err
	}
	var jobs []unitJob
	for _, j := range all {
		var s Spec
		if err := json.Unmarshal(j.Config, &s); err != nil {
			return nil, fmt.Errorf("job %s: stored configuration unreadable: %w", j.ID, err)
		}
		if s.DP.Enabled && s.DP.PrivacyUnit == name {
			jobs = append(jobs, unitJob{job: j, spec: s})
		}
	}
	return jobs, nil
}

// joinUnit gives a job on a privacy unit the unit's δ. An unknown unit, or
// a job without DP naming one (it would never be charged), is a
// *ValidationError on dp.privacy_unit.
func (m *Manager) joinUnit(spec *Spec) error {
	name := spec.DP.PrivacyUnit
	if name == "" {
		return nil
	}
	if !spec.DP.Enabled {
		return &ValidationError{Field: "dp.privacy_unit", Rule: fmt.Sprintf(
			"a job without differential privacy (dp.enabled false) releases its results without noise and cannot be charged to privacy unit %q; enable DP or leave privacy_unit empty", name)}
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

// admitToUnit admits a job to its privacy unit at submission, reserving
// the job's whole planned spend. The job must share the unit's adjacency
// (a *ValidationError on dp.privacy_unit otherwise), and the unit's
// position (unitPosition: spent events plus its running jobs' remaining
// rounds) plus SelfComposed(roundEvent(spec), spec.Rounds) must stay
// within ε_max at the unit's δ; otherwise the error wraps ErrBudget and
// names the remaining ε. store writes the job; it runs under m.unitMu
// after the checks pass, so that the stored job is its reservation and
// concurrent submissions cannot both take the unit's last ε. A job on no
// unit is just stored. joinUnit has refused a job without DP on a unit.
func (m *Manager) admitToUnit(spec Spec, store func() error) error {
	name := spec.DP.PrivacyUnit
	if name == "" {
		return store()
	}
	m.unitMu.Lock()
	defer m.unitMu.Unlock()
	pos, err := m.unitPosition(name)
	if err != nil {
		return err
	}
	u := pos.unit
	if len(pos.mixed) > 0 {
		return &ValidationError{Field: "dp.privacy_unit", Rule: mixedNote(name, pos) + "; it admits no more jobs"}
	}
	adj := spec.Adjacency()
	if pos.adjacency != "" && adj != pos.adjacency {
		return &ValidationError{Field: "dp.privacy_unit", Rule: fmt.Sprintf(
			"privacy unit %q states its ε under %s adjacency, fixed by its first job, but this job's is %s (%s); guarantees under different neighbouring relations do not compose into one ε, so charge the job to a unit of its own",
			name, pos.adjacency, adj, adjacencyOf(spec))}
	}
	ev := roundEvent(spec)
	ca, err := pos.committedAccountant()
	if err != nil {
		return err
	}
	r, err := ca.EpsilonWith(accounting.SelfComposed{Event: ev, Count: spec.Rounds}, 1, u.Delta)
	if err != nil {
		return err
	}
	if after := r.Epsilon(); after > u.EpsilonBudget {
		// For the message: ε of the committed and of the spent events
		// (0 for none).
		epsOf := func(a *accounting.Accountant, events int) (float64, error) {
			if events == 0 {
				return 0, nil
			}
			r, err := a.Epsilon(u.Delta)
			return r.Epsilon(), err
		}
		before, err := epsOf(ca, len(pos.spent)+len(pos.reserved))
		if err != nil {
			return err
		}
		spent, err := epsOf(pos.acc, len(pos.spent))
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: privacy unit %q has ε_max = %g at δ = %g; it has spent ε = %.4g over %d events and its %d running jobs reserve %d more rounds, which commits ε = %.4g (remaining %.4g); this job's %d rounds would raise it to %.4g",
			ErrBudget, name, u.EpsilonBudget, u.Delta, spent, len(pos.spent), pos.running, pos.reservedRounds, before, u.EpsilonBudget-before, spec.Rounds, after)
	}
	return store()
}

// adjacencyOf says which part of spec sets its adjacency.
func adjacencyOf(spec Spec) string {
	switch {
	case spec.Population.Source == "devices":
		return "devices join of their own accord: replace-one"
	case spec.Sampling.Scheme == "fixed":
		return "a fixed cohort is sampling without replacement: replace-one"
	}
	return "Poisson sampling: add/remove-one"
}

// mixedNote explains a unit whose jobs (admitted before adjacency was
// checked) use both neighbouring relations.
func mixedNote(name string, pos position) string {
	return fmt.Sprintf("privacy unit %q holds jobs under both neighbouring relations (the first is %s; %v are not), whose guarantees do not compose: its ε is not a proven bound",
		name, pos.adjacency, pos.mixed)
}

// charge records round r's DP event write-ahead, after checking the job's
// own budget and its unit's. It returns a non-empty reason when the round
// must not run. The unit check is on the events actually spent: the job's
// rounds were reserved at admission, so it fails only when interruptions
// wasted events beyond the reservations.
func (m *Manager) charge(l *ledgerState, spec Spec, r int) (stop string, err error) {
	if next := l.next.Epsilon(); spec.DP.EpsilonBudget > 0 && next > spec.DP.EpsilonBudget {
		return fmt.Sprintf("round %d would raise ε from %.4g to %.4g at δ=%g, past the budget ε_max=%g; %d rounds completed",
			r, l.current.Epsilon(), next, l.delta, spec.DP.EpsilonBudget, r-1), nil
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
	c, ok := m.units[name]
	if !ok {
		jobs, err := m.unitJobs(name)
		if err != nil {
			return "", err
		}
		if c, err = m.unitCache(name, jobs); err != nil {
			return "", err
		}
	}
	// The round fits if ε over the unit's events and this one stays
	// within ε_max; FitsWith settles that by RDP alone while the budget
	// is far from spent, sparing a PLD computation per charge.
	fits, err := c.acc.FitsWith(l.event, 1, u.Delta, u.EpsilonBudget)
	if err != nil {
		return "", err
	}
	if !fits {
		rep, err := c.acc.EpsilonWith(l.event, 1, u.Delta)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("round %d would raise privacy unit %q to ε = %.4g at δ=%g, past its budget ε_max=%g; %d rounds completed",
			r, name, rep.Epsilon(), u.Delta, u.EpsilonBudget, r-1), nil
	}
	if err := l.append(r); err != nil {
		return "", err
	}
	if err := c.acc.Compose(l.event, 1); err != nil {
		delete(m.units, name) // the charge is stored: reload the unit from the store
		return "", err
	}
	c.events = append(c.events, l.event)
	c.count[l.jobID]++
	return "", nil
}
