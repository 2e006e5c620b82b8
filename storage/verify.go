package storage

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Verify checks the whole file in one read transaction: bbolt's own page
// consistency check (tx.Check: no double-referenced or leaked pages), every
// value's CRC-32C, and the per-job invariants of the package doc (metrics
// exactly 1 … Job.Round, checkpoint present iff Job.Round > 0 and of round
// Job.Round, ledger seqs exactly 1 … n). It returns nil or the joined
// errors, each wrapping ErrCorrupt when the data (not the bbolt structure)
// is at fault. Its cost is linear in the file size; meant for startup checks,
// tests and operators, not hot paths.
func (db *DB) Verify() error {
	var errs []error
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, fmt.Errorf("storage: bbolt check: %w", err))
		}
		set := tx.Bucket(bucketSettings)
		err := set.ForEach(func(k, v []byte) error {
			if v == nil {
				errs = append(errs, fmt.Errorf("storage: setting %q is a bucket: %w", k, ErrCorrupt))
			} else if _, err := unframe(v); err != nil {
				errs = append(errs, fmt.Errorf("storage: setting %q: %v: %w", k, err, ErrCorrupt))
			}
			return nil
		})
		if err != nil {
			return err
		}
		jobs := tx.Bucket(bucketJobs)
		return jobs.ForEachBucket(func(k []byte) error {
			id := string(k)
			b := jobs.Bucket(k)
			if _, err := readMeta(b, id); err != nil {
				errs = append(errs, err)
				return nil // the remaining checks all need meta
			}
			if _, err := readMetrics(b, id); err != nil {
				errs = append(errs, err)
			}
			if _, _, err := readCheckpoint(b, id); err != nil {
				errs = append(errs, err)
			}
			l, err := subBucket(b, id, bucketLedger)
			if err != nil {
				errs = append(errs, err)
				return nil
			}
			var last uint64
			return l.ForEach(func(k, v []byte) error {
				if _, err := decodeLedger(k, v, last+1); err != nil {
					errs = append(errs, fmt.Errorf("storage: job %q ledger %w", id, err))
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
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
