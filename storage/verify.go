package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dpfl/dpfl/audit"
)

// VerifyOptions bound how much of the file VerifyWith reads. Job records,
// ledgers, units, settings and metrics are always read and checksummed in
// full: they are small (about 100–1,000 bytes a record) and the ledgers
// are what every reported ε rests on. The options bound the rest.
type VerifyOptions struct {
	// Structure runs bbolt's page consistency check (tx.Check: no page
	// referenced twice, none leaked). It visits every page of the file, so
	// its cost is linear in the file size.
	Structure bool
	// CheckpointBytes caps the bytes of checkpoint values whose CRC-32C
	// and layout are verified; checkpoints are by far the largest values
	// (4 bytes per model parameter). Live (non-terminal) jobs' checkpoints
	// come first, since a restart resumes from them, then terminal jobs',
	// most recently updated first. A checkpoint that no longer fits in
	// what is left of the cap is checked only for presence and for the
	// round in its header, without reading its body. Negative: no cap.
	CheckpointBytes int64
	// LogKey, when set, is the note verifier key of the server's log
	// signer (SetLogSigner): the log head's checkpoint, if signed, must
	// carry a valid signature by it.
	LogKey string
}

// VerifyResult says what a verification covered, for logs.
type VerifyResult struct {
	// Jobs, Units, Settings and Devices count the records read and
	// checksummed.
	Jobs, Units, Settings, Devices int
	// LedgerEntries and MetricsRounds count the ledger entries and
	// metrics rows read and checksummed, over all jobs.
	LedgerEntries, MetricsRounds int
	// LogLeaves counts the transparency log's leaves read, checksummed
	// and hashed into the recomputed tree.
	LogLeaves int
	// CheckpointsVerified counts checkpoints checksummed in full,
	// CheckpointBytes their total size in bytes; CheckpointsSkipped those
	// past VerifyOptions.CheckpointBytes, checked by header only.
	CheckpointsVerified, CheckpointsSkipped int
	CheckpointBytes                         int64
	// Structure says whether bbolt's page check ran.
	Structure bool
	// Duration is the wall time of the verification.
	Duration time.Duration
}

// maxVerifyErrors caps the errors a verification collects; one more error
// then says how many were left out.
const maxVerifyErrors = 100

// Verify checks the whole file in one read transaction: bbolt's own page
// consistency check (tx.Check: no double-referenced or leaked pages), every
// value's CRC-32C, and the invariants of the package doc (per job: metrics
// exactly 1 … Job.Round, checkpoint present iff Job.Round > 0 and of round
// Job.Round, ledger seqs exactly 1 … n with rounds non-decreasing and at
// most Job.Round+1; every unit record well-formed), and the transparency
// log (verifyLog in tlog.go: the tree hash recomputed from the leaves
// against the stored head, and the log against the ledgers, rounds,
// checkpoints and units). It returns nil or the
// joined errors (at most 100, then a count of the rest), each wrapping
// ErrCorrupt when the data (not the bbolt structure) is at fault. Its cost
// is linear in the file size; VerifyWith bounds it.
func (db *DB) Verify() error {
	_, err := db.VerifyWith(VerifyOptions{Structure: true, CheckpointBytes: -1})
	return err
}

// VerifyWith is Verify with its work bounded by opt (see VerifyOptions):
// the check dpfl-server runs at every start. It returns what it covered and
// nil or the joined errors, as Verify does.
func (db *DB) VerifyWith(opt VerifyOptions) (VerifyResult, error) {
	start := time.Now()
	res := VerifyResult{Structure: opt.Structure && db.kv.structureCheck()}
	var errs []error
	dropped := 0
	add := func(err error) {
		if len(errs) < maxVerifyErrors {
			errs = append(errs, err)
		} else {
			dropped++
		}
	}
	err := db.view(func(tx kvTx) error {
		if res.Structure {
			for err := range tx.Check() {
				add(fmt.Errorf("storage: bbolt check: %w", err))
			}
		}
		if err := verifySettings(tx, &res, add); err != nil {
			return err
		}
		if err := verifyUnits(tx, &res, add); err != nil {
			return err
		}
		cks, err := db.verifyJobs(tx, &res, add)
		if err != nil {
			return err
		}
		if err := verifyDevices(tx, &res, add); err != nil {
			return err
		}
		models := verifyLog(tx, opt.LogKey, &res, add)
		for i := range cks {
			cks[i].model = models[cks[i].id]
		}
		db.verifyCheckpoints(tx, cks, opt.CheckpointBytes, &res, add)
		return nil
	})
	if err != nil {
		add(err)
	}
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("storage: %d more errors not listed: %w", dropped, ErrCorrupt))
	}
	res.Duration = time.Since(start)
	return res, errors.Join(errs...)
}

