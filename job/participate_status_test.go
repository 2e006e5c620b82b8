package job

import (
	"context"
	crand "crypto/rand"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/etcdtest"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// waitingDevicesSpec is a one-round devices job whose join stage stays
// open (a cohort of 4, and a minute to join) while the tests look.
func waitingDevicesSpec(t *testing.T) types.Spec {
	return small(t, func(s *types.Spec) {
		s.Population.Source = "devices"
		s.Sampling.Scheme = "fixed"
		s.Sampling.CohortSize = 4
		s.SecureAggregation = true
		s.SecAgg.JoinTimeoutSeconds = 60
		s.Rounds = 1
	})
}

// leadingPair is two replicas on one etcd store with a devices job that
// a leads, in its join stage, and b follows.
func leadingPair(t *testing.T) (c *etcdtest.Cluster, a, b *replica, id string) {
	t.Helper()
	c = etcdtest.Private(t)
	blobs := t.TempDir()
	a = newReplica(t, c.Endpoints(), blobs, "a")
	b = newReplica(t, c.Endpoints(), blobs, "b")
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}
	id = openRound(t, a.m, waitingDevicesSpec(t))
	if err := b.m.Resume(); err != nil {
		t.Fatal(err)
	}
	if l, _, err := b.el.Leader(context.Background(), id); err != nil || l != "a" {
		t.Fatalf("leader of the job: %q, %v; want a", l, err)
	}
	return c, a, b, id
}

// sameRound reports whether two statuses show the same round.
func sameRound(x, y types.RoundStatus) bool {
	if x.Deadline == nil || y.Deadline == nil {
		return false
	}
	return x.JobID == y.JobID && x.State == y.State && x.Round == y.Round && x.Attempt == y.Attempt &&
		x.Stage == y.Stage && x.Joined == y.Joined && x.CohortSize == y.CohortSize && x.Deadline.Equal(*y.Deadline)
}

// A replica that does not lead a devices job answers its round's status
// as the leader does, from the record the leader published and its watch
// delivered: stage, deadline, joined count; it names the leader for
// joins. With etcd paused, both replicas still answer polls and
// authenticate devices seen before (from memory: no etcd request). A job
// cancelled through the follower shows cancelled on both.
func TestFollowerAnswersParticipateFromItsWatch(t *testing.T) {
	c, a, b, id := leadingPair(t)
	lead, err := a.m.DeviceRound(id)
	if err != nil || lead.Round != 1 || lead.Attempt != 1 || lead.Stage != types.StageJoin || lead.CohortSize != 4 {
		t.Fatalf("leader's status %+v, %v", lead, err)
	}
	waitFor(t, 10*time.Second, "the follower to show the leader's round", func() bool {
		st, err := b.m.DeviceRound(id)
		return err == nil && sameRound(st, lead)
	})
	if u, err := b.m.DeviceLeader(id); err != nil || u != "http://a.invalid" {
		t.Fatalf("follower routes joins to %q, %v; want http://a.invalid", u, err)
	}
	if u, err := a.m.DeviceLeader(id); err != nil || u != "" {
		t.Fatalf("leader routes joins to %q, %v; want itself", u, err)
	}

	// A device joins on the leader; the follower sees it joined.
	dev, cred := enroll(t, a.m, id)
	info, err := a.m.Join(id, dev)
	if err != nil {
		t.Fatal(err)
	}
	_, adv, err := secagg.NewClient(info.ClientID, info.Session, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.m.AdvertiseKeys(id, dev, info.Token, adv); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to count the device", func() bool {
		st, err := b.m.DeviceRound(id)
		return err == nil && st.Joined == 1 && st.Stage == types.StageJoin
	})
	if got, err := b.m.AuthenticateDevice(id, cred); err != nil || got != dev {
		t.Fatalf("follower authenticates %q, %v; want %s", got, err, dev)
	}
	wrong := "00" + cred[2:]
	if cred[:2] == "00" {
		wrong = "11" + cred[2:]
	}
	if _, err := b.m.AuthenticateDevice(id, wrong); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a wrong credential: %v, want ErrUnauthorized", err)
	}

	// etcd paused: polls and known credentials are answered from memory.
	before, _ := b.m.DeviceRound(id)
	m0 := c.Members[0]
	if err := m0.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 200 {
		for _, r := range []*replica{a, b} {
			st, err := r.m.DeviceRound(id)
			if err != nil || st.Round != 1 || st.Stage != types.StageJoin || st.Joined != 1 {
				m0.Resume()
				t.Fatalf("poll with etcd paused: %+v, %v", st, err)
			}
			if got, err := r.m.AuthenticateDevice(id, cred); err != nil || got != dev {
				m0.Resume()
				t.Fatalf("authentication with etcd paused: %q, %v", got, err)
			}
		}
		if _, err := b.m.AuthenticateDevice(id, wrong); !errors.Is(err, ErrUnauthorized) {
			m0.Resume()
			t.Fatalf("a refused credential with etcd paused: %v, want ErrUnauthorized from memory", err)
		}
	}
	took := time.Since(start)
	if err := m0.Resume(); err != nil {
		t.Fatal(err)
	}
	if took > time.Second {
		t.Errorf("600 polls and 400 authentications with etcd paused took %v: some waited for etcd", took)
	}
	if after, _ := b.m.DeviceRound(id); !sameRound(before, after) {
		t.Errorf("status changed across the pause: %+v, then %+v", before, after)
	}

	// Cancelled through the follower: both show it.
	if _, err := b.m.Cancel(id); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{a, b} {
		waitFor(t, 10*time.Second, "the cancel to show", func() bool {
			st, err := r.m.DeviceRound(id)
			return err == nil && st.State == types.StateCancelled && st.Round == 0 && st.Stage == types.StageWaiting
		})
	}
}

