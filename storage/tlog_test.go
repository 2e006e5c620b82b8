package storage

import (
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/audit"
)

// testKey returns a fresh note key pair named "dpfl/test".
func testKey(t testing.TB) (skey, vkey string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(crand.Reader, "dpfl/test")
	if err != nil {
		t.Fatal(err)
	}
	return skey, vkey
}

// rawTx edits the closed store file directly through bbolt, as disk
// damage or someone rewriting the file would.
func rawTx(t testing.TB, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(fn); err != nil {
		t.Fatalf("raw update: %v", err)
	}
}

// loggedDB returns a closed store signed with skey whose job "j" has
// three charges and two committed rounds, plus a unit "u" and a job "k"
// with one charge; it returns the path.
func loggedDB(t *testing.T, skey string) string {
	t.Helper()
	db, path := openTemp(t)
	if skey != "" {
		if _, err := db.SetLogSigner(skey); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, db, "j")
	mustCreate(t, db, "k")
	if err := db.CreateUnit(Unit{Name: "u", EpsilonBudget: 8, Delta: 1e-6}); err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= 3; r++ {
		if _, err := db.AppendCharge("j", LedgerEntry{Round: r, Event: event(r)}, "u"); err != nil {
			t.Fatal(err)
		}
		if r == 1 {
			if _, err := db.AppendLedger("k", LedgerEntry{Round: 1, Event: event(1)}); err != nil {
				t.Fatal(err)
			}
		}
		if r < 3 {
			if err := db.CommitRound("j", r, metricsFor(r), checkpointFor(r, 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("clean store fails Verify: %v", err)
	}
	db.Close()
	return path
}

// Every charge, commit and unit is a leaf; a job's leaves chain, carry
// the ledger's fields, the spec's hash and the released model's hash, and
// each inclusion proof checks against the head.
func TestLogRecordsChargesReleasesAndUnits(t *testing.T) {
	db := reopen(t, loggedDB(t, ""))
	head, err := db.LogHead()
	if err != nil {
		t.Fatal(err)
	}
	// unit, j charge 1, k charge 1, j release 1, j charge 2, j release 2, j charge 3
	if head.Size != 7 {
		t.Fatalf("log of %d leaves, want 7", head.Size)
	}
	h2, j, entries, _, err := db.JobLog("j", 0)
	if err != nil || h2 != head {
		t.Fatalf("JobLog: head %+v (want %+v), err %v", h2, head, err)
	}
	ledger, err := db.Ledger("j")
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := []int64{1, 3, 4, 5, 6}
	wantKind := []string{"charge", "release", "charge", "release", "charge"}
	if len(entries) != len(wantIdx) {
		t.Fatalf("%d entries of job j, want %d", len(entries), len(wantIdx))
	}
	charges := 0
	for i, e := range entries {
		if e.Index != wantIdx[i] {
			t.Fatalf("entry %d at index %d, want %d", i, e.Index, wantIdx[i])
		}
		if err := tlog.CheckRecord(e.Proof, head.Size, head.Root, e.Index, tlog.RecordHash(e.Leaf)); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		l, err := audit.ParseLeaf(e.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		if l.Kind != wantKind[i] || l.Job != "j" || l.JobLeaf != int64(i+1) || l.SpecSHA256 != audit.SHA256Hex(j.Config) {
			t.Fatalf("entry %d: %+v", i, l)
		}
		if (i == 0) != (l.Prev == nil) || i > 0 && *l.Prev != wantIdx[i-1] {
			t.Fatalf("entry %d: prev %v", i, l.Prev)
		}
		switch l.Kind {
		case "charge":
			e := ledger[charges]
			if l.Seq != e.Seq || l.Round != e.Round || !l.Time.Equal(e.Time) || string(l.Event) != string(e.Event) || l.Unit != "u" {
				t.Fatalf("charge leaf %+v, ledger entry %+v", l, e)
			}
			charges++
		case "release":
			if want := audit.ModelHash(checkpointFor(l.Round, 100).Params); l.ModelSHA256 != want || l.ChargeSeq != uint64(l.Round) {
				t.Fatalf("release leaf %+v, want model %s and charge seq %d", l, want, l.Round)
			}
		}
	}
	leaves, err := db.LogLeaves(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := audit.ParseLeaf(leaves[0]); err != nil || u.Kind != "unit" || u.Unit != "u" || u.EpsilonBudget != 8 || u.Delta != 1e-6 {
		t.Fatalf("first leaf %s: %v", leaves[0], err)
	}
	if _, _, _, _, err := db.JobLog("nope", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
	if _, _, _, _, err := db.JobLog("j", 8); !errors.Is(err, ErrConflict) {
		t.Fatalf("since past the log: %v", err)
	}
	if _, e, err := db.ReleaseEntry("j", 2); err != nil || e.Index != 5 {
		t.Fatalf("release of round 2: index %d, %v", e.Index, err)
	}
	if _, _, err := db.ReleaseEntry("j", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("release of an uncommitted round: %v", err)
	}
}

// With a signer every append signs the new head; without one the head is
// unsigned, and SignLogHead signs it once.
func TestLogHeadIsSigned(t *testing.T) {
	skey, vkey := testKey(t)
	path := loggedDB(t, "")
	db := reopen(t, path)
	got, err := db.SetLogSigner(skey)
	if err != nil || got != vkey {
		t.Fatalf("SetLogSigner gave key %q (%v), want %q", got, err, vkey)
	}
	head, _ := db.LogHead()
	if _, err := audit.OpenCheckpoint(head.Checkpoint, vkey); err == nil {
		t.Fatal("a head written without a signer verifies")
	}
	if signed, err := db.SignLogHead(); err != nil || !signed {
		t.Fatalf("SignLogHead: %v, %v", signed, err)
	}
	if signed, err := db.SignLogHead(); err != nil || signed {
		t.Fatalf("second SignLogHead: %v, %v", signed, err)
	}
	if _, err := db.AppendLedger("j", LedgerEntry{Round: 3, Event: event(3)}); err != nil {
		t.Fatal(err)
	}
	head, _ = db.LogHead()
	cp, err := audit.OpenCheckpoint(head.Checkpoint, vkey)
	if err != nil || cp.Size != 8 || cp.Root != head.Root || cp.Origin != "dpfl/test" {
		t.Fatalf("checkpoint %+v, %v; head %+v", cp, err, head)
	}
	if _, err := db.VerifyWith(VerifyOptions{LogKey: vkey}); err != nil {
		t.Fatal(err)
	}
}

// A consistency proof shows that an earlier head is a prefix of the
// current one; a head from a log with another history does not pass.
func TestLogConsistencyProof(t *testing.T) {
	db := reopen(t, loggedDB(t, ""))
	old, _ := db.LogHead()
	if err := db.CommitRound("j", 3, metricsFor(3), checkpointFor(3, 100)); err != nil {
		t.Fatal(err)
	}
	head, proof, err := db.ConsistencyProof(old.Size)
	if err != nil || head.Size != old.Size+1 {
		t.Fatalf("head %d, %v", head.Size, err)
	}
	if err := tlog.CheckTree(proof, head.Size, head.Root, old.Size, old.Root); err != nil {
		t.Fatal(err)
	}
	other := reopen(t, loggedDB(t, "")) // same records, other times: other leaves
	oh, _ := other.LogHead()
	if err := tlog.CheckTree(proof, head.Size, head.Root, oh.Size, oh.Root); err == nil {
		t.Fatal("a head of another log passes the consistency proof")
	}
	if _, _, err := db.ConsistencyProof(head.Size + 1); !errors.Is(err, ErrConflict) {
		t.Fatalf("proof from past the head: %v", err)
	}
}

// A write that fails leaves no leaf: the leaf shares its transaction.
func TestFailedWriteLogsNothing(t *testing.T) {
	db := reopen(t, loggedDB(t, ""))
	before, _ := db.LogHead()
	if _, err := db.AppendLedger("j", LedgerEntry{Round: 5, Event: event(5)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("charge of a wrong round: %v", err)
	}
	if err := db.SetJobState("k", StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendLedger("k", LedgerEntry{Round: 1, Event: event(1)}); !errors.Is(err, ErrConflict) {
		t.Fatalf("charge of a finished job: %v", err)
	}
	if err := db.CommitRound("j", 7, metricsFor(7), checkpointFor(7, 100)); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit of a wrong round: %v", err)
	}
	if err := db.CreateUnit(Unit{Name: "u", EpsilonBudget: 8, Delta: 1e-6}); !errors.Is(err, ErrExists) {
		t.Fatalf("second unit u: %v", err)
	}
	if after, _ := db.LogHead(); after != before {
		t.Fatalf("the log moved from %d to %d leaves", before.Size, after.Size)
	}
}

// The start-up check recomputes the tree from the leaves and checks the
// log against the records: a rewritten leaf, hash, ledger entry, spec or
// model, a removed leaf, and a consistent rewrite signed with another key
// are each reported.
func TestVerifyCatchesLogTampering(t *testing.T) {
	skey, vkey := testKey(t)
	rewrite := func(tx *bolt.Tx, b *bolt.Bucket, key []byte, edit func([]byte) []byte) error {
		p, err := unframe(b.Get(key))
		if err != nil {
			return err
		}
		return b.Put(key, frame(edit(append([]byte(nil), p...))))
	}
	z := func(p []byte) []byte { return []byte(strings.Replace(string(p), `"z":1.1`, `"z":2.2`, 1)) }
	for _, tc := range []struct {
		name   string
		damage func(tx *bolt.Tx) error
		frag   string
	}{
		{"leaf rewritten (checksum fixed)", func(tx *bolt.Tx) error {
			return rewrite(tx, tx.Bucket(bucketLog).Bucket(bucketLogLeaves), u64(1), z)
		}, "recomputed from the leaves"},
		{"stored hash rewritten", func(tx *bolt.Tx) error {
			return rewrite(tx, tx.Bucket(bucketLog).Bucket(bucketLogHashes), u64(0), func(p []byte) []byte { p[0] ^= 1; return p })
		}, "first mismatch at stored index 0"},
		{"ledger entry rewritten (checksum fixed)", func(tx *bolt.Tx) error {
			return rewrite(tx, tx.Bucket(bucketJobs).Bucket([]byte("j")).Bucket(bucketLedger), u64(2), z)
		}, `ledger seq 2 (round 2, event {"mechanism":"gaussian","round":2,"z":2.2`},
		{"last leaf removed", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketLog).Bucket(bucketLogLeaves).Delete(u64(6))
		}, "the head says 7 leaves"},
		{"spec rewritten", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketJobs).Bucket([]byte("j"))
			j, err := readMeta(b, "j")
			if err != nil {
				return err
			}
			j.Config = json.RawMessage(`{"rounds":11}`)
			return putMeta(b, &j)
		}, "but the job's configuration hashes to"},
		{"model replaced", func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketJobs).Bucket([]byte("j"))
			ck := checkpointFor(2, 100)
			ck.Params[3] = 42
			return b.Put(keyJobCheckpoint, encodeCheckpoint(2, &ck))
		}, "not the model the transparency log records"},
		{"unit budget rewritten", func(tx *bolt.Tx) error {
			u, _ := json.Marshal(Unit{Name: "u", EpsilonBudget: 80, Delta: 1e-6})
			return tx.Bucket(bucketUnits).Put([]byte("u"), frame(u))
		}, `privacy unit "u" (ε_max 80`},
		{"whole log rewritten and signed with another key", func(tx *bolt.Tx) error {
			other, _ := testKey(t)
			if err := rewrite(tx, tx.Bucket(bucketJobs).Bucket([]byte("j")).Bucket(bucketLedger), u64(2), z); err != nil {
				return err
			}
			return rebuildLog(tx, other, func(i int64, p []byte) []byte {
				if i == 4 {
					return z(p)
				}
				return p
			})
		}, "not by this server's key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := loggedDB(t, skey)
			rawTx(t, path, tc.damage)
			db := reopen(t, path)
			_, err := db.VerifyWith(VerifyOptions{CheckpointBytes: -1, LogKey: vkey})
			wantErr(t, err, ErrCorrupt, tc.frag)
			if strings.Contains(tc.name, "another key") {
				// Consistent in itself: only the server's key tells.
				if _, err := db.VerifyWith(VerifyOptions{CheckpointBytes: -1}); err != nil {
					t.Fatalf("the consistent rewrite fails even without the key: %v", err)
				}
			}
		})
	}
}

