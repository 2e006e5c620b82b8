package job

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/secagg"
)

// Monitoring (issue 17): what package api exports at GET /metrics beyond
// what it reads from the public queries (List, Get). Two parts:
//
//   - an Observer, told of server-side timings as the jobs run;
//   - LedgerEpsilon and BudgetEpsilon, the ε of a job's privacy report and
//     of a shared budget's report, recomputed only when a ledger grew, so
//     that a scrape every few seconds does not rerun the accountants.
//
// Nothing here releases more than the API does (docs/privacy.md, "What a
// DP job releases"): under DP the round and secure aggregation times are
// not measured for an observer at all, since they follow the cohort's
// size and its largest dataset. Only the time spent accounting (checking
// the budgets, appending the round's event and recomputing ε: server-side
// work on the public ledger) is observed for DP jobs.

// Observer receives server-side timings of the jobs as they run. Each
// function may be nil; they are called in the job's goroutine and must
// not block.
type Observer struct {
	// RoundSeconds: a round of a job without DP committed after seconds
	// of wall time (its rounds[].seconds in the API). Never called for a
	// DP job.
	RoundSeconds func(jobID string, seconds float64)
	// AccountingSeconds: charging a DP job's round (budget checks, the
	// write-ahead ledger append and ε's recomputation) took seconds.
	// Only DP jobs are charged.
	AccountingSeconds func(jobID string, seconds float64)
	// SecAggStageSeconds: a stage of a devices round's secure
	// aggregation instance took seconds, from its opening to the next
	// stage's (or the instance's end); stage is one of SecAggStages. Only
	// for devices jobs without DP.
	SecAggStageSeconds func(jobID, stage string, seconds float64)
}

// SecAggStages are the stage names that Observer.SecAggStageSeconds
// reports: the protocol's four stages (the devices' advertise_keys is
// their join) and unmask_sum, the server's reconstruction of the dropped
// clients' masks and of the sum after the last stage closed.
var SecAggStages = []string{"advertise_keys", "share_keys", "masked_input", "unmask", "unmask_sum"}

// monitor is the manager's observers and the caches of LedgerEpsilon and
// BudgetEpsilon. Its zero value is ready.
type monitor struct {
	mu        sync.Mutex
	next      int
	observers map[int]Observer
	jobs      map[string]ledgerEpsilon
	budgets   map[string]budgetEpsilon
}

type ledgerEpsilon struct {
	events int
	eps    *float64
}

type budgetEpsilon struct {
	events    int
	unit      [2]float64 // ε_max and δ
	spent     *float64
	remaining float64
}

// Observe adds o to the manager's observers until the returned function
// is called.
func (m *Manager) Observe(o Observer) (stop func()) {
	mon := &m.monitor
	mon.mu.Lock()
	defer mon.mu.Unlock()
	if mon.observers == nil {
		mon.observers = map[int]Observer{}
	}
	id := mon.next
	mon.next++
	mon.observers[id] = o
	return func() {
		mon.mu.Lock()
		delete(mon.observers, id)
		mon.mu.Unlock()
	}
}

// each calls f with every observer.
func (m *Manager) each(f func(o Observer)) {
	m.monitor.mu.Lock()
	obs := make([]Observer, 0, len(m.monitor.observers))
	for _, o := range m.monitor.observers {
		obs = append(obs, o)
	}
	m.monitor.mu.Unlock()
	for _, o := range obs {
		f(o)
	}
}

// observeAccounting tells the observers how long charging the round took
// (DP jobs only: without DP nothing is charged).
func (jr *jobRun) observeAccounting(d time.Duration) {
	if jr.ledger == nil {
		return
	}
	jr.m.each(func(o Observer) {
		if o.AccountingSeconds != nil {
			o.AccountingSeconds(jr.job.ID, d.Seconds())
		}
	})
}

// observeCommit tells the observers that met's round committed, with its
// wall time for a job without DP; a DP job releases no round time, so
// nothing is reported.
func (jr *jobRun) observeCommit(met types.RoundMetrics) {
	if jr.spec.DP.Enabled {
		return
	}
	jr.m.each(func(o Observer) {
		if o.RoundSeconds != nil {
			o.RoundSeconds(jr.job.ID, met.Seconds)
		}
	})
}

// runInstance runs a devices round's secure aggregation instance; for a
// job without DP it times each stage for the observers
// (SecAggStageSeconds). Under DP the stages are not timed: how long they
// take follows who joins, drops out and how long their training takes.
func (d *deviceRunner) runInstance(ctx context.Context, driver *secagg.ServerDriver) (secagg.Result, error) {
	if d.spec.DP.Enabled {
		return driver.Run(ctx)
	}
	t := &stageTimer{ServerTransport: driver.Transport, report: func(stage string, s float64) {
		d.m.each(func(o Observer) {
			if o.SecAggStageSeconds != nil {
				o.SecAggStageSeconds(d.jobID, stage, s)
			}
		})
	}}
	driver.Transport = t
	res, err := driver.Run(ctx)
	if err == nil && !t.closedAt.IsZero() {
		t.report("unmask_sum", time.Since(t.closedAt).Seconds())
	}
	return res, err
}

