// Package etcdtest starts real etcd servers on loopback for the tests of
// the etcd store (storage), the per-job election (internal/leader) and
// dpfl-server's end-to-end suite: one implementation of finding the
// binary, choosing ports, waiting for a raft leader and stopping only the
// processes a test started.
//
// The binary is $DPFL_ETCD_BIN when set (only that one), else
// /usr/bin/etcd (Debian's etcd-server), else "etcd" on $PATH. Without one
// Binary skips the test, unless DPFL_REQUIRE_ETCD=1 (CI), where it fails.
// Members log at etcd's error level unless $DPFL_ETCD_LOG_LEVEL says
// otherwise (Member.Logs).
package etcdtest

import (
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

// Member is one etcd process of a Cluster. Tests may signal Cmd's
// process (SIGSTOP to simulate a pause), or use Pause, Resume, Kill and
// Restart; Stop resumes a paused member before killing it. Restart
// replaces Cmd, so a test that restarts members reads it through
// Process.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:port
	PeerURL   string
	// DataDir is the member's data directory, kept across Kill and
	// Restart.
	DataDir string
	Cmd     *exec.Cmd
	log     *lockedBuffer
	waitErr chan error
	stopped bool

	// mu guards Cmd, waitErr, stopped and running once the member runs:
	// Kill, Restart, Stop and the accessors may be called from several
	// goroutines.
	mu      sync.Mutex
	running bool     // the current process has not been seen to exit
	bin     string   // the etcd binary
	flags   []string // every flag but --initial-cluster-state
}

// Logs returns the member's output so far (its first 256 KiB and last
// 768 KiB), each incarnation's after a line that names its start.
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
// first) and waits up to 5 s for each to exit. It is idempotent, and
// later Restarts are refused.
func (c *Cluster) Stop() {
	for _, m := range c.Members {
		m.mu.Lock()
		if m.stopped || m.Cmd == nil || m.Cmd.Process == nil {
			m.stopped = true
			m.mu.Unlock()
			continue
		}
		m.stopped = true
		m.mu.Unlock()
		m.kill(5 * time.Second)
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
	return StartWith(bin, dir, Options{Members: n, HeartbeatMS: heartbeatMS, ElectionMS: electionMS})
}

// Options are a cluster's size and raft settings (StartWith).
type Options struct {
	Members                 int
	HeartbeatMS, ElectionMS int
	// PreVote runs raft's pre-vote phase (etcd --pre-vote: the default
	// from etcd 3.5 on, off in 3.4). Without it a member that stayed up
	// alone while a quorum was down has campaigned its term far ahead,
	// and when the others return its stale log cannot win while its term
	// keeps deposing their leaders: a cluster back from a quorum loss
	// then takes several seconds (up to 7 s seen) to elect a leader.
	PreVote bool
}

// StartWith is Start with Options.
func StartWith(bin, dir string, o Options) (*Cluster, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := tryStart(bin, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), o)
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStart(bin, dir string, o Options) (*Cluster, error) {
	n := o.Members
	ports, err := FreePorts(2 * n)
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
			DataDir:   filepath.Join(dir, fmt.Sprintf("m%d", i)),
			log:       &lockedBuffer{},
			bin:       bin,
		}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	token := fmt.Sprintf("dpfl-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range c.Members {
		m.flags = []string{
			"--name", m.Name,
			"--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", token,
			"--heartbeat-interval", fmt.Sprint(o.HeartbeatMS),
			"--election-timeout", fmt.Sprint(o.ElectionMS),
			"--logger", "zap",
			"--log-level", logLevel(),
		}
		if o.PreVote {
			m.flags = append(m.flags, "--pre-vote")
		}
		m.mu.Lock()
		err := m.spawn("new")
		m.mu.Unlock()
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range c.Members {
		if err := m.waitReady(deadline); err != nil {
			logs := m.Logs()
			c.Stop()
			return nil, fmt.Errorf("etcd member %s not ready: %v\n%s", m.Name, err, logs)
		}
	}
	return c, nil
}

// logLevel is etcd's --log-level: $DPFL_ETCD_LOG_LEVEL (debug, info,
// warn, error…), by default error.
func logLevel() string {
	if l := os.Getenv("DPFL_ETCD_LOG_LEVEL"); l != "" {
		return l
	}
	return "error"
}

// spawn starts a new process of m with --initial-cluster-state state
// ("new" the first time, "existing" on a restart: the data directory
// then holds the member's identity and log). m.mu is held.
func (m *Member) spawn(state string) error {
	cmd := exec.Command(m.bin, append(append([]string(nil), m.flags...), "--initial-cluster-state", state)...)
	cmd.Stdout = m.log
	cmd.Stderr = m.log
	DieWithParent(cmd)
	fmt.Fprintf(m.log, "=== etcdtest: %s starts (--initial-cluster-state %s) at %s\n", m.Name, state, time.Now().Format("15:04:05.000"))
	if err := cmd.Start(); err != nil {
		return err
	}
	waitErr := make(chan error, 1)
	m.Cmd, m.waitErr, m.running = cmd, waitErr, true
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		if m.Cmd == cmd {
			m.running = false
		}
		m.mu.Unlock()
		fmt.Fprintf(m.log, "=== etcdtest: %s exited (%v) at %s\n", m.Name, err, time.Now().Format("15:04:05.000"))
		waitErr <- err
	}()
	return nil
}

