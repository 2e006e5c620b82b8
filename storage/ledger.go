package storage

import (
	"encoding/json"
	"fmt"
	"time"
)

// LedgerEntry is one record of a job's privacy ledger: the accounting event
// (e.g. one Gaussian-mechanism release with its noise multiplier z and
// sampling rate q) of a differentially private step. The ledger is
// write-ahead: the caller appends the event before making the release, so a
// crash can over-count spent privacy but never lose it.
type LedgerEntry struct {
	Seq   uint64          `json:"seq"` // assigned by AppendLedger, 1-based, per job
	Round int             `json:"round"`
	Event json.RawMessage `json:"event"` // accounting event JSON, opaque here; stored compacted
	Time  time.Time       `json:"time"`
}

// ledgerRecord is a ledger entry as stored: the entry's JSON fields,
// then the attempt ID of AppendChargeOnce when one was given (an entry
// without one encodes exactly as before the field existed).
type ledgerRecord struct {
	LedgerEntry
	Attempt string `json:"attempt,omitempty"`
}

// AppendLedger appends e to the job's ledger in one transaction and returns
// the stored entry: Seq is assigned (previous last seq + 1, ignoring e.Seq)
// and a zero Time becomes the current UTC time. e.Event must be valid,
// non-empty JSON.
//
// The entry is the write-ahead event of the round about to run, so e.Round
// must be Job.Round+1 (the next round to commit); a retry after a crash
// appends that round again. Since Job.Round only grows (CommitRound), every
// stored entry then has Round ≤ Job.Round+1 and the rounds never decrease
// with Seq: invariants that Verify checks.
//
// Errors wrap ErrNotFound for an unknown job, and ErrConflict (nothing
// written) for a job in a terminal state, so that a release for a finished
// job cannot be recorded — and, write-ahead, made — or for a round other
// than Job.Round+1.
//
// The same transaction appends the entry's charge leaf to the
// transparency log (tlog.go) and signs the new head, so the ledger and
// the log never disagree.
//
// A retry after an error whose outcome is unknown (ErrUnavailable) may
// charge the round twice: an over-count, never a lost charge.
// AppendChargeOnce makes such retries idempotent.
func (db *DB) AppendLedger(jobID string, e LedgerEntry) (LedgerEntry, error) {
	return db.AppendCharge(jobID, e, "")
}

// AppendCharge is AppendLedger for a job charged to privacy unit unit as
// well ("" for none): the charge leaf it logs names the unit, and the
// same transaction bumps the unit's revision (UnitRevision). It does not
// check the revision: AppendUnitCharge does.
func (db *DB) AppendCharge(jobID string, e LedgerEntry, unit string) (LedgerEntry, error) {
	return db.AppendChargeOnce(jobID, e, unit, "")
}

// AppendChargeOnce is AppendCharge made idempotent by attempt, an ID the
// caller draws once per charge (e.g. 16 random bytes in hex) and passes
// again when it retries the charge after an error of unknown outcome
// (ErrUnavailable): if the ledger's last entry was stored with the same
// attempt, round and (compacted) event, that entry is returned and
// nothing is written, so the round is not charged twice. The attempt is
// stored with the entry (an "attempt" field of its JSON; Ledger does not
// return it). An empty attempt never matches: AppendCharge.
func (db *DB) AppendChargeOnce(jobID string, e LedgerEntry, unit, attempt string) (LedgerEntry, error) {
	return db.appendCharge(jobID, e, unit, attempt, nil)
}

