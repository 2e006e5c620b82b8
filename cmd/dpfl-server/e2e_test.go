package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/dpfl/dpfl/internal/datatest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/internal/contracttest"
)

// These tests run the real dpfl-server binary on a loopback port and drive
// it with the real client package, as a user would. Their HTTP traffic
// goes through contracttest.Proxy (startServer, launch), which checks every
// request and response against the OpenAPI contract (api/openapi.json);
// TestMain prints what was validated in all.

var serverBin, clientBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dpfl-e2e")
	if err != nil {
		panic(err)
	}
	serverBin = filepath.Join(dir, "dpfl-server")
	clientBin = filepath.Join(dir, "dpfl-client")
	for bin, pkg := range map[string]string{serverBin: ".", clientBin: "../dpfl-client"} {
		out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	fmt.Println(contracttest.Summary())
	os.RemoveAll(dir)
	os.Exit(code)
}

func needData(t *testing.T) {
	t.Helper()
	datatest.FashionMNIST(t)
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type server struct {
	cmd *exec.Cmd
	// addr is the base URL the tests use: a contracttest.Proxy in front
	// of the server, which validates every exchange against the contract
	// (direct itself only for TLS, see launch).
	addr string
	// direct is the server's own base URL, for what a proxy cannot stand
	// in for (waiting for the server to listen, a TLS handshake).
	direct string
	log    *syncLog
}

// syncLog collects the server's stderr; the reader goroutine and the test
// both touch it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(line + "\n")
}

// waitFor reports whether every one of subs appears in the log within a
// few seconds: the server's stderr reaches the log through a pipe and a
// goroutine, so a line logged before a response may arrive after it.
func (l *syncLog) waitFor(subs ...string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, all := l.String(), true
		for _, sub := range subs {
			all = all && strings.Contains(s, sub)
		}
		if all || time.Now().After(deadline) {
			return all
		}
	}
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServer runs dpfl-server on db and waits until it answers.
func startServer(t *testing.T, db, token string) *server {
	t.Helper()
	return startServerWith(t, token, "--db", db)
}

