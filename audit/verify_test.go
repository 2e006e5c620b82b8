package audit_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/datatest"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// These tests audit bundles of real jobs: a job.Manager trains small DP
// jobs on Fashion-MNIST over a database whose log is signed, and
// Manager.AuditBundle assembles the bundle as GET /v1/log/jobs/{id}/bundle
// serves it.

// server is one dpfl database with a signed log and a manager over it.
type server struct {
	m    *job.Manager
	db   *storage.DB
	vkey string
}

// newServer opens a fresh database signed with skey (a new key if "").
func newServer(t *testing.T, skey string) *server {
	t.Helper()
	datatest.FashionMNIST(t)
	if skey == "" {
		var err error
		if skey, _, err = note.GenerateKey(crand.Reader, "dpfl/test"); err != nil {
			t.Fatal(err)
		}
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := db.SetLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Workers: 2, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { m.Shutdown(t.Context()); db.Close() })
	return &server{m: m, db: db, vkey: vkey}
}

// run trains a small DP job (logreg, 300 users, Poisson q = 0.1, z = 1)
// of rounds rounds to its end; edit adjusts the spec.
func (s *server) run(t *testing.T, rounds int, edit func(*types.Spec)) string {
	t.Helper()
	spec := job.DefaultSpec()
	spec.Population.Size, spec.Sampling.Rate, spec.Rounds, spec.EvalEvery = 300, 0.1, rounds, rounds
	if edit != nil {
		edit(&spec)
	}
	j, err := s.m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	s.m.Wait(j.ID)
	st, err := s.m.Get(j.ID)
	if err != nil || st.State != types.StateCompleted {
		t.Fatalf("job ended %v (%s), err %v", st.State, st.Message, err)
	}
	return j.ID
}

