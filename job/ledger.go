package job

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// ledgerState tracks a DP job's privacy spend: the events of its stored
// ledger, composed into an accountant, and the accounting report over
// them.
type ledgerState struct {
	db    *storage.DB
	jobID string
	event accounting.Event // every round of a job releases this event
	raw   []byte
	// unit is the shared budget the job is charged to ("" for none),
	// named in each charge's transparency log leaf.
	unit  string
	delta float64
	// acc holds the ledger's events: rebuilt from the stored ledger at
	// open, then one Compose per appended round, so a round's accounting
	// does not re-read or re-group the whole ledger. Its reports are
	// accounting.Account's over the same events, bit for bit.
	acc *accounting.Accountant
	// current is the report over the ledger; next adds one more round.
	current, next accounting.Report
}

// openLedger rebuilds the job's privacy spend from its stored ledger,
// wasted write-ahead events of interrupted rounds included. A ledger that
// does not hold an event for every committed round (checkLedger) is an
// error naming the job, its committed rounds and the events found: the job
// must not run on a spend that under-counts.
//
// Its appends go through db: the manager's store, or the job's fenced
// view while this replica leads it (lead.go).
func (m *Manager) openLedger(db *storage.DB, jobID string, spec types.Spec) (*ledgerState, error) {
	ev := roundEvent(spec)
	raw, err := accounting.MarshalEvent(ev)
	if err != nil {
		return nil, err
	}
	// The job's ε (and its budget check) is at the δ its privacy report
	// uses: δ less what secure aggregation's aborts cost.
	l := &ledgerState{db: db, jobID: jobID, event: ev, raw: raw, unit: spec.DP.Budget, delta: AccountingDelta(spec.DP)}
	events, err := ledgerEvents(db, jobID)
	if err != nil {
		return nil, err
	}
	l.acc = accounting.NewAccountant()
	for _, e := range events {
		if err := l.acc.Compose(e, 1); err != nil {
			return nil, err
		}
	}
	if l.current, err = l.acc.Epsilon(l.delta); err != nil {
		return nil, err
	}
	return l, l.project()
}

// ledgerEvents reads a DP job's ledger, checks it against the job's
// committed rounds (checkLedger) in the same read, and decodes its events.
func ledgerEvents(db *storage.DB, jobID string) ([]accounting.Event, error) {
	j, entries, err := db.JobLedger(jobID)
	if err != nil {
		return nil, err
	}
	return decodeLedger(j, entries)
}

// decodeLedger checks entries, job j's ledger read with j in one
// transaction, against j's committed rounds (checkLedger) and decodes
// their events.
func decodeLedger(j storage.Job, entries []storage.LedgerEntry) ([]accounting.Event, error) {
	if err := checkLedger(j, entries); err != nil {
		return nil, err
	}
	events := make([]accounting.Event, len(entries))
	for i, e := range entries {
		var err error
		if events[i], err = accounting.UnmarshalEvent(e.Event); err != nil {
			return nil, fmt.Errorf("job %s ledger entry %d: %w", j.ID, e.Seq, err)
		}
	}
	return events, nil
}

// errLedgerShort: a DP job's ledger lacks the event of a committed round.
// It wraps storage.ErrCorrupt.
var errLedgerShort = fmt.Errorf("ledger lost events: %w", storage.ErrCorrupt)

// checkLedger checks a DP job's ledger against its committed rounds j.Round.
// Each round's event is appended (write-ahead) before the round runs, and
// storage refuses an event for any round but Job.Round+1, so the entries'
// rounds run 1, …, j.Round or 1, …, j.Round+1, each round once or, when
// interrupted, more than once: there are never fewer events than committed
// rounds. A ledger that holds fewer, skips a round or stops short of
// j.Round has lost entries (a truncated tail, or a job record from a later
// state than its ledger), and its spend would be under-counted. The error
// wraps errLedgerShort (so storage.ErrCorrupt) and names the job, the
// committed rounds and the events found. Extra events (extraEvents) are
// not an error: they over-count, as the write-ahead rule intends.
func checkLedger(j storage.Job, entries []storage.LedgerEntry) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("job %s: privacy ledger holds %d events for %d committed rounds: %s: %w",
			j.ID, len(entries), j.Round, fmt.Sprintf(format, a...), errLedgerShort)
	}
	if len(entries) < j.Round {
		return bad("committed rounds without an event: at least %d (each round writes its event before it runs, so there are never fewer events than committed rounds)", j.Round-len(entries))
	}
	prev := 0
	for _, e := range entries {
		if e.Round != prev && e.Round != prev+1 {
			return bad("entry seq %d is of round %d after round %d, so round %d has no event", e.Seq, e.Round, prev, prev+1)
		}
		prev = e.Round
	}
	if prev < j.Round {
		return bad("the last event is of round %d, so rounds %d … %d have none", prev, prev+1, j.Round)
	}
	return nil
}

// extraEvents is the number of events in a DP job's ledger beyond one per
// committed round: write-ahead events of round attempts that did not
// commit. Every interruption of a running round (the server killed or
// stopped, the job cancelled or failed, after the event and before the
// commit) leaves at most one, so extraEvents is at most the number of
// interruptions. They are charged, since the round may have released its
// noisy aggregate before it was cut short. events is the length of the
// job's ledger and committed its Job.Round; the result is never negative.
func extraEvents(events, committed int) int {
	return max(0, events-committed)
}

// VerifyLedgers checks, for every job trained with DP, that its ledger
// holds an event for every committed round (checkLedger) and decodes, and
// that the shared budget it names exists. dpfl-server runs it at start,
// after storage.DB.VerifyWith; it reads every DP job's ledger once. The
// result is nil or the joined errors, one per job, each naming the job.
func (m *Manager) VerifyLedgers() error {
	jobs, err := m.db.Jobs()
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range jobs {
		var s types.Spec
		if err := json.Unmarshal(j.Config, &s); err != nil {
			errs = append(errs, fmt.Errorf("job %s: stored configuration unreadable: %w", j.ID, err))
			continue
		}
		if !s.DP.Enabled {
			continue
		}
		if _, err := ledgerEvents(m.db, j.ID); err != nil {
			errs = append(errs, err)
		}
		if name := s.DP.Budget; name != "" {
			if _, err := m.db.Unit(name); err != nil {
				errs = append(errs, fmt.Errorf("job %s is charged to budget %q: %w", j.ID, name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// project computes the report with one more round recorded.
func (l *ledgerState) project() (err error) {
	l.next, err = l.acc.EpsilonWith(l.event, 1, l.delta)
	return err
}

// append records round's event durably, with its charge leaf in the
// transparency log (naming the job's shared budget, if any) in the same
// transaction, then advances the reports.
func (l *ledgerState) append(round int) error {
	if _, err := l.db.AppendCharge(l.jobID, storage.LedgerEntry{Round: round, Event: l.raw}, l.unit); err != nil {
		return err
	}
	return l.advance()
}

// advance composes the round's event, stored by the caller, into the
// accountant and moves the reports on by one round.
func (l *ledgerState) advance() error {
	if err := l.acc.Compose(l.event, 1); err != nil {
		return err
	}
	l.current = l.next
	return l.project()
}
