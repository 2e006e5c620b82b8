package job

import (
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/storage"
)

// ledgerState tracks a DP job's privacy spend: the events of its stored
// ledger and the accounting report over them.
type ledgerState struct {
	db     *storage.DB
	jobID  string
	event  accounting.Event // every round of a job releases this event
	raw    []byte
	delta  float64
	events []accounting.Event
	// current is the report over events; next adds one more round.
	current, next accounting.Report
}

// openLedger rebuilds the job's privacy spend from its stored ledger,
// wasted write-ahead events of crashed rounds included.
func (m *Manager) openLedger(jobID string, spec Spec) (*ledgerState, error) {
	ev := roundEvent(spec)
	raw, err := accounting.MarshalEvent(ev)
	if err != nil {
		return nil, err
	}
	l := &ledgerState{db: m.db, jobID: jobID, event: ev, raw: raw, delta: spec.DP.Delta}
	if l.events, err = ledgerEvents(m.db, jobID); err != nil {
		return nil, err
	}
	if l.current, err = accounting.Account(l.events, l.delta); err != nil {
		return nil, err
	}
	return l, l.project()
}

func ledgerEvents(db *storage.DB, jobID string) ([]accounting.Event, error) {
	entries, err := db.Ledger(jobID)
	if err != nil {
		return nil, err
	}
	events := make([]accounting.Event, len(entries))
	for i, e := range entries {
		if events[i], err = accounting.UnmarshalEvent(e.Event); err != nil {
			return nil, fmt.Errorf("job %s ledger entry %d: %w", jobID, e.Seq, err)
		}
	}
	return events, nil
}

// project computes the report with one more round recorded.
func (l *ledgerState) project() (err error) {
	l.next, err = accounting.Account(append(l.events[:len(l.events):len(l.events)], l.event), l.delta)
	return err
}

// append records round's event durably, then advances the reports.
func (l *ledgerState) append(round int) error {
	if _, err := l.db.AppendLedger(l.jobID, storage.LedgerEntry{Round: round, Event: l.raw}); err != nil {
		return err
	}
	l.events = append(l.events, l.event)
	l.current = l.next
	return l.project()
}
