package leader

import (
	"bytes"
	"context"
	"errors"
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

// This file starts real etcd servers for the tests: the binary named by
// $DPFL_ETCD_BIN (only that one, when set), else /usr/bin/etcd, else "etcd"
// on $PATH. Without one the
// tests skip, unless DPFL_REQUIRE_ETCD=1, where they fail.

// etcdBinary returns the etcd server binary or skips (fails under
// DPFL_REQUIRE_ETCD=1) the test.
func etcdBinary(t testing.TB) string {
	t.Helper()
	candidates := []string{"/usr/bin/etcd"}
	if p, err := exec.LookPath("etcd"); err == nil {
		candidates = append(candidates, p)
	}
	if env := os.Getenv("DPFL_ETCD_BIN"); env != "" {
		candidates = []string{env} // explicit choice only
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c
		}
	}
	msg := "etcd server binary not found (set DPFL_ETCD_BIN, install /usr/bin/etcd, or put etcd on PATH); the leader election tests need a real etcd"
	if os.Getenv("DPFL_REQUIRE_ETCD") == "1" {
		t.Fatal(msg + " and DPFL_REQUIRE_ETCD=1")
	}
	t.Skip(msg)
	return ""
}

type etcdMember struct {
	name      string
	clientURL string
	peerURL   string
	cmd       *exec.Cmd
	log       *lockedBuffer
	waitErr   chan error
	stopped   bool
}

type etcdCluster struct {
	members []*etcdMember
}

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

// startEtcd starts an n-member etcd cluster on loopback in dir and waits
// until every member serves linearizable reads. Fast raft timing
// (heartbeat/election in ms) makes short lease TTLs possible: etcd's minimum
// lease TTL is 1.5 election timeouts rounded up to whole seconds.
func startEtcd(bin, dir string, n, heartbeatMS, electionMS int) (*etcdCluster, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a reserved port can be taken meanwhile
		c, err := tryStartEtcd(bin, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), n, heartbeatMS, electionMS)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStartEtcd(bin, dir string, n, heartbeatMS, electionMS int) (*etcdCluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &etcdCluster{}
	var initial []string
	for i := 0; i < n; i++ {
		m := &etcdMember{
			name:      fmt.Sprintf("m%d", i),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			log:       &lockedBuffer{},
			waitErr:   make(chan error, 1),
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	token := fmt.Sprintf("dpfl-leader-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.members {
		m.cmd = exec.Command(bin,
			"--name", m.name,
			"--data-dir", filepath.Join(dir, m.name),
			"--listen-client-urls", m.clientURL,
			"--advertise-client-urls", m.clientURL,
			"--listen-peer-urls", m.peerURL,
			"--initial-advertise-peer-urls", m.peerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", fmt.Sprint(heartbeatMS),
			"--election-timeout", fmt.Sprint(electionMS),
			"--logger", "zap",
			"--log-level", "error",
		)
		m.cmd.Stdout = m.log
		m.cmd.Stderr = m.log
		dieWithTest(m.cmd)
		if err := m.cmd.Start(); err != nil {
			c.stop()
			return nil, err
		}
		go func(m *etcdMember) { m.waitErr <- m.cmd.Wait() }(m)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range c.members {
		if err := waitReady(m, deadline); err != nil {
			logs := m.log.String()
			c.stop()
			return nil, fmt.Errorf("etcd member %s not ready: %v\n%s", m.name, err, logs)
		}
	}
	return c, nil
}

func waitReady(m *etcdMember, deadline time.Time) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
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
		_, err := cli.Get(ctx, "/readiness-probe") // linearizable: needs a raft leader
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

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

func (c *etcdCluster) stop() {
	for _, m := range c.members {
		if m.cmd == nil || m.cmd.Process == nil || m.stopped {
			continue
		}
		m.stopped = true
		_ = m.cmd.Process.Signal(syscall.SIGCONT) // in case a test paused it
		_ = m.cmd.Process.Kill()
		select {
		case <-m.waitErr:
		case <-time.After(5 * time.Second):
		}
	}
}

// shared single-member etcd for most tests; each test uses its own prefix.
var (
	sharedOnce    sync.Once
	sharedCluster *etcdCluster
	sharedErr     error
	sharedDir     string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		sharedCluster.stop()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// sharedEtcd returns the client endpoint of the shared single-member etcd,
// started on first use with 50 ms heartbeats and 500 ms election timeout, so
// 1 s leases are honoured.
func sharedEtcd(t *testing.T) []string {
	t.Helper()
	bin := etcdBinary(t)
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "dpfl-leader-etcd-")
		if sharedErr != nil {
			return
		}
		sharedCluster, sharedErr = startEtcd(bin, sharedDir, 1, 50, 500)
	})
	if sharedErr != nil {
		t.Fatalf("start etcd: %v", sharedErr)
	}
	return sharedCluster.endpoints()
}

// newClient returns an etcd client on endpoints, closed at test end.
func newClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// testPrefix is a per-test election key prefix on the shared etcd.
func testPrefix(t *testing.T) string {
	return "/dpfl-test/" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "/"
}

// newElector returns an Elector with its own client, closed at test end.
func newElector(t *testing.T, endpoints []string, prefix, id string, ttl time.Duration) *Elector {
	t.Helper()
	e, err := New(newClient(t, endpoints...), prefix, id, ttl)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type campaignResult struct {
	term *Term
	err  error
	at   time.Time
}

func campaignAsync(ctx context.Context, e *Elector, job string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		t, err := e.Campaign(ctx, job)
		ch <- campaignResult{t, err, time.Now()}
	}()
	return ch
}

func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
		return 0
	}
}

func isNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }
