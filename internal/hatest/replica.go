package hatest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dpfl/dpfl/internal/etcdtest"
)

// Replica is one dpfl-server process of the suite, which it may kill -9,
// restart (same port, replica ID and flags), pause and resume. Its output
// goes to a file (every incarnation, after a line naming it) and to an
// in-memory tail for failure reports.
type Replica struct {
	ID   string
	Addr string // 127.0.0.1:port
	URL  string // http://Addr

	bin     string
	args    []string
	env     []string
	LogPath string
	logFile *os.File
	tail    *tailBuffer

	mu          sync.Mutex
	cmd         *exec.Cmd
	running     bool
	paused      bool
	killing     bool // Kill sent SIGKILL: the exit is ours
	incarnation int
	exited      chan struct{}
	// crashes are exits that no Kill or Stop caused.
	crashes []string
}

// NewReplica prepares (does not start) a replica running bin with args,
// env added to the test's environment, logging to logPath.
func NewReplica(id, addr, bin string, args, env []string, logPath string) (*Replica, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Replica{
		ID: id, Addr: addr, URL: "http://" + addr,
		bin: bin, args: args, env: env, LogPath: logPath, logFile: f, tail: &tailBuffer{max: 512 << 10},
	}, nil
}

// Start starts a new incarnation (the first, or after Kill).
func (r *Replica) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return fmt.Errorf("replica %s is running", r.ID)
	}
	r.incarnation++
	cmd := exec.Command(r.bin, r.args...)
	cmd.Env = append(os.Environ(), r.env...)
	w := io.MultiWriter(r.logFile, r.tail)
	cmd.Stdout, cmd.Stderr = w, w
	etcdtest.DieWithParent(cmd)
	fmt.Fprintf(w, "=== hatest: replica %s incarnation %d starts at %s: %s %s\n", r.ID, r.incarnation, stamp(time.Now()), r.bin, strings.Join(r.args, " "))
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	r.cmd, r.running, r.paused, r.killing, r.exited = cmd, true, false, false, exited
	inc := r.incarnation
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		ours := r.killing
		r.running, r.paused = false, false
		if !ours {
			r.crashes = append(r.crashes, fmt.Sprintf("replica %s incarnation %d exited by itself at %s: %v", r.ID, inc, stamp(time.Now()), err))
		}
		r.mu.Unlock()
		fmt.Fprintf(w, "=== hatest: replica %s incarnation %d exited at %s: %v\n", r.ID, inc, stamp(time.Now()), err)
		close(exited)
	}()
	return nil
}

// Kill sends SIGKILL (kill -9) and waits for the process to exit.
func (r *Replica) Kill() error {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return nil
	}
	r.killing = true
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("replica %s did not exit within 10 s of SIGKILL", r.ID)
	}
}

// Pause sends SIGSTOP; Resume SIGCONT.
func (r *Replica) Pause() error  { return r.signal(syscall.SIGSTOP, true) }
func (r *Replica) Resume() error { return r.signal(syscall.SIGCONT, false) }

func (r *Replica) signal(sig syscall.Signal, paused bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return fmt.Errorf("replica %s is not running", r.ID)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return err
	}
	r.paused = paused
	return nil
}

// Running reports whether the process runs (paused or not); Live
// whether it runs and is not paused, so it can answer.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

func (r *Replica) Live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running && !r.paused
}

// Incarnation numbers the replica's process starts (1 for the first).
func (r *Replica) Incarnation() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.incarnation
}

// Crashes lists the exits no Kill caused.
func (r *Replica) Crashes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.crashes...)
}

// Stop kills the replica (resuming it first) at the end of the suite.
func (r *Replica) Stop() {
	r.mu.Lock()
	running, cmd := r.running, r.cmd
	r.mu.Unlock()
	if running {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = r.Kill()
	}
	r.logFile.Close()
}

// WaitHealthy waits until GET /healthz answers 200, the process exits,
// or timeout passes.
func (r *Replica) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	r.mu.Lock()
	exited := r.exited
	r.mu.Unlock()
	for {
		select {
		case <-exited:
			return fmt.Errorf("replica %s exited before it answered /healthz", r.ID)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s did not answer /healthz within %v (last: %v)", r.ID, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Tail returns the last n lines of the replica's output.
func (r *Replica) Tail(n int) string { return lastLines(r.tail.String(), n) }

// Log returns the replica's output kept in memory (its last 512 KiB).
func (r *Replica) Log() string { return r.tail.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > t.max/4 {
		t.b = append(t.b[:0:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// stamp formats t as the summaries do.
func stamp(t time.Time) string { return t.Format("15:04:05.000") }
