package hatest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/etcdtest"
)

// WriteDeviceData writes examples [from, from+n) of ds as a device's IDX
// pair (train-images-idx3-ubyte, train-labels-idx1-ubyte; pixels back to
// bytes) in dir.
func WriteDeviceData(dir string, ds *data.Dataset, from, n int) error {
	img := idxHeader(0x08, n, 28, 28)
	for _, v := range ds.X[from*ds.Dim : (from+n)*ds.Dim] {
		img = append(img, byte(math.Round(float64(v)*255)))
	}
	lab := append(idxHeader(0x08, n), ds.Y[from:from+n]...)
	for name, b := range map[string][]byte{"train-images-idx3-ubyte": img, "train-labels-idx1-ubyte": lab} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// idxHeader is the IDX magic and the big-endian dimensions.
func idxHeader(typ byte, dims ...int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	return b.Bytes()
}

// Participant is one 'dpfl-client participate' process, supervised: when
// it exits before the job has ended (its replica was killed, say), it is
// started again against the next live replica, as a device app would
// retry, and the restart is counted.
type Participant struct {
	N          int
	Credential string
	DataDir    string
	env        *Env
	clientBin  string
	job        string
	log        *tailBuffer
	out        io.Writer // log and the file LogPath
	// LogPath is the device's whole output (every incarnation).
	LogPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	server   int // index of the replica it polls
	restarts []string
	exits    []string
	stopped  bool
	done     chan struct{}
}

// StartParticipant starts device n of job against replica n mod the
// number of replicas, logging to logPath.
func StartParticipant(e *Env, clientBin, job string, n int, credential, dataDir, logPath string) (*Participant, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &Participant{N: n, Credential: credential, DataDir: dataDir, env: e, clientBin: clientBin, job: job,
		log: &tailBuffer{max: 64 << 10}, LogPath: logPath, server: n % len(e.Replicas), done: make(chan struct{})}
	p.out = &stampWriter{w: io.MultiWriter(p.log, f)}
	go func() { <-p.done; f.Close() }()
	if err := p.start(); err != nil {
		return nil, err
	}
	go p.supervise()
	return p, nil
}

func (p *Participant) start() error {
	r := p.env.Replicas[p.server]
	cmd := exec.Command(p.clientBin, "participate", p.job, "--server", r.URL, "--data-dir", p.DataDir, "--poll", "100ms", "--workers", "1")
	cmd.Env = append(os.Environ(), "DPFL_TOKEN=", "DPFL_DEVICE_CREDENTIAL="+p.Credential)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	etcdtest.DieWithParent(cmd)
	fmt.Fprintf(p.out, "=== hatest: device %d starts against %s at %s\n", p.N, r.ID, stamp(time.Now()))
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	return nil
}

// supervise waits for the process; an exit while the supervisor runs
// and the job has not ended restarts it against the next live replica.
func (p *Participant) supervise() {
	defer close(p.done)
	for {
		p.mu.Lock()
		cmd := p.cmd
		p.mu.Unlock()
		err := cmd.Wait()
		p.mu.Lock()
		p.exits = append(p.exits, fmt.Sprintf("%s: %v", stamp(time.Now()), err))
		if p.stopped || err == nil {
			p.mu.Unlock()
			return // stopped, or the job ended (participate exits 0)
		}
		time.Sleep(500 * time.Millisecond)
		for i := 1; i <= len(p.env.Replicas); i++ {
			next := (p.server + i) % len(p.env.Replicas)
			if p.env.Replicas[next].Live() {
				p.server = next
				break
			}
		}
		p.restarts = append(p.restarts, fmt.Sprintf("%s → %s after %v", stamp(time.Now()), p.env.Replicas[p.server].ID, err))
		if serr := p.start(); serr != nil {
			p.exits = append(p.exits, fmt.Sprintf("restart failed: %v", serr))
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// Stop kills the process and ends the supervision.
func (p *Participant) Stop() {
	p.mu.Lock()
	p.stopped = true
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
}

// Restarts lists the restarts after unexpected exits.
func (p *Participant) Restarts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.restarts...)
}

// Log is the tail of the device's output, its exits and restarts.
func (p *Participant) Log(lines int) string {
	p.mu.Lock()
	exits := strings.Join(p.exits, "; ")
	p.mu.Unlock()
	return fmt.Sprintf("exits: %s\n%s", exits, lastLines(p.log.String(), lines))
}

// stampWriter prefixes every line with the time it was written.
type stampWriter struct {
	mu      sync.Mutex
	w       io.Writer
	midLine bool
}

func (s *stampWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	for _, c := range p {
		if !s.midLine {
			b.WriteString(stamp(time.Now()) + " ")
			s.midLine = true
		}
		b.WriteByte(c)
		if c == '\n' {
			s.midLine = false
		}
	}
	if _, err := s.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
