package etcdtest

import (
	"os"
	"sync"
	"testing"
)

// Shared is a single-member etcd that a test package starts on first use
// and shares among its tests (each under its own key prefix), so that a
// package starts one etcd instead of one per test. The package's TestMain
// calls Stop after m.Run. HeartbeatMS and ElectionMS set the raft timing
// (Start); the zero value of either takes etcd's default (100 ms, 1 s).
// Safe for concurrent use.
type Shared struct {
	HeartbeatMS, ElectionMS int

	once    sync.Once
	dir     string
	cluster *Cluster
	err     error
}

// Endpoints returns the shared etcd's client URLs, starting it in a new
// temporary directory on the first call. It skips t without a binary
// (Binary) and fails t if the etcd did not start (then and on every later
// call).
func (s *Shared) Endpoints(t testing.TB) []string {
	t.Helper()
	bin := Binary(t)
	s.once.Do(func() {
		hb, el := s.HeartbeatMS, s.ElectionMS
		if hb == 0 {
			hb = 100
		}
		if el == 0 {
			el = 1000
		}
		if s.dir, s.err = os.MkdirTemp("", "dpfl-etcd-"); s.err != nil {
			return
		}
		s.cluster, s.err = Start(bin, s.dir, 1, hb, el)
	})
	if s.err != nil {
		t.Fatalf("the shared etcd did not start: %v", s.err)
	}
	return s.cluster.Endpoints()
}

// Stop kills the shared etcd, if it was started, and removes its
// directory.
func (s *Shared) Stop() {
	if s.cluster != nil {
		s.cluster.Stop()
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
