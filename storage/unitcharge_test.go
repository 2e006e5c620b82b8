package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// bothStores runs test on a fresh bbolt store and on a fresh etcd store.
func bothStores(t *testing.T, test func(t *testing.T, db *DB)) {
	for name, open := range map[string]func(*testing.T) *DB{
		"bbolt": func(t *testing.T) *DB { db, _ := openTemp(t); return db },
		"etcd":  func(t *testing.T) *DB { return openEtcdTemp(t) },
	} {
		t.Run(name, func(t *testing.T) { test(t, open(t)) })
	}
}

// wantRev fails unless unit's revision is want.
func wantRev(t *testing.T, db *DB, unit string, want uint64) {
	t.Helper()
	if got, err := db.UnitRevision(unit); err != nil || got != want {
		t.Fatalf("revision of %q: %d, %v; want %d", unit, got, err, want)
	}
}

// A unit's revision counts the charges to it. AppendUnitCharge appends
// only at the revision the caller saw, and bumps it; at any other it
// writes nothing (no ledger entry, no log leaf, no bump).
func TestUnitChargeComparesRevision(t *testing.T) {
	bothStores(t, func(t *testing.T, db *DB) {
		if _, err := db.UnitRevision("u"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revision of an unknown unit: %v", err)
		}
		for _, name := range []string{"u", "v"} {
			if err := db.CreateUnit(Unit{Name: name, EpsilonBudget: 1, Delta: 1e-6}); err != nil {
				t.Fatal(err)
			}
		}
		mustCreate(t, db, "j")
		wantRev(t, db, "u", 0)
		ev := json.RawMessage(`{"z":1}`)
		charge := LedgerEntry{Round: 1, Event: ev}
		// state is the ledger's length and the log's size.
		state := func() string {
			t.Helper()
			led, err := db.Ledger("j")
			if err != nil {
				t.Fatal(err)
			}
			h, err := db.LogHead()
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d entries, %d leaves", len(led), h.Size)
		}

		e, err := db.AppendUnitCharge("j", charge, "u", 0)
		if err != nil || e.Seq != 1 {
			t.Fatalf("charge at the current revision: %+v, %v", e, err)
		}
		wantRev(t, db, "u", 1)
		before := state()
		for _, seen := range []uint64{0, 2} { // stale, and never reached
			_, err := db.AppendUnitCharge("j", charge, "u", seen)
			wantErr(t, err, ErrUnitMoved, `"u"`, "revision 1", fmt.Sprintf("revision %d", seen))
			if after := state(); after != before {
				t.Fatalf("a refused charge wrote: %s, then %s", before, after)
			}
			wantRev(t, db, "u", 1)
		}

		// Every charge naming the unit bumps it, checked or not; others not.
		if _, err := db.AppendCharge("j", charge, "u"); err != nil {
			t.Fatal(err)
		}
		wantRev(t, db, "u", 2)
		if _, err := db.AppendCharge("j", charge, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := db.AppendLedger("j", charge); err != nil {
			t.Fatal(err)
		}
		wantRev(t, db, "u", 2)
		wantRev(t, db, "v", 0)
		if e, err := db.AppendUnitCharge("j", charge, "u", 2); err != nil || e.Seq != 5 {
			t.Fatalf("charge at revision 2: %+v, %v", e, err)
		}
		wantRev(t, db, "u", 3)

		// A retried attempt whose entry is stored writes nothing, even
		// though its own append moved the revision past what it saw.
		e1, err := db.AppendUnitChargeOnce("j", charge, "u", "a1", 3)
		if err != nil {
			t.Fatal(err)
		}
		before = state()
		e2, err := db.AppendUnitChargeOnce("j", charge, "u", "a1", 3)
		if err != nil || e2.Seq != e1.Seq || state() != before {
			t.Fatalf("retried attempt: %+v (first %+v), %v; %s then %s", e2, e1, err, before, state())
		}
		wantRev(t, db, "u", 4)
		// AppendChargeOnce bumps too.
		if _, err := db.AppendChargeOnce("j", charge, "u", "a2"); err != nil {
			t.Fatal(err)
		}
		wantRev(t, db, "u", 5)

		// An unknown unit, or none, is refused and writes nothing.
		before = state()
		if _, err := db.AppendUnitCharge("j", charge, "nope", 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown unit: %v", err)
		}
		if _, err := db.AppendUnitCharge("j", charge, "", 0); err == nil {
			t.Fatal("a checked charge without a unit was accepted")
		}
		if state() != before {
			t.Fatalf("refused charges wrote: %s, then %s", before, state())
		}
		if _, err := db.UnitRevision("nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("revision of an unknown unit: %v", err)
		}
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}

// Writers racing to charge a unit up to a cap, each checking the cap at
// the revision it read: with the compare, exactly cap charges land
// (each success is one revision; a writer that lost a race re-reads). On
// etcd the writers use two handles on one store, as two servers do.
func TestUnitChargeRace(t *testing.T) {
	const writers, limit = 4, 12
	for name, open := range map[string]func(*testing.T) (*DB, *DB){
		"bbolt": func(t *testing.T) (*DB, *DB) { db, _ := openTemp(t); return db, db },
		"etcd": func(t *testing.T) (*DB, *DB) {
			url, prefix := etcdURL(t), testPrefix(t)
			return openEtcdAt(t, url, prefix, t.TempDir()), openEtcdAt(t, url, prefix, t.TempDir())
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			if err := a.CreateUnit(Unit{Name: "u", EpsilonBudget: 1, Delta: 1e-6}); err != nil {
				t.Fatal(err)
			}
			for i := range writers {
				mustCreate(t, a, fmt.Sprint("j", i))
			}
			var landed, moved atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for i := range writers {
				db := []*DB{a, b}[i%2]
				wg.Go(func() {
					for {
						seen, err := db.UnitRevision("u")
						if err != nil {
							errs <- err
							return
						}
						if seen >= limit { // the "budget" is spent
							return
						}
						_, err = db.AppendUnitCharge(fmt.Sprint("j", i), LedgerEntry{Round: 1, Event: json.RawMessage(`{}`)}, "u", seen)
						switch {
						case err == nil:
							landed.Add(1)
						case errors.Is(err, ErrUnitMoved):
							moved.Add(1)
						default:
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			total := 0
			for i := range writers {
				led, err := b.Ledger(fmt.Sprint("j", i))
				if err != nil {
					t.Fatal(err)
				}
				total += len(led)
			}
			if total != limit || landed.Load() != limit {
				t.Fatalf("%d entries stored, %d charges landed (%d refused as moved); want exactly %d", total, landed.Load(), moved.Load(), limit)
			}
			wantRev(t, b, "u", limit)
			t.Logf("%d charges refused as stale", moved.Load())
		})
	}
}

// A store written before the revisions has no counter: it reads 0, and
// a charge checked at 0 lands and starts it. A damaged counter is
// ErrCorrupt, for the read and for a charge.
func TestUnitRevisionOldStore(t *testing.T) {
	db, path := openTemp(t)
	if err := db.CreateUnit(Unit{Name: "u", EpsilonBudget: 1, Delta: 1e-6}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, "j")
	charge := LedgerEntry{Round: 1, Event: json.RawMessage(`{"z":1}`)}
	for range 2 {
		if _, err := db.AppendCharge("j", charge, "u"); err != nil {
			t.Fatal(err)
		}
	}
	wantRev(t, db, "u", 2)
	db.Close()
	// boltEdit reopens the closed file raw and runs fn on it.
	boltEdit := func(fn func(tx *bolt.Tx) error) {
		t.Helper()
		b, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	boltEdit(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketUnitRevs) })
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	wantRev(t, db, "u", 0)
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendUnitCharge("j", charge, "u", 1); !errors.Is(err, ErrUnitMoved) {
		t.Fatalf("charge checked at revision 1 of a store at 0: %v", err)
	}
	if _, err := db.AppendUnitCharge("j", charge, "u", 0); err != nil {
		t.Fatal(err)
	}
	wantRev(t, db, "u", 1)
	db.Close()

	boltEdit(func(tx *bolt.Tx) error { return tx.Bucket(bucketUnitRevs).Put([]byte("u"), frame([]byte{1, 2, 3})) })
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.UnitRevision("u"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged revision: %v", err)
	}
	if _, err := db.AppendCharge("j", charge, "u"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("charge to a unit with a damaged revision: %v", err)
	}
}
