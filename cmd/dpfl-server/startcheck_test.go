package main

import (
	"encoding/json"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
	bolt "go.etcd.io/bbolt"
)

// startDB writes a store with a privacy unit and a DP job on it that has
// committed rounds 1 … committed, with ledger events for rounds 1 … events
// (events < committed is a ledger that lost its tail), and returns its path.
func startDB(t *testing.T, committed, events int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dpfl.db")
	db, err := storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateUnit(storage.Unit{Name: "pop", EpsilonBudget: 8, Delta: 1e-6}); err != nil {
		t.Fatal(err)
	}
	cfg := json.RawMessage(`{"dp": {"enabled": true, "privacy_unit": "pop"}}`)
	if err := db.CreateJob(storage.Job{ID: "job-b", Config: cfg, State: storage.StateRunning}); err != nil {
		t.Fatal(err)
	}
	ev := json.RawMessage(`{"type":"GaussianDpEvent","noise_multiplier":1}`)
	for r := 1; r <= committed; r++ {
		if r <= events {
			if _, err := db.AppendLedger("job-b", storage.LedgerEntry{Round: r, Event: ev}); err != nil {
				t.Fatal(err)
			}
		}
		ck := storage.Checkpoint{Params: []float32{1, 2, 3}}
		if err := db.CommitRound("job-b", r, json.RawMessage(`{}`), ck); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetJobState("job-b", storage.StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	return path
}

func check(t *testing.T, path string, full bool) error {
	t.Helper()
	db, err := storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mgr := job.NewManager(db, job.Options{Logger: slog.New(slog.DiscardHandler)})
	return checkStore(db, mgr, full, slog.New(slog.DiscardHandler))
}

// The start-up check passes an intact store and refuses one whose ledger
// lost a committed round's event, or whose privacy unit record is
// damaged, naming the job or unit.
func TestStartUpCheck(t *testing.T) {
	for _, full := range []bool{false, true} {
		if err := check(t, startDB(t, 3, 3), full); err != nil {
			t.Fatalf("intact store (full %v): %v", full, err)
		}
	}

	err := check(t, startDB(t, 3, 2), false)
	if err == nil || !strings.Contains(err.Error(), "failed its start-up check") ||
		!strings.Contains(err.Error(), "job job-b: privacy ledger holds 2 events for 3 committed rounds") {
		t.Fatalf("truncated ledger: %v", err)
	}

	path := startDB(t, 3, 3)
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		u := tx.Bucket([]byte("units"))
		v := append([]byte{}, u.Get([]byte("pop"))...)
		v[9] ^= 1
		return u.Put([]byte("pop"), v)
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := check(t, path, false); err == nil || !strings.Contains(err.Error(), `privacy unit "pop"`) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("damaged unit: %v", err)
	}
}

// The server binary refuses to start on a damaged store: it exits with an
// error naming what is damaged instead of serving.
func TestServerRefusesDamagedStore(t *testing.T) {
	path := startDB(t, 3, 2)
	cmd := exec.Command(serverBin, "--addr", freePort(t), "--db", path, "--token", "tok")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("dpfl-server did not exit on a damaged store")
	}
	if err == nil || !strings.Contains(string(out), "job job-b: privacy ledger holds 2 events for 3 committed rounds") {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
	t.Logf("refused start:\n%s", out)
}