// When a job's leader loses its term mid-round, the next leader runs the
// round again as a new attempt, which every replica shows; the old
// leader's record is not shown once its term has ended, and the old
// leader now routes joins to the new one. A device's round token of the
// lost attempt is unknown to the new leader.
func TestFailoverRestartsTheDeviceRoundAsANewAttempt(t *testing.T) {
	c, a, b, id := leadingPair(t)
	dev, _ := enroll(t, a.m, id)
	info, err := a.m.Join(id, dev)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to show attempt 1", func() bool {
		st, err := b.m.DeviceRound(id)
		return err == nil && st.Round == 1 && st.Attempt == 1 && st.Stage == types.StageJoin
	})

	// a's term ends behind its back, as a lapsed lease ends it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	resp, err := cli.Get(ctx, testStorePrefix+"leader/"+id+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("a's election key: %v %v", resp, err)
	}
	if _, err := cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "b to lead and open attempt 2", func() bool {
		st, err := b.m.DeviceRound(id)
		return err == nil && st.Round == 1 && st.Attempt == 2 && st.Stage == types.StageJoin
	})
	lead, _ := b.m.DeviceRound(id)
	waitFor(t, 10*time.Second, "a to show b's attempt", func() bool {
		st, err := a.m.DeviceRound(id)
		return err == nil && sameRound(st, lead)
	})
	if u, err := a.m.DeviceLeader(id); err != nil || u != "http://b.invalid" {
		t.Fatalf("a routes joins to %q, %v; want http://b.invalid", u, err)
	}
	if _, err := b.m.ShareKeysRequest(id, dev, info.Token); !errors.Is(err, ErrConflict) {
		t.Fatalf("the lost attempt's token on the new leader: %v, want ErrConflict", err)
	}
	again, err := b.m.Join(id, dev)
	if err != nil || again.Round != 1 || again.Attempt != 2 {
		t.Fatalf("joining the new attempt: %+v, %v", again, err)
	}
}

// Without a leader's record (none published, or its term gone) a
// follower shows the job waiting and has no leader to route joins to.
func TestNoLeaderNoRound(t *testing.T) {
	a, b := twoReplicas(t)
	if err := a.m.Resume(); err != nil {
		t.Fatal(err)
	}
	// a's job held before its first round: no round opens.
	hold := make(chan struct{})
	defer close(hold)
	a.m.beforeRound = func(ctx context.Context, _ string, _ int) {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	j, err := a.m.Submit(waitingDevicesSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a to lead", func() bool { return a.m.term(j.ID) != nil })
	waitFor(t, 10*time.Second, "b to load the records", func() bool {
		ps := b.m.participation()
		return ps != nil && ps.isReady()
	})
	st, err := b.m.DeviceRound(j.ID)
	if err != nil || st.State != types.StateRunning || st.Round != 0 || st.Stage != types.StageWaiting || st.CohortSize != 4 {
		t.Fatalf("follower's status before any round: %+v, %v", st, err)
	}
	if _, err := b.m.DeviceLeader(j.ID); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("routing a join before any round: %v, want ErrNoLeader", err)
	}
	if _, err := b.m.DeviceRound("job-nope"); err == nil {
		t.Fatal("an unknown job has a round")
	}
}

// Records compare by value, deadlines by instant; onlyJoined tells a
// change of the joined count alone (published at most every joinedEvery)
// from any other (published at once).
func TestParticipateRecordChanges(t *testing.T) {
	dl := time.Unix(100, 0)
	dl2 := dl.In(time.FixedZone("x", 3600)) // the same instant
	a := participateRecord{Round: 1, Attempt: 1, Stage: types.StageJoin, Deadline: &dl, Joined: 1, Leader: "a", URL: "u", Fence: "k", Epoch: 7}
	b := a
	b.Deadline = &dl2
	if !a.equal(b) || !a.onlyJoined(b) {
		t.Fatal("the same record with the deadline in another zone differs")
	}
	b.Joined = 2
	if a.equal(b) || !a.onlyJoined(b) {
		t.Fatal("a new joined count is not a joined-only change")
	}
	for name, edit := range map[string]func(*participateRecord){
		"stage":    func(r *participateRecord) { r.Stage = types.StageShareKeys },
		"attempt":  func(r *participateRecord) { r.Attempt = 2 },
		"deadline": func(r *participateRecord) { later := dl.Add(time.Second); r.Deadline = &later },
		"none":     func(r *participateRecord) { r.Deadline = nil },
		"epoch":    func(r *participateRecord) { r.Epoch = 8 },
	} {
		c := a
		edit(&c)
		c.Joined = 3
		if a.onlyJoined(c) || a.equal(c) {
			t.Errorf("a %s change counts as a joined-only change", name)
		}
	}
}

// A follower whose status feed is not loaded (at start, or reloading a
// broken watch) answers a poll of a running job with 503 (ErrUnavailable),
// never "waiting", which a device in the round would take for the round
// having gone on without it; the leader answers from its live round.
func TestUnloadedFollowerAnswersUnavailable(t *testing.T) {
	_, a, b, id := leadingPair(t)
	ps := b.m.participation()
	ps.mu.Lock()
	ps.ready = false
	ps.mu.Unlock()
	if _, err := b.m.DeviceRound(id); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("an unloaded follower's poll: %v, want ErrUnavailable", err)
	}
	if st, err := a.m.DeviceRound(id); err != nil || st.Round != 1 {
		t.Fatalf("the leader's poll: %+v, %v", st, err)
	}
}
