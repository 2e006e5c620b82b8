package api

import (
	"bytes"
	crand "crypto/rand"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
)

// The log's routes answer the auditor's token as well as the admin's:
// the key, the signed checkpoint, leaves, consistency proofs and a job's
// bundle, which verifies. Without a signing key they refuse (409), and
// bad query values are 400s naming the parameter.
func TestLogRoutes(t *testing.T) {
	s := newTestServer(t)
	if code, e := s.call("GET", "/v1/log/checkpoint", "audit", "", "", nil); code != 409 || !strings.Contains(e.Error, "does not sign its transparency log") {
		t.Fatalf("unsigned log: %d %q", code, e.Error)
	}
	skey, vkey, err := note.GenerateKey(crand.Reader, "dpfl/api-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.SetLogSigner(skey); err != nil {
		t.Fatal(err)
	}
	var key types.LogKeyResponse
	if code, e := s.call("GET", "/v1/log/key", "audit", "", "", &key); code != 200 || key.PublicKey != vkey || key.Origin != "dpfl/api-test" {
		t.Fatalf("key: %d %q %+v", code, e.Error, key)
	}
	if _, err := s.m.CreateBudget("pop", 5, 1e-6); err != nil {
		t.Fatal(err)
	}
	var before types.CheckpointResponse
	if code, _ := s.call("GET", "/v1/log/checkpoint", "audit", "", "", &before); code != 200 || before.Size != 1 {
		t.Fatalf("checkpoint: %d %+v", code, before)
	}
	if cp, err := audit.OpenCheckpoint(before.Checkpoint, vkey); err != nil || cp.Size != 1 || !bytes.Equal(cp.Root[:], before.Root) {
		t.Fatalf("checkpoint %+v: %v", cp, err)
	}
	var st struct {
		ID string `json:"id"`
	}
	if code, e := s.call("POST", "/v1/jobs", "tok", "", `{"rounds": 2, "population": {"size": 300}, "sampling": {"rate": 0.1}}`, &st); code != 201 {
		t.Fatalf("submit: %d %s", code, e.Error)
	}
	s.m.Wait(st.ID)
	var b audit.Bundle
	if code, e := s.call("GET", "/v1/log/jobs/"+st.ID+"/bundle?since=1", "audit", "", "", &b); code != 200 {
		t.Fatalf("bundle: %d %s", code, e.Error)
	}
	b.Since.Checkpoint = before.Checkpoint
	if res, err := audit.Verify(&b, audit.Options{Key: vkey}); err != nil || res.Rounds != 2 || res.SinceSize != 1 {
		t.Fatalf("bundle verifies: %v, %+v", err, res)
	}
	var cons types.CheckpointResponse
	if code, _ := s.call("GET", "/v1/log/consistency?old=1", "audit", "", "", &cons); code != 200 || cons.Old != 1 || cons.Size != 5 || len(cons.Proof) == 0 {
		t.Fatalf("consistency: %d %+v", code, cons)
	}
	var leaves types.LeavesResponse
	if code, _ := s.call("GET", "/v1/log/leaves?start=1&end=3", "audit", "", "", &leaves); code != 200 || leaves.Start != 1 || len(leaves.Leaves) != 2 || !strings.Contains(leaves.Leaves[0], `"kind":"charge"`) {
		t.Fatalf("leaves: %d %+v", code, leaves)
	}
	for _, c := range []struct {
		path  string
		code  int
		field string
	}{
		{"/v1/log/consistency", 400, "old"},
		{"/v1/log/consistency?old=-1", 400, "old"},
		{"/v1/log/consistency?old=99", 409, ""},
		{"/v1/log/leaves?start=x", 400, "start"},
		{"/v1/log/leaves?start=3&end=99", 409, ""},
		{"/v1/log/jobs/" + st.ID + "/bundle?since=1.5", 400, "since"},
		{"/v1/log/jobs/nope/bundle", 404, ""},
	} {
		if code, e := s.call("GET", c.path, "audit", "", "", nil); code != c.code || e.Field != c.field {
			t.Errorf("%s: %d (field %q) %q, want %d on %q", c.path, code, e.Field, e.Error, c.code, c.field)
		}
	}
	if code, _ := s.call("GET", "/v1/log/key", "", "", "", nil); code != 401 {
		t.Fatalf("no token: %d", code)
	}
}