func verifySettings(tx kvTx, res *VerifyResult, add func(error)) error {
	return tx.Bucket(bucketSettings).ForEach(func(k, v []byte) error {
		res.Settings++
		if v == nil {
			add(fmt.Errorf("storage: setting %q is a bucket: %w", k, ErrCorrupt))
		} else if _, err := unframe(v); err != nil {
			add(fmt.Errorf("storage: setting %q: %v: %w", k, err, ErrCorrupt))
		}
		return nil
	})
}

// verifyDevices checks every enrolled device (decodeDevice: checksum,
// JSON, an ID and job equal to its keys, a SHA-256-sized hash) and that
// the credential index and the records agree one to one.
func verifyDevices(tx kvTx, res *VerifyResult, add func(error)) error {
	return tx.Bucket(bucketDevices).ForEach(func(job, v []byte) error {
		jobID := string(job)
		if v != nil {
			add(fmt.Errorf("storage: devices of job %q is not a bucket: %w", jobID, ErrCorrupt))
			return nil
		}
		ids, creds, err := deviceBuckets(tx, jobID)
		if err != nil {
			add(err)
			return nil
		}
		hashes := map[string]string{} // credential hash → device id
		err = ids.ForEach(func(k, v []byte) error {
			res.Devices++
			d, err := decodeDevice(jobID, string(k), v)
			if err != nil {
				add(err)
				return nil
			}
			hashes[string(d.CredentialHash)] = d.ID
			return nil
		})
		if err != nil {
			return err
		}
		err = creds.ForEach(func(k, v []byte) error {
			p, err := unframe(v)
			if err == nil && hashes[string(k)] != string(p) {
				err = fmt.Errorf("points to device %q, whose record holds another hash or is missing", p)
			}
			if err != nil {
				add(fmt.Errorf("storage: job %q credential index: %v: %w", jobID, err, ErrCorrupt))
			}
			delete(hashes, string(k))
			return nil
		})
		for _, id := range hashes {
			add(fmt.Errorf("storage: job %q device %q: credential missing from the index: %w", jobID, id, ErrCorrupt))
		}
		return err
	})
}

// verifyUnits checks every privacy unit record: checksum, JSON, a name
// equal to its key, and a budget and δ that CreateUnit would accept.
func verifyUnits(tx kvTx, res *VerifyResult, add func(error)) error {
	return tx.Bucket(bucketUnits).ForEach(func(k, v []byte) error {
		res.Units++
		if v == nil {
			add(fmt.Errorf("storage: privacy unit %q is a bucket: %w", k, ErrCorrupt))
			return nil
		}
		p, err := unframe(v)
		if err != nil {
			add(fmt.Errorf("storage: privacy unit %q: %v: %w", k, err, ErrCorrupt))
			return nil
		}
		var u Unit
		if err := json.Unmarshal(p, &u); err != nil {
			add(fmt.Errorf("storage: privacy unit %q: %v: %w", k, err, ErrCorrupt))
			return nil
		}
		if u.Name != string(k) || !(u.EpsilonBudget > 0) || math.IsInf(u.EpsilonBudget, 0) || !(u.Delta > 0 && u.Delta < 1) {
			add(fmt.Errorf("storage: privacy unit %q: inconsistent record (name %q, ε_max %v, δ %v): %w", k, u.Name, u.EpsilonBudget, u.Delta, ErrCorrupt))
		}
		return nil
	})
}

// ckRef is a job whose checkpoint is still to be verified.
type ckRef struct {
	id   string
	job  Job
	size int
	// model is the model hash of the job's latest release in the log
	// ("" if none), which the checkpoint's parameters must have.
	model string
}

