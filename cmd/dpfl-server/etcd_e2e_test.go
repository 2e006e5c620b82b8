package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/internal/etcdtest"
)

// The etcd end-to-end test runs a private single-member etcd
// (internal/etcdtest), skipping without one unless DPFL_REQUIRE_ETCD=1.

// A DP job on the etcd store (--store etcd://…, --blob-dir): it completes
// with one privacy-ledger event per round; after a restart on the same
// etcd and blob directory the start-up check passes and the job, its
// ledger, metrics and model are all still served, signed by the same
// log key (kept in the blob directory).
func TestEtcdStoreEndToEnd(t *testing.T) {
	etcdAddr := strings.TrimPrefix(etcdtest.Private(t).Endpoints()[0], "http://")
	blobs := filepath.Join(t.TempDir(), "blobs")
	args := []string{"--store", "etcd://" + etcdAddr, "--store-prefix", "/dpfl-e2e/", "--blob-dir", blobs}
	s := startServerWith(t, "tok", args...)
	cl := client.New(s.addr, "tok")
	ctx := context.Background()
	if !s.log.waitFor("database checked", "etcd://"+etcdAddr) {
		t.Fatalf("no start-up check, or the store not logged:\n%s", s.log)
	}

	const rounds = 4
	spec := fmt.Sprintf(`{
  "name": "etcd-e2e",
  "dataset": "synthetic",
  "model": "logreg",
  "population": {"size": 60},
  "sampling": {"scheme": "poisson", "rate": 0.5},
  "rounds": %d,
  "client": {"epochs": 1, "batch_size": 10, "lr": 0.1},
  "dp": {"enabled": true, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": 1e-5},
  "eval_every": 2
}`, rounds)
	st, err := cl.Submit(ctx, []byte(spec))
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err = cl.Wait(wctx, st.ID, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log)
	}
	if st.State != "completed" || st.Round != rounds {
		t.Fatalf("job ended %s at round %d: %s\n%s", st.State, st.Round, st.Message, s.log)
	}
	rep, err := cl.Privacy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != rounds {
		t.Fatalf("%d privacy events for %d rounds", len(rep.Events), rounds)
	}
	for i, e := range rep.Events {
		if e.Round != i+1 {
			t.Fatalf("event %d is for round %d", i, e.Round)
		}
	}
	if rep.Epsilon == nil || !(*rep.Epsilon > 0) {
		t.Fatalf("privacy report ε=%v", rep.Epsilon)
	}
	mod, err := cl.Model(ctx, st.ID)
	if err != nil || mod.Round != rounds || mod.NumParams == 0 || len(mod.Params) != mod.NumParams {
		t.Fatalf("model: round %d, %d of %d params, err %v", mod.Round, len(mod.Params), mod.NumParams, err)
	}
	key, err := cl.LogKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint is a blob, and the signing key lives beside the
	// blobs (mode 0600).
	if fi, err := os.Stat(filepath.Join(blobs, "signing-key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key in the blob directory: %v %v", fi, err)
	}
	if ents, _ := os.ReadDir(blobs); len(ents) < 2 {
		t.Fatalf("blob directory holds %d entries, want a job's blobs and the signing key", len(ents))
	}

	// Restart on the same etcd and blob directory.
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()
	s2 := startServerWith(t, "tok", args...)
	cl2 := client.New(s2.addr, "tok")
	if !s2.log.waitFor("database checked") {
		t.Fatalf("restart: no start-up check:\n%s", s2.log)
	}
	after, err := cl2.Job(ctx, st.ID)
	if err != nil || after.State != "completed" || after.Round != rounds {
		t.Fatalf("after restart: job %s at round %d, err %v", after.State, after.Round, err)
	}
	rep2, err := cl2.Privacy(ctx, st.ID)
	if err != nil || len(rep2.Events) != rounds || rep2.Epsilon == nil || *rep2.Epsilon != *rep.Epsilon {
		t.Fatalf("after restart: %d privacy events, ε %v (was %v), err %v", len(rep2.Events), rep2.Epsilon, *rep.Epsilon, err)
	}
	met, err := cl2.Metrics(ctx, st.ID)
	if err != nil || len(met) != rounds {
		t.Fatalf("after restart: %d metrics rows, err %v", len(met), err)
	}
	mod2, err := cl2.Model(ctx, st.ID)
	if err != nil || mod2.Round != rounds || !slices.Equal(mod2.Params, mod.Params) {
		t.Fatalf("after restart: model round %d, params equal %v, err %v", mod2.Round, slices.Equal(mod2.Params, mod.Params), err)
	}
	key2, err := cl2.LogKey(ctx)
	if err != nil || key2.PublicKey != key.PublicKey {
		t.Fatalf("after restart: log key %q, was %q, err %v", key2.PublicKey, key.PublicKey, err)
	}
}