// startServerWith runs dpfl-server with the store flags given and waits
// until it answers.
func startServerWith(t *testing.T, token string, storeArgs ...string) *server {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(serverBin, append([]string{"--addr", addr, "--workers", "2"}, storeArgs...)...)
	cmd.Env = append(os.Environ(), "DPFL_TOKEN="+token)
	s := &server{cmd: cmd, direct: "http://" + addr, log: &syncLog{}}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.log.add(sc.Text())
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Polled directly: until the server listens, a proxy could only answer
	// 502 itself.
	cl := client.New(s.direct, token)
	for i := 0; ; i++ {
		if cl.Health(context.Background()) == nil {
			s.addr = contracttest.Proxy(t, s.direct)
			return s
		}
		if i > 100 {
			t.Fatalf("dpfl-server did not come up:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const smallJob = `{
  "name": "e2e",
  "model": "logreg",
  "population": {"size": 600, "partition": "dirichlet", "dirichlet_alpha": 1.0},
  "sampling": {"scheme": "poisson", "rate": 0.1},
  "rounds": %d,
  "client": {"epochs": 1, "batch_size": 20, "lr": 0.1},
  "dp": {"enabled": true, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": 1e-5},
  "eval_every": 5
}`

func TestEndToEndDPJob(t *testing.T) {
	needData(t)
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), "secret-e2e")
	ctx := context.Background()

	// Without the token every /v1 route is refused.
	var apiErr *client.Error
	if _, err := client.New(s.addr, "").List(ctx); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("no token: got %v, want 401", err)
	}
	if _, err := client.New(s.addr, "wrong").List(ctx); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("wrong token: got %v, want 401", err)
	}

	cl := client.New(s.addr, "secret-e2e")
	const rounds = 20
	st, err := cl.Submit(ctx, []byte(fmt.Sprintf(smallJob, rounds)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	st, err = cl.Wait(wctx, st.ID, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log)
	}
	if st.State != "completed" || st.Round != rounds {
		t.Fatalf("job ended %s at round %d: %s", st.State, st.Round, st.Message)
	}
	// Chance is 10%; DP logistic regression passes 60% within 20 rounds.
	if st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.6 {
		t.Fatalf("final test metrics %+v, want accuracy ≥ 0.6", st.LatestTest)
	}
	rep, err := cl.Privacy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != rounds {
		t.Fatalf("%d privacy events for %d rounds", len(rep.Events), rounds)
	}
	for i, e := range rep.Events {
		if e.Round != i+1 {
			t.Fatalf("event %d is for round %d", i, e.Round)
		}
	}
	if rep.Epsilon == nil || !(*rep.Epsilon > 0) || rep.Delta != 1e-5 {
		t.Fatalf("privacy report ε=%v δ=%v", rep.Epsilon, rep.Delta)
	}
	met, err := cl.Metrics(ctx, st.ID)
	if err != nil || len(met) != rounds {
		t.Fatalf("metrics: %d rounds, err %v", len(met), err)
	}
	// ε grows with every round.
	for i := 1; i < len(met); i++ {
		if !(*met[i].Epsilon > *met[i-1].Epsilon) {
			t.Fatalf("ε did not grow from round %d (%v) to %d (%v)", i, *met[i-1].Epsilon, i+1, *met[i].Epsilon)
		}
	}
	if *met[len(met)-1].Epsilon != *rep.Epsilon {
		t.Fatalf("last round's ε %v differs from the ledger's %v", *met[len(met)-1].Epsilon, *rep.Epsilon)
	}
	mod, err := cl.Model(ctx, st.ID)
	if err != nil || mod.NumParams != 7850 || len(mod.Params) != 7850 || mod.Round != rounds {
		t.Fatalf("model: %d params, round %d, err %v", len(mod.Params), mod.Round, err)
	}
}

func TestBadSubmissionsCreateNothing(t *testing.T) {
	needData(t)
	s := startServer(t, filepath.Join(t.TempDir(), "dpfl.db"), "tok")
	cl := client.New(s.addr, "tok")
	ctx := context.Background()
	cases := map[string]string{
		`{"dp": {"noise_multiplier": -1}}`:                       "dp.noise_multiplier",
		`{"dp": {"delta": 1.5}}`:                                 "dp.delta",
		`{"model": "resnet"}`:                                    "model",
		`{"sampling": {"scheme": "fixed", "cohort_size": 7000}}`: "sampling.cohort_size",
		`{"population": {"size": 0}}`:                            "population.size",
		`{"population": {"clients": 0}}`:                         "population.size",
		`{"rounds": "many"}`:                                     "body",
		`{"rouds": 3}`:                                           "rouds",
		`not json`:                                               "body",
	}
	for body, field := range cases {
		_, err := cl.Submit(ctx, []byte(body))
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != field {
			t.Errorf("%s: got %v (field %q), want 400 naming %q", body, err, fieldOf(apiErr), field)
		}
	}
	jobs, err := cl.List(ctx)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("after bad submissions: %d jobs, err %v", len(jobs), err)
	}
	if _, err := cl.Job(ctx, "job-nope"); !isStatus(err, 404) {
		t.Fatalf("unknown job: %v", err)
	}
}

func fieldOf(e *client.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}

func isStatus(err error, code int) bool {
	var apiErr *client.Error
	return errors.As(err, &apiErr) && apiErr.Status == code
}

// Killing the server with SIGKILL mid-job loses nothing committed: after a
// restart on the same db the job resumes from its last committed round,
// finishes, and its ledger holds an event for every round (plus at most one
// wasted write-ahead event per crash).
func TestKilledServerResumesJob(t *testing.T) {
	needData(t)
	db := filepath.Join(t.TempDir(), "dpfl.db")
	s := startServer(t, db, "tok")
	cl := client.New(s.addr, "tok")
	ctx := context.Background()
	const rounds = 40
	st, err := cl.Submit(ctx, []byte(fmt.Sprintf(smallJob, rounds)))
	if err != nil {
		t.Fatal(err)
	}
	var killedAt int
	for deadline := time.Now().Add(2 * time.Minute); ; {
		cur, err := cl.Job(ctx, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Round >= 5 {
			killedAt = cur.Round
			break
		}
		if cur.State.Terminal() || time.Now().After(deadline) {
			t.Fatalf("job %s at round %d before the kill", cur.State, cur.Round)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()

	s2 := startServer(t, db, "tok")
	cl2 := client.New(s2.addr, "tok")
	after, err := cl2.Job(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Round < killedAt {
		t.Fatalf("restart lost committed rounds: %d < %d", after.Round, killedAt)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	final, err := cl2.Wait(wctx, st.ID, 200*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, s2.log)
	}
	if final.State != "completed" || final.Round != rounds {
		t.Fatalf("resumed job ended %s at round %d: %s", final.State, final.Round, final.Message)
	}
	met, err := cl2.Metrics(ctx, st.ID)
	if err != nil || len(met) != rounds {
		t.Fatalf("%d metrics rows, err %v", len(met), err)
	}
	for i, m := range met {
		if m.Round != i+1 {
			t.Fatalf("metrics row %d is round %d", i, m.Round)
		}
	}
	rep, err := cl2.Privacy(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Events); n < rounds || n > rounds+1 {
		t.Fatalf("%d ledger events for %d rounds and one crash", n, rounds)
	}
	covered := map[int]bool{}
	for _, e := range rep.Events {
		covered[e.Round] = true
	}
	for r := 1; r <= rounds; r++ {
		if !covered[r] {
			t.Fatalf("round %d has no privacy event", r)
		}
	}
	if !strings.Contains(s2.log.String(), "resuming job") {
		t.Fatalf("restarted server did not report resuming:\n%s", s2.log)
	}
}
