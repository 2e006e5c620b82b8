package storage

import (
	"encoding/json"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// ledgerDB returns a closed store whose job "j" has three ledger entries
// and two committed rounds of 1000 parameters.
func ledgerDB(t *testing.T) string {
	t.Helper()
	db, path := openTemp(t)
	mustCreate(t, db, "j")
	for r := 1; r <= 3; r++ {
		if _, err := db.AppendLedger("j", LedgerEntry{Round: r, Event: event(r)}); err != nil {
			t.Fatal(err)
		}
		if r < 3 {
			if err := db.CommitRound("j", r, metricsFor(r), checkpointFor(r, 1000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("clean store fails Verify: %v", err)
	}
	db.Close()
	return path
}

// flip XORs one byte of a stored value; a negative index counts from the end.
func flip(b *bolt.Bucket, key []byte, i int) error {
	v := slices.Clone(b.Get(key))
	if i < 0 {
		i += len(v)
	}
	v[i] ^= 0x20
	return b.Put(key, v)
}

func reopen(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLedgerCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(l *bolt.Bucket) error
		frag   string
	}{
		{"payload byte", func(l *bolt.Bucket) error { return flip(l, u64(2), 20) }, "checksum"},
		{"last byte", func(l *bolt.Bucket) error { return flip(l, u64(2), -1) }, "checksum"},
		{"checksum byte", func(l *bolt.Bucket) error { return flip(l, u64(2), 1) }, "checksum"},
		{"truncated", func(l *bolt.Bucket) error { return l.Put(u64(2), []byte{1, 2}) }, "shorter"},
		{"valid checksum, not JSON", func(l *bolt.Bucket) error { return l.Put(u64(2), frame([]byte("not json"))) }, "seq 2"},
		{"valid checksum, wrong seq", func(l *bolt.Bucket) error {
			p, _ := json.Marshal(LedgerEntry{Seq: 3, Round: 2, Event: event(2)})
			return l.Put(u64(2), frame(p))
		}, "says seq 3"},
		{"deleted", func(l *bolt.Bucket) error { return l.Delete(u64(2)) }, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ledgerDB(t)
			rawUpdate(t, path, func(jobs *bolt.Bucket) error {
				return tc.damage(jobs.Bucket([]byte("j")).Bucket(bucketLedger))
			})
			db := reopen(t, path)
			l, err := db.Ledger("j")
			wantErr(t, err, ErrCorrupt, `job "j"`, "seq 2", tc.frag)
			if l != nil {
				t.Fatalf("corrupt ledger returned %d entries", len(l))
			}
			wantErr(t, db.Verify(), ErrCorrupt, "seq 2")
			// Undamaged data stays readable.
			if _, err := db.Metrics("j"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckpointCorruption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(j *bolt.Bucket) error
		frag   string
	}{
		{"checksum byte", func(j *bolt.Bucket) error { return flip(j, keyJobCheckpoint, 0) }, "checksum"},
		{"header byte", func(j *bolt.Bucket) error { return flip(j, keyJobCheckpoint, frameHeader+9) }, "checksum"},
		{"param byte", func(j *bolt.Bucket) error { return flip(j, keyJobCheckpoint, frameHeader+ckHeaderLen+2001) }, "checksum"},
		{"optimizer byte", func(j *bolt.Bucket) error { return flip(j, keyJobCheckpoint, -1) }, "checksum"},
		{"truncated", func(j *bolt.Bucket) error {
			v := j.Get(keyJobCheckpoint)
			return j.Put(keyJobCheckpoint, slices.Clone(v[:len(v)/2]))
		}, "checksum"},
		{"deleted", func(j *bolt.Bucket) error { return j.Delete(keyJobCheckpoint) }, "missing"},
		{"stale round", func(j *bolt.Bucket) error {
			ck := checkpointFor(1, 1000)
			return j.Put(keyJobCheckpoint, encodeCheckpoint(1, &ck))
		}, "of round 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ledgerDB(t)
			rawUpdate(t, path, func(jobs *bolt.Bucket) error { return tc.damage(jobs.Bucket([]byte("j"))) })
			db := reopen(t, path)
			_, ok, err := db.Checkpoint("j")
			wantErr(t, err, ErrCorrupt, `job "j"`, "round", tc.frag)
			if ok {
				t.Fatal("corrupt checkpoint reported ok")
			}
			wantErr(t, db.Verify(), ErrCorrupt, "checkpoint")
			if _, err := db.Ledger("j"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMetricsAndMetaCorruption(t *testing.T) {
	path := ledgerDB(t)
	rawUpdate(t, path, func(jobs *bolt.Bucket) error {
		return flip(jobs.Bucket([]byte("j")).Bucket(bucketMetrics), u64(2), 6)
	})
	db := reopen(t, path)
	_, err := db.Metrics("j")
	wantErr(t, err, ErrCorrupt, `job "j"`, "metrics round 2", "checksum")
	db.Close()

	path = ledgerDB(t)
	rawUpdate(t, path, func(jobs *bolt.Bucket) error { return flip(jobs.Bucket([]byte("j")), keyJobMeta, 10) })
	db = reopen(t, path)
	_, err = db.Job("j")
	wantErr(t, err, ErrCorrupt, `job "j"`, "meta")
	_, err = db.Jobs()
	wantErr(t, err, ErrCorrupt, `job "j"`)
	// Writes that depend on the record refuse rather than overwrite it.
	wantErr(t, db.SetJobState("j", StateRunning, ""), ErrCorrupt)
	_, err = db.AppendLedger("j", LedgerEntry{Round: 3, Event: event(3)})
	wantErr(t, err, ErrCorrupt)
	wantErr(t, db.CommitRound("j", 3, metricsFor(3), Checkpoint{}), ErrCorrupt)
}

func TestSettingCorruption(t *testing.T) {
	db, path := openTemp(t)
	if err := db.SetSetting("key", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error { return flip(tx.Bucket(bucketSettings), []byte("key"), -1) }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db = reopen(t, path)
	_, _, err = db.Setting("key")
	wantErr(t, err, ErrCorrupt, `"key"`)
	_, err = db.SetSettingIfAbsent("key", []byte("x"))
	wantErr(t, err, ErrCorrupt, `"key"`)
}

func TestOpenRefusesOtherFormat(t *testing.T) {
	db, path := openTemp(t)
	db.Close()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyFormat, frame([]byte("dpfl-storage/2")))
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if db, err := Open(path); err == nil {
		db.Close()
		t.Fatal("opened a file of another format version")
	}
}
