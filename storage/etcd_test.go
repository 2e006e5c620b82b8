package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dpfl/dpfl/internal/etcdtest"
)

// The etcd store's tests run a real etcd (internal/etcdtest): one shared
// single-member server for most, stopped by TestMain, and a private one
// where a test stops it.

// sharedEtcd is one etcd for the tests that need nothing special of
// theirs; each uses its own prefix.
var sharedEtcd etcdtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	sharedEtcd.Stop()
	os.Exit(code)
}

// etcdURL returns the shared etcd's URL, starting it on first use.
func etcdURL(t testing.TB) string {
	t.Helper()
	return sharedEtcd.Endpoints(t)[0]
}

// testPrefix is a fresh key prefix for one test.
func testPrefix(t testing.TB) string {
	return fmt.Sprintf("/dpfl-test/%s/%d/", strings.ReplaceAll(t.Name(), "/", "_"), rand.Uint64())
}

// openEtcdTemp opens an etcd store under a fresh prefix of the shared
// etcd, with its blob directory, closed at the end of the test.
func openEtcdTemp(t testing.TB) *DB {
	t.Helper()
	return openEtcdAt(t, etcdURL(t), testPrefix(t), t.TempDir())
}

func openEtcdAt(t testing.TB, url, prefix, blobs string) *DB {
	t.Helper()
	db, err := OpenEtcd(context.Background(), EtcdOptions{Endpoints: []string{url}, Prefix: prefix, BlobDir: blobs, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func etcdOf(db *DB) *etcdStore { return db.kv.(*etcdStore) }

// ---------------------------------------------------------------------
// The kv layer: the etcd store against bbolt, op for op.

// kvOp is one random operation of the differential test; its result is
// rendered as a string, and the two stores must render the same.
func kvRandomOps(rng *rand.Rand, n int) []func(b kvBucket) string {
	key := func() []byte {
		// Few distinct keys, so puts, deletes and reads collide; some
		// keys are prefixes of others and of bucket names.
		ks := []string{"a", "ab", "b", "k", "kb", "m", "\x00", "\xff", "z", "zz", "sub", "sub2"}
		return []byte(ks[rng.IntN(len(ks))])
	}
	render := func(k, v []byte) string {
		if k == nil {
			return "<nil>"
		}
		if v == nil {
			return fmt.Sprintf("%q=<bucket>", k)
		}
		return fmt.Sprintf("%q=%q", k, v)
	}
	var ops []func(b kvBucket) string
	for range n {
		switch r := rng.IntN(10); {
		case r < 3:
			k, v := key(), []byte(fmt.Sprint(rng.IntN(1000)))
			ops = append(ops, func(b kvBucket) string { return fmt.Sprint("put ", b.Put(k, v)) })
		case r < 4:
			k := key()
			ops = append(ops, func(b kvBucket) string { return fmt.Sprint("del ", b.Delete(k)) })
		case r < 5:
			k := key()
			ops = append(ops, func(b kvBucket) string {
				nb, err := b.CreateBucketIfNotExists(k)
				if err != nil {
					return "cbine " + err.Error()
				}
				return "cbine ok " + fmt.Sprint(nb.Put([]byte("x"), k))
			})
		case r < 6:
			k := key()
			ops = append(ops, func(b kvBucket) string { return "get " + fmt.Sprintf("%q", b.Get(k)) + fmt.Sprint(b.Bucket(k) != nil) })
		case r < 7:
			ops = append(ops, func(b kvBucket) string {
				var out []string
				err := b.ForEach(func(k, v []byte) error { out = append(out, render(k, v)); return nil })
				var bs []string
				b.ForEachBucket(func(k []byte) error { bs = append(bs, string(k)); return nil })
				return fmt.Sprint("foreach ", out, err, bs)
			})
		default:
			k := key()
			moves := []int{rng.IntN(5), rng.IntN(5), rng.IntN(5), rng.IntN(5)}
			ops = append(ops, func(b kvBucket) string {
				c := b.Cursor()
				var out []string
				for _, m := range moves {
					var kk, vv []byte
					switch m {
					case 0:
						kk, vv = c.First()
					case 1:
						kk, vv = c.Last()
					case 2:
						kk, vv = c.Next()
					case 3:
						kk, vv = c.Prev()
					case 4:
						kk, vv = c.Seek(k)
					}
					out = append(out, fmt.Sprint(m, render(kk, vv)))
				}
				return "cursor " + strings.Join(out, " ")
			})
		}
	}
	return ops
}

// runOps runs ops in Update transactions (split at random), each on the
// bucket "t" or its nested bucket "sub", and returns the rendered results.
func runOps(t *testing.T, s kvStore, seed uint64, ops []func(kvBucket) string) []string {
	rng := rand.New(rand.NewPCG(seed, 2))
	var out []string
	for i := 0; i < len(ops); {
		n := 1 + rng.IntN(8)
		abort := rng.IntN(5) == 0
		var got []string
		err := s.Update(nil, func(tx kvTx) error {
			got = got[:0]
			top, err := tx.CreateBucketIfNotExists([]byte("t"))
			if err != nil {
				return err
			}
			for j := i; j < min(i+n, len(ops)); j++ {
				b := top
				if j%3 == 0 {
					if sb := top.Bucket([]byte("sub")); sb != nil {
						b = sb
					}
				}
				got = append(got, ops[j](b))
			}
			if abort {
				return errors.New("abort")
			}
			return nil
		})
		out = append(out, got...)
		out = append(out, fmt.Sprint("commit ", err))
		// And what a fresh read transaction sees.
		s.View(func(tx kvTx) error {
			var all []string
			var walk func(b kvBucket, path string)
			walk = func(b kvBucket, path string) {
				if b == nil {
					return
				}
				b.ForEach(func(k, v []byte) error {
					if v == nil {
						walk(b.Bucket(k), path+"/"+string(k))
						return nil
					}
					all = append(all, fmt.Sprintf("%s/%q=%q", path, k, v))
					return nil
				})
			}
			walk(tx.Bucket([]byte("t")), "")
			out = append(out, "view "+strings.Join(all, ","))
			return nil
		})
		i += n
	}
	return out
}

// The etcd store behaves as bbolt on random sequences of puts, deletes,
// nested buckets, reads, ForEach and cursor moves, inside transactions
// (read-your-writes, cursors included) and across them (aborted ones
// leave nothing).
func TestEtcdKVMatchesBolt(t *testing.T) {
	url := etcdURL(t)
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ops := kvRandomOps(rand.New(rand.NewPCG(seed, 1)), 120)
			bdb, _ := openTemp(t)
			edb := openEtcdAt(t, url, testPrefix(t), t.TempDir())
			want := runOps(t, bdb.kv, seed, ops)
			got := runOps(t, edb.kv, seed, ops)
			for i := range want {
				if i >= len(got) || got[i] != want[i] {
					t.Fatalf("step %d:\n bbolt %s\n etcd  %s", i, want[i], got[min(i, len(got)-1)])
				}
			}
		})
	}
}

