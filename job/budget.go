package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// ErrBudget: a job does not fit in what is left of its shared budget once
// the budget's spent events and its running jobs' reserved rounds are
// counted. The message names the remaining ε.
var ErrBudget = errors.New("privacy budget exceeded")

// MaxNameLen bounds a name the API stores (a budget's).
const MaxNameLen = 64

// CheckName checks a name that the API stores and that appears in paths
// (PUT /v1/budgets/{name}) and logs: 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], starting with a letter or digit. So no name carries a
// control character, a path separator, or a look-alike of another, and
// "." and ".." are not names. A bad name is a *ValidationError for field.
func CheckName(field, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return NewValidationError(field, types.RuleFormat, fmt.Sprintf("must have 1 to %d characters, got %d", MaxNameLen, len(name)))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return NewValidationError(field, types.RuleFormat, fmt.Sprintf("may hold only letters, digits, '.', '_' and '-', starting with a letter or digit; byte %d is %q", i, c))
		}
	}
	return nil
}

// CreateBudget creates a shared privacy budget: a named (ε_max, δ) that
// every job that trains on it (dp.budget) is charged to. Bad values are a
// *ValidationError; an existing name is storage.ErrExists. The store
// calls budgets units (storage.Unit).
func (m *Manager) CreateBudget(name string, epsilon, delta float64) (storage.Unit, error) {
	if err := CheckName("name", name); err != nil {
		return storage.Unit{}, err
	}
	switch {
	case !(epsilon > 0) || math.IsInf(epsilon, 0):
		return storage.Unit{}, NewValidationError("epsilon_budget", types.RuleRange, fmt.Sprintf("must be a finite number > 0, got %v", epsilon))
	case !(delta > 0 && delta < 1):
		return storage.Unit{}, NewValidationError("delta", types.RuleRange, fmt.Sprintf("must be in (0, 1), got %v", delta))
	}
	u := storage.Unit{Name: name, EpsilonBudget: epsilon, Delta: delta}
	if err := m.db.CreateUnit(u); err != nil {
		return u, err
	}
	return m.db.Unit(name)
}

