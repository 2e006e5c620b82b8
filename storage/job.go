package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// JobState is the lifecycle state of a federated training job.
type JobState string

// Job states. Pending and Running are live; the rest are terminal and final.
const (
	StatePending   JobState = "pending"   // created, not yet started
	StateRunning   JobState = "running"   // rounds in progress
	StateCompleted JobState = "completed" // ran all configured rounds
	StateFailed    JobState = "failed"    // stopped by an error; Message says why
	StateCancelled JobState = "cancelled" // stopped by a user
	// StateBudgetExhausted: stopped because the next round would exceed the
	// privacy budget (ε, δ) according to the ledger.
	StateBudgetExhausted JobState = "budget_exhausted"
)

// Terminal reports whether s is final: completed, failed, cancelled or
// budget_exhausted. A job in a terminal state accepts no state change, ledger
// entry or round commit.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateBudgetExhausted:
		return true
	}
	return false
}

// Valid reports whether s is one of the six defined states.
func (s JobState) Valid() bool {
	return s == StatePending || s == StateRunning || s.Terminal()
}

// MaxJobIDLen is the longest accepted job ID in bytes.
const MaxJobIDLen = 256

// Job is the stored record of one training job. Config is the job's
// configuration JSON, opaque to this package (stored compacted).
type Job struct {
	ID        string          `json:"id"`
	Config    json.RawMessage `json:"config"`
	State     JobState        `json:"state"`
	Message   string          `json:"message,omitempty"`
	Round     int             `json:"round"` // last committed round, 0 = none
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

var (
	keyJobMeta       = []byte("meta")
	keyJobCheckpoint = []byte("checkpoint")
	bucketLedger     = []byte("ledger")
	bucketMetrics    = []byte("metrics")
)

// CreateJob stores a new job in one transaction, with empty ledger and
// metrics. j.ID must be 1…MaxJobIDLen bytes, j.Round must be 0, j.Config
// must be empty (stored as JSON null) or valid JSON, and j.State empty (meaning StatePending) or
// valid. Zero CreatedAt/UpdatedAt are set to the current UTC time. It
// returns an error wrapping ErrExists if the ID is taken.
func (db *DB) CreateJob(j Job) error {
	switch {
	case j.ID == "":
		return errors.New("storage: empty job id")
	case len(j.ID) > MaxJobIDLen:
		return fmt.Errorf("storage: job id is %d bytes, limit %d", len(j.ID), MaxJobIDLen)
	case j.Round != 0:
		return fmt.Errorf("storage: job %q: new job has round %d, want 0", j.ID, j.Round)
	case len(j.Config) > 0 && !json.Valid(j.Config):
		return fmt.Errorf("storage: job %q: config is not valid JSON", j.ID)
	}
	if j.State == "" {
		j.State = StatePending
	}
	if !j.State.Valid() {
		return fmt.Errorf("storage: job %q: unknown state %q", j.ID, j.State)
	}
	now := time.Now().UTC()
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	if j.UpdatedAt.IsZero() {
		j.UpdatedAt = now
	}
	return db.update(func(tx kvTx) error {
		jobs := tx.Bucket(bucketJobs)
		if jobs.Get([]byte(j.ID)) != nil || jobs.Bucket([]byte(j.ID)) != nil {
			return fmt.Errorf("storage: job %q: %w", j.ID, ErrExists)
		}
		b, err := jobs.CreateBucket([]byte(j.ID))
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketLedger, bucketMetrics} {
			if _, err := b.CreateBucket(name); err != nil {
				return err
			}
		}
		return putMeta(b, &j)
	})
}

// Job returns the job with the given ID, or an error wrapping ErrNotFound.
func (db *DB) Job(id string) (Job, error) {
	var j Job
	err := db.view(func(tx kvTx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		j, err = readMeta(b, id)
		return err
	})
	return j, err
}