// Process is the member's current process (nil before its start).
func (m *Member) Process() *os.Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Cmd == nil {
		return nil
	}
	return m.Cmd.Process
}

// Running reports whether the member's current process has not exited
// (a paused member runs).
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// Kill sends SIGKILL to the member's process (kill -9: no clean
// shutdown; its data directory stays as the crash left it) and waits up
// to 5 s for it to exit. Killing a member that is not running is a
// no-op.
func (m *Member) Kill() error {
	if !m.Running() {
		return nil
	}
	if !m.kill(5 * time.Second) {
		return fmt.Errorf("etcd member %s did not exit within 5 s of SIGKILL", m.Name)
	}
	return nil
}

// kill SIGCONTs and SIGKILLs the current process and waits up to d for
// its exit, reporting whether it exited.
func (m *Member) kill(d time.Duration) bool {
	m.mu.Lock()
	cmd, waitErr := m.Cmd, m.waitErr
	m.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	select {
	case err := <-waitErr:
		waitErr <- err // for any other waiter
		return true
	case <-time.After(d):
		return false
	}
}

// Restart starts the member again after Kill (or after its process
// exited), on the same ports, name and data directory, with
// --initial-cluster-state existing. It does not wait for the member to
// serve: alone it cannot while a quorum is missing (WaitReady waits).
func (m *Member) Restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.stopped:
		return fmt.Errorf("etcd member %s: the cluster was stopped", m.Name)
	case m.running:
		return fmt.Errorf("etcd member %s is still running: Kill it first", m.Name)
	}
	return m.spawn("existing")
}

// Pause stops the member's process with SIGSTOP (it keeps its sockets,
// and answers nothing until Resume).
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Member) signal(sig os.Signal) error {
	p := m.Process()
	if p == nil || !m.Running() {
		return fmt.Errorf("etcd member %s is not running", m.Name)
	}
	return p.Signal(sig)
}

// WaitReady waits up to timeout until the member serves a linearizable
// read (so the cluster has a raft leader and the member has caught up
// with it).
func (m *Member) WaitReady(timeout time.Duration) error {
	return m.waitReady(time.Now().Add(timeout))
}

// WaitReady waits up to timeout until every running member serves a
// linearizable read.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		if err := m.waitReady(deadline); err != nil {
			return fmt.Errorf("etcd member %s: %w", m.Name, err)
		}
	}
	return nil
}

// Leader returns the member that is the raft leader, as the first
// running member that answers a status request within timeout reports it
// (nil, error when none knows one).
func (c *Cluster) Leader(timeout time.Duration) (*Member, error) {
	var eps []string
	for _, m := range c.Members {
		if m.Running() {
			eps = append(eps, m.ClientURL)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no etcd member runs")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: timeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var lastErr error
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			lastErr = err
			continue
		}
		if st.Leader == 0 {
			lastErr = fmt.Errorf("%s knows no raft leader", ep)
			continue
		}
		for _, m := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			ms, err := cli.Status(ctx, m.ClientURL)
			cancel()
			if err == nil && ms.Header.MemberId == st.Leader {
				return m, nil
			}
		}
		lastErr = fmt.Errorf("the raft leader %x is no member that answers", st.Leader)
	}
	return nil, lastErr
}

// waitReady polls m with a linearizable read (which needs a raft
// leader) until it answers, m's process exits, or deadline passes.
func (m *Member) waitReady(deadline time.Time) error {
	m.mu.Lock()
	waitErr := m.waitErr
	m.mu.Unlock()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		select {
		case err := <-waitErr:
			waitErr <- err
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

// FreePorts reserves n loopback ports and releases them together right
// before use, so one call never returns the same port twice.
func FreePorts(n int) ([]int, error) {
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
// by the test; it keeps the first logHead bytes and the last logTail
// (a member killed and restarted many times logs most at the end).
type lockedBuffer struct {
	mu      sync.Mutex
	head    []byte
	tail    []byte
	dropped int64
}

const (
	logHead = 256 << 10
	logTail = 768 << 10
)

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	if room := logHead - len(l.head); room > 0 {
		k := min(room, len(p))
		l.head = append(l.head, p[:k]...)
		p = p[k:]
	}
	l.tail = append(l.tail, p...)
	if over := len(l.tail) - logTail; over > logTail/4 {
		l.dropped += int64(over)
		l.tail = append(l.tail[:0:0], l.tail[over:]...)
	}
	return n, nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped == 0 {
		return string(l.head) + string(l.tail)
	}
	return fmt.Sprintf("%s\n… %d bytes left out …\n%s", l.head, l.dropped, l.tail)
}
