package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"google.golang.org/protobuf/proto"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	auditlog "github.com/dpfl/dpfl/audit"
	"github.com/dpfl/dpfl/export"
	"github.com/dpfl/dpfl/export/onnxpb"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/datatest"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// modelServer runs dpfl-server's API in process, over a database that
// signs its transparency log, with the admin token "tok"; the client's
// commands reach it through $DPFL_SERVER and $DPFL_TOKEN.
func modelServer(t *testing.T) *client.Client {
	t.Helper()
	datatest.FashionMNIST(t)
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	skey, _, err := note.GenerateKey(nil, "dpfl/model-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetLogSigner(skey); err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Logger: slog.New(slog.DiscardHandler)})
	tokens := &api.Tokens{}
	tokens.Add(api.HashToken("tok"), api.RoleAdmin)
	srv := httptest.NewServer(api.New(m, api.Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(func() { srv.Close(); m.Shutdown(context.Background()); db.Close() })
	t.Setenv("DPFL_SERVER", srv.URL)
	t.Setenv("DPFL_TOKEN", "tok")
	return client.New(srv.URL, "tok")
}

// runJob submits spec and waits for it to complete.
func runJob(t *testing.T, cl *client.Client, spec string) types.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := cl.Submit(ctx, []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	if st, err = cl.Wait(ctx, st.ID, 100*time.Millisecond, nil); err != nil || st.State != "completed" {
		t.Fatalf("job %s: %v, %v", st.ID, st.State, err)
	}
	return st
}

// dpflClient runs the client's command line and returns its output.
func dpflClient(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	return out.String(), err
}

const modelJob = `{"name": "export", "model": "logreg", "rounds": 3, "seed": 5,
  "population": {"size": 600, "partition": "iid"},
  "sampling": {"scheme": "poisson", "rate": 0.1},
  "client": {"epochs": 1, "batch_size": 20, "lr": 0.1},
  "dp": {"enabled": %v, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": 1e-5},
  "eval_every": 3}`

// model --format: json stays the default and today's file; onnx and
// safetensors carry the model's weights and its privacy certificate,
// whose ε, δ and log root are the server's model certificate's (and
// whose log root is GET /v1/log/checkpoint's when nothing was logged
// since); a job without DP says dp=false. Binary formats need
// --out and unknown formats are refused before any request.
func TestModelFormats(t *testing.T) {
	cl := modelServer(t)
	st := runJob(t, cl, fmt.Sprintf(modelJob, true))
	dir := t.TempDir()
	ctx := context.Background()

	// json: as before, to stdout and to --out.
	out, err := dpflClient(t, "model", st.ID)
	var me types.ModelExport
	if err != nil || json.Unmarshal([]byte(out), &me) != nil || me.NumParams != 7850 || me.Round != 3 || len(me.Certificate) == 0 {
		t.Fatalf("model JOB: %v, %.200s", err, out)
	}
	jsonFile := filepath.Join(dir, "m.json")
	if out, err := dpflClient(t, "model", st.ID, "--out", jsonFile, "--format", "json"); err != nil || !strings.Contains(out, "wrote "+jsonFile+": logreg, 7850 parameters, round 3") {
		t.Fatalf("model --format json --out: %v, %s", err, out)
	}
	if out, err := dpflClient(t, "verify", jsonFile); err != nil || !strings.HasPrefix(out, "OK") {
		t.Fatalf("verify of the json file: %v, %s", err, out)
	}
	var cert auditlog.ModelCertificate
	if err := json.Unmarshal(me.Certificate, &cert); err != nil || cert.Epsilon == nil {
		t.Fatalf("certificate %s: %v", me.Certificate, err)
	}
	// Nothing was logged since the job ended: the certificate's tree head
	// is GET /v1/log/checkpoint's.
	if cp, err := cl.LogCheckpoint(ctx); err != nil || cp.Size != cert.LogSize || !bytes.Equal(cp.Root, cert.LogRoot[:]) {
		t.Fatalf("checkpoint %d %x (%v), certificate's %d %x", cp.Size, cp.Root, err, cert.LogSize, cert.LogRoot[:])
	}

	// onnx: the weights and the certificate.
	onnxFile := filepath.Join(dir, "m.onnx")
	out, err = dpflClient(t, "model", st.ID, "--format", "onnx", "--out", onnxFile)
	if err != nil || !strings.Contains(out, "wrote "+onnxFile+": onnx, logreg of job "+st.ID) || !strings.Contains(out, "ε = ") || !strings.Contains(out, "log root "+cert.LogRoot.String()) {
		t.Fatalf("model --format onnx: %v, %s", err, out)
	}
	b, err := os.ReadFile(onnxFile)
	if err != nil {
		t.Fatal(err)
	}
	var om onnxpb.ModelProto
	if err := proto.Unmarshal(b, &om); err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{}
	for _, kv := range om.GetMetadataProps() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	want := map[string]string{
		"dp": "true", "dpfl.job_id": st.ID, "dpfl.model": "logreg", "dpfl.round": "3", "dp.rounds": "3",
		"dp.epsilon": strconv.FormatFloat(*cert.Epsilon, 'g', -1, 64), "dp.epsilon_source": "model_certificate",
		"dp.delta": "1e-05", "dp.adjacency": "add_remove", "dp.accountant": cert.Accountant, "dp.pld_method": cert.PLDMethod,
		"dp.clip_norm": "0.5", "dp.noise_multiplier": "1", "dp.sampling": "poisson", "dp.sampling_rate": "0.1",
		"dp.population_size": "600", "dp.charges": strconv.FormatUint(cert.ChargeSeq, 10),
		"log.root": cert.LogRoot.String(), "log.size": strconv.FormatInt(cert.LogSize, 10),
		"log.leaf_index": strconv.FormatInt(cert.LeafIndex, 10), "log.public_key": cert.PublicKey,
		"dpfl.model_sha256": auditlog.ModelHash(me.Params),
	}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("onnx metadata %s = %q, want %q", k, meta[k], v)
		}
	}
	if meta["log.checkpoint"] != cert.Checkpoint || meta["dpfl.certificate"] == "" {
		t.Errorf("onnx metadata lacks the checkpoint or the certificate")
	}
	ref, err := export.BuildONNX(export.FashionMNIST("logreg"), me.Params, meta)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(ref, &om) {
		t.Errorf("the CLI's ONNX file is not export.BuildONNX of the job's model")
	}

	// safetensors: the same tensors and certificate.
	stFile := filepath.Join(dir, "m.safetensors")
	if out, err := dpflClient(t, "model", st.ID, "--format", "safetensors", "--out", stFile); err != nil || !strings.Contains(out, "safetensors, logreg") {
		t.Fatalf("model --format safetensors: %v, %s", err, out)
	}
	b, err = os.ReadFile(stFile)
	if err != nil {
		t.Fatal(err)
	}
	ts, stMeta, err := export.ReadSafetensors(b)
	if err != nil || len(ts) != 2 || ts[0].Name != "fc.weight" || len(ts[0].Data) != 7840 || ts[1].Data[9] != me.Params[7849] {
		t.Fatalf("safetensors: %v, %d tensors", err, len(ts))
	}
	for k, v := range meta {
		if stMeta[k] != v {
			t.Errorf("safetensors metadata %s = %q, onnx's %q", k, stMeta[k], v)
		}
	}

	// Refusals: before any request for bad flags.
	if _, err := dpflClient(t, "model", st.ID, "--format", "onnx"); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("onnx without --out: %v", err)
	}
	if _, err := dpflClient(t, "model", st.ID, "--format", "tflite", "--out", "x"); err == nil || !strings.Contains(err.Error(), "unknown --format \"tflite\"") {
		t.Errorf("an unknown format: %v", err)
	}

	// A job without DP: dp=false, no ε, the log root still.
	plain := runJob(t, cl, fmt.Sprintf(modelJob, false))
	if out, err = dpflClient(t, "model", plain.ID, "--format", "onnx", "--out", onnxFile); err != nil || !strings.Contains(out, "dp=false") {
		t.Fatalf("model --format onnx of a job without DP: %v, %s", err, out)
	}
	b, _ = os.ReadFile(onnxFile)
	om.Reset()
	if err := proto.Unmarshal(b, &om); err != nil {
		t.Fatal(err)
	}
	meta = map[string]string{}
	for _, kv := range om.GetMetadataProps() {
		meta[kv.GetKey()] = kv.GetValue()
	}
	if meta["dp"] != "false" || meta["dp.epsilon"] != "" || meta["dpfl.job_id"] != plain.ID || meta["log.root"] == "" {
		t.Errorf("metadata of a job without DP: %v", meta)
	}
}
