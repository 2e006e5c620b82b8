// Package etcdtest starts real etcd servers on loopback for the tests of
// the etcd store (storage), the per-job election (internal/leader) and
// dpfl-server's end-to-end suite: one implementation of finding the
// binary, choosing ports, waiting for a raft leader and stopping only the
// processes a test started.
//
// The binary is $DPFL_ETCD_BIN when set (only that one), else
// /usr/bin/etcd (Debian's etcd-server), else "etcd" on $PATH. Without one
// Binary skips the test, unless DPFL_REQUIRE_ETCD=1 (CI), where it fails.
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd server binary, or skips t (fails it under
// DPFL_REQUIRE_ETCD=1) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	candidates := []string{"/usr/bin/etcd"}
	if p, err := exec.LookPath("etcd"); err == nil {
		candidates = append(candidates, p)
	}
	if env := os.Getenv("DPFL_ETCD_BIN"); env != "" {
		candidates = []string{env} // an explicit choice only
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	msg := "etcd server binary not found (apt-get install etcd-server, or set DPFL_ETCD_BIN): this test needs a real etcd"
	if os.Getenv("DPFL_REQUIRE_ETCD") == "1" {
		t.Fatal(msg + " and DPFL_REQUIRE_ETCD=1")
	}
	t.Skip(msg + "; set DPFL_REQUIRE_ETCD=1 to fail instead")
	return ""
}

// Member is one running etcd process of a Cluster. Tests may signal Cmd's
// process (SIGSTOP to simulate a pause); Stop resumes it before killing.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:port
	PeerURL   string
	Cmd       *exec.Cmd
	log       *lockedBuffer
	waitErr   chan error
	stopped   bool
}

// Logs returns the member's output so far (capped at 1 MiB).
func (m *Member) Logs() string { return m.log.String() }

// Cluster is a set of etcd members started together by Start.
type Cluster struct {
	Members []*Member
}

// Endpoints returns the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Stop kills every member this cluster started (resuming a paused one
// first) and waits up to 5 s for each to exit. It is idempotent.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		if m.Cmd == nil || m.Cmd.Process == nil || m.stopped {
			continue
		}
		m.stopped = true
		_ = m.Cmd.Process.Signal(syscall.SIGCONT)
		_ = m.Cmd.Process.Kill()
		select {
		case <-m.waitErr:
		case <-time.After(5 * time.Second):
		}
	}
}

// Private starts a single-member etcd in a temporary directory of t with
// etcd's default raft timing (100 ms heartbeats, 1 s elections), stopped
// at the end of t. It skips t without a binary (Binary).
func Private(t testing.TB) *Cluster {
	t.Helper()
	c, err := Start(Binary(t), t.TempDir(), 1, 100, 1000)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Start starts an n-member etcd cluster of bin on loopback in dir and
// waits (up to 20 s) until every member serves linearizable reads, i.e.
// the cluster has a raft leader. heartbeatMS and electionMS set the raft
// timing; etcd's least lease TTL is 1.5 election timeouts rounded up to
// whole seconds. Ports taken between their choice and their use are
// retried with others (3 tries).
func Start(bin, dir string, n, heartbeatMS, electionMS int) (*Cluster, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := tryStart(bin, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), n, heartbeatMS, electionMS)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStart(bin, dir string, n, heartbeatMS, electionMS int) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{}
	var initial []string
	for i := 0; i < n; i++ {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			log:       &lockedBuffer{},
			waitErr:   make(chan error, 1),
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	token := fmt.Sprintf("dpfl-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.Members {
		m.Cmd = exec.Command(bin,
			"--name", m.Name,
			"--data-dir", filepath.Join(dir, m.Name),
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", fmt.Sprint(heartbeatMS),
			"--election-timeout", fmt.Sprint(electionMS),
			"--logger", "zap",
			"--log-level", "error",
		)
		m.Cmd.Stdout = m.log
		m.Cmd.Stderr = m.log
		dieWithParent(m.Cmd)
		if err := m.Cmd.Start(); err != nil {
			c.Stop()
			return nil, err
		}
		go func(m *Member) { m.waitErr <- m.Cmd.Wait() }(m)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range c.Members {
		if err := waitReady(m, deadline); err != nil {
			logs := m.Logs()
			c.Stop()
			return nil, fmt.Errorf("etcd member %s not ready: %v\n%s", m.Name, err, logs)
		}
	}
	return c, nil
}

// waitReady polls m with a linearizable read (which needs a raft
// leader) until it answers, m exits, or deadline passes.
func waitReady(m *Member, deadline time.Time) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		select {
		case err := <-m.waitErr:
			m.waitErr <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := cli.Get(ctx, "/readiness-probe")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts reserves n loopback ports and releases them together right
// before use, so one call never returns the same port twice.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lockedBuffer is a member's output, written by exec's copier and read
// by the test; it keeps the first MiB.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