// (e) Inside one transaction, Get, ForEach and cursors see the
// transaction's own puts and deletes merged in key order with the
// snapshot; nothing is visible outside until the commit.
func TestEtcdReadYourWrites(t *testing.T) {
	db := openEtcdTemp(t)
	s := etcdOf(db)
	err := s.Update(nil, func(tx kvTx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("r"))
		if err != nil {
			return err
		}
		for _, k := range []string{"b", "d", "f"} {
			if err := b.Put([]byte(k), []byte("old-"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(nil, func(tx kvTx) error {
		b := tx.Bucket([]byte("r"))
		b.Put([]byte("a"), []byte("new-a"))
		b.Put([]byte("d"), []byte("new-d"))
		b.Delete([]byte("f"))
		b.Put([]byte("g"), []byte("new-g"))
		if _, err := b.CreateBucket([]byte("e")); err != nil {
			return err
		}
		if v := b.Get([]byte("d")); string(v) != "new-d" {
			t.Errorf("Get(d) = %q", v)
		}
		if v := b.Get([]byte("f")); v != nil {
			t.Errorf("Get(f) after delete = %q", v)
		}
		var seen []string
		b.ForEach(func(k, v []byte) error { seen = append(seen, fmt.Sprintf("%s=%s", k, v)); return nil })
		if want := "[a=new-a b=old-b d=new-d e= g=new-g]"; fmt.Sprint(seen) != want {
			t.Errorf("ForEach = %v, want %s", seen, want)
		}
		c := b.Cursor()
		if k, v := c.Last(); string(k) != "g" || string(v) != "new-g" {
			t.Errorf("Last = %s %s", k, v)
		}
		if k, _ := c.Prev(); string(k) != "e" {
			t.Errorf("Prev = %s", k)
		}
		if k, v := c.Seek([]byte("c")); string(k) != "d" || string(v) != "new-d" {
			t.Errorf("Seek(c) = %s %s", k, v)
		}
		if k, _ := c.Next(); string(k) != "e" {
			t.Errorf("Next = %s", k)
		}
		if k, _ := c.First(); string(k) != "a" {
			t.Errorf("First = %s", k)
		}
		// Another transaction does not see any of it yet.
		s.View(func(tx2 kvTx) error {
			if v := tx2.Bucket([]byte("r")).Get([]byte("a")); v != nil {
				t.Errorf("uncommitted write visible: %q", v)
			}
			return nil
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.View(func(tx kvTx) error {
		if k, _ := tx.Bucket([]byte("r")).Cursor().Last(); string(k) != "g" {
			t.Errorf("Last after commit = %s", k)
		}
		return nil
	})
}

// ---------------------------------------------------------------------
// The store's behaviours, run against bbolt, bbolt with a blob
// directory and etcd: the same calls must give the same results.

// behaviours runs a representative sequence of the store's methods and
// returns what they returned, times left out (they are the clock's).
func behaviours(t *testing.T, db *DB) []string {
	t.Helper()
	var out []string
	rec := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	skey, vkey := testKey(t)
	if _, err := db.SetLogSigner(skey); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	must(db.CreateUnit(Unit{Name: "u", EpsilonBudget: 8, Delta: 1e-6, CreatedAt: t0}))
	rec("unit exists: %v", errors.Is(db.CreateUnit(Unit{Name: "u", EpsilonBudget: 8, Delta: 1e-6}), ErrExists))
	for _, id := range []string{"j", "k", "dev"} {
		must(db.CreateJob(Job{ID: id, Config: json.RawMessage(`{"rounds": 10}`), CreatedAt: t0, UpdatedAt: t0}))
	}
	rec("job exists: %v", errors.Is(db.CreateJob(Job{ID: "j"}), ErrExists))
	_, err := db.Job("nope")
	rec("job not found: %v", errors.Is(err, ErrNotFound))
	must(db.SetJobState("j", StateRunning, ""))
	for r := 1; r <= 4; r++ {
		e, err := db.AppendCharge("j", LedgerEntry{Round: r, Event: event(r), Time: t0.Add(time.Duration(r) * time.Second)}, "u")
		must(err)
		rec("charge %d seq %d", r, e.Seq)
		if r == 2 { // an interrupted round: charged twice
			e, err = db.AppendCharge("j", LedgerEntry{Round: r, Event: event(r), Time: t0}, "u")
			must(err)
			rec("recharge seq %d", e.Seq)
		}
		if r < 4 {
			must(db.CommitRound("j", r, metricsFor(r), checkpointFor(r, 1000)))
		}
	}
	_, err = db.AppendLedger("j", LedgerEntry{Round: 9, Event: event(9)})
	rec("wrong round: %v", errors.Is(err, ErrConflict))
	rec("commit conflict: %v", errors.Is(db.CommitRound("j", 7, metricsFor(7), checkpointFor(7, 10)), ErrConflict))
	_, err = db.AppendLedger("k", LedgerEntry{Round: 1, Event: event(1), Time: t0})
	must(err)
	must(db.CommitRound("k", 1, metricsFor(1), checkpointFor(1, 10)))
	must(db.SetJobState("k", StateCompleted, "done"))
	rec("terminal: %v", errors.Is(db.CommitRound("k", 2, metricsFor(2), checkpointFor(2, 10)), ErrConflict))

	jobs, err := db.Jobs()
	must(err)
	for _, j := range jobs {
		rec("job %s %s %q round %d config %s", j.ID, j.State, j.Message, j.Round, j.Config)
	}
	j, led, err := db.JobLedger("j")
	must(err)
	rec("ledger of round %d", j.Round)
	for _, e := range led {
		rec("  seq %d round %d event %s time %v", e.Seq, e.Round, e.Event, e.Time)
	}
	m, err := db.Metrics("j")
	must(err)
	rec("metrics %s", m)
	ck, ok, err := db.Checkpoint("j")
	must(err)
	want := checkpointFor(3, 1000)
	want.Round = 3
	rec("checkpoint %v %v", ok, equalCheckpoint(ck, want))
	_, ok, err = db.Checkpoint("dev")
	rec("no checkpoint %v %v", ok, err)

	units, err := db.Units()
	must(err)
	rec("units %v", units)

	h := sha256.Sum256([]byte("cred"))
	must(db.EnrollDevice(Device{ID: "d1", JobID: "dev", CredentialHash: h[:], EnrolledAt: t0}))
	h2 := sha256.Sum256([]byte("cred2"))
	must(db.EnrollDevice(Device{ID: "d2", JobID: "dev", CredentialHash: h2[:], EnrolledAt: t0}))
	rec("device exists %v", errors.Is(db.EnrollDevice(Device{ID: "d3", JobID: "dev", CredentialHash: h[:]}), ErrExists))
	devs, err := db.Devices("dev")
	must(err)
	rec("devices %v", devs)
	d, err := db.DeviceByCredentialHash("dev", h2[:])
	must(err)
	rec("device by hash %s", d.ID)
	_, err = db.DeviceByCredentialHash("dev", make([]byte, 32))
	rec("no device %v", errors.Is(err, ErrNotFound))

	must(db.SetSetting("a", []byte("one")))
	must(db.SetSetting("empty", nil))
	v, err := db.SetSettingIfAbsent("a", []byte("two"))
	must(err)
	rec("if absent %q", v)
	v, ok, err = db.Setting("empty")
	rec("empty setting %q %v %v", v, ok, err)
	must(db.SetSetting("old-token", []byte("secret")))
	found, err := db.MigratePlaintextToken("old-token", "admin")
	rec("migrated %v %v", found, err)
	th, ok, err := db.TokenHash("admin")
	rec("token hash %x %v %v", th, ok, err)

	signed, err := db.SignLogHead()
	rec("signed %v %v", signed, err)
	head, err := db.LogHead()
	must(err)
	rec("log size %d", head.Size)
	lh, _, entries, proof, err := db.JobLog("j", 3)
	must(err)
	rec("job log %d entries, proof %d, head %d", len(entries), len(proof), lh.Size)
	_, rel, err := db.ReleaseEntry("j", 2)
	must(err)
	rec("release index %d", rel.Index)
	_, proof, err = db.ConsistencyProof(5)
	rec("consistency %d %v", len(proof), err)
	leaves, err := db.LogLeaves(0, 3)
	rec("leaves %d %v", len(leaves), err)
	res, err := db.VerifyWith(VerifyOptions{CheckpointBytes: -1, LogKey: vkey})
	rec("verify %v: %d jobs %d units %d devices %d ledger %d metrics %d leaves %d checkpoints %d bytes",
		err, res.Jobs, res.Units, res.Devices, res.LedgerEntries, res.MetricsRounds, res.LogLeaves, res.CheckpointsVerified, res.CheckpointBytes)
	res, err = db.VerifyWith(VerifyOptions{CheckpointBytes: 100})
	rec("verify capped %v: %d verified %d skipped", err, res.CheckpointsVerified, res.CheckpointsSkipped)
	return out
}

func TestEtcdBehavesAsBolt(t *testing.T) {
	url := etcdURL(t)
	plain, _ := openTemp(t)
	want := behaviours(t, plain)
	blobPath := filepath.Join(t.TempDir(), "dpfl.db")
	withBlobs, err := OpenWith(blobPath, Options{BlobDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer withBlobs.Close()
	etcd := openEtcdAt(t, url, testPrefix(t), t.TempDir())
	for name, db := range map[string]*DB{"bbolt with blobs": withBlobs, "etcd": etcd} {
		got := behaviours(t, db)
		if !slices.Equal(got, want) {
			for i := range max(len(got), len(want)) {
				var g, w string
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if g != w {
					t.Errorf("%s, line %d:\n got  %s\n want %s", name, i, g, w)
				}
			}
		}
	}
	for _, l := range want {
		if strings.HasPrefix(l, "verify") && !strings.Contains(l, "<nil>") {
			t.Errorf("bbolt: %s", l)
		}
	}
	// A store reopened reads the same.
	etcd.Close()
	again := openEtcdAt(t, url, etcdOf(etcd).root, etcd.blobDir)
	if err := again.Verify(); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------
// Fencing.

// campaign wins the election of job id and returns its fence.
func campaign(t *testing.T, url, job string) (Fence, *concurrency.Session) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	e := concurrency.NewElection(sess, "/dpfl-test-election/"+t.Name()+"/"+job)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Campaign(ctx, "me"); err != nil {
		t.Fatal(err)
	}
	return Fence{Key: e.Key(), Rev: e.Rev()}, sess
}

// (a) A round commit under a stale fence is refused by etcd itself:
// ErrFenced, nothing written, the counter moves; the new leader's
// writes go through.
func TestEtcdStaleFenceRefused(t *testing.T) {
	url := etcdURL(t)
	db := openEtcdTemp(t)
	mustCreate(t, db, "j")
	old, sess := campaign(t, url, "j")
	lead := db.Fenced("j", old)
	if _, err := lead.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)}); err != nil {
		t.Fatal(err)
	}
	if err := lead.CommitRound("j", 1, metricsFor(1), checkpointFor(1, 100)); err != nil {
		t.Fatal(err)
	}
	// The leader's session ends (its lease lapses); another server wins.
	sess.Close()
	fresh, _ := campaign(t, url, "j")
	headBefore, _ := db.LogHead()
	if _, err := lead.AppendLedger("j", LedgerEntry{Round: 2, Event: event(2)}); !errors.Is(err, ErrFenced) {
		t.Fatalf("stale leader's append: %v, want ErrFenced", err)
	}
	err := lead.CommitRound("j", 2, metricsFor(2), checkpointFor(2, 100))
	wantErr(t, err, ErrFenced, `job "j"`, "not the leader")
	if n := db.FencedWrites(); n != 2 {
		t.Fatalf("FencedWrites = %d, want 2", n)
	}
	j, led, err := db.JobLedger("j")
	if err != nil || j.Round != 1 || len(led) != 1 {
		t.Fatalf("after refused writes: round %d, %d entries, %v", j.Round, len(led), err)
	}
	if h, _ := db.LogHead(); h.Size != headBefore.Size {
		t.Fatalf("log grew from %d to %d leaves", headBefore.Size, h.Size)
	}
	ck, _, err := db.Checkpoint("j")
	if err != nil || ck.Round != 1 {
		t.Fatalf("checkpoint round %d, %v", ck.Round, err)
	}
	nl := db.Fenced("j", fresh)
	if _, err := nl.AppendLedger("j", LedgerEntry{Round: 2, Event: event(2)}); err != nil {
		t.Fatal(err)
	}
	if err := nl.CommitRound("j", 2, metricsFor(2), checkpointFor(2, 100)); err != nil {
		t.Fatal(err)
	}
	if nl.Close() != nil || db.Verify() != nil { // closing a view leaves db open
		t.Fatal(db.Verify())
	}
}

func TestBoltFence(t *testing.T) {
	db, _ := openTemp(t)
	if db.Fenced("j", Fence{}) != db {
		t.Fatal("a zero fence made a view")
	}
	mustCreate(t, db, "j")
	v := db.Fenced("j", Fence{Key: "k", Rev: 3})
	if _, err := v.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)}); err == nil || !strings.Contains(err.Error(), "need the etcd store") {
		t.Fatalf("fenced bbolt write: %v", err)
	}
	if l, _ := db.Ledger("j"); len(l) != 0 {
		t.Fatal("fenced bbolt write was written")
	}
}

// ---------------------------------------------------------------------
// Races and lost answers.

// (b) Concurrent writers lose races and run again, never losing an
// update: every ledger entry is stored, with seqs 1 … N.
func TestEtcdConcurrentAppends(t *testing.T) {
	url := etcdURL(t)
	prefix, blobs := testPrefix(t), t.TempDir()
	a := openEtcdAt(t, url, prefix, blobs)
	b := openEtcdAt(t, url, prefix, blobs)
	mustCreate(t, a, "j")
	const each = 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	for _, db := range []*DB{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := db.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	led, err := a.Ledger("j")
	if err != nil || len(led) != 2*each {
		t.Fatalf("%d entries, %v; want %d", len(led), err, 2*each)
	}
	for i, e := range led {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
	if err := a.Verify(); err != nil {
		t.Fatal(err)
	}
}

// A write committed by another writer between a transaction's snapshot
// and its commit makes the commit's comparison fail and the transaction
// run again on the new state: deterministic version of the race above.
func TestEtcdConflictRetries(t *testing.T) {
	url := etcdURL(t)
	prefix, blobs := testPrefix(t), t.TempDir()
	a := openEtcdAt(t, url, prefix, blobs)
	b := openEtcdAt(t, url, prefix, blobs)
	mustCreate(t, a, "j")
	s := etcdOf(a)
	send := s.txn
	var calls atomic.Int32
	s.txn = func(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
		if calls.Add(1) == 1 { // another server appends in between
			if _, err := b.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)}); err != nil {
				t.Error(err)
			}
		}
		return send(ctx, cmps, then, els)
	}
	e, err := a.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)})
	if err != nil || e.Seq != 2 || calls.Load() != 2 {
		t.Fatalf("seq %d after %d commits, %v; want seq 2 after 2", e.Seq, calls.Load(), err)
	}
	if led, _ := a.Ledger("j"); len(led) != 2 {
		t.Fatalf("%d entries, want 2", len(led))
	}
}

