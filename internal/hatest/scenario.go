package hatest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/etcdtest"
)

// Scenario injects faults into a running job on an Env and records them.
type Scenario struct {
	T      testing.TB
	Env    *Env
	W      *Watcher
	Job    string
	Faults []Fault
	// Settle bounds each wait for the system to recover between faults.
	Settle time.Duration
}

// logf logs with the time since T0.
func (s *Scenario) logf(format string, args ...any) {
	s.T.Helper()
	s.T.Logf("[%s] %s", strings.TrimSpace(s.Env.Since(time.Now())), fmt.Sprintf(format, args...))
}

// Settled waits until every replica answers, every etcd member serves,
// and a new round is seen committed (the job made progress since the
// last fault ended), or the job has ended.
func (s *Scenario) Settled() error {
	for _, r := range s.Env.Replicas {
		if !r.Live() {
			return fmt.Errorf("replica %s is not running", r.ID)
		}
	}
	if err := s.Env.Etcd.WaitReady(s.Settle); err != nil {
		return fmt.Errorf("etcd did not recover: %w", err)
	}
	round := s.W.Round()
	err := s.W.WaitFor(s.Settle, fmt.Sprintf("a commit after round %d", round), func() bool { return s.W.Round() > round || s.Done() })
	if err != nil {
		return fmt.Errorf("no progress after the last fault: %w (last seen: %+v)", err, s.W.Last())
	}
	return nil
}

// Done reports whether the job has ended.
func (s *Scenario) Done() bool { return s.W.Last().Terminal() }

// leader returns the job's leader replica as a live replica reports it
// now, waiting up to Settle for one.
func (s *Scenario) leader() (*Replica, LeaderView, error) {
	var lv LeaderView
	var r *Replica
	err := s.W.WaitFor(s.Settle, "a leader of the job", func() bool {
		j, _, err := s.Env.Job(context.Background(), s.Job)
		if err != nil || j.Leader == nil {
			return false
		}
		lv, r = *j.Leader, s.Env.Replica(j.Leader.Replica)
		return r != nil && r.Live()
	})
	if err != nil {
		return nil, lv, err
	}
	return r, lv, nil
}

// midRound waits until the leader is between a round's charge and its
// commit (MidRound), up to Settle, and returns the last commit; it
// returns mid false if the job keeps missing the window (it gives up
// after Settle and the fault goes in anyway, marked so).
func (s *Scenario) midRound() (int, bool) {
	var last int
	var mid bool
	_ = s.W.WaitFor(s.Settle, "a round between its charge and its commit", func() bool {
		last, mid = s.W.MidRound()
		return mid || s.Done()
	})
	return last, mid
}

// leaderMidRound finds the job's leader and waits until it is mid-round,
// checking with the latest poll (no request: the fault follows at once)
// that the leadership did not move meanwhile (else it starts again, up
// to three times).
func (s *Scenario) leaderMidRound() (*Replica, LeaderView, int, bool, error) {
	for try := 0; ; try++ {
		r, lv, err := s.leader()
		if err != nil {
			return nil, lv, 0, false, err
		}
		round, mid := s.midRound()
		if l := s.W.Last().Leader; l != nil && *l == lv || try == 2 {
			return r, lv, round, mid, nil
		}
	}
}

// KillLeader kills the job's leader with SIGKILL mid-round, waits for the
// next commit, and restarts the killed replica.
func (s *Scenario) KillLeader() error {
	if r, _, err := s.leader(); err == nil {
		s.W.ScrapeNow(r) // its counters, before it goes
	}
	r, lv, round, mid, err := s.leaderMidRound()
	if err != nil {
		return err
	}
	f := Fault{Kind: LeaderKill, Target: r.ID, Round: round, MidRound: mid, Epoch: lv.Epoch, Note: fmt.Sprintf("epoch %d", lv.Epoch)}
	f.At = time.Now()
	if err := r.Kill(); err != nil {
		return err
	}
	s.logf("killed leader %s (epoch %d) at round %d, mid-round %v", r.ID, lv.Epoch, round, mid)
	_, werr := s.W.WaitCommitAfter(round, s.Settle)
	if err := r.Start(); err != nil {
		return err
	}
	if err := r.WaitHealthy(s.Settle); err != nil {
		return err
	}
	f.Lifted = time.Now()
	s.Faults = append(s.Faults, f)
	if werr != nil {
		return fmt.Errorf("after killing leader %s: %w", r.ID, werr)
	}
	return nil
}

