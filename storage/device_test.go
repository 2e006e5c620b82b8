package storage

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Devices are enrolled per job: a device's credential hash finds it in
// its own job only, IDs and hashes are unique within a job, and a
// finished or unknown job takes no enrolment.
func TestDeviceEnrollment(t *testing.T) {
	db, path := openTemp(t)
	mustCreate(t, db, "a")
	mustCreate(t, db, "b")
	h := func(s string) []byte { x := sha256.Sum256([]byte(s)); return x[:] }

	if ds, err := db.Devices("a"); err != nil || len(ds) != 0 {
		t.Fatalf("no enrolments yet: %v %v", ds, err)
	}
	if _, err := db.DeviceByCredentialHash("a", h("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup before any enrolment: %v", err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := db.EnrollDevice(Device{ID: "dev-2", JobID: "a", CredentialHash: h("two"), EnrolledAt: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := db.EnrollDevice(Device{ID: "dev-1", JobID: "a", CredentialHash: h("one"), EnrolledAt: t0}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, db.EnrollDevice(Device{ID: "dev-1", JobID: "a", CredentialHash: h("three")}), ErrExists, "dev-1")
	wantErr(t, db.EnrollDevice(Device{ID: "dev-3", JobID: "a", CredentialHash: h("one")}), ErrExists, "credential")
	wantErr(t, db.EnrollDevice(Device{ID: "dev-1", JobID: "nope", CredentialHash: h("x")}), ErrNotFound, "nope")
	if err := db.EnrollDevice(Device{ID: "dev-4", JobID: "a", CredentialHash: []byte("short")}); err == nil {
		t.Fatal("a hash that is not SHA-256 was accepted")
	}
	if err := db.EnrollDevice(Device{ID: "", JobID: "a", CredentialHash: h("y")}); err == nil {
		t.Fatal("an empty device ID was accepted")
	}
	// The same ID and credential may serve another job; lookups stay apart.
	if err := db.EnrollDevice(Device{ID: "dev-1", JobID: "b", CredentialHash: h("b-one")}); err != nil {
		t.Fatal(err)
	}

	ds, err := db.Devices("a")
	if err != nil || len(ds) != 2 || ds[0].ID != "dev-1" || ds[1].ID != "dev-2" || !ds[0].EnrolledAt.Equal(t0) {
		t.Fatalf("devices of a: %+v, %v", ds, err)
	}
	d, err := db.DeviceByCredentialHash("a", h("two"))
	if err != nil || d.ID != "dev-2" || d.JobID != "a" || !bytes.Equal(d.CredentialHash, h("two")) {
		t.Fatalf("lookup: %+v, %v", d, err)
	}
	wantErr(t, func() error { _, err := db.DeviceByCredentialHash("b", h("two")); return err }(), ErrNotFound, "b")
	wantErr(t, func() error { _, err := db.DeviceByCredentialHash("c", h("two")); return err }(), ErrNotFound)
	wantErr(t, func() error { _, err := db.Devices("c"); return err }(), ErrNotFound, "c")

	if err := db.SetJobState("b", StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	wantErr(t, db.EnrollDevice(Device{ID: "dev-9", JobID: "b", CredentialHash: h("late")}), ErrConflict, "completed")

	// Enrolments survive a restart; a flipped bit in a record is ErrCorrupt.
	db.Close()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		ids := tx.Bucket(bucketDevices).Bucket([]byte("a")).Bucket(bucketDeviceIDs)
		v := bytes.Clone(ids.Get([]byte("dev-2")))
		v[len(v)-2] ^= 1
		return ids.Put([]byte("dev-2"), v)
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d, err := db.DeviceByCredentialHash("a", h("one")); err != nil || d.ID != "dev-1" {
		t.Fatalf("after reopen: %+v, %v", d, err)
	}
	wantErr(t, func() error { _, err := db.DeviceByCredentialHash("a", h("two")); return err }(), ErrCorrupt, "dev-2")
	wantErr(t, func() error { _, err := db.Devices("a"); return err }(), ErrCorrupt, "dev-2")
}