// rebuildLog rewrites every leaf through edit and rebuilds the stored
// hashes and the head consistently, signed with skey: what someone with
// write access to the file but not the server's key could do.
func rebuildLog(tx *bolt.Tx, skey string, edit func(i int64, p []byte) []byte) error {
	lb, _ := openLog(boltTx{tx})
	var leaves [][]byte
	if err := lb.leaves.ForEach(func(k, v []byte) error {
		p, err := unframe(v)
		leaves = append(leaves, edit(int64(len(leaves)), append([]byte(nil), p...)))
		return err
	}); err != nil {
		return err
	}
	if err := lb.root.(boltBucket).b.DeleteBucket(bucketLogHashes); err != nil {
		return err
	}
	hb, err := lb.root.CreateBucket(bucketLogHashes)
	if err != nil {
		return err
	}
	lb.hashes = hb
	r := hashReader{hb}
	for i, p := range leaves {
		if err := lb.leaves.Put(u64(uint64(i)), frame(p)); err != nil {
			return err
		}
		hs, err := tlog.StoredHashes(int64(i), p, r)
		if err != nil {
			return err
		}
		for k, h := range hs {
			if err := hb.Put(u64(uint64(tlog.StoredHashIndex(0, int64(i))+int64(k))), frame(h[:])); err != nil {
				return err
			}
		}
	}
	root, err := tlog.TreeHash(int64(len(leaves)), r)
	if err != nil {
		return err
	}
	forger := &DB{}
	if _, err := forger.SetLogSigner(skey); err != nil {
		return err
	}
	return forger.putHead(lb, int64(len(leaves)), root)
}

