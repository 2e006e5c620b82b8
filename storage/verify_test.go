package storage

import (
	"crypto/sha256"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// boundedDB returns a closed store with three jobs of two committed rounds
// each (checkpoints of 1000 parameters, 4,060 bytes): "live" still
// running, "done" and "old" completed (old first), plus a privacy unit.
// It returns the path and the size of one checkpoint value.
func boundedDB(t *testing.T) (string, int) {
	t.Helper()
	db, path := openTemp(t)
	for _, id := range []string{"old", "done", "live"} {
		mustCreate(t, db, id)
		for r := 1; r <= 2; r++ {
			if _, err := db.AppendLedger(id, LedgerEntry{Round: r, Event: event(r)}); err != nil {
				t.Fatal(err)
			}
			if err := db.CommitRound(id, r, metricsFor(r), checkpointFor(r, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		if id != "live" {
			if err := db.SetJobState(id, StateCompleted, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.CreateUnit(Unit{Name: "fmnist", EpsilonBudget: 8, Delta: 1e-6}); err != nil {
		t.Fatal(err)
	}
	ck := checkpointFor(2, 1000)
	size := len(encodeCheckpoint(2, &ck))
	db.Close()
	return path, size
}

// VerifyWith reads every job record, ledger, metrics row and unit, but
// checksums checkpoints only up to its byte cap: running jobs' first,
// then the most recently updated. Past the cap it still checks that the
// checkpoint exists and names the job's round.
func TestVerifyWithBoundsCheckpoints(t *testing.T) {
	path, size := boundedDB(t)
	db := reopen(t, path)
	res, err := db.VerifyWith(VerifyOptions{CheckpointBytes: int64(2 * size)})
	if err != nil {
		t.Fatal(err)
	}
	want := VerifyResult{Jobs: 3, Units: 1, Settings: 0, LedgerEntries: 6, MetricsRounds: 6, LogLeaves: 13,
		CheckpointsVerified: 2, CheckpointsSkipped: 1, CheckpointBytes: int64(2 * size)}
	res.Duration = 0
	if res != want {
		t.Fatalf("covered %+v, want %+v", res, want)
	}
	full, err := db.VerifyWith(VerifyOptions{Structure: true, CheckpointBytes: -1})
	if err != nil || full.CheckpointsVerified != 3 || full.CheckpointsSkipped != 0 || !full.Structure {
		t.Fatalf("unbounded: %+v, %v", full, err)
	}
	db.Close()

	// Damage each job's checkpoint body: within the cap (the live job's,
	// the last updated) it is found; past it (old's) only the full check
	// finds it.
	for _, tc := range []struct {
		job     string
		bounded bool
	}{{"live", true}, {"done", true}, {"old", false}} {
		t.Run(tc.job, func(t *testing.T) {
			path, size := boundedDB(t)
			rawUpdate(t, path, func(jobs *bolt.Bucket) error {
				return flip(jobs.Bucket([]byte(tc.job)), keyJobCheckpoint, frameHeader+ckHeaderLen+100)
			})
			db := reopen(t, path)
			_, err := db.VerifyWith(VerifyOptions{CheckpointBytes: int64(2 * size)})
			if tc.bounded {
				wantErr(t, err, ErrCorrupt, `job "`+tc.job+`"`, "checkpoint", "checksum")
			} else if err != nil {
				t.Fatalf("checkpoint past the cap was read: %v", err)
			}
			wantErr(t, db.Verify(), ErrCorrupt, `job "`+tc.job+`"`, "checksum")
		})
	}

	// A checkpoint past the cap whose header names another round is found.
	path, size = boundedDB(t)
	rawUpdate(t, path, func(jobs *bolt.Bucket) error {
		ck := checkpointFor(1, 1000)
		return jobs.Bucket([]byte("old")).Put(keyJobCheckpoint, encodeCheckpoint(1, &ck))
	})
	db = reopen(t, path)
	_, err = db.VerifyWith(VerifyOptions{CheckpointBytes: int64(size)})
	wantErr(t, err, ErrCorrupt, `job "old" checkpoint round 2`, "of round 1")
}

// However small the cap, every ledger entry and unit is checked.
func TestVerifyWithReadsEveryLedgerAndUnit(t *testing.T) {
	path, _ := boundedDB(t)
	rawUpdate(t, path, func(jobs *bolt.Bucket) error {
		return flip(jobs.Bucket([]byte("old")).Bucket(bucketLedger), u64(2), 20)
	})
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		return flip(tx.Bucket(bucketUnits), []byte("fmnist"), 10)
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	db := reopen(t, path)
	_, err = db.VerifyWith(VerifyOptions{CheckpointBytes: 0})
	wantErr(t, err, ErrCorrupt, `job "old" ledger seq 2`, `privacy unit "fmnist"`, "checksum")
}

// VerifyWith reads the enrolled devices: a record that fails its checksum
// and a credential index entry without its record are reported, naming
// the job and the device.
func TestVerifyWithReadsDevices(t *testing.T) {
	db, path := openTemp(t)
	mustCreate(t, db, "a")
	for i, id := range []string{"dev-1", "dev-2"} {
		h := sha256.Sum256([]byte{byte(i)})
		if err := db.EnrollDevice(Device{ID: id, JobID: "a", CredentialHash: h[:]}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.VerifyWith(VerifyOptions{})
	if err != nil || res.Devices != 2 {
		t.Fatalf("intact store: %+v, %v", res, err)
	}
	db.Close()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		job := tx.Bucket(bucketDevices).Bucket([]byte("a"))
		ids := job.Bucket(bucketDeviceIDs)
		v := append([]byte(nil), ids.Get([]byte("dev-1"))...)
		v[len(v)-1] ^= 1
		if err := ids.Put([]byte("dev-1"), v); err != nil {
			return err
		}
		return ids.Delete([]byte("dev-2"))
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path)
	_, err = db.VerifyWith(VerifyOptions{})
	wantErr(t, err, ErrCorrupt, `device "dev-1"`, `"dev-2"`)
}