// bundle returns the job's bundle as the JSON file dpfl-client writes.
func (s *server) bundle(t *testing.T, id string, since int64) []byte {
	t.Helper()
	b, err := s.m.AuditBundle(id, since)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(&b, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fixture is one server with two finished 5-round DP jobs, the first's
// bundle and model, shared by the tests (training takes seconds).
type fixture struct {
	s     *server
	skey  string // the server's signing key
	id    string
	raw   []byte
	model audit.ModelFile
	other string // the second job
	// before is the log's size after the first job, before the second,
	// and early the checkpoint signed then, as an auditor would keep it.
	before int64
	early  string
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix != nil {
		fix.s.m.Shutdown(context.Background())
		fix.s.db.Close()
	}
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

func getFixture(t *testing.T) *fixture {
	t.Helper()
	datatest.FashionMNIST(t)
	fixOnce.Do(func() {
		// The fixture outlives the test that builds it: its own temp dir,
		// which TestMain removes.
		dir, err := os.MkdirTemp("", "audit-test")
		if err != nil {
			t.Fatal(err)
		}
		fixDir = dir
		skey, _, err := note.GenerateKey(crand.Reader, "dpfl/test")
		if err != nil {
			t.Fatal(err)
		}
		db, err := storage.Open(filepath.Join(dir, "dpfl.db"))
		if err != nil {
			t.Fatal(err)
		}
		vkey, err := db.SetLogSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Workers: 2, Logger: slog.New(slog.DiscardHandler)})
		s := &server{m: m, db: db, vkey: vkey}
		f := &fixture{s: s, skey: skey}
		f.id = s.run(t, 5, nil)
		head, err := db.LogHead()
		if err != nil {
			t.Fatal(err)
		}
		f.before, f.early = head.Size, head.Checkpoint
		f.other = s.run(t, 3, nil)
		f.raw = s.bundle(t, f.id, 0)
		me, err := m.Model(f.id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(me)
		if err := json.Unmarshal(b, &f.model); err != nil {
			t.Fatal(err)
		}
		fix = f
	})
	if fix == nil {
		t.Fatal("fixture failed to build")
	}
	return fix
}

func read(t *testing.T, raw []byte) *audit.Bundle {
	t.Helper()
	b, err := audit.ReadBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The untouched bundle of a real job verifies under the server's key:
// the chain is the job's 5 charges and 5 releases, and ε recomputed from
// the logged events is the claimed ε.
func TestVerifyRealJob(t *testing.T) {
	f := getFixture(t)
	b := read(t, f.raw)
	res, err := audit.Verify(b, audit.Options{Key: f.s.vkey})
	if err != nil {
		t.Fatal(err)
	}
	if res.SelfVouched || len(res.Warnings) != 0 {
		t.Fatalf("self-vouched %v, warnings %v", res.SelfVouched, res.Warnings)
	}
	if res.Charges != 5 || res.Rounds != 5 || res.ExtraEvents != 0 || len(b.Entries) != 10 {
		t.Fatalf("%d charges, %d rounds, %d extra, %d entries; want 5, 5, 0, 10", res.Charges, res.Rounds, res.ExtraEvents, len(b.Entries))
	}
	// Two jobs in the log: the second job's leaves are not in the bundle.
	if res.Checkpoint.Size != f.before+6 || b.Entries[9].Index != f.before-1 {
		t.Fatalf("checkpoint of %d leaves, last entry %d; want %d leaves, entry %d", res.Checkpoint.Size, b.Entries[9].Index, f.before+6, f.before-1)
	}
	if got, want := res.Recomputed.Epsilon(), *b.Claim.Epsilon; got != want || res.AccountingDelta != 1e-5 {
		t.Fatalf("recomputed ε %v at δ %v, claimed %v at 1e-5", got, res.AccountingDelta, want)
	}
	if b.Claim.Accountant != "pld" || b.Claim.RDPEpsilon == nil || b.Claim.PLDEpsilon == nil || b.Claim.Adjacency != "add_remove" {
		t.Fatalf("claim %+v", b.Claim)
	}
	// Without a key the bundle's own key is used, and the result says so.
	res, err = audit.Verify(b, audit.Options{})
	if err != nil || !res.SelfVouched || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "consistent with itself") {
		t.Fatalf("without a key: %v, %+v", err, res)
	}
}

// Each tampering fails verification with its own message; the untouched
// bundle (TestVerifyRealJob) passes.
func TestTamperedBundles(t *testing.T) {
	f := getFixture(t)
	other := read(t, f.s.bundle(t, f.other, 0))
	_, wrongV, err := note.GenerateKey(crand.Reader, "dpfl/test")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		raw  func([]byte) []byte   // edits the file's bytes, or
		edit func(b *audit.Bundle) // edits the decoded bundle
		key  string                // "" : the server's key
		want string
	}{
		{name: "flipped byte in an entry", raw: func(r []byte) []byte {
			// One hex digit of the third entry's model hash, in the file.
			i := nthIndex(r, []byte(`model_sha256\":\"`), 3) + len(`model_sha256\":\"`)
			r[i] = flipHex(r[i])
			return r
		}, want: "is not in the log: its inclusion proof does not lead to the checkpoint's root"},
		{name: "flipped byte in a proof", edit: func(b *audit.Bundle) {
			b.Entries[4].Proof[0][7] ^= 1
		}, want: "entry 5 (log index 4), the job's charge of round 3, is not in the log"},
		{name: "flipped byte in the checkpoint", edit: func(b *audit.Bundle) {
			c := []byte(b.Checkpoint) // origin, size, root: flip the root's first byte
			i := nthIndex(c, []byte("\n"), 2) + 1
			c[i] ^= 'A' ^ 'B'
			b.Checkpoint = string(c)
		}, want: "invalid signature"},
		{name: "removed entry", edit: func(b *audit.Bundle) {
			b.Entries = append(b.Entries[:3], b.Entries[4:]...)
		}, want: "the job's leaf 4 is missing here (an entry was removed"},
		{name: "removed last entry", edit: func(b *audit.Bundle) {
			b.Entries = b.Entries[:len(b.Entries)-1]
		}, want: "claim: 5 committed rounds, but the log releases 4"},
		{name: "reordered entries", edit: func(b *audit.Bundle) {
			b.Entries[2], b.Entries[3] = b.Entries[3], b.Entries[2]
		}, want: "the entries were reordered"},
		{name: "reordered leaves", edit: func(b *audit.Bundle) {
			// Leaves swapped, indices and proofs left in place.
			b.Entries[2].Leaf, b.Entries[4].Leaf = b.Entries[4].Leaf, b.Entries[2].Leaf
		}, want: "is the job's leaf 5, but the bundle holds only 2 before it"},
		{name: "inserted duplicate entry", edit: func(b *audit.Bundle) {
			b.Entries = append(b.Entries[:3], append([]audit.Entry{b.Entries[2]}, b.Entries[3:]...)...)
		}, want: "repeats the log index of entry 3: an entry was inserted"},
		{name: "inserted entry of another job", edit: func(b *audit.Bundle) {
			b.Entries = append(b.Entries, other.Entries[0])
		}, want: "not of job"},
		{name: "changed event parameter (z lowered)", edit: func(b *audit.Bundle) {
			b.Entries[4].Leaf = strings.Replace(b.Entries[4].Leaf, `"noise_multiplier":1}`, `"noise_multiplier":0.7}`, 1)
		}, want: "charge seq 3 records event"},
		{name: "z lowered in every charge", edit: func(b *audit.Bundle) {
			for i := range b.Entries {
				b.Entries[i].Leaf = strings.Replace(b.Entries[i].Leaf, `"noise_multiplier":1}`, `"noise_multiplier":0.7}`, 1)
			}
		}, want: "event has noise multiplier 0.7, but the job's spec sets dp.noise_multiplier = 1"},
		{name: "spec altered", edit: func(b *audit.Bundle) {
			b.Spec = strings.Replace(b.Spec, `"delta":0.00001`, `"delta":0.001`, 1)
		}, want: "but the bundle's spec hashes to"},
		{name: "wrong key", key: wrongV, want: "wrong key: the checkpoint is not signed by dpfl/test+"},
		{name: "ε claim below the bound", edit: func(b *audit.Bundle) {
			e := *b.Claim.Epsilon * 0.95
			b.Claim.Epsilon = &e
		}, want: "the claimed ε is too low"},
		{name: "RDP claim below its recomputation", edit: func(b *audit.Bundle) {
			e := *b.Claim.RDPEpsilon * 0.95
			b.Claim.RDPEpsilon = &e
		}, want: "the rdp accountant's ε"},
		{name: "claimed rounds", edit: func(b *audit.Bundle) { b.Claim.Rounds = 4 }, want: "claim: 4 committed rounds, but the log releases 5"},
	}
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := bytes.Clone(f.raw)
			if c.raw != nil {
				raw = c.raw(raw)
			}
			b, err := audit.ReadBundle(raw)
			if err != nil {
				t.Fatal(err)
			}
			if c.edit != nil {
				c.edit(b)
			}
			key := c.key
			if key == "" {
				key = f.s.vkey
			}
			_, err = audit.Verify(b, audit.Options{Key: key})
			if err == nil {
				t.Fatal("the tampered bundle verifies")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			t.Logf("%v", err)
			if prev, ok := seen[err.Error()]; ok {
				t.Fatalf("same message as case %q: %v", prev, err)
			}
			seen[err.Error()] = c.name
		})
	}
}