// stageTimer is a secagg.ServerTransport that times the stages it opens:
// a stage lasts from its Open to the next Open or to Close.
type stageTimer struct {
	secagg.ServerTransport
	report   func(stage string, seconds float64)
	open     string // the open stage ("": none)
	since    time.Time
	closedAt time.Time
}

func (t *stageTimer) Open(ctx context.Context, stage secagg.Stage, deadline time.Time) (<-chan struct{}, error) {
	t.end()
	t.open, t.since = stage.String(), time.Now()
	return t.ServerTransport.Open(ctx, stage, deadline)
}

func (t *stageTimer) Close() {
	t.end()
	t.closedAt = time.Now()
	t.ServerTransport.Close()
}

// end reports the open stage, if any.
func (t *stageTimer) end() {
	if t.open != "" {
		t.report(t.open, time.Since(t.since).Seconds())
		t.open = ""
	}
}

// LedgerEpsilon is job id's ε over every event of its ledger, at the δ of
// its privacy report: Privacy(id).Epsilon, bit for bit, without the rest
// of the report (and without computing a canary audit). It is nil for a
// job without DP, before its first event, and when no accountant gives a
// bound. The accountants rerun only when the ledger has grown since the
// last call.
func (m *Manager) LedgerEpsilon(id string) (*float64, error) {
	j, entries, err := m.db.JobLedger(id)
	if err != nil {
		return nil, err
	}
	var spec types.Spec
	if err := json.Unmarshal(j.Config, &spec); err != nil {
		return nil, fmt.Errorf("job %s: %w: %v", id, errConfigUnreadable, err)
	}
	if !spec.DP.Enabled || len(entries) == 0 {
		return nil, nil
	}
	mon := &m.monitor
	mon.mu.Lock()
	c, ok := mon.jobs[id]
	mon.mu.Unlock()
	if ok && c.events == len(entries) {
		return c.eps, nil
	}
	events, err := decodeLedger(j, entries)
	if err != nil {
		return nil, err
	}
	rep, err := accounting.Account(events, AccountingDelta(spec.DP))
	if err != nil {
		return nil, err
	}
	mon.mu.Lock()
	if mon.jobs == nil {
		mon.jobs = map[string]ledgerEpsilon{}
	}
	mon.jobs[id] = ledgerEpsilon{events: len(entries), eps: rep.Best.Epsilon}
	mon.mu.Unlock()
	return rep.Best.Epsilon, nil
}

// BudgetSpend is a shared budget's spend, as its report (Budget) states
// it.
type BudgetSpend struct {
	// EpsilonBudget is the budget's ε_max.
	EpsilonBudget float64
	// Epsilon is ε at the budget's δ over every event of its jobs'
	// ledgers (nil with none): BudgetReport.Epsilon.
	Epsilon *float64
	// Remaining is ε_max − ε: BudgetReport.Remaining.
	Remaining float64
}

// BudgetEpsilon is budget name's spend, the values of Budget(name), with
// the accountants rerun only when its jobs' ledgers have grown since the
// last call.
func (m *Manager) BudgetEpsilon(name string) (BudgetSpend, error) {
	m.unitMu.Lock()
	u, err := m.db.Unit(name)
	if err != nil {
		m.unitMu.Unlock()
		return BudgetSpend{}, err
	}
	// Fresh: other replicas sharing the store charge the budget too.
	c, _, err := m.unit(name, true)
	if err != nil {
		m.unitMu.Unlock()
		return BudgetSpend{}, err
	}
	n, unit := len(c.events), [2]float64{u.EpsilonBudget, u.Delta}
	mon := &m.monitor
	mon.mu.Lock()
	cached, hit := mon.budgets[name]
	mon.mu.Unlock()
	if hit && cached.events == n && cached.unit == unit {
		m.unitMu.Unlock()
		return BudgetSpend{EpsilonBudget: u.EpsilonBudget, Epsilon: cached.spent, Remaining: cached.remaining}, nil
	}
	acc := c.acc.Clone() // charge composes into the cache's accountant once the lock is released
	m.unitMu.Unlock()
	out := BudgetSpend{EpsilonBudget: u.EpsilonBudget, Remaining: u.EpsilonBudget}
	if n > 0 {
		rep, err := acc.Epsilon(u.Delta)
		if err != nil {
			return BudgetSpend{}, err
		}
		out.Epsilon, out.Remaining = rep.Best.Epsilon, u.EpsilonBudget-rep.Epsilon()
	}
	mon.mu.Lock()
	if mon.budgets == nil {
		mon.budgets = map[string]budgetEpsilon{}
	}
	mon.budgets[name] = budgetEpsilon{events: n, unit: unit, spent: out.Epsilon, remaining: out.Remaining}
	mon.mu.Unlock()
	return out, nil
}

// BudgetNames lists the shared budgets, by name.
func (m *Manager) BudgetNames() ([]string, error) {
	units, err := m.db.Units()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(units))
	for i, u := range units {
		out[i] = u.Name
	}
	return out, nil
}
