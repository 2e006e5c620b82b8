package job

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/etcdtest"
	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/storage"
)

const testStorePrefix = "/t/"

// replica is one server of a test's cluster: its own etcd client (store),
// elector and manager over the shared etcd store and blob directory.
type replica struct {
	db *storage.DB
	el *leader.Elector
	m  *Manager
}

func newReplica(t *testing.T, endpoints []string, blobs, id string) *replica {
	t.Helper()
	db, err := storage.OpenEtcd(context.Background(), storage.EtcdOptions{Endpoints: endpoints, Prefix: testStorePrefix, BlobDir: blobs, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	el, err := leader.New(db.EtcdClient(), testStorePrefix+"leader/", id, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { el.Close() })
	m := managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain),
		Leadership: &Leadership{Elector: el, URL: "http://" + id + ".invalid", Scan: 100 * time.Millisecond}})
	return &replica{db: db, el: el, m: m}
}

// twoReplicas are replicas a and b over one private etcd and blob
// directory, not resumed.
func twoReplicas(t *testing.T) (a, b *replica) {
	t.Helper()
	c := etcdtest.Private(t)
	blobs := t.TempDir()
	return newReplica(t, c.Endpoints(), blobs, "a"), newReplica(t, c.Endpoints(), blobs, "b")
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// Two replicas on one etcd store: the job runs on the replica that wins
// its election; when that replica's term ends mid-job (its election key
// deleted, as a lapsed lease deletes it) its next write is refused by
// etcd (the fence), the other replica takes the job over from the last
// committed round with a charge of its own, and the job completes with an
// event for every committed round and exactly one extra event.
func TestLeaderFailoverFencesTheStaleLeader(t *testing.T) {
	a, b := twoReplicas(t)
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}

	const takeoverRound = 4
	var hooked atomic.Bool
	a.m.beforeRound = func(_ context.Context, id string, r int) {
		if r != takeoverRound || !hooked.CompareAndSwap(false, true) {
			return
		}
		// a's term ends behind its back: delete its election key, then
		// let b win before a goes on to charge round r. (Not the run's
		// context: on a loaded machine a's lease may lapse by itself,
		// which ends the run's context and is a failover too.)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli := a.db.EtcdClient()
		resp, err := cli.Get(ctx, testStorePrefix+"leader/"+id+"/", clientv3.WithFirstCreate()...)
		if err != nil {
			t.Error(err)
			return
		}
		if len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) == "a" {
			if _, err := cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
				t.Error(err)
				return
			}
		}
		if err := b.m.Resume(); err != nil {
			t.Error(err)
			return
		}
		waitFor(t, 10*time.Second, "b to lead", func() bool {
			id, _, err := b.el.Leader(context.Background(), id)
			return err == nil && id == "b"
		})
	}
	spec := small(t, func(s *types.Spec) { s.Rounds = 10 })
	j, err := a.m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	var st types.Status
	waitFor(t, 60*time.Second, "the job to end", func() bool {
		st, err = b.m.Get(j.ID)
		return err == nil && st.State.Terminal()
	})
	if st.State != types.StateCompleted || st.Round != spec.Rounds {
		t.Fatalf("job ended %s at round %d: %s", st.State, st.Round, st.Message)
	}
	if !hooked.Load() {
		t.Fatal("a never reached the takeover round")
	}
	if n := a.db.FencedWrites(); n == 0 {
		t.Error("a's write after its term ended was not refused by the fence")
	}
	rep, err := b.m.Privacy(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// a charged rounds 1..3, b 4..10; a's refused charge of round 4 is
	// not stored, so the only extra event could come from a charge that
	// landed before the fence; there is none here.
	if len(rep.Events) < spec.Rounds || len(rep.Events) > spec.Rounds+1 {
		t.Errorf("%d ledger events for %d committed rounds (want %d or one more)", len(rep.Events), spec.Rounds, spec.Rounds)
	}
	ledger, err := b.db.Ledger(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range ledger {
		if i > 0 && e.Round < ledger[i-1].Round {
			t.Errorf("ledger out of round order: %+v after %+v", e, ledger[i-1])
		}
	}
	// GET shows no leader for an ended job.
	if st.Leader != nil {
		t.Errorf("an ended job shows leader %+v", st.Leader)
	}
}

// A job is shown with its leader while it runs.
func TestJobShowsItsLeader(t *testing.T) {
	c := etcdtest.Private(t)
	a := newReplica(t, c.Endpoints(), t.TempDir(), "a")
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	a.m.beforeRound = func(ctx context.Context, _ string, r int) {
		if r == 2 {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
	}
	j, err := a.m.Submit(small(t, func(s *types.Spec) { s.Rounds = 3 }))
	if err != nil {
		t.Fatal(err)
	}
	var st types.Status
	waitFor(t, 30*time.Second, "round 1 and a leader", func() bool {
		st, err = a.m.Get(j.ID)
		return err == nil && st.Round == 1 && st.Leader != nil
	})
	if st.Leader.Replica != "a" || st.Leader.URL != "http://a.invalid" || st.Leader.Epoch <= 0 {
		t.Errorf("leader %+v, want replica a at http://a.invalid with a positive epoch", *st.Leader)
	}
	close(hold)
	a.m.Wait(j.ID)
	waitFor(t, 30*time.Second, "the job to end", func() bool {
		st, err = a.m.Get(j.ID)
		return err == nil && st.State.Terminal()
	})
	if st.State != types.StateCompleted {
		t.Fatalf("job ended %s: %s", st.State, st.Message)
	}
}

// A cancel sent to a replica that does not lead the job ends it: the
// leader stops at its next scan or write, and the job stays cancelled.
func TestCancelThroughAFollower(t *testing.T) {
	a, b := twoReplicas(t)
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}
	a.m.beforeRound = func(ctx context.Context, _ string, r int) {
		if r == 2 {
			<-ctx.Done() // hold the job on its leader until stopped
		}
	}
	j, err := a.m.Submit(small(t, func(s *types.Spec) { s.Rounds = 5 }))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "round 1", func() bool {
		st, err := a.m.Get(j.ID)
		return err == nil && st.Round == 1
	})
	if err := b.m.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.m.Cancel(j.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a to stop the job", func() bool { return a.m.runs.lookup(j.ID) == nil })
	st, err := a.m.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != types.StateCancelled || st.Round != 1 {
		t.Fatalf("job %s at round %d (%s), want cancelled at round 1", st.State, st.Round, st.Message)
	}
	if _, err := a.m.Cancel(j.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("cancelling the cancelled job: %v, want ErrConflict", err)
	}
}

// While etcd is down (its only member killed for 4 s mid-job) the leader's
// run stops at its first failed write without ending the job, and once etcd is back a replica leads the job again and
// completes it; every committed round has its event, and the outage
// costs at most one extra event (a charge whose outcome was unknown).
func TestStoreOutageStopsAndResumesTheJob(t *testing.T) {
	c := etcdtest.Private(t)
	a := newReplica(t, c.Endpoints(), t.TempDir(), "a")
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}
	const outageRound = 3
	var hooked atomic.Bool
	member := c.Members[0]
	a.m.beforeRound = func(ctx context.Context, id string, r int) {
		if r != outageRound || !hooked.CompareAndSwap(false, true) {
			return
		}
		if err := member.Kill(); err != nil {
			t.Error(err)
			return
		}
		go func() {
			time.Sleep(4 * time.Second)
			if err := member.Restart(); err != nil {
				t.Error(err)
			}
		}()
	}
	spec := small(t, func(s *types.Spec) { s.Rounds = 6 })
	j, err := a.m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	var st types.Status
	waitFor(t, 90*time.Second, "the job to end", func() bool {
		st, err = a.m.Get(j.ID)
		return err == nil && st.State.Terminal()
	})
	if st.State != types.StateCompleted || st.Round != spec.Rounds {
		t.Fatalf("job ended %s at round %d: %s", st.State, st.Round, st.Message)
	}
	if !hooked.Load() {
		t.Fatal("the outage never happened")
	}
	rep, err := a.m.Privacy(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Events); n < spec.Rounds || n > spec.Rounds+1 {
		t.Errorf("%d ledger events for %d committed rounds, one outage: want %d or %d", n, spec.Rounds, spec.Rounds, spec.Rounds+1)
	}
}