// A commit whose answer is lost is settled: applied once, whether or not
// it reached etcd, never twice.
func TestEtcdLostAnswerSettled(t *testing.T) {
	for _, sent := range []bool{true, false} {
		t.Run(fmt.Sprint("sent=", sent), func(t *testing.T) {
			db := openEtcdTemp(t)
			mustCreate(t, db, "j")
			s := etcdOf(db)
			send := s.txn
			var calls atomic.Int32
			s.txn = func(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
				if calls.Add(1) == 1 {
					if sent {
						send(ctx, cmps, then, els)
					}
					return nil, context.DeadlineExceeded
				}
				return send(ctx, cmps, then, els)
			}
			e, err := db.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)})
			if err != nil || e.Seq != 1 {
				t.Fatalf("append: seq %d, %v", e.Seq, err)
			}
			if want := map[bool]int32{true: 1, false: 2}[sent]; calls.Load() != want {
				t.Fatalf("%d commits sent, want %d", calls.Load(), want)
			}
			if led, _ := db.Ledger("j"); len(led) != 1 {
				t.Fatalf("%d entries, want 1", len(led))
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An etcd that is gone gives ErrUnavailable, in bounded time.
func TestEtcdUnavailable(t *testing.T) {
	srv := etcdtest.Private(t)
	db, err := OpenEtcd(context.Background(), EtcdOptions{Endpoints: srv.Endpoints(), Prefix: "/p/", BlobDir: t.TempDir(), RequestTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustCreate(t, db, "j")
	srv.Stop()
	start := time.Now()
	_, err = db.AppendLedger("j", LedgerEntry{Round: 1, Event: event(1)})
	wantErr(t, err, ErrUnavailable)
	_, err = db.Job("j")
	wantErr(t, err, ErrUnavailable)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := OpenEtcd(ctx, EtcdOptions{Endpoints: srv.Endpoints(), BlobDir: t.TempDir(), DialTimeout: 300 * time.Millisecond, RequestTimeout: 300 * time.Millisecond}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("OpenEtcd of a stopped etcd: %v", err)
	}
}

// ---------------------------------------------------------------------
// Ledger idempotency, limits, blobs.

// A retried charge with the same attempt ID charges once; another
// attempt (or none) charges again. An entry without an attempt is stored
// exactly as before the attempt existed.
func TestAppendChargeOnce(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *DB{
		"bbolt": func(t *testing.T) *DB { db, _ := openTemp(t); return db },
		"etcd":  func(t *testing.T) *DB { return openEtcdTemp(t) },
	} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			mustCreate(t, db, "j")
			ev := json.RawMessage(`{ "z": 1.1 }`)
			e1, err := db.AppendChargeOnce("j", LedgerEntry{Round: 1, Event: ev}, "", "a1")
			if err != nil {
				t.Fatal(err)
			}
			e2, err := db.AppendChargeOnce("j", LedgerEntry{Round: 1, Event: json.RawMessage(`{"z":1.1}`)}, "", "a1")
			if err != nil || e2.Seq != 1 || !e2.Time.Equal(e1.Time) {
				t.Fatalf("retry: %+v, %v", e2, err)
			}
			if _, err := db.AppendChargeOnce("j", LedgerEntry{Round: 1, Event: ev}, "", "a2"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := db.AppendCharge("j", LedgerEntry{Round: 1, Event: ev}, ""); err != nil {
					t.Fatal(err)
				}
			}
			led, err := db.Ledger("j")
			if err != nil || len(led) != 4 {
				t.Fatalf("ledger %+v, %v", led, err)
			}
			db.view(func(tx kvTx) error {
				l := tx.Bucket(bucketJobs).Bucket([]byte("j")).Bucket(bucketLedger)
				for seq, want := range map[uint64]string{1: `,"attempt":"a1"}`, 2: `,"attempt":"a2"}`, 3: `Z"}`} {
					p, _ := unframe(l.Get(u64(seq)))
					if !strings.HasSuffix(string(p), want) {
						t.Errorf("seq %d stored as %s", seq, p)
					}
				}
				return nil
			})
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// (d) A value over the cap, and a transaction over etcd's operation or
// request-size limits, are refused with an error saying so; nothing is
// written.
func TestEtcdLimits(t *testing.T) {
	db := openEtcdTemp(t)
	big := bytes.Repeat([]byte("x"), MaxEtcdValueBytes+1)
	err := db.SetSetting("big", big)
	if err == nil || !strings.Contains(err.Error(), "exceeds the etcd store's cap of 524288 bytes") {
		t.Fatalf("over the cap: %v", err)
	}
	cfg := json.RawMessage(`"` + strings.Repeat("y", MaxEtcdValueBytes) + `"`)
	if err := db.CreateJob(Job{ID: "j", Config: cfg}); err == nil || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("huge config: %v", err)
	}
	if _, err := db.Job("j"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused job stored: %v", err)
	}
	if _, ok, _ := db.Setting("big"); ok {
		t.Fatal("refused setting stored")
	}
	s := etcdOf(db)
	err = s.Update(nil, func(tx kvTx) error {
		b := tx.Bucket(bucketSettings)
		for i := range 200 {
			b.Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Fatalf("200 puts: %v", err)
	}
	err = s.Update(nil, func(tx kvTx) error {
		b := tx.Bucket(bucketSettings)
		for i := range 4 {
			b.Put(fmt.Appendf(nil, "k%d", i), bytes.Repeat([]byte("v"), 500<<10))
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("2 MB transaction: %v", err)
	}
	if err := db.SetSetting("fits", bytes.Repeat([]byte("x"), MaxEtcdValueBytes-frameHeader)); err != nil {
		t.Fatalf("a value at the cap: %v", err)
	}
}

// blobFiles lists job id's blob files.
func blobFiles(t *testing.T, db *DB, id string) []string {
	ents, err := os.ReadDir(db.blobJobDir(id))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, filepath.Join(db.blobJobDir(id), e.Name()))
	}
	return out
}

// (c) A checkpoint blob that was altered, truncated or removed is
// reported as corrupt by Checkpoint and Verify; a commit keeps the
// current and previous rounds' blobs only.
func TestCheckpointBlobs(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *DB{
		"bbolt": func(t *testing.T) *DB {
			db, err := OpenWith(filepath.Join(t.TempDir(), "dpfl.db"), Options{BlobDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"etcd": func(t *testing.T) *DB { return openEtcdTemp(t) },
	} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			mustCreate(t, db, "j")
			for r := 1; r <= 4; r++ {
				if err := db.CommitRound("j", r, metricsFor(r), checkpointFor(r, 50_000)); err != nil {
					t.Fatal(err)
				}
			}
			files := blobFiles(t, db, "j")
			if len(files) != 2 {
				t.Fatalf("blob files %v, want the last two rounds'", files)
			}
			ck, ok, err := db.Checkpoint("j")
			if err != nil || !ok || ck.Round != 4 || ck.Params[7] != checkpointFor(4, 50_000).Params[7] {
				t.Fatalf("checkpoint round %d %v %v", ck.Round, ok, err)
			}
			var cur string
			db.view(func(tx kvTx) error {
				r, err := decodeBlobRef(tx.Bucket(bucketJobs).Bucket([]byte("j")).Get(keyJobCheckpointBlob))
				cur = filepath.Join(db.blobJobDir("j"), r.SHA256)
				if err == nil && r.Size != int64(frameHeader+ckHeaderLen+4*50_000+len("opt-4")) {
					t.Errorf("pointer size %d", r.Size)
				}
				return err
			})
			good, err := os.ReadFile(cur)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				data []byte // nil: remove the file
				frag string
			}{
				{"byte flipped", func() []byte { b := bytes.Clone(good); b[1000] ^= 1; return b }(), "the file was altered"},
				{"truncated", good[:len(good)-1], "the file was altered or truncated"},
				{"removed", nil, "missing"},
			} {
				if tc.data == nil {
					os.Remove(cur)
				} else if err := os.WriteFile(cur, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
				_, _, err := db.Checkpoint("j")
				wantErr(t, err, ErrCorrupt, `job "j"`, "checkpoint round 4", tc.frag)
				wantErr(t, db.Verify(), ErrCorrupt, tc.frag)
				if tc.name != "byte flipped" {
					_, err := db.VerifyWith(VerifyOptions{CheckpointBytes: 0})
					wantErr(t, err, ErrCorrupt, "checkpoint round 4")
				}
			}
			if err := os.WriteFile(cur, good, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
			// The same bytes committed again (a retried commit) are harmless.
			if _, err := db.writeBlob("j", good); err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(good); filepath.Base(cur) != hex.EncodeToString(sum[:]) {
				t.Fatal("blob not named by its SHA-256")
			}
		})
	}
}

// A bbolt file with checkpoint blobs opened without its blob directory
// says so, instead of reading as if no checkpoint existed.
func TestBlobsNeedTheirDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dpfl.db")
	db, err := OpenWith(path, Options{BlobDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, db, "j")
	if err := db.CommitRound("j", 1, metricsFor(1), checkpointFor(1, 10)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = reopen(t, path)
	if _, _, err := db.Checkpoint("j"); err == nil || !strings.Contains(err.Error(), "without a blob directory") {
		t.Fatalf("Checkpoint without BlobDir: %v", err)
	}
	// A commit without blobs stores the checkpoint inline again.
	if err := db.CommitRound("j", 2, metricsFor(2), checkpointFor(2, 10)); err != nil {
		t.Fatal(err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// The etcd store checks the format marker as Open does, and needs a
// blob directory.
func TestEtcdFormatAndOptions(t *testing.T) {
	url := etcdURL(t)
	db := openEtcdTemp(t)
	s := etcdOf(db)
	if err := s.Update(nil, func(tx kvTx) error {
		return tx.Bucket(bucketMeta).Put(keyFormat, frame([]byte("dpfl-storage/99")))
	}); err != nil {
		t.Fatal(err)
	}
	_, err := OpenEtcd(context.Background(), EtcdOptions{Endpoints: []string{url}, Prefix: s.root, BlobDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `file format "dpfl-storage/99"`) {
		t.Fatalf("other format: %v", err)
	}
	if _, err := OpenEtcd(context.Background(), EtcdOptions{Endpoints: []string{url}}); err == nil || !strings.Contains(err.Error(), "BlobDir is required") {
		t.Fatalf("no BlobDir: %v", err)
	}
}

// CommitChargedRound refuses a round without its charge, in the commit's
// own transaction; CommitRound (jobs that do not charge) does not.
func TestCommitChargedRound(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *DB{
		"bbolt": func(t *testing.T) *DB { db, _ := openTemp(t); return db },
		"etcd":  func(t *testing.T) *DB { return openEtcdTemp(t) },
	} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			mustCreate(t, db, "j")
			err := db.CommitChargedRound("j", 1, metricsFor(1), checkpointFor(1, 10))
			wantErr(t, err, ErrConflict, `job "j"`, "round 1", "no charge")
			if j, _ := db.Job("j"); j.Round != 0 {
				t.Fatalf("refused commit moved the job to round %d", j.Round)
			}
			for r := 1; r <= 2; r++ {
				if _, err := db.AppendLedger("j", LedgerEntry{Round: r, Event: event(r)}); err != nil {
					t.Fatal(err)
				}
				if err := db.CommitChargedRound("j", r, metricsFor(r), checkpointFor(r, 10)); err != nil {
					t.Fatal(err)
				}
			}
			// Round 3's charge is missing: the last entry is round 2's.
			wantErr(t, db.CommitChargedRound("j", 3, metricsFor(3), checkpointFor(3, 10)), ErrConflict, "no charge")
			if err := db.CommitRound("j", 3, metricsFor(3), checkpointFor(3, 10)); err != nil {
				t.Fatal(err)
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
