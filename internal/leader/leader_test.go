package leader

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/dpfl/dpfl/internal/etcdtest"
)

const testTTL = 2 * time.Second

func TestNewValidates(t *testing.T) {
	cli := &clientv3.Client{}
	for _, tc := range []struct {
		name       string
		cli        *clientv3.Client
		prefix, id string
		ttl        time.Duration
	}{
		{"nil client", nil, "/p/", "r1", 0},
		{"empty prefix", cli, "", "r1", 0},
		{"empty id", cli, "/p/", "", 0},
		{"negative ttl", cli, "/p/", "r1", -time.Second},
	} {
		if _, err := New(tc.cli, tc.prefix, tc.id, tc.ttl); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
	e, err := New(cli, "/p", "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.prefix != "/p/" || e.TTL() != DefaultTTL || e.ID() != "r1" {
		t.Errorf("prefix %q ttl %v id %q", e.prefix, e.TTL(), e.ID())
	}
	if e, _ := New(cli, "/p/", "r1", 2500*time.Millisecond); e.TTL() != 3*time.Second {
		t.Errorf("ttl 2.5s rounded to %v, want 3s", e.TTL())
	}
	if e, _ := New(cli, "/p/", "r1", time.Second); e.TTL() != MinTTL {
		t.Errorf("ttl 1s raised to %v, want MinTTL", e.TTL())
	}
	for _, job := range []string{"", "a/b"} {
		if _, err := e.Campaign(context.Background(), job); err == nil {
			t.Errorf("Campaign(%q) succeeded", job)
		}
	}
}

// Test 1: two replicas, one job. Exactly one leads; when the leader's
// process dies without resigning (keep-alive stops, lease not revoked) the
// other takes over within TTL + 1 s with a larger epoch. Then test 2, the
// property the storage layer relies on: a transaction fenced on the old term
// is refused by etcd, one fenced on the new term is applied.
func TestFailoverAfterCrashAndStaleFence(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	a := newElector(t, eps, prefix, "replica-a", testTTL)
	b := newElector(t, eps, prefix, "replica-b", testTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	ta, err := a.Campaign(ctx, "job1")
	if err != nil {
		t.Fatalf("a.Campaign: %v", err)
	}
	if err := ta.Check(ctx); err != nil {
		t.Fatalf("leader's Check: %v", err)
	}
	bres := campaignAsync(ctx, b, "job1")
	select {
	case r := <-bres:
		t.Fatalf("second replica also leads (term %v, err %v)", r.term, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	id, rev, err := b.Leader(ctx, "job1")
	if err != nil || id != "replica-a" || rev != ta.Epoch() {
		t.Fatalf("Leader() = %q, %d, %v; want replica-a, %d", id, rev, err, ta.Epoch())
	}

	// Crash: stop renewing the lease without revoking it.
	a.sessMu.Lock()
	sa := a.sess
	a.sessMu.Unlock()
	crash := time.Now()
	sa.Orphan()
	waitClosed(t, ta.Done(), time.Second, "old leader's Done after its session ended")
	if !isNotLeader(ta.Err()) {
		t.Errorf("old term Err() = %v, want ErrNotLeader", ta.Err())
	}

	var tb *Term
	select {
	case r := <-bres:
		if r.err != nil {
			t.Fatalf("b.Campaign: %v", r.err)
		}
		tb = r.term
		failover := r.at.Sub(crash)
		t.Logf("failover after crash: %v (TTL %v)", failover.Round(time.Millisecond), testTTL)
		if failover > testTTL+time.Second {
			t.Errorf("failover took %v, want <= TTL + 1s = %v", failover, testTTL+time.Second)
		}
	case <-time.After(testTTL + 2*time.Second):
		t.Fatal("no failover within TTL + 2s")
	}
	defer tb.Resign(context.Background())
	if tb.Epoch() <= ta.Epoch() {
		t.Fatalf("new epoch %d not above old %d", tb.Epoch(), ta.Epoch())
	}
	if tb.Fence().Key == ta.Fence().Key {
		t.Fatalf("new and old terms share key %s", tb.Fence().Key)
	}
	if id, rev, err := a.Leader(ctx, "job1"); err != nil || id != "replica-b" || rev != tb.Epoch() {
		t.Fatalf("Leader() = %q, %d, %v; want replica-b, %d", id, rev, err, tb.Epoch())
	}
	if err := ta.Check(ctx); !isNotLeader(err) {
		t.Fatalf("old term Check = %v, want ErrNotLeader", err)
	}

	// Test 2: the fence.
	ledger := prefix + "ledger/job1"
	cli := newClient(t, eps...)
	stale, err := cli.Txn(ctx).If(ta.Fence().Cmp()).Then(clientv3.OpPut(ledger, "stale")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	if stale.Succeeded {
		t.Fatal("etcd applied a write fenced on the old term")
	}
	// The same compare spelled as the storage layer will (storage.Fence).
	old := ta.Fence()
	stale2, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(old.Key), "=", old.Rev)).
		Then(clientv3.OpPut(ledger, "stale")).Commit()
	if err != nil || stale2.Succeeded {
		t.Fatalf("old-fence write: succeeded=%v err=%v", stale2 != nil && stale2.Succeeded, err)
	}
	fresh, err := cli.Txn(ctx).If(tb.Fence().Cmp()).Then(clientv3.OpPut(ledger, "fresh")).Commit()
	if err != nil || !fresh.Succeeded {
		t.Fatalf("write fenced on the new term: succeeded=%v err=%v", fresh != nil && fresh.Succeeded, err)
	}
	got, err := cli.Get(ctx, ledger)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "fresh" {
		t.Fatalf("ledger = %v, %v", got, err)
	}

	// The crashed replica's Elector opens a new session by itself and
	// campaigns again; it becomes leader once b resigns, with a new epoch.
	ares := campaignAsync(ctx, a, "job1")
	select {
	case r := <-ares:
		t.Fatalf("a leads again while b leads: %v %v", r.term, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tb.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if !errors.Is(tb.Err(), ErrResigned) {
		t.Errorf("resigned term Err() = %v", tb.Err())
	}
	r := <-ares
	if r.err != nil {
		t.Fatalf("a re-campaign: %v", r.err)
	}
	defer r.term.Resign(context.Background())
	if r.term.Epoch() <= tb.Epoch() || r.term.Lease() == ta.Lease() {
		t.Fatalf("re-elected term epoch %d lease %x; old epoch %d lease %x", r.term.Epoch(), r.term.Lease(), tb.Epoch(), ta.Lease())
	}
	if res, err := cli.Txn(ctx).If(tb.Fence().Cmp()).Then(clientv3.OpPut(ledger, "stale")).Commit(); err != nil || res.Succeeded {
		t.Fatalf("write fenced on the resigned term: %v %v", res, err)
	}
}

// Test 1, graceful variant: the leader's Elector is closed (lease revoked):
// the follower takes over at once.
func TestFailoverAfterClose(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	a := newElector(t, eps, prefix, "replica-a", testTTL)
	b := newElector(t, eps, prefix, "replica-b", testTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ta, err := a.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	bres := campaignAsync(ctx, b, "job1")
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed(t, ta.Done(), time.Second, "Done after Close")
	r := <-bres
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.term.Resign(context.Background())
	failover := r.at.Sub(start)
	t.Logf("failover after Close: %v", failover.Round(time.Millisecond))
	if failover > testTTL+time.Second {
		t.Errorf("failover took %v", failover)
	}
	if r.term.Epoch() <= ta.Epoch() {
		t.Errorf("epoch %d <= %d", r.term.Epoch(), ta.Epoch())
	}
	if _, err := a.Campaign(ctx, "job2"); !errors.Is(err, ErrClosed) {
		t.Errorf("Campaign after Close = %v, want ErrClosed", err)
	}
}

// Several replicas, one job: terms are handed over one at a time, never two
// live at once, with strictly increasing epochs.
func TestHandOverChain(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 3
	results := make(chan campaignResult, n)
	for i := 0; i < n; i++ {
		e := newElector(t, eps, prefix, fmt.Sprintf("replica-%d", i), testTTL)
		go func() { r := <-campaignAsync(ctx, e, "job1"); results <- r }()
	}
	var last int64
	for i := 0; i < n; i++ {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		select {
		case r2 := <-results:
			t.Fatalf("two live terms: %d and %d (%v)", r.term.Epoch(), r2.term.Epoch(), r2.err)
		case <-time.After(150 * time.Millisecond):
		}
		if err := r.term.Check(ctx); err != nil {
			t.Fatal(err)
		}
		if r.term.Epoch() <= last {
			t.Fatalf("epoch %d after %d", r.term.Epoch(), last)
		}
		last = r.term.Epoch()
		if err := r.term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBusyAndNoLeader(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	e := newElector(t, eps, prefix, "replica-a", testTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := e.Leader(ctx, "job1"); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader of empty election = %v, want ErrNoLeader", err)
	}
	t1, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(ctx, "job1"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Campaign for a led job = %v, want ErrBusy", err)
	}
	t2, err := e.Campaign(ctx, "job2") // other jobs share the session
	if err != nil {
		t.Fatal(err)
	}
	if t1.Lease() != t2.Lease() || t1.Fence().Key == t2.Fence().Key {
		t.Fatalf("terms of one replica: lease %x/%x keys %s/%s", t1.Lease(), t2.Lease(), t1.Fence().Key, t2.Fence().Key)
	}
	if err := t1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := t1.Resign(ctx); err != nil {
		t.Fatalf("second Resign: %v", err)
	}
	if err := t1.Check(ctx); !errors.Is(err, ErrResigned) {
		t.Fatalf("Check after Resign = %v", err)
	}
	t3, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatalf("Campaign after Resign: %v", err)
	}
	if t3.Epoch() <= t1.Epoch() {
		t.Fatalf("epoch %d <= %d", t3.Epoch(), t1.Epoch())
	}
	select {
	case <-t2.Done():
		t.Fatal("resigning job1 ended job2's term")
	default:
	}
}

// A Campaign abandoned by its caller leaves no candidacy key behind (one
// would make etcd regard as leader a replica that does not act), and the
// job is free for the next Campaign.
func TestCanceledCampaignLeavesNoKey(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	admin := newClient(t, eps...)
	a := newElector(t, eps, prefix, "replica-a", testTTL)
	b := newElector(t, eps, prefix, "replica-b", testTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ta, err := a.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.Campaign(short, "job1")
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign with expiring ctx = %v", err)
	}
	resp, err := admin.Get(ctx, prefix+"job1/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != ta.Fence().Key {
		t.Fatalf("election keys after abandoned campaign: %v", resp.Kvs)
	}
	bres := campaignAsync(ctx, b, "job1") // not ErrBusy
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-bres
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.term.Resign(ctx)
}

// Trap 1 reproduced on the bare etcd recipe: concurrency.Election.Campaign
// reports a win to a candidate whose lease was revoked while it waited, so
// its key no longer exists. This is why Elector.Campaign verifies.
func TestBareCampaignReportsPhantomWin(t *testing.T) {
	eps := sharedEtcd(t)
	pfx := testPrefix(t) + "job1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cliA, cliB, admin := newClient(t, eps...), newClient(t, eps...), newClient(t, eps...)
	sa, err := concurrency.NewSession(cliA, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := concurrency.NewSession(cliB, concurrency.WithTTL(2))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ea, eb := concurrency.NewElection(sa, pfx), concurrency.NewElection(sb, pfx)
	if err := ea.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eb.Campaign(ctx, "b") }()
	// Wait until b's key exists, then revoke b's lease (b's key goes), then
	// a's lease: the older key b was waiting on is deleted and b "wins".
	bKey := fmt.Sprintf("%s/%x", pfx, sb.Lease())
	for {
		resp, err := admin.Get(ctx, bKey)
		if err == nil && len(resp.Kvs) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("b's candidacy key never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := admin.Revoke(ctx, sb.Lease()); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Revoke(ctx, sa.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Skipf("bare Campaign returned %v; the phantom did not reproduce this time", err)
	}
	if eb.Key() != bKey {
		t.Fatalf("b's election key %q, want %q", eb.Key(), bKey)
	}
	resp, err := admin.Get(ctx, bKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("winner's key still exists")
	}
	t.Logf("bare concurrency Campaign reported a win for key %s, which does not exist", eb.Key())
}

// Test 3a: Campaign succeeded, then the lease was revoked before the guard
// ran. The guard must refuse that win; the Elector opens a new session and
// wins for real.
func TestGuardRefusesWinWithRevokedLease(t *testing.T) {
	term, phantom := sabotagedWin(t, func(admin *clientv3.Client, w win) error {
		_, err := admin.Revoke(context.Background(), w.lease)
		return err
	})
	if term.Lease() == phantom.lease || term.Fence().Key == phantom.key || term.Epoch() <= phantom.rev {
		t.Fatalf("Campaign reported the refused win: fence %+v lease %x; phantom %s@%d lease %x",
			term.Fence(), term.Lease(), phantom.key, phantom.rev, phantom.lease)
	}
}

// Test 3b: Campaign succeeded, then the key was deleted (lease alive)
// before the guard ran. The guard refuses; the replica campaigns again on the
// same session.
func TestGuardRefusesWinWithDeletedKey(t *testing.T) {
	term, phantom := sabotagedWin(t, func(admin *clientv3.Client, w win) error {
		_, err := admin.Delete(context.Background(), w.key)
		return err
	})
	if term.Epoch() <= phantom.rev || term.Lease() != phantom.lease {
		t.Fatalf("term epoch %d lease %x; phantom %d lease %x", term.Epoch(), term.Lease(), phantom.rev, phantom.lease)
	}
}

// win is a win that concurrency's Campaign reported.
type win struct {
	key   string
	rev   int64
	lease clientv3.LeaseID
}

// sabotagedWin campaigns for job1 on a fresh elector whose first reported
// win is sabotaged (by an admin client) before the guard runs, and checks
// that the guard refused exactly that win (Phantoms 1) and that the term
// Campaign then returned passes Check. It returns the term (resigned at
// the end of t) and the refused win.
func sabotagedWin(t *testing.T, sabotage func(admin *clientv3.Client, w win) error) (*Term, win) {
	t.Helper()
	eps := sharedEtcd(t)
	admin := newClient(t, eps...)
	e := newElector(t, eps, testPrefix(t), "replica-a", testTTL)
	var phantom win
	e.afterCampaign = func(key string, rev int64, lease clientv3.LeaseID) {
		if phantom.key != "" {
			return
		}
		phantom = win{key, rev, lease}
		if err := sabotage(admin, phantom); err != nil {
			t.Errorf("sabotage: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	t.Cleanup(func() { term.Resign(context.Background()) })
	if e.Phantoms() != 1 {
		t.Errorf("Phantoms() = %d, want 1", e.Phantoms())
	}
	if err := term.Check(ctx); err != nil {
		t.Fatalf("Check on the real term: %v", err)
	}
	return term, phantom
}

// Test 3c: the guard unit itself: a term whose key was deleted behind its
// back, or whose key is no longer the oldest, fails verification.
func TestCheckFailsWhenKeyDeletedOrNotOldest(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	admin := newClient(t, eps...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	e := newElector(t, eps, prefix, "replica-a", testTTL)
	term, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, term.Fence().Key); err != nil {
		t.Fatal(err)
	}
	if err := term.Check(ctx); !isNotLeader(err) {
		t.Fatalf("Check after key deletion = %v, want ErrNotLeader", err)
	}
	waitClosed(t, term.Done(), time.Second, "Done after key deletion")

	// "Not the oldest": build a term by hand whose key is younger than
	// another key under the election prefix (which the watch-based monitor
	// could never see happen to a live term; verify must still refuse it).
	term2, err := e.Campaign(ctx, "job2")
	if err != nil {
		t.Fatal(err)
	}
	defer term2.Resign(context.Background())
	fake := &Term{e: e, jobID: "job2", sess: term2.sess, prefix: prefix + "job2/", key: term2.key, lease: term2.lease}
	older := prefix + "job2/0"
	// Recreate the situation with two keys: our key younger than "older".
	if _, err := admin.Delete(ctx, term2.Fence().Key); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Put(ctx, older, "intruder"); err != nil {
		t.Fatal(err)
	}
	put, err := admin.Put(ctx, term2.Fence().Key, "replica-a", clientv3.WithLease(term2.Lease()))
	if err != nil {
		t.Fatal(err)
	}
	fake.rev = put.Header.Revision
	if _, err := fake.verify(ctx); !isNotLeader(err) || err == nil {
		t.Fatalf("verify of a key that is not the oldest = %v", err)
	}
	admin.Delete(ctx, older)
}

// Test 4: lease loss while leading (what a SIGSTOPped or partitioned leader
// suffers): the lease is revoked behind the replica's back. Done fires,
// Check fails, and the Elector recovers with a new session.
func TestLeaseLossEndsTerm(t *testing.T) {
	eps := sharedEtcd(t)
	prefix := testPrefix(t)
	admin := newClient(t, eps...)
	e := newElector(t, eps, prefix, "replica-a", testTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Campaign(ctx, "job2")
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if _, err := admin.Revoke(ctx, term.Lease()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, term.Done(), 2*time.Second, "Done after lease revoked")
	t.Logf("Done %v after the revoke was sent", time.Since(revoked).Round(time.Millisecond))
	waitClosed(t, other.Done(), 2*time.Second, "other job's Done after lease revoked")
	if err := term.Check(ctx); !isNotLeader(err) {
		t.Fatalf("Check after lease loss = %v, want ErrNotLeader", err)
	}
	again, err := e.Campaign(ctx, "job1")
	if err != nil {
		t.Fatalf("Campaign after session loss: %v", err)
	}
	defer again.Resign(context.Background())
	if again.Lease() == term.Lease() || again.Epoch() <= term.Epoch() {
		t.Fatalf("new term lease %x epoch %d; old lease %x epoch %d", again.Lease(), again.Epoch(), term.Lease(), term.Epoch())
	}
}

// Test 4, with a real pause: a 3-member cluster; the leader replica talks
// only to member X, and X is SIGSTOPped (the leader replica is partitioned;
// X is a raft follower so the cluster keeps quorum). The other replica, on
// member Y, takes over within about one TTL; a write the old leader sent as
// X was paused timed out (outcome unknown) and must never be applied; the
// old leader's Term ends by itself; after X resumes, its fenced writes are
// refused and Check fails.
func TestPartitionedLeaderIsFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	bin := etcdtest.Binary(t)
	start := time.Now()
	c, err := etcdtest.Start(bin, t.TempDir(), 3, 100, 1000)
	if err != nil {
		t.Fatalf("start 3-member etcd: %v", err)
	}
	t.Cleanup(c.Stop) // runs after the Electors' and clients' cleanups
	t.Logf("3-member cluster up in %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Find a follower X and another member Y.
	var x, y *etcdtest.Member
	probe := newClient(t, c.Endpoints()...)
	for _, m := range c.Members {
		st, err := probe.Status(ctx, m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader != st.Header.MemberId && x == nil {
			x = m
		} else if y == nil {
			y = m
		}
	}
	if x == nil || y == nil {
		t.Fatal("no follower found")
	}
	prefix := testPrefix(t)
	a := newElector(t, []string{x.ClientURL}, prefix, "replica-a", testTTL)
	b := newElector(t, []string{y.ClientURL}, prefix, "replica-b", testTTL)
	admin := newClient(t, y.ClientURL)

	ta, err := a.Campaign(ctx, "job1")
	if err != nil {
		t.Fatal(err)
	}
	bres := campaignAsync(ctx, b, "job1")
	time.Sleep(200 * time.Millisecond)

	if err := x.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			x.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	ledger := prefix + "ledger/job1"
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, werr := a.cli.Txn(wctx).If(ta.Fence().Cmp()).Then(clientv3.OpPut(ledger, "stale")).Commit()
	wcancel()
	t.Logf("old leader's write while partitioned: %v (outcome unknown)", werr)

	var tb *Term
	select {
	case r := <-bres:
		if r.err != nil {
			t.Fatal(r.err)
		}
		tb = r.term
		t.Logf("takeover %v after pause (TTL %v)", r.at.Sub(paused).Round(time.Millisecond), testTTL)
	case <-time.After(testTTL + 3*time.Second):
		t.Fatal("no takeover")
	}
	defer tb.Resign(context.Background())
	if tb.Epoch() <= ta.Epoch() {
		t.Fatalf("epoch %d <= %d", tb.Epoch(), ta.Epoch())
	}
	d := waitClosed(t, ta.Done(), testTTL+3*time.Second, "partitioned leader's Done")
	t.Logf("partitioned leader's Done fired %v after pause", time.Since(paused).Round(time.Millisecond))
	_ = d
	if res, err := admin.Txn(ctx).If(tb.Fence().Cmp()).Then(clientv3.OpPut(ledger, "fresh")).Commit(); err != nil || !res.Succeeded {
		t.Fatalf("new leader's fenced write: %v %v", res, err)
	}

	if err := x.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if err := ta.Check(ctx); !isNotLeader(err) {
		t.Fatalf("old term Check after resume = %v", err)
	}
	res, err := a.cli.Txn(ctx).If(ta.Fence().Cmp()).Then(clientv3.OpPut(ledger, "stale")).Commit()
	if err != nil {
		t.Fatalf("old leader's write after resume: %v", err)
	}
	if res.Succeeded {
		t.Fatal("etcd applied the old leader's fenced write")
	}
	time.Sleep(200 * time.Millisecond) // let any delayed copy of the timed-out write arrive
	got, err := admin.Get(ctx, ledger)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "fresh" {
		t.Fatalf("ledger = %v %v, want only the new leader's write", got, err)
	}
}
