package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dpfl/dpfl/audit"
)

// CommitRound records the end of a training round in ONE transaction: it
// stores metrics (valid, non-empty JSON) under round, replaces the job's
// checkpoint with ck (ck.Round must be 0, meaning round, or equal round) and
// sets Job.Round = round and UpdatedAt. It requires round == Job.Round+1 and a
// non-terminal job; otherwise it returns an error wrapping ErrConflict and
// writes nothing. Unknown jobs give ErrNotFound. The same transaction
// appends the round's release leaf to the transparency log (tlog.go):
// the SHA-256 of ck.Params (audit.ModelHash) and the seq of the ledger's
// last entry when it is of this round.
//
// The checkpoint is encoded and hashed before the transaction starts so
// bbolt's single writer lock is held only for the B+tree update and fsync.
//
// CommitRound does not require the round to have been charged: storage
// cannot tell a job that charges its rounds (differentially private)
// from one that does not. CommitChargedRound does.
func (db *DB) CommitRound(jobID string, round int, metrics json.RawMessage, ck Checkpoint) error {
	return db.commitRound(jobID, round, metrics, ck, false)
}

// CommitChargedRound is CommitRound for a job whose every round is
// charged to its ledger first (write-ahead): in the same transaction it
// requires the ledger's last entry to be of this round, and otherwise
// returns an error wrapping ErrConflict and writes nothing. With the etcd
// store and a fenced view (Fenced), the charge's presence, the fence and
// the commit are thus checked and written in one etcd Txn.
func (db *DB) CommitChargedRound(jobID string, round int, metrics json.RawMessage, ck Checkpoint) error {
	return db.commitRound(jobID, round, metrics, ck, true)
}

func (db *DB) commitRound(jobID string, round int, metrics json.RawMessage, ck Checkpoint, charged bool) error {
	switch {
	case round < 1:
		return fmt.Errorf("storage: job %q: commit of round %d, rounds start at 1", jobID, round)
	case ck.Round != 0 && ck.Round != round:
		return fmt.Errorf("storage: job %q: commit of round %d with checkpoint of round %d", jobID, round, ck.Round)
	case len(metrics) == 0 || !json.Valid(metrics):
		return fmt.Errorf("storage: job %q round %d: metrics are not valid JSON", jobID, round)
	}
	ckv := encodeCheckpoint(round, &ck)
	model := audit.ModelHash(ck.Params)
	// With a blob directory the checkpoint goes to its file first, and
	// the transaction stores its pointer (blob.go).
	var ref *blobRef
	if db.blobDir != "" {
		r, err := db.writeBlob(jobID, ckv)
		if err != nil {
			return fmt.Errorf("storage: job %q round %d: writing the checkpoint blob: %w", jobID, round, err)
		}
		ref = &r
	}
	err := db.update(func(tx kvTx) error {
		b, j, err := liveJob(tx, jobID, fmt.Sprintf("commit round %d", round))
		if err != nil {
			return err
		}
		if round != j.Round+1 {
			return fmt.Errorf("storage: job %q: commit of round %d after round %d, want %d: %w", jobID, round, j.Round, j.Round+1, ErrConflict)
		}
		mb, err := subBucket(b, jobID, bucketMetrics)
		if err != nil {
			return err
		}
		if err := mb.Put(u64(uint64(round)), frame(metrics)); err != nil {
			return err
		}
		if err := putCheckpoint(b, jobID, ckv, ref); err != nil {
			return err
		}
		j.Round, j.UpdatedAt = round, time.Now().UTC()
		// The release's leaf in the transparency log (tlog.go), with the
		// model's hash, in this transaction.
		leaf, err := releaseLeaf(b, j, round, model, j.UpdatedAt)
		if err != nil {
			return err
		}
		if charged && leaf.ChargeSeq == 0 {
			return fmt.Errorf("storage: job %q: commit of round %d, which has no charge in the ledger (its last entry is not of round %d): %w", jobID, round, round, ErrConflict)
		}
		if _, err := db.appendLeaf(tx, leaf); err != nil {
			return err
		}
		return putMeta(b, &j)
	})
	if err == nil && ref != nil {
		db.collectBlobs(jobID)
	}
	return err
}

// putCheckpoint stores the job's checkpoint ckv: inline, or (ref non-nil)
// as the pointer to its blob, naming the blob it replaces as Prev. A job
// keeps one of the two keys, so the other is deleted if present.
func putCheckpoint(b kvBucket, id string, ckv []byte, ref *blobRef) error {
	if ref == nil {
		if b.Get(keyJobCheckpointBlob) != nil {
			if err := b.Delete(keyJobCheckpointBlob); err != nil {
				return err
			}
		}
		return b.Put(keyJobCheckpoint, ckv)
	}
	r := *ref
	if raw := b.Get(keyJobCheckpointBlob); raw != nil {
		old, err := decodeBlobRef(raw)
		if err != nil {
			return fmt.Errorf("storage: job %q checkpoint: %v: %w", id, err, ErrCorrupt)
		}
		r.Prev = old.SHA256
	}
	if r.Prev == r.SHA256 {
		r.Prev = ""
	}
	p, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if b.Get(keyJobCheckpoint) != nil {
		if err := b.Delete(keyJobCheckpoint); err != nil {
			return err
		}
	}
	return b.Put(keyJobCheckpointBlob, frame(p))
}