// nthIndex is the index of the n-th (1-based) occurrence of sep in s.
func nthIndex(s, sep []byte, n int) int {
	off := 0
	for ; n > 0; n-- {
		i := bytes.Index(s[off:], sep)
		if i < 0 {
			return -1
		}
		off += i + len(sep)
	}
	return off - len(sep)
}

func flipHex(c byte) byte {
	if c == '0' {
		return '1'
	}
	return '0'
}

// A bundle made with an earlier checkpoint that the auditor kept proves
// that the log only grew since; a checkpoint of a forked log (another
// database signed with the same key, as a server that rewrote its history
// would have) fails the consistency proof.
func TestConsistencyWithEarlierCheckpoint(t *testing.T) {
	f := getFixture(t)
	kept := mustPeek(t, f.early)
	if kept.Size != f.before {
		t.Fatalf("kept checkpoint of %d leaves, want %d", kept.Size, f.before)
	}
	b, err := f.s.m.AuditBundle(f.other, kept.Size)
	if err != nil {
		t.Fatal(err)
	}
	b.Since.Checkpoint = f.early
	res, err := audit.Verify(&b, audit.Options{Key: f.s.vkey})
	if err != nil {
		t.Fatal(err)
	}
	if res.SinceSize != f.before || res.Checkpoint.Size <= f.before {
		t.Fatalf("since %d, checkpoint %d; want since %d and a larger checkpoint", res.SinceSize, res.Checkpoint.Size, f.before)
	}

	// The same key on a second database whose log holds another history.
	fork := newServer(t, f.skey)
	fork.run(t, 2, nil)
	forkHead, err := fork.db.LogHead()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.OpenCheckpoint(forkHead.Checkpoint, f.s.vkey); err != nil {
		t.Fatalf("the fork's checkpoint is not signed by the shared key: %v", err)
	}
	b, err = f.s.m.AuditBundle(f.other, forkHead.Size)
	if err != nil {
		t.Fatal(err)
	}
	b.Since.Checkpoint = forkHead.Checkpoint
	_, err = audit.Verify(&b, audit.Options{Key: f.s.vkey})
	if err == nil || !strings.Contains(err.Error(), "the log was rewritten or forked since the earlier checkpoint") {
		t.Fatalf("forked log: got %v", err)
	}
	// A proof made for another size than the kept checkpoint's.
	b, err = f.s.m.AuditBundle(f.other, kept.Size-1)
	if err != nil {
		t.Fatal(err)
	}
	b.Since.Checkpoint = f.early
	if _, err = audit.Verify(&b, audit.Options{Key: f.s.vkey}); err == nil || !strings.Contains(err.Error(), "consistency proof is for a log of") {
		t.Fatalf("proof for the wrong size: got %v", err)
	}
}