// PauseLeader SIGSTOPs the job's leader mid-round for d, then SIGCONTs
// it.
func (s *Scenario) PauseLeader(d time.Duration) error {
	if r, _, err := s.leader(); err == nil {
		s.W.ScrapeNow(r) // its counters, before it goes
	}
	r, lv, round, mid, err := s.leaderMidRound()
	if err != nil {
		return err
	}
	f := Fault{Kind: LeaderStop, Target: r.ID, Round: round, MidRound: mid, Epoch: lv.Epoch, Note: fmt.Sprintf("epoch %d, %v", lv.Epoch, d)}
	f.At = time.Now()
	if err := r.Pause(); err != nil {
		return err
	}
	s.logf("paused leader %s (epoch %d) at round %d, mid-round %v", r.ID, lv.Epoch, round, mid)
	time.Sleep(d)
	if err := r.Resume(); err != nil {
		return err
	}
	f.Lifted = time.Now()
	s.Faults = append(s.Faults, f)
	s.logf("resumed %s", r.ID)
	return nil
}

// BlackholeLeader drops all traffic between the job's leader and etcd
// for d.
func (s *Scenario) BlackholeLeader(d time.Duration) error {
	r, lv, round, mid, err := s.leaderMidRound()
	if err != nil {
		return err
	}
	ps := s.Env.Proxies[r.ID]
	if len(ps) == 0 {
		return fmt.Errorf("replica %s has no proxies (Config.Proxied)", r.ID)
	}
	f := Fault{Kind: LinkBlackhole, Target: r.ID, Round: round, MidRound: mid, Epoch: lv.Epoch, Note: fmt.Sprintf("epoch %d, %v, %s", lv.Epoch, d, ps[0].Mode)}
	f.At = time.Now()
	for _, p := range ps {
		p.Blackhole()
	}
	s.logf("blackholed %s's etcd link (%s) at round %d, mid-round %v", r.ID, ps[0].Mode, round, mid)
	time.Sleep(d)
	var dropped int64
	for _, p := range ps {
		p.Restore()
		dropped += p.Dropped()
	}
	f.Lifted = time.Now()
	if ps[0].Mode == Drop {
		f.Note += fmt.Sprintf(", %d bytes dropped", dropped)
	}
	s.Faults = append(s.Faults, f)
	s.logf("restored %s's etcd link (%d bytes dropped in all)", r.ID, dropped)
	return nil
}

// KillMember kills etcd member m for d (at least until a commit is seen
// while it is down, bounded by Settle), then restarts it.
func (s *Scenario) KillMember(m *etcdtest.Member, d time.Duration) error {
	note := ""
	if l, err := s.Env.Etcd.Leader(time.Second); err == nil && l == m {
		note = "the raft leader"
	}
	round := s.W.Round()
	f := Fault{Kind: MemberKill, Target: m.Name, Round: round, Note: note}
	f.At = time.Now()
	if err := m.Kill(); err != nil {
		return err
	}
	s.logf("killed etcd member %s %s at round %d", m.Name, note, round)
	time.Sleep(d)
	_, werr := s.W.WaitCommitAfter(round, s.Settle)
	if err := m.Restart(); err != nil {
		return err
	}
	if err := m.WaitReady(s.Settle); err != nil {
		return fmt.Errorf("etcd member %s after restart: %w\n%s", m.Name, err, lastLines(m.Logs(), 30))
	}
	f.Lifted = time.Now()
	s.Faults = append(s.Faults, f)
	if werr != nil {
		return fmt.Errorf("with etcd member %s down: %w", m.Name, werr)
	}
	return nil
}