// Checkpoint returns the job's latest checkpoint (that of round Job.Round)
// in freshly allocated memory; ok is false if no round has been committed.
// A checksum mismatch, undecodable payload or a checkpoint whose round is not
// Job.Round gives an error wrapping ErrCorrupt naming job and round.
//
// With a blob directory the blob's length and SHA-256 are checked against
// its stored pointer first: a missing or altered blob is an error wrapping
// ErrCorrupt too.
func (db *DB) Checkpoint(jobID string) (ck Checkpoint, ok bool, err error) {
	// A blob found missing is looked for once more: a commit in between
	// may have moved the pointer on and removed an old blob (blob.go).
	for try := 0; try < 2; try++ {
		err = db.view(func(tx kvTx) error {
			b, err := jobBucket(tx, jobID)
			if err != nil {
				return err
			}
			ck, ok, err = db.readCheckpoint(b, jobID)
			return err
		})
		if !errors.Is(err, errBlobMissing) {
			break
		}
	}
	return ck, ok, err
}

// readCheckpoint reads and cross-checks the job's checkpoint (inline, or
// its blob) against meta.
func (db *DB) readCheckpoint(b kvBucket, id string) (Checkpoint, bool, error) {
	j, err := readMeta(b, id)
	if err != nil {
		return Checkpoint{}, false, err
	}
	v, _, _, err := db.checkpointValue(b, id, true)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("storage: job %q checkpoint round %d: %w", id, j.Round, err)
	}
	if v == nil {
		if j.Round > 0 {
			return Checkpoint{}, false, fmt.Errorf("storage: job %q checkpoint round %d: missing: %w", id, j.Round, ErrCorrupt)
		}
		return Checkpoint{}, false, nil
	}
	ck, err := decodeCheckpoint(v)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("storage: job %q checkpoint round %d: %v: %w", id, j.Round, err, ErrCorrupt)
	}
	if ck.Round != j.Round {
		return Checkpoint{}, false, fmt.Errorf("storage: job %q checkpoint is of round %d but job is at round %d: %w", id, ck.Round, j.Round, ErrCorrupt)
	}
	return ck, true, nil
}

// Metrics returns the metrics JSON of rounds 1 … Job.Round, in round order,
// as fresh copies. A checksum mismatch, a missing round, or a round beyond
// Job.Round gives an error wrapping ErrCorrupt naming job and round.
func (db *DB) Metrics(jobID string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := db.view(func(tx kvTx) error {
		b, err := jobBucket(tx, jobID)
		if err != nil {
			return err
		}
		out, err = readMetrics(b, jobID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readMetrics reads jobs/<id>/metrics and checks its keys are 1 … Job.Round.
func readMetrics(b kvBucket, id string) ([]json.RawMessage, error) {
	j, err := readMeta(b, id)
	if err != nil {
		return nil, err
	}
	mb, err := subBucket(b, id, bucketMetrics)
	if err != nil {
		return nil, err
	}
	// j.Round comes from the store and is only as trustworthy as its
	// checksum: a record with a huge round but a valid CRC (a foreign or
	// buggy writer) must be reported as corrupt, not allocated, so the
	// preallocation is capped and the loop below finds the gap.
	out := make([]json.RawMessage, 0, min(j.Round, 1<<12))
	err = mb.ForEach(func(k, v []byte) error {
		want := uint64(len(out)) + 1
		r, ok := keyU64(k)
		switch {
		case !ok:
			return fmt.Errorf("storage: job %q metrics round %d: key %x is not a round: %w", id, want, k, ErrCorrupt)
		case r != want:
			return fmt.Errorf("storage: job %q metrics round %d: missing (next stored round is %d): %w", id, want, r, ErrCorrupt)
		case r > uint64(j.Round):
			return fmt.Errorf("storage: job %q metrics round %d: beyond committed round %d: %w", id, r, j.Round, ErrCorrupt)
		case v == nil:
			return fmt.Errorf("storage: job %q metrics round %d: is a bucket: %w", id, r, ErrCorrupt)
		}
		p, err := unframe(v)
		if err != nil {
			return fmt.Errorf("storage: job %q metrics round %d: %v: %w", id, r, err, ErrCorrupt)
		}
		out = append(out, append(json.RawMessage{}, p...))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) != j.Round {
		return nil, fmt.Errorf("storage: job %q metrics round %d: missing (job is at round %d): %w", id, len(out)+1, j.Round, ErrCorrupt)
	}
	return out, nil
}
