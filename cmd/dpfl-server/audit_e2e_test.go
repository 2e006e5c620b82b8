package main

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/dpfl/dpfl/api/client"
)

// publicKeyRe finds the log's public key in the server's log line
// "transparency log public_key=…".
var publicKeyRe = regexp.MustCompile(`msg="transparency log" public_key=(\S+)`)

// logKeyOf waits for the server to log its transparency log key.
func logKeyOf(t *testing.T, s *server) string {
	t.Helper()
	if !s.log.waitFor("transparency log") {
		t.Fatalf("the server logged no transparency log key:\n%s", s.log)
	}
	m := publicKeyRe.FindStringSubmatch(s.log.String())
	if m == nil {
		t.Fatalf("no public_key in the log:\n%s", s.log)
	}
	return m[1]
}

// dpflClient runs dpfl-client with args against server (which may be
// down) and returns its combined output and error.
func dpflClient(server, token string, args ...string) (string, error) {
	cmd := exec.Command(clientBin, args...)
	cmd.Env = append(os.Environ(), "DPFL_SERVER="+server, "DPFL_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A DP job's audit bundle, written with dpfl-client audit --bundle while
// the server runs, verifies offline with dpfl-client verify --key after
// the server has stopped; a tampered bundle or a wrong key fails it. The
// key is created at first start (mode 0600), kept across restarts, and a
// later bundle proves the log only grew since the first.
func TestAuditBundleVerifiesOffline(t *testing.T) {
	needData(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "dpfl.db")
	const token = "secret-audit-e2e"
	s := startServer(t, db, token)
	key := logKeyOf(t, s)
	fi, err := os.Stat(db + ".signing-key")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key file: mode %v, %v", fi.Mode().Perm(), err)
	}
	ctx := context.Background()
	cl := client.New(s.addr, token)
	if k, err := cl.LogKey(ctx); err != nil || k.PublicKey != key {
		t.Fatalf("GET /v1/log/key: %+v, %v; logged %s", k, err, key)
	}
	st, err := cl.Submit(ctx, []byte(fmt.Sprintf(smallJob, 6)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if st, err = cl.Wait(wctx, st.ID, 200*time.Millisecond, nil); err != nil || st.State != "completed" {
		t.Fatalf("job %v: %v\n%s", st.State, err, s.log)
	}
	bundle := filepath.Join(dir, "bundle.json")
	model := filepath.Join(dir, "model.json")
	out, err := dpflClient(s.addr, token, "audit", st.ID, "--bundle", bundle)
	if err != nil || !strings.Contains(out, "wrote "+bundle) {
		t.Fatalf("audit --bundle: %v\n%s", err, out)
	}
	if out, err := dpflClient(s.addr, token, "model", st.ID, "--out", model); err != nil {
		t.Fatalf("model --out: %v\n%s", err, out)
	}
	s.stop(t)

	// Offline: the server is down, and the client is pointed nowhere.
	nowhere := "http://127.0.0.1:1"
	out, err = dpflClient(nowhere, "", "verify", bundle, "--key", key)
	if err != nil || !strings.Contains(out, "OK: "+bundle+" verifies") || !strings.Contains(out, "6 charges, 6 rounds released, 0 extra events") ||
		!strings.Contains(out, "not below the bound") || strings.Contains(out, "WARNING") {
		t.Fatalf("verify --key: %v\n%s", err, out)
	}
	if out, err := dpflClient(nowhere, "", "verify", bundle, "--key", key, "--model", model); err != nil || !strings.Contains(out, "the model released in round 6") {
		t.Fatalf("verify --model: %v\n%s", err, out)
	}
	if out, err := dpflClient(nowhere, "", "verify", model, "--key", key); err != nil || !strings.Contains(out, "released in round 6") {
		t.Fatalf("verify of the model file: %v\n%s", err, out)
	}
	if out, err := dpflClient(nowhere, "", "verify", bundle); err != nil || !strings.Contains(out, "WARNING: no --key given") {
		t.Fatalf("verify without a key: %v\n%s", err, out)
	}

	// Tampered: each exits non-zero and names the problem.
	raw, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.json")
	i := strings.Index(string(raw), `\"model_sha256\":\"`) + len(`\"model_sha256\":\"`)
	flipped := []byte(string(raw))
	if flipped[i] == '0' {
		flipped[i] = '1'
	} else {
		flipped[i] = '0'
	}
	if err := os.WriteFile(tampered, flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := dpflClient(nowhere, "", "verify", tampered, "--key", key); err == nil || !strings.Contains(out, "is not in the log") {
		t.Fatalf("flipped byte: %v\n%s", err, out)
	}
	_, wrong, err := note.GenerateKey(crand.Reader, "dpfl/impostor")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dpflClient(nowhere, "", "verify", bundle, "--key", wrong); err == nil || !strings.Contains(out, "FAILED: checkpoint: wrong key") {
		t.Fatalf("wrong key: %v\n%s", err, out)
	}

	// A restart keeps the key, and a later bundle proves the log grew
	// from the first bundle's checkpoint.
	s = startServer(t, db, token)
	if k := logKeyOf(t, s); k != key {
		t.Fatalf("key after restart %s, was %s", k, key)
	}
	cl = client.New(s.addr, token)
	st2, err := cl.Submit(ctx, []byte(fmt.Sprintf(smallJob, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if st2, err = cl.Wait(wctx, st2.ID, 200*time.Millisecond, nil); err != nil || st2.State != "completed" {
		t.Fatalf("second job %v: %v", st2.State, err)
	}
	later := filepath.Join(dir, "later.json")
	if out, err := dpflClient(s.addr, token, "audit", st2.ID, "--bundle", later, "--since-checkpoint", bundle); err != nil {
		t.Fatalf("audit --since-checkpoint: %v\n%s", err, out)
	}
	s.stop(t)
	if out, err := dpflClient(nowhere, "", "verify", later, "--key", key); err != nil || !strings.Contains(out, "the log only grew since the earlier checkpoint") {
		t.Fatalf("verify of the later bundle: %v\n%s", err, out)
	}

	// A signing key that others may read is refused at start.
	if err := os.Chmod(db+".signing-key", 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(serverBin, "--addr", freePort(t), "--db", db)
	cmd.Env = append(os.Environ(), "DPFL_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "chmod 600") {
		t.Fatalf("server with a world-readable key: %v\n%s", err, out)
	}
}
