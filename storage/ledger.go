package storage

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
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

// AppendLedger appends e to the job's ledger in one transaction and returns
// the stored entry: Seq is assigned (previous last seq + 1, ignoring e.Seq)
// and a zero Time becomes the current UTC time. e.Event must be valid,
// non-empty JSON and e.Round ≥ 0. Errors wrap ErrNotFound for an unknown job
// and ErrConflict (nothing written) for a job in a terminal state, so that a
// release for a finished job cannot be recorded — and, write-ahead, made.
func (db *DB) AppendLedger(jobID string, e LedgerEntry) (LedgerEntry, error) {
	if e.Round < 0 {
		return LedgerEntry{}, fmt.Errorf("storage: job %q ledger: negative round %d", jobID, e.Round)
	}
	if len(e.Event) == 0 || !json.Valid(e.Event) {
		return LedgerEntry{}, fmt.Errorf("storage: job %q ledger: event is not valid JSON", jobID)
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, _, err := liveJob(tx, jobID, "append to its ledger")
		if err != nil {
			return err
		}
		l, err := subBucket(b, jobID, bucketLedger)
		if err != nil {
			return err
		}
		e.Seq = 1
		if k, _ := l.Cursor().Last(); k != nil {
			last, ok := keyU64(k)
			if !ok {
				return fmt.Errorf("storage: job %q ledger: key %x is not a seq: %w", jobID, k, ErrCorrupt)
			}
			e.Seq = last + 1
		}
		p, err := json.Marshal(&e)
		if err != nil {
			return fmt.Errorf("storage: job %q ledger: encode: %w", jobID, err)
		}
		return l.Put(u64(e.Seq), frame(p))
	})
	if err != nil {
		return LedgerEntry{}, err
	}
	return e, nil
}

// Ledger returns the job's ledger ordered by Seq (1, 2, …). Any entry whose
// checksum fails, that does not decode, whose stored seq disagrees with its
// key, or a gap in the seqs, yields an error wrapping ErrCorrupt naming the
// job and seq; entries are never skipped, since a skipped event would
// under-count spent privacy. Unknown jobs give ErrNotFound.
func (db *DB) Ledger(jobID string) ([]LedgerEntry, error) {
	var out []LedgerEntry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b, err := jobBucket(tx, jobID)
		if err != nil {
			return err
		}
		l, err := subBucket(b, jobID, bucketLedger)
		if err != nil {
			return err
		}
		return l.ForEach(func(k, v []byte) error {
			e, err := decodeLedger(k, v, uint64(len(out))+1)
			if err != nil {
				return fmt.Errorf("storage: job %q ledger %w", jobID, err)
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