// appendCharge is AppendChargeOnce and, with seen non-nil,
// AppendUnitChargeOnce: in the append's transaction, a charge to a unit
// (unit != "") that writes an entry first passes chargeUnit (the compare
// of the unit's revision with *seen, when given) and bumps the revision.
// A retry that finds its attempt's entry stored writes nothing and is not
// compared: that charge was compared, and bumped the revision, when it
// was stored.
func (db *DB) appendCharge(jobID string, e LedgerEntry, unit, attempt string, seen *uint64) (LedgerEntry, error) {
	if e.Round < 1 {
		return LedgerEntry{}, fmt.Errorf("storage: job %q ledger: round %d, rounds start at 1", jobID, e.Round)
	}
	if len(e.Event) == 0 || !json.Valid(e.Event) {
		return LedgerEntry{}, fmt.Errorf("storage: job %q ledger: event is not valid JSON", jobID)
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	var out LedgerEntry
	err := db.update(func(tx kvTx) error {
		b, j, err := liveJob(tx, jobID, "append to its ledger")
		if err != nil {
			return err
		}
		if e.Round != j.Round+1 {
			return fmt.Errorf("storage: job %q ledger: event for round %d, but %d rounds are committed: only round %d may be charged: %w",
				jobID, e.Round, j.Round, j.Round+1, ErrConflict)
		}
		l, err := subBucket(b, jobID, bucketLedger)
		if err != nil {
			return err
		}
		e.Seq = 1
		k, v := l.Cursor().Last()
		if k != nil {
			last, ok := keyU64(k)
			if !ok {
				return fmt.Errorf("storage: job %q ledger: key %x is not a seq: %w", jobID, k, ErrCorrupt)
			}
			e.Seq = last + 1
		}
		p, err := json.Marshal(&ledgerRecord{LedgerEntry: e, Attempt: attempt})
		if err != nil {
			return fmt.Errorf("storage: job %q ledger: encode: %w", jobID, err)
		}
		// The entry as stored: its event compacted, as a read returns it.
		var stored LedgerEntry
		if err := json.Unmarshal(p, &stored); err != nil {
			return err
		}
		if attempt != "" && k != nil {
			prev, err := decodeLedger(k, v, e.Seq-1)
			if err != nil {
				return fmt.Errorf("storage: job %q ledger %w", jobID, err)
			}
			var rec ledgerRecord
			pv, _ := unframe(v) // decodeLedger checked it
			if json.Unmarshal(pv, &rec) == nil && rec.Attempt == attempt && prev.Round == e.Round && string(prev.Event) == string(stored.Event) {
				out = prev // this attempt's charge is stored already
				return nil
			}
		}
		if unit != "" {
			if err := chargeUnit(tx, unit, seen); err != nil {
				return err
			}
		}
		if err := l.Put(u64(e.Seq), frame(p)); err != nil {
			return err
		}
		out = e
		_, err = db.appendLeaf(tx, chargeLeaf(j, stored, unit))
		return err
	})
	if err != nil {
		return LedgerEntry{}, err
	}
	return out, nil
}

// Ledger returns the job's ledger ordered by Seq (1, 2, …). Any entry whose
// checksum fails, that does not decode, whose stored seq disagrees with its
// key, a gap in the seqs, or an entry that breaks the round invariants of
// AppendLedger (a round before the previous entry's, or after Job.Round+1),
// yields an error wrapping ErrCorrupt naming the job and seq; entries are
// never skipped, since a skipped event would under-count spent privacy.
// Unknown jobs give ErrNotFound.
//
// Storage cannot tell whether a job charges its rounds (only DP jobs do),
// so a ledger shorter than Job.Round is not an error here; package
// job checks that every committed round of a DP job has its event.
func (db *DB) Ledger(jobID string) ([]LedgerEntry, error) {
	_, out, err := db.JobLedger(jobID)
	return out, err
}

// JobLedger returns the job's record and its ledger (as Ledger does) read
// in one transaction, so that the ledger can be checked against the rounds
// the record says are committed without a round committing in between.
func (db *DB) JobLedger(jobID string) (Job, []LedgerEntry, error) {
	var out []LedgerEntry
	var j Job
	err := db.view(func(tx kvTx) error {
		b, err := jobBucket(tx, jobID)
		if err != nil {
			return err
		}
		if j, err = readMeta(b, jobID); err != nil {
			return err
		}
		l, err := subBucket(b, jobID, bucketLedger)
		if err != nil {
			return err
		}
		prev := 0
		return l.ForEach(func(k, v []byte) error {
			e, err := decodeLedger(k, v, uint64(len(out))+1)
			if err == nil {
				err = checkLedgerRound(e, prev, j.Round)
			}
			if err != nil {
				return fmt.Errorf("storage: job %q ledger %w", jobID, err)
			}
			prev = e.Round
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return Job{}, nil, err
	}
	return j, out, nil
}

// decodeLedger decodes one ledger key/value pair that should hold seq want.
// Errors wrap ErrCorrupt and start with "seq N: ".
func decodeLedger(k, v []byte, want uint64) (LedgerEntry, error) {
	var e LedgerEntry
	seq, ok := keyU64(k)
	switch {
	case !ok:
		return e, fmt.Errorf("seq %d: key %x is not a seq: %w", want, k, ErrCorrupt)
	case seq != want:
		return e, fmt.Errorf("seq %d: missing (next stored seq is %d): %w", want, seq, ErrCorrupt)
	case v == nil:
		return e, fmt.Errorf("seq %d: is a bucket, not a value: %w", seq, ErrCorrupt)
	}
	p, err := unframe(v)
	if err != nil {
		return e, fmt.Errorf("seq %d: %v: %w", seq, err, ErrCorrupt)
	}
	if err := json.Unmarshal(p, &e); err != nil {
		return e, fmt.Errorf("seq %d: %v: %w", seq, err, ErrCorrupt)
	}
	if e.Seq != seq || len(e.Event) == 0 {
		return e, fmt.Errorf("seq %d: record says seq %d, event %d bytes: %w", seq, e.Seq, len(e.Event), ErrCorrupt)
	}
	return e, nil
}

// checkLedgerRound checks entry e, which follows an entry of round prev (0
// for the first), against the invariants AppendLedger keeps for a job at
// committed round jobRound: 1 ≤ e.Round ≤ jobRound+1 and e.Round ≥ prev.
// A violation means entries or the job record were damaged or rolled back
// (e.g. a job record older than its ledger). Errors wrap ErrCorrupt and
// start with "seq N: ".
func checkLedgerRound(e LedgerEntry, prev, jobRound int) error {
	switch {
	case e.Round < 1 || e.Round > jobRound+1:
		return fmt.Errorf("seq %d: event of round %d, but the job has committed %d rounds (events are only written for rounds 1 … %d): %w",
			e.Seq, e.Round, jobRound, jobRound+1, ErrCorrupt)
	case e.Round < prev:
		return fmt.Errorf("seq %d: event of round %d after an event of round %d (rounds never decrease): %w", e.Seq, e.Round, prev, ErrCorrupt)
	}
	return nil
}