// verifyJobs checks every job's meta, metrics and ledger, and returns the
// jobs whose checkpoints are still to be checked.
func (db *DB) verifyJobs(tx kvTx, res *VerifyResult, add func(error)) ([]ckRef, error) {
	var cks []ckRef
	jobs := tx.Bucket(bucketJobs)
	err := jobs.ForEachBucket(func(k []byte) error {
		id := string(k)
		b := jobs.Bucket(k)
		res.Jobs++
		j, err := readMeta(b, id)
		if err != nil {
			add(err)
			return nil // the remaining checks all need meta
		}
		if m, err := readMetrics(b, id); err != nil {
			add(err)
		} else {
			res.MetricsRounds += len(m)
		}
		_, size, _, err := db.checkpointValue(b, id, false)
		if err != nil {
			add(fmt.Errorf("storage: job %q checkpoint round %d: %w", id, j.Round, err))
		}
		cks = append(cks, ckRef{id: id, job: j, size: int(size)})
		l, err := subBucket(b, id, bucketLedger)
		if err != nil {
			add(err)
			return nil
		}
		var last uint64
		prev := 0
		return l.ForEach(func(k, v []byte) error {
			res.LedgerEntries++
			e, err := decodeLedger(k, v, last+1)
			if err == nil {
				err = checkLedgerRound(e, prev, j.Round)
			}
			if err != nil {
				add(fmt.Errorf("storage: job %q ledger %w", id, err))
			} else {
				prev = e.Round
			}
			// Resynchronise after a gap so one gap is one error.
			if s, ok := keyU64(k); ok {
				last = s
			} else {
				last++
			}
			return nil
		})
	})
	return cks, err
}

// verifyCheckpoints checks the checkpoints of cks, live jobs first and then
// the most recently updated, in full while the byte cap allows and by
// header after.
func (db *DB) verifyCheckpoints(tx kvTx, cks []ckRef, capBytes int64, res *VerifyResult, add func(error)) {
	slices.SortStableFunc(cks, func(a, b ckRef) int {
		if at, bt := a.job.State.Terminal(), b.job.State.Terminal(); at != bt {
			if at {
				return 1
			}
			return -1
		}
		return b.job.UpdatedAt.Compare(a.job.UpdatedAt)
	})
	left := capBytes
	jobs := tx.Bucket(bucketJobs)
	for _, c := range cks {
		b := jobs.Bucket([]byte(c.id))
		if c.size == 0 || capBytes < 0 || int64(c.size) <= left {
			if ck, ok, err := db.readCheckpoint(b, c.id); err != nil {
				add(err)
			} else if ok && c.model != "" && audit.ModelHash(ck.Params) != c.model {
				add(fmt.Errorf("storage: job %q checkpoint round %d: its parameters are not the model the transparency log records for that round: %w", c.id, c.job.Round, ErrCorrupt))
			}
			if c.size > 0 {
				res.CheckpointsVerified++
				res.CheckpointBytes += int64(c.size)
				left -= int64(c.size)
			}
			continue
		}
		res.CheckpointsSkipped++
		if err := db.checkpointHeaderRound(b, c.id, c.job); err != nil {
			add(fmt.Errorf("storage: job %q checkpoint round %d: %v: %w", c.id, c.job.Round, err, ErrCorrupt))
		}
	}
}

// checkpointHeaderRound checks, without reading the body or its checksum,
// that job id's stored checkpoint's header is of the layout this build
// writes and names round j.Round (for a blob: that its file exists with
// the pointer's length, and its header).
func (db *DB) checkpointHeaderRound(b kvBucket, id string, j Job) error {
	v := b.Get(keyJobCheckpoint)
	if raw := b.Get(keyJobCheckpointBlob); raw != nil {
		ref, err := decodeBlobRef(raw)
		if err != nil {
			return err
		}
		if v, err = db.blobHeader(id, ref); err != nil {
			return err
		}
	}
	if len(v) < frameHeader+ckHeaderLen || string(v[frameHeader:frameHeader+4]) != ckMagic {
		return errors.New("bad checkpoint header")
	}
	p := v[frameHeader:]
	if ver := binary.LittleEndian.Uint32(p[4:]); ver != ckVersion {
		return fmt.Errorf("checkpoint layout version %d, want %d", ver, ckVersion)
	}
	if r := binary.LittleEndian.Uint64(p[8:]); r != uint64(j.Round) {
		return fmt.Errorf("checkpoint is of round %d but job is at round %d", r, j.Round)
	}
	return nil
}
