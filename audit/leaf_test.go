package audit_test

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/audit"
	"github.com/dpfl/dpfl/storage"
)

// ModelHash is SHA-256 over the parameters as float32 little-endian: 1.0
// is 00 00 80 3f, -2.5 is 00 00 20 c0. The chunked encoding agrees with
// one pass over a vector longer than its buffer.
func TestModelHash(t *testing.T) {
	if got, want := audit.ModelHash([]float32{1, -2.5}), audit.SHA256Hex([]byte{0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0}); got != want {
		t.Fatalf("ModelHash = %s, want %s", got, want)
	}
	long := make([]float32, 5000)
	var raw []byte
	for i := range long {
		long[i] = float32(i) / 7
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(long[i]))
	}
	if got, want := audit.ModelHash(long), audit.SHA256Hex(raw); got != want {
		t.Fatalf("ModelHash of 5000 parameters = %s, want %s", got, want)
	}
}

// ParseLeaf accepts what Marshal writes and refuses a leaf missing what
// its kind needs, an unknown key, or trailing data.
func TestParseLeaf(t *testing.T) {
	prev := int64(3)
	spec := audit.SHA256Hex([]byte("{}"))
	good := audit.Leaf{Kind: audit.KindCharge, Job: "j", JobLeaf: 2, Prev: &prev, Seq: 1, Round: 1, Time: time.Unix(5, 0).UTC(),
		Event: json.RawMessage(`{"type":"NoOpDpEvent"}`), SpecSHA256: spec}
	b, err := good.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := audit.ParseLeaf(b); err != nil || l.Seq != 1 || *l.Prev != 3 {
		t.Fatalf("round trip: %+v, %v", l, err)
	}
	for _, c := range []struct{ leaf, says string }{
		{strings.Replace(string(b), `"seq":1,`, ``, 1), "needs seq"},
		{strings.Replace(string(b), `"prev":3,`, ``, 1), "exactly the first leaf"},
		{strings.Replace(string(b), `"kind":"charge"`, `"kind":"refund"`, 1), "unknown kind"},
		{strings.Replace(string(b), `"job":"j",`, `"job":"j","extra":1,`, 1), "unknown field"},
		{string(b) + `{}`, "data after"},
		{strings.Replace(string(b), spec, strings.ToUpper(spec), 1), "spec_sha256"},
	} {
		if _, err := audit.ParseLeaf([]byte(c.leaf)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an error saying %q", c.leaf, err, c.says)
		}
	}
}