// A database written before the log gets one at its next open, holding
// its history: every ledger entry, committed round and unit, marked
// backfilled, with the model hash of each job's latest round; it then
// passes the start-up check.
func TestOpenStartsTheLogOfAnOlderDatabase(t *testing.T) {
	path := loggedDB(t, "")
	rawTx(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLog) })
	db := reopen(t, path)
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	head, _ := db.LogHead()
	if head.Size != 7 {
		t.Fatalf("log of %d leaves, want 7", head.Size)
	}
	_, _, entries, _, err := db.JobLog("j", 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		l, err := audit.ParseLeaf(e.Leaf)
		if err != nil || !l.Backfilled {
			t.Fatalf("leaf %s: %v", e.Leaf, err)
		}
		kinds = append(kinds, l.Kind+":"+string(rune('0'+l.Round)))
		if l.Kind == "release" && (l.Round == 2) != (l.ModelSHA256 != "") {
			t.Fatalf("release of round %d with model hash %q", l.Round, l.ModelSHA256)
		}
	}
	if got := strings.Join(kinds, " "); got != "charge:1 release:1 charge:2 release:2 charge:3" {
		t.Fatalf("backfilled leaves %s", got)
	}
}

// The signing key is created once with mode 0600 and read back after;
// a key file others can read is refused.
func TestLogKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dpfl.db.signing-key")
	skey, created, err := LoadOrCreateLogKey(path, "dpfl/host")
	if err != nil || !created {
		t.Fatalf("create: %v, created %v", err, created)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v", fi.Mode().Perm(), err)
	}
	again, created, err := LoadOrCreateLogKey(path, "other")
	if err != nil || created || again != skey {
		t.Fatalf("reload: %v, created %v, same %v", err, created, again == skey)
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+dpfl/host+") {
		t.Fatalf("key named %q", skey)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateLogKey(path, "dpfl/host"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable key: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateLogKey(bad, "x"); err == nil || !strings.Contains(err.Error(), "not a note signing key") {
		t.Fatalf("garbage key: %v", err)
	}
}

// The verifier key derived from a signing key is note.GenerateKey's, for
// keys whose base64 holds '+' too.
func TestVerifierKeyMatchesGenerateKey(t *testing.T) {
	for range 64 {
		skey, vkey := testKey(t)
		got, err := verifierKey(skey)
		if err != nil || got != vkey {
			t.Fatalf("verifierKey(%q) = %q, %v; want %q", skey, got, err, vkey)
		}
	}
}