// Budget reports shared budget name.
func (m *Manager) Budget(name string) (types.BudgetReport, error) {
	m.unitMu.Lock()
	pos, err := m.budgetPosition(name)
	m.unitMu.Unlock()
	if err != nil {
		return types.BudgetReport{}, err
	}
	u := pos.budget
	rep := types.BudgetReport{
		Budget: types.Budget(u), Adjacency: pos.adjacency, Jobs: pos.jobs, Events: len(pos.spent), ExtraEvents: pos.extra,
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
		rep.Accounting, rep.Epsilon, rep.Accountant = wireAccounting(acc), acc.Best.Epsilon, acc.Best.Accountant
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

// unitCache is what the manager keeps of a budget between calls,
// under m.unitMu: the events of its jobs' ledgers, loaded from the store
// and then extended by this manager's charges. Other managers sharing
// the store (replicas on etcd) charge the budget too, so the cache may be
// stale: rev says which state of the budget it reflects, and the store
// refuses a charge checked against a cache whose rev is no longer the
// budget's (storage.DB.AppendUnitCharge), upon which charge reloads it.
type unitCache struct {
	// rev is the budget's revision (storage.DB.UnitRevision) read
	// before the cache's jobs and ledgers were, plus one per charge of
	// this manager since: every charge counted by rev is in events
	// (events may hold more, charges that landed while they were read,
	// which over-counts).
	rev    uint64
	events []accounting.Event
	// acc has composed events, in order: its reports are
	// accounting.Account(events, ·)'s, at a cost per charge that does not
	// grow with the budget's ledgers.
	acc *accounting.Accountant
	// count is the number of events of each job in events.
	count map[string]int
}

// budgetJob is a stored DP job charged to a budget.
type budgetJob struct {
	job  storage.Job
	spec types.Spec
}

// position is a budget's committed position, computed from stored
// state only (the budget record, job specs, states and rounds, and
// ledgers), so a restarted server sees the same one.
type position struct {
	budget storage.Unit
	// stored are the budget's DP jobs, oldest first; jobs their IDs.
	stored []budgetJob
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

// budgetPosition computes budget name's position. m.unitMu must be held.
//
// A job that has not ended reserves its remaining
// rounds, Spec.Rounds − Job.Round, at its round event. While a round runs,
// its write-ahead event is already in the ledger and the round is still
// counted as remaining, so the position over-counts by one event per
// running round: exactly the event an interruption of that round would
// waste. A job that ends for any reason (completed, cancelled, failed,
// budget_exhausted) stops reserving, which releases what it did not spend.
//
// The events come from the cache, checked to be current (unit with
// fresh): so the position of a budget that other servers sharing the
// store charge is theirs too, up to charges landing after the check.
func (m *Manager) budgetPosition(name string) (position, error) {
	u, err := m.db.Unit(name)
	if err != nil {
		return position{}, err
	}
	c, jobs, err := m.unit(name, true)
	if err != nil {
		return position{}, err
	}
	if jobs == nil {
		if jobs, err = m.budgetJobs(name); err != nil {
			return position{}, err
		}
	}
	// A clone, not the cache's accountant: Unit reads the position after
	// releasing m.unitMu, while charge composes into the cache's.
	p := position{budget: u, stored: jobs, jobs: []string{}, spent: c.events, acc: c.acc.Clone()}
	for _, uj := range jobs {
		j, s := uj.job, uj.spec
		p.jobs = append(p.jobs, j.ID)
		p.extra += extraEvents(c.count[j.ID], j.Round)
		if adj := Adjacency(s); p.adjacency == "" {
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

// unit returns budget name's cache, loading it on first use and, when
// fresh is set, also when the budget's stored revision is no longer the
// cache's (another server sharing the store charged it); jobs are the
// budget's DP jobs when it loaded them, nil when it did not. A ledger
// that does not cover its job's committed rounds (checkLedger) is an
// error naming the job. m.unitMu must be held.
//
// Loading reads the budget's revision first, then lists its jobs, then
// reads their ledgers, each in its own transaction. The order is what
// makes the revision safe to compare: a charge that lands after the
// revision was read has bumped the stored revision past the cache's, so
// a charge checked against this cache is refused (ErrUnitMoved) even if
// its event was missed; had the revision been read after the jobs or
// the ledgers, a charge landing in between (of a job not yet listed, or
// to a ledger already read) would be counted by the revision but not by
// the events, and a check against them would pass on a stale spend.
func (m *Manager) unit(name string, fresh bool) (*unitCache, []budgetJob, error) {
	c, ok := m.units[name]
	if ok && !fresh {
		return c, nil, nil
	}
	rev, err := m.db.UnitRevision(name)
	if err != nil {
		return nil, nil, err
	}
	if ok && c.rev == rev {
		return c, nil, nil
	}
	jobs, err := m.budgetJobs(name)
	if err != nil {
		return nil, nil, err
	}
	if jobs == nil {
		jobs = []budgetJob{}
	}
	c = &unitCache{rev: rev, acc: accounting.NewAccountant(), count: map[string]int{}}
	for _, uj := range jobs {
		ev, err := ledgerEvents(m.db, uj.job.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("budget %q: %w", name, err)
		}
		for _, e := range ev {
			if err := c.acc.Compose(e, 1); err != nil {
				return nil, nil, fmt.Errorf("budget %q: job %s: %w", name, uj.job.ID, err)
			}
		}
		c.events = append(c.events, ev...)
		c.count[uj.job.ID] = len(ev)
	}
	m.units[name] = c
	return c, jobs, nil
}

// budgetJobs lists the stored DP jobs charged to budget name, oldest first.
func (m *Manager) budgetJobs(name string) ([]budgetJob, error) {
	all, err := m.db.Jobs()
	if err != nil {
		return nil, err
	}
	var jobs []budgetJob
	for _, j := range all {
		var s types.Spec
		if err := json.Unmarshal(j.Config, &s); err != nil {
			return nil, fmt.Errorf("job %s: stored configuration unreadable: %w", j.ID, err)
		}
		if s.DP.Enabled && s.DP.Budget == name {
			jobs = append(jobs, budgetJob{job: j, spec: s})
		}
	}
	return jobs, nil
}

// joinUnit gives a job on a budget the budget's δ. An unknown budget, or
// a job without DP naming one (it would never be charged), is a
// *ValidationError on dp.budget.
func (m *Manager) joinUnit(spec *types.Spec) error {
	name := spec.DP.Budget
	if name == "" {
		return nil
	}
	if !spec.DP.Enabled {
		return NewValidationError("dp.budget", types.RuleConflict, fmt.Sprintf(
			"a job without differential privacy (dp.enabled false) releases its results without noise and cannot be charged to budget %q; enable DP or leave dp.budget empty", name))
	}
	u, err := m.db.Unit(name)
	if errors.Is(err, storage.ErrNotFound) {
		return NewValidationError("dp.budget", types.RuleOneOf, fmt.Sprintf("unknown budget %q; create it with PUT /v1/budgets/%s", name, name))
	}
	if err != nil {
		return err
	}
	spec.DP.Delta = u.Delta
	return nil
}

// admitToUnit admits a job to its budget at submission, reserving
// the job's whole planned spend. The job must share the budget's adjacency
// (a *ValidationError on dp.budget otherwise), and the budget's
// position (budgetPosition: spent events plus its running jobs' remaining
// rounds) plus SelfComposed(roundEvent(spec), spec.Rounds) must stay
// within ε_max at the budget's δ; otherwise the error wraps ErrBudget and
// names the remaining ε. store writes the job; it runs under m.unitMu
// after the checks pass, so that the stored job is its reservation and
// concurrent submissions to this manager cannot both take the budget's
// last ε. Replicas sharing an etcd store each hold their own lock, so two
// of them may both admit a job that fits alone: admission is then an
// estimate, and the charge of each round (charge, compared on the
// budget's revision) is what keeps the budget's ε within ε_max; the job
// that finds it spent ends budget_exhausted. A job on no budget is just
// stored. joinUnit has refused a job without DP on a budget.
func (m *Manager) admitToUnit(spec types.Spec, store func() error) error {
	name := spec.DP.Budget
	if name == "" {
		return store()
	}
	m.unitMu.Lock()
	defer m.unitMu.Unlock()
	pos, err := m.budgetPosition(name)
	if err != nil {
		return err
	}
	u := pos.budget
	if len(pos.mixed) > 0 {
		return NewValidationError("dp.budget", types.RuleConflict, mixedNote(name, pos)+"; it admits no more jobs")
	}
	adj := Adjacency(spec)
	if pos.adjacency != "" && adj != pos.adjacency {
		return NewValidationError("dp.budget", types.RuleConflict, fmt.Sprintf(
			"budget %q states its ε under %s adjacency, fixed by its first job, but this job's is %s (%s); guarantees under different neighbouring relations do not compose into one ε, so charge the job to a budget of its own",
			name, pos.adjacency, adj, adjacencyOf(spec)))
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
		return fmt.Errorf("%w: budget %q has ε_max = %g at δ = %g; it has spent ε = %.4g over %d events and its %d running jobs reserve %d more rounds, which commits ε = %.4g (remaining %.4g); this job's %d rounds would raise it to %.4g",
			ErrBudget, name, u.EpsilonBudget, u.Delta, spent, len(pos.spent), pos.running, pos.reservedRounds, before, u.EpsilonBudget-before, spec.Rounds, after)
	}
	return store()
}

// adjacencyOf says which part of spec sets its adjacency.
func adjacencyOf(spec types.Spec) string {
	switch {
	case spec.Population.Source == "devices":
		return "devices join of their own accord: replace-one"
	case spec.Sampling.Scheme == "fixed":
		return "a fixed cohort is sampling without replacement: replace-one"
	}
	return "Poisson sampling: add/remove-one"
}

// mixedNote explains a budget whose jobs (admitted before adjacency was
// checked) use both neighbouring relations.
func mixedNote(name string, pos position) string {
	return fmt.Sprintf("budget %q holds jobs under both neighbouring relations (the first is %s; %v are not), whose guarantees do not compose: its ε is not a proven bound",
		name, pos.adjacency, pos.mixed)
}

// chargeTries bounds how often charge checks a round against a budget
// that other servers sharing the store keep charging between its check
// and its append (storage.ErrUnitMoved).
const chargeTries = 5

// charge records round r's DP event write-ahead, after checking the job's
// own budget and its budget's. It returns a non-empty reason when the round
// must not run. The budget check is on the events actually spent: the job's
// rounds were reserved at admission, so it fails only when interruptions
// wasted events beyond the reservations.
//
// The budget check is against the manager's cache of the budget's events,
// and the append is refused by the store unless the budget's revision is
// still the cache's (storage.DB.AppendUnitCharge), in the append's own
// transaction: so servers sharing a store (etcd), each with its own
// cache, cannot both take a budget's last ε. A refused append drops the
// cache, reloads it and checks again, up to chargeTries times; then the
// error wraps storage.ErrUnavailable (the store kept losing races with
// other writers), which leaves the job to resume.
func (m *Manager) charge(l *ledgerState, spec types.Spec, r int) (stop string, err error) {
	if next := l.next.Epsilon(); spec.DP.EpsilonBudget > 0 && next > spec.DP.EpsilonBudget {
		return fmt.Sprintf("round %d would raise ε from %.4g to %.4g at δ=%g, past the budget ε_max=%g; %d rounds completed",
			r, l.current.Epsilon(), next, l.delta, spec.DP.EpsilonBudget, r-1), nil
	}
	name := spec.DP.Budget
	if name == "" {
		return "", l.append(r)
	}
	// One lock for check and append, so this manager's jobs on a budget
	// cannot both take its last ε, nor race on its cache.
	m.unitMu.Lock()
	defer m.unitMu.Unlock()
	u, err := m.db.Unit(name)
	if err != nil {
		return "", err
	}
	for try := 1; ; try++ {
		// Not fresh: a stale cache is caught by the append's compare of
		// its revision, which spares a read per charge.
		c, _, err := m.unit(name, false)
		if err != nil {
			return "", err
		}
		// The round fits if ε over the budget's events and this one stays
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
			return fmt.Sprintf("round %d would raise budget %q to ε = %.4g at δ=%g, past its budget ε_max=%g; %d rounds completed",
				r, name, rep.Epsilon(), u.Delta, u.EpsilonBudget, r-1), nil
		}
		err = l.appendUnit(r, c.rev)
		if errors.Is(err, storage.ErrUnitMoved) {
			// Charged by another server since the cache's revision: its
			// events may be missing from the check. Reload and check again.
			delete(m.units, name)
			if try == chargeTries {
				return "", fmt.Errorf("budget %q: other servers charged it between each of %d checks of round %d and its append; the round was not charged: %w: %w",
					name, try, r, err, storage.ErrUnavailable)
			}
			continue
		}
		if err != nil {
			// The append's outcome may be unknown (ErrUnavailable): reload
			// the budget from the store at the next charge.
			delete(m.units, name)
			return "", err
		}
		c.rev++
		if err := c.acc.Compose(l.event, 1); err != nil {
			delete(m.units, name) // the charge is stored: reload the unit from the store
			return "", err
		}
		c.events = append(c.events, l.event)
		c.count[l.jobID]++
		return "", nil
	}
}

// appendUnit is ledgerState.append for a job on a shared budget: the
// append is refused, wrapping storage.ErrUnitMoved, unless the budget's
// revision is still seen (storage.DB.AppendUnitCharge).
func (l *ledgerState) appendUnit(round int, seen uint64) error {
	if _, err := l.db.AppendUnitCharge(l.jobID, storage.LedgerEntry{Round: round, Event: l.raw}, l.unit, seen); err != nil {
		return err
	}
	return l.advance()
}

// Budgets is every shared budget's report (Budget), in name order; an
// empty list, never nil, when there is none.
func (m *Manager) Budgets() ([]types.BudgetReport, error) {
	names, err := m.BudgetNames()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]types.BudgetReport, 0, len(names))
	for _, name := range names {
		rep, err := m.Budget(name)
		if err != nil {
			return nil, err
		}
		out = append(out, rep)
	}
	return out, nil
}