// Jobs returns every job ordered by CreatedAt, ties broken by ID.
func (db *DB) Jobs() ([]Job, error) {
	var out []Job
	err := db.view(func(tx kvTx) error {
		return tx.Bucket(bucketJobs).ForEachBucket(func(k []byte) error {
			j, err := readMeta(tx.Bucket(bucketJobs).Bucket(k), string(k))
			if err != nil {
				return err
			}
			out = append(out, j)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// SetJobState sets the job's State and Message and stamps UpdatedAt. It
// returns an error wrapping ErrNotFound for an unknown job, and one wrapping
// ErrConflict (writing nothing) if the job is already in a terminal state.
func (db *DB) SetJobState(id string, s JobState, message string) error {
	if !s.Valid() {
		return fmt.Errorf("storage: job %q: unknown state %q", id, s)
	}
	return db.update(func(tx kvTx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		j, err := readMeta(b, id)
		if err != nil {
			return err
		}
		if j.State.Terminal() {
			return fmt.Errorf("storage: job %q: cannot move from terminal state %s to %s: %w", id, j.State, s, ErrConflict)
		}
		j.State, j.Message, j.UpdatedAt = s, message, time.Now().UTC()
		return putMeta(b, &j)
	})
}

// jobBucket returns jobs/<id>, or an error wrapping ErrNotFound.
func jobBucket(tx kvTx, id string) (kvBucket, error) {
	b := tx.Bucket(bucketJobs).Bucket([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("storage: job %q: %w", id, ErrNotFound)
	}
	return b, nil
}

// liveJob opens job id's bucket and record for a write, refusing a job in
// a terminal state (ErrConflict): a finished job's ledger and rounds are
// closed. action names the refused write in the error.
func liveJob(tx kvTx, id, action string) (kvBucket, Job, error) {
	b, err := jobBucket(tx, id)
	if err != nil {
		return nil, Job{}, err
	}
	j, err := readMeta(b, id)
	if err != nil {
		return nil, Job{}, err
	}
	if j.State.Terminal() {
		return nil, Job{}, fmt.Errorf("storage: job %q is %s, cannot %s: %w", id, j.State, action, ErrConflict)
	}
	return b, j, nil
}

// subBucket returns a required nested bucket of a job; its absence means
// the file was damaged or written by something else.
func subBucket(b kvBucket, id string, name []byte) (kvBucket, error) {
	s := b.Bucket(name)
	if s == nil {
		return nil, fmt.Errorf("storage: job %q: missing %s bucket: %w", id, name, ErrCorrupt)
	}
	return s, nil
}

// readMeta decodes and checks jobs/<id>/meta. It needs only b's Get
// (tests pass a raw *bbolt.Bucket).
func readMeta(b interface{ Get(key []byte) []byte }, id string) (Job, error) {
	var j Job
	raw := b.Get(keyJobMeta)
	if raw == nil {
		return j, fmt.Errorf("storage: job %q: missing meta: %w", id, ErrCorrupt)
	}
	return decodeMeta(id, raw)
}

// decodeMeta checks and decodes the framed meta record of job id.
func decodeMeta(id string, raw []byte) (Job, error) {
	var j Job
	p, err := unframe(raw)
	if err != nil {
		return j, fmt.Errorf("storage: job %q meta: %v: %w", id, err, ErrCorrupt)
	}
	// json.Unmarshal copies into fresh memory, so j does not alias the mmap.
	if err := json.Unmarshal(p, &j); err != nil {
		return j, fmt.Errorf("storage: job %q meta: %v: %w", id, err, ErrCorrupt)
	}
	if j.ID != id || !j.State.Valid() || j.Round < 0 {
		return j, fmt.Errorf("storage: job %q meta: inconsistent record (id %q, state %q, round %d): %w", id, j.ID, j.State, j.Round, ErrCorrupt)
	}
	return j, nil
}

// putMeta writes j as framed JSON into its job bucket. It needs only b's
// Put (tests pass a raw *bbolt.Bucket).
func putMeta(b interface{ Put(key, value []byte) error }, j *Job) error {
	p, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("storage: job %q: encode: %w", j.ID, err)
	}
	return b.Put(keyJobMeta, frame(p))
}