// A checkpoint's text round-trips; other texts are refused.
func TestCheckpointText(t *testing.T) {
	c := audit.Checkpoint{Origin: "dpfl/host", Size: 42, Root: tlog.RecordHash([]byte("x"))}
	got, err := audit.ParseCheckpoint(c.Text())
	if err != nil || got != c {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	for _, bad := range []string{"dpfl/host\n42\n", "dpfl/host\n-1\n" + c.Root.String() + "\n", "dpfl/host\n042\n" + c.Root.String() + "\n", "\n1\n" + c.Root.String() + "\n", c.Text() + "extra\n"} {
		if _, err := audit.ParseCheckpoint(bad); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

// syntheticBundle is the bundle of a job written straight into storage
// (three charges of a Poisson-sampled Gaussian, two commits), without
// training: a seed for the fuzz target that needs no dataset.
func syntheticBundle(t testing.TB) ([]byte, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(crand.Reader, "dpfl/fuzz")
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SetLogSigner(skey); err != nil {
		t.Fatal(err)
	}
	cfg := json.RawMessage(`{"dp":{"enabled":true,"noise_multiplier":1,"delta":0.00001},"sampling":{"scheme":"poisson"}}`)
	if err := db.CreateJob(storage.Job{ID: "j", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	ev := accounting.PoissonSampled{SamplingProbability: 0.1, Event: accounting.Gaussian{NoiseMultiplier: 1}}
	raw, _ := accounting.MarshalEvent(ev)
	for r := 1; r <= 3; r++ {
		if _, err := db.AppendLedger("j", storage.LedgerEntry{Round: r, Event: raw}); err != nil {
			t.Fatal(err)
		}
		if r < 3 {
			if err := db.CommitRound("j", r, json.RawMessage(`{}`), storage.Checkpoint{Params: []float32{float32(r)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	head, j, entries, _, err := db.JobLog("j", 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := accounting.Account([]accounting.Event{ev, ev, ev}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	b := audit.Bundle{Format: audit.BundleFormat, Job: "j", Spec: string(j.Config), PublicKey: vkey, Checkpoint: head.Checkpoint,
		Claim: audit.Claim{Private: true, Epsilon: rep.Best.Epsilon, Accountant: rep.Best.Accountant, Delta: 1e-5, Adjacency: "add_remove",
			Rounds: 2, Events: 3, ExtraEvents: 1, PLDMethod: accounting.PLDMethod}}
	for _, e := range entries {
		b.Entries = append(b.Entries, audit.Entry{Index: e.Index, Leaf: string(e.Leaf), Proof: e.Proof})
	}
	out, err := json.Marshal(&b)
	if err != nil {
		t.Fatal(err)
	}
	return out, vkey
}

// The synthetic bundle verifies, its in-progress third charge counted as
// an extra event.
func TestSyntheticBundle(t *testing.T) {
	raw, vkey := syntheticBundle(t)
	b, err := audit.ReadBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(b, audit.Options{Key: vkey})
	if err != nil || res.Charges != 3 || res.Rounds != 2 || res.ExtraEvents != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
}

// Verify never panics, whatever the bundle holds, and a bundle it
// accepts is one whose every entry is in the signed log.
func FuzzVerifyBundle(f *testing.F) {
	raw, vkey := syntheticBundle(f)
	f.Add(raw)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := audit.ReadBundle(data)
		if err != nil {
			return
		}
		res, err := audit.Verify(b, audit.Options{Key: vkey})
		if err != nil {
			return
		}
		for _, e := range b.Entries {
			if tlog.CheckRecord(e.Proof, res.Checkpoint.Size, res.Checkpoint.Root, e.Index, tlog.RecordHash([]byte(e.Leaf))) != nil {
				t.Fatalf("accepted an entry that is not in the log: %+v", e)
			}
		}
	})
}

// A claim is recomputed with the PLD method it names: the current one,
// or, for a bundle from a server before methods were named (no
// pld_method), "pld/1", whose figures such a server reported; a method
// this verifier does not know is refused by name.
func TestVerifyPLDMethods(t *testing.T) {
	raw, vkey := syntheticBundle(t)
	ev := accounting.PoissonSampled{SamplingProbability: 0.1, Event: accounting.Gaussian{NoiseMultiplier: 1}}
	events := []accounting.Event{ev, ev, ev}
	for _, tc := range []struct{ named, method string }{{accounting.PLDMethod, accounting.PLDMethod}, {"", accounting.PLDMethodV1}} {
		b, err := audit.ReadBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := accounting.AccountMethod(events, 1e-5, tc.method)
		if err != nil {
			t.Fatal(err)
		}
		b.Claim.PLDMethod, b.Claim.Epsilon, b.Claim.PLDEpsilon = tc.named, rep.Best.Epsilon, rep.PLD.Epsilon
		res, err := audit.Verify(b, audit.Options{Key: vkey})
		if err != nil {
			t.Fatalf("claim naming %q: %v", tc.named, err)
		}
		if res.Recomputed.PLDMethod != tc.method || res.Recomputed.Epsilon() != *rep.Best.Epsilon {
			t.Errorf("claim naming %q: recomputed by %q, ε = %v; want %q, %v", tc.named, res.Recomputed.PLDMethod, res.Recomputed.Epsilon(), tc.method, *rep.Best.Epsilon)
		}
	}
	b, _ := audit.ReadBundle(raw)
	b.Claim.PLDMethod = "pld/9"
	if _, err := audit.Verify(b, audit.Options{Key: vkey}); err == nil || !strings.Contains(err.Error(), `"pld/9"`) {
		t.Errorf("unknown method: %v", err)
	}
}
