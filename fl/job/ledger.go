package job

import (
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/storage"
)

// ledgerState tracks a DP job's privacy spend: the ledger in the store and
// two RDP accountants over it, one for what was recorded and one with the
// next round's event added, so the budget check costs one composition.
type ledgerState struct {
	db     *storage.DB
	jobID  string
	event  accounting.Event
	raw    []byte
	delta  float64
	acct   *accounting.RDPAccountant // events recorded so far
	next   *accounting.RDPAccountant // recorded + one more round
	events int
	eps    float64 // ε(δ) of acct
}

// openLedger rebuilds the accountants from the job's stored ledger, wasted
// write-ahead events of crashed rounds included.
func (m *Manager) openLedger(jobID string, spec Spec) (*ledgerState, error) {
	ev := roundEvent(spec)
	raw, err := accounting.MarshalEvent(ev)
	if err != nil {
		return nil, err
	}
	l := &ledgerState{
		db: m.db, jobID: jobID, event: ev, raw: raw, delta: spec.DP.Delta,
		acct: accounting.NewRDPAccountant(nil), next: accounting.NewRDPAccountant(nil),
	}
	entries, err := m.db.Ledger(jobID)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		stored, err := accounting.UnmarshalEvent(e.Event)
		if err != nil {
			return nil, fmt.Errorf("ledger entry %d: %w", e.Seq, err)
		}
		if err := l.acct.Compose(stored, 1); err != nil {
			return nil, fmt.Errorf("ledger entry %d: %w", e.Seq, err)
		}
		if err := l.next.Compose(stored, 1); err != nil {
			return nil, err
		}
	}
	l.events = len(entries)
	if err := l.next.Compose(ev, 1); err != nil {
		return nil, err
	}
	if l.events > 0 {
		if l.eps, _, err = l.acct.Epsilon(l.delta); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// projected is ε(δ) if one more round is recorded.
func (l *ledgerState) projected() (float64, error) {
	eps, _, err := l.next.Epsilon(l.delta)
	return eps, err
}

// append records round's event durably, then advances the accountants.
func (l *ledgerState) append(round int) error {
	if _, err := l.db.AppendLedger(l.jobID, storage.LedgerEntry{Round: round, Event: l.raw}); err != nil {
		return err
	}
	l.events++
	if err := l.acct.Compose(l.event, 1); err != nil {
		return err
	}
	if err := l.next.Compose(l.event, 1); err != nil {
		return err
	}
	eps, _, err := l.acct.Epsilon(l.delta)
	if err != nil {
		return err
	}
	l.eps = eps
	return nil
}
