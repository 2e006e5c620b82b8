package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A shared budget's revision: a counter that every ledger append charged
// to the budget (AppendCharge, AppendChargeOnce or AppendUnitCharge with
// its name) bumps in the append's own transaction. A server that checks
// a charge against the budget's spend reads the revision before the
// ledgers it checks, and AppendUnitCharge refuses the charge unless the
// revision is still the one it read: since write transactions are
// serializable on both stores (bbolt's single writer; etcd's commit key,
// etcd.go), no charge can land between that compare and the append, so
// servers sharing one store (etcd) cannot both take a budget's last ε on
// stale views of its ledgers.
//
// The counters live in their own top-level bucket,
//
//	unit_revisions/       unit name → framed 8-byte little-endian uint64
//
// created by the first charge to a budget (so a store written before the
// counters has none, and a missing counter reads 0), apart from units/,
// whose every value is a Unit record (Units, Verify and the transparency
// log's checks iterate it). The counter counts charges, not events of a
// stored ledger: Verify does not check it, and a store whose counters
// lag its ledgers (older stores) is consistent, since only equality with
// what a reader saw is ever tested.

// bucketUnitRevs holds each budget's revision, keyed by its name.
var bucketUnitRevs = []byte("unit_revisions")

// ErrUnitMoved: the budget was charged by someone else (another server
// sharing the store, or another writer) since the caller read its
// revision to check the charge, so that check may have seen a stale
// spend; nothing was written. Reload the budget's ledgers, check again,
// and retry with the revision read before them.
var ErrUnitMoved = errors.New("privacy budget charged since it was checked")

// UnitRevision returns the revision of unit name: the number of ledger
// appends charged to it since its store began counting (0 for a unit
// never charged, or charged only by a build from before the counter).
// It is read in one transaction with the unit's record; ErrNotFound if
// there is no such unit, ErrCorrupt if the counter fails its checksum.
//
// A caller that checks a charge against the unit's spend reads the
// revision before the ledgers it checks and passes it to
// AppendUnitCharge.
func (db *DB) UnitRevision(name string) (uint64, error) {
	var rev uint64
	err := db.view(func(tx kvTx) error {
		if tx.Bucket(bucketUnits).Get([]byte(name)) == nil {
			return fmt.Errorf("storage: privacy unit %q: %w", name, ErrNotFound)
		}
		var err error
		rev, err = unitRevision(tx, name)
		return err
	})
	return rev, err
}

// AppendUnitCharge is AppendCharge for a job charged to unit, checked by
// a compare on the unit's revision in the same transaction: seen is the
// revision (UnitRevision) that the caller read before the ledgers against
// which it checked that the charge fits. If the stored revision differs,
// the unit was charged since, nothing is written and the error wraps
// ErrUnitMoved; otherwise the entry is appended (as AppendCharge does)
// and the revision becomes seen+1. An unknown unit is ErrNotFound.
func (db *DB) AppendUnitCharge(jobID string, e LedgerEntry, unit string, seen uint64) (LedgerEntry, error) {
	return db.AppendUnitChargeOnce(jobID, e, unit, "", seen)
}

// AppendUnitChargeOnce is AppendUnitCharge made idempotent by attempt, as
// AppendChargeOnce is: a retry whose attempt's entry is stored already
// returns that entry and writes nothing, whatever the revision (the
// retried charge was checked and bumped the revision when it was
// stored).
func (db *DB) AppendUnitChargeOnce(jobID string, e LedgerEntry, unit, attempt string, seen uint64) (LedgerEntry, error) {
	if unit == "" {
		return LedgerEntry{}, fmt.Errorf("storage: job %q ledger: a charge checked against a privacy unit needs the unit's name", jobID)
	}
	return db.appendCharge(jobID, e, unit, attempt, &seen)
}

// unitRevision reads unit's revision in tx: 0 when it has none.
func unitRevision(tx kvTx, unit string) (uint64, error) {
	b := tx.Bucket(bucketUnitRevs)
	if b == nil {
		return 0, nil
	}
	raw := b.Get([]byte(unit))
	if raw == nil {
		return 0, nil
	}
	p, err := unframe(raw)
	if err == nil && len(p) != 8 {
		err = fmt.Errorf("%d bytes, not 8", len(p))
	}
	if err != nil {
		return 0, fmt.Errorf("storage: privacy unit %q: revision: %v: %w", unit, err, ErrCorrupt)
	}
	return binary.LittleEndian.Uint64(p), nil
}

// chargeUnit is the part of a ledger append charged to unit that concerns
// the unit, run in the append's transaction before anything is written:
// with seen non-nil it refuses (ErrUnitMoved) a unit whose revision is
// not *seen, or that does not exist (ErrNotFound); then it bumps the
// revision.
func chargeUnit(tx kvTx, unit string, seen *uint64) error {
	if seen != nil && tx.Bucket(bucketUnits).Get([]byte(unit)) == nil {
		return fmt.Errorf("storage: privacy unit %q: %w", unit, ErrNotFound)
	}
	rev, err := unitRevision(tx, unit)
	if err != nil {
		return err
	}
	if seen != nil && rev != *seen {
		return fmt.Errorf("storage: privacy unit %q: revision %d, but the charge was checked at revision %d: %w", unit, rev, *seen, ErrUnitMoved)
	}
	b, err := tx.CreateBucketIfNotExists(bucketUnitRevs)
	if err != nil {
		return err
	}
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], rev+1)
	return b.Put([]byte(unit), frame(p[:]))
}
