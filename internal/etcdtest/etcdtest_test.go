package etcdtest

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A 3-member cluster survives one member's kill -9 and takes it back on
// restart (same name, ports and data directory) with what was written
// meanwhile; two members down stop linearizable reads until they return;
// a paused member answers nothing until resumed.
func TestMemberKillRestartPause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster and kills its members")
	}
	c, err := Start(Binary(t), t.TempDir(), 3, 100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	m0, m1, m2 := c.Members[0], c.Members[1], c.Members[2]
	cli := func(m *Member) *clientv3.Client {
		cl, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	get := func(m *Member, d time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		r, err := cli(m).Get(ctx, "k")
		if err != nil || len(r.Kvs) == 0 {
			return "", err
		}
		return string(r.Kvs[0].Value), nil
	}
	if l, err := c.Leader(time.Second); err != nil || l == nil {
		t.Fatalf("leader: %v %v", l, err)
	}

	if err := m0.Kill(); err != nil {
		t.Fatal(err)
	}
	if m0.Running() || m0.Process() == nil {
		t.Fatal("killed member still running, or its process forgotten")
	}
	// Restarted and killed again at once: the second incarnation is
	// tracked like the first.
	if err := m0.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := m0.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(10 * time.Second); err != nil {
		t.Fatalf("2 of 3 members: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := cli(m1).Put(ctx, "k", "written while m0 was down"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := m0.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := m0.Restart(); err == nil {
		t.Fatal("Restart of a running member succeeded")
	}
	if err := m0.WaitReady(15 * time.Second); err != nil {
		t.Fatalf("m0 after restart: %v\n%s", err, m0.Logs())
	}
	if v, err := get(m0, 5*time.Second); err != nil || v != "written while m0 was down" {
		t.Fatalf("m0 after restart reads %q, %v", v, err)
	}

	// Two down: no quorum, then back.
	if err := m1.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m2.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(m0, time.Second); err == nil {
		t.Fatal("a linearizable read without a quorum succeeded")
	}
	for _, m := range []*Member{m1, m2} {
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitReady(15 * time.Second); err != nil {
		t.Fatalf("after the quorum came back: %v", err)
	}

	// Paused: no answer; resumed: answers.
	if err := m2.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(m2, 500*time.Millisecond); err == nil {
		t.Fatal("a paused member answered")
	}
	if err := m2.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := m2.WaitReady(10 * time.Second); err != nil {
		t.Fatalf("resumed: %v", err)
	}
	if logs := m0.Logs(); !contains(logs, "--initial-cluster-state existing") || !contains(logs, "exited") {
		t.Fatalf("m0's log names no restart:\n%s", logs)
	}
	c.Stop()
	if m0.Running() || m1.Running() || m2.Running() {
		t.Fatal("Stop left a member running")
	}
	if err := m0.Restart(); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

// The log buffer keeps its head and its tail.
func TestLockedBuffer(t *testing.T) {
	var l lockedBuffer
	l.Write([]byte("first line\n"))
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for i := 0; i < 40; i++ {
		l.Write(chunk)
	}
	l.Write([]byte("last line\n"))
	s := l.String()
	if !contains(s, "first line") || !contains(s, "last line") || !contains(s, "bytes left out") || len(s) > logHead+logTail+logTail/4+100 {
		t.Fatalf("buffer of %d bytes: head %v tail %v", len(s), contains(s, "first line"), contains(s, "last line"))
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