// A model file checks against the bundle (its hash is its round's
// release) and on its own (its certificate); a changed parameter fails
// both.
func TestModelAgainstTheLog(t *testing.T) {
	f := getFixture(t)
	b := read(t, f.raw)
	m := f.model
	if m.Certificate == nil || m.Round != 5 {
		t.Fatalf("model of round %d, certificate %v", m.Round, m.Certificate)
	}
	res, err := audit.Verify(b, audit.Options{Key: f.s.vkey, Model: &m})
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelRound != 5 || res.ModelEpsilon == nil || *res.ModelEpsilon != *b.Claim.Epsilon || *m.Certificate.Epsilon != *b.Claim.Epsilon {
		t.Fatalf("model round %d, ε %v, certificate ε %v; claim ε %v", res.ModelRound, res.ModelEpsilon, m.Certificate.Epsilon, *b.Claim.Epsilon)
	}
	if _, err := audit.VerifyModel(m.Certificate, m.Params, f.s.vkey); err != nil {
		t.Fatal(err)
	}
	c := *m.Certificate
	if c.Delta != 1e-5 || c.Adjacency != "add_remove" || c.Accountant != "pld" || c.LogSize < 10 || c.ChargeSeq != 5 {
		t.Fatalf("certificate %+v", c)
	}

	changed := m
	changed.Params = append([]float32(nil), m.Params...)
	changed.Params[17] += 1e-3
	if _, err := audit.Verify(b, audit.Options{Key: f.s.vkey, Model: &changed}); err == nil || !strings.Contains(err.Error(), "this is not the released model") {
		t.Fatalf("changed model against the bundle: got %v", err)
	}
	if _, err := audit.VerifyModel(m.Certificate, changed.Params, f.s.vkey); err == nil || !strings.Contains(err.Error(), "this is not the certified model") {
		t.Fatalf("changed model against its certificate: got %v", err)
	}
	low := c
	e := *c.Epsilon * 0.9
	low.Epsilon = &e
	lowM := m
	lowM.Certificate = &low
	if _, err := audit.Verify(b, audit.Options{Key: f.s.vkey, Model: &lowM}); err == nil || !strings.Contains(err.Error(), "below the bound recomputed over the charges up to its release") {
		t.Fatalf("certificate with a low ε: got %v", err)
	}
}

func mustPeek(t *testing.T, signed string) audit.Checkpoint {
	t.Helper()
	c, err := audit.PeekCheckpoint(signed)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