// LoseQuorum kills two etcd members (the raft leader and another) for d,
// then restarts both.
func (s *Scenario) LoseQuorum(d time.Duration) error {
	ms := s.Env.Etcd.Members
	var victims []*etcdtest.Member
	if l, err := s.Env.Etcd.Leader(time.Second); err == nil {
		victims = append(victims, l)
	}
	for _, m := range ms {
		if len(victims) < 2 && (len(victims) == 0 || victims[0] != m) {
			victims = append(victims, m)
		}
	}
	round := s.W.Round()
	f := Fault{Kind: QuorumLoss, Target: victims[0].Name + "+" + victims[1].Name, Round: round, Note: fmt.Sprintf("%v down", d)}
	for _, m := range victims {
		if err := m.Kill(); err != nil {
			return err
		}
	}
	// From the second kill: a commit between the two had its quorum.
	f.At = time.Now()
	s.logf("killed etcd members %s at round %d (no quorum)", f.Target, round)
	time.Sleep(d)
	f.Lifted = time.Now()
	for _, m := range victims {
		if err := m.Restart(); err != nil {
			return err
		}
	}
	s.Faults = append(s.Faults, f)
	if err := s.Env.Etcd.WaitReady(s.Settle); err != nil {
		return fmt.Errorf("etcd after the quorum loss: %w", err)
	}
	s.logf("restarted %s; etcd serves again after %v", f.Target, time.Since(f.Lifted).Round(time.Millisecond))
	return nil
}

// Verified is what dpfl-client verify said of the job's audit bundle.
type Verified struct {
	Output                 string
	Charges, Rounds, Extra int
	Claimed, Bound         string // ε as printed (4 decimals)
	BundleClaim            *float64
	Warned                 bool
}

var (
	chainRe = regexp.MustCompile(`chain: (\d+) charges, (\d+) rounds released, (\d+) extra events`)
	boundRe = regexp.MustCompile(`bound ε = ([0-9.]+)`)
	claimRe = regexp.MustCompile(`claimed: ε = ([0-9.]+)`)
)

// VerifyBundle writes the job's audit bundle with 'dpfl-client audit
// --bundle' from a live replica and checks it offline with 'dpfl-client
// verify --key' against the server's log key.
func VerifyBundle(e *Env, clientBin, dir, job string) (*Verified, error) {
	live := e.Live()
	if len(live) == 0 {
		return nil, fmt.Errorf("no live replica")
	}
	base := live[0].URL
	var key types.LogKeyResponse
	if err := getJSON(context.Background(), base, e.Token, "/v1/log/key", &key); err != nil {
		return nil, fmt.Errorf("GET /v1/log/key: %w", err)
	}
	bundle := filepath.Join(dir, "bundle-"+job+".json")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(clientBin, args...)
		cmd.Env = append(os.Environ(), "DPFL_SERVER="+base, "DPFL_TOKEN="+e.Token)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("audit", job, "--bundle", bundle); err != nil {
		return nil, fmt.Errorf("dpfl-client audit --bundle: %v\n%s", err, out)
	}
	out, err := run("verify", bundle, "--key", key.PublicKey)
	v := &Verified{Output: out, Warned: strings.Contains(out, "WARNING")}
	if err != nil || !strings.Contains(out, "OK: ") {
		return v, fmt.Errorf("dpfl-client verify: %v\n%s", err, out)
	}
	m := chainRe.FindStringSubmatch(out)
	if m == nil {
		return v, fmt.Errorf("dpfl-client verify printed no chain line:\n%s", out)
	}
	v.Charges, _ = strconv.Atoi(m[1])
	v.Rounds, _ = strconv.Atoi(m[2])
	v.Extra, _ = strconv.Atoi(m[3])
	if m := boundRe.FindStringSubmatch(out); m != nil {
		v.Bound = m[1]
	}
	if m := claimRe.FindStringSubmatch(out); m != nil {
		v.Claimed = m[1]
	}
	if b, err := os.ReadFile(bundle); err == nil {
		var bb struct {
			Claim struct {
				Epsilon *float64 `json:"epsilon"`
			} `json:"claim"`
		}
		if jsonErr := json.Unmarshal(b, &bb); jsonErr == nil {
			v.BundleClaim = bb.Claim.Epsilon
		}
	}
	return v, nil
}
