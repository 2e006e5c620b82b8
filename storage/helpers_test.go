package storage

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// openTemp opens a fresh store in a test-private directory and closes it at
// the end of the test.
func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dpfl.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// mustCreate creates a job with the given ID and a small config.
func mustCreate(t testing.TB, db *DB, id string) {
	t.Helper()
	if err := db.CreateJob(Job{ID: id, Config: json.RawMessage(`{"rounds": 10}`)}); err != nil {
		t.Fatalf("CreateJob(%q): %v", id, err)
	}
}

// wantErr fails unless err wraps target and its message contains every
// fragment (the context callers rely on: job id, seq, round).
func wantErr(t testing.TB, err, target error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one wrapping %v", err, target)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

// rawUpdate edits the closed store file directly through bbolt, bypassing
// this package, the way disk damage or a foreign writer would.
func rawUpdate(t testing.TB, path string, fn func(jobs *bolt.Bucket) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bolt.Open: %v", err)
	}
	defer b.Close()
	if err := b.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketJobs)) }); err != nil {
		t.Fatalf("raw update: %v", err)
	}
}
