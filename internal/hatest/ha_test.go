//go:build ha

package hatest

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/etcdtest"
)

// The kill -9 suite of issue 18 (make test-ha, scripts/test-ha.sh); the
// package documentation lists its environment variables.

var serverBin, clientBin string

func TestMain(m *testing.M) {
	serverBin, clientBin = os.Getenv("DPFL_HA_SERVER_BIN"), os.Getenv("DPFL_HA_CLIENT_BIN")
	var tmp string
	if serverBin == "" || clientBin == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "dpfl-hatest-bin"); err != nil {
			panic(err)
		}
		serverBin, clientBin = filepath.Join(tmp, "dpfl-server"), filepath.Join(tmp, "dpfl-client")
		for bin, pkg := range map[string]string{serverBin: "../../cmd/dpfl-server", clientBin: "../../cmd/dpfl-client"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
				os.Exit(1)
			}
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// workDir is $DPFL_HA_DIR/name (kept) or a temporary directory.
func workDir(t *testing.T, name string) string {
	if d := os.Getenv("DPFL_HA_DIR"); d != "" {
		dir := filepath.Join(d, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// haConfig is the suite's environment: 3 etcd members with etcd's
// default raft timing and pre-vote (etcd ≥ 3.5's default; Debian's 3.4
// has it off, and then a cluster back from a quorum loss can take up to
// 7 s to elect a leader: etcdtest.Options), 3 replicas with 2 s leases,
// each behind its own proxies, training on one core each.
func haConfig(t *testing.T, dir string) (Config, bool) {
	single := os.Getenv("DPFL_HA_SINGLE") == "1"
	if !single && !SupportsLeaderFlags(serverBin) {
		t.Fatalf("%s has no --replica-id / --lease-ttl: the per-job leader wiring of issue 18 is missing from this build (DPFL_HA_SINGLE=1 runs the etcd faults against one replica)", serverBin)
	}
	cfg := Config{
		ServerBin: serverBin, ClientBin: clientBin, Dir: dir,
		Members: 3, HeartbeatMS: 100, ElectionMS: 1000, PreVote: true,
		Replicas: 3, Leader: true, LeaseTTL: 2 * time.Second, Proxied: true,
		Args: []string{"--workers", "1"},
	}
	if os.Getenv("DPFL_HA_BLACKHOLE") == "hold" {
		cfg.Blackhole = Hold
	}
	if single {
		cfg.Replicas, cfg.Leader = 1, false
	}
	return cfg, single
}

// haJob is the suite's DP logistic regression: 100 rounds on a small
// synthetic population (quick to load, so a new leader starts at once),
// every user in every round (the synthetic users' sizes are lognormal
// with a heavy tail, so a sampled cohort's work would vary several-fold
// from round to round), each round about roundSeconds of training on one
// core (the local epochs are calibrated), so that the faults fall
// mid-round and the job outlasts them.
const haJob = `{
  "name": "ha-logreg",
  "dataset": "synthetic",
  "model": "logreg",
  "population": {"size": 50},
  "sampling": {"scheme": "fixed", "cohort_size": 50},
  "rounds": %d,
  "client": {"epochs": %d, "batch_size": 10, "lr": 0.05},
  "dp": {"enabled": true, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": 1e-5},
  "eval_every": 10
}`

// roundSeconds is the wall time of one round that the suite aims for
// (DPFL_HA_ROUND_MS overrides it): long enough that the job outlasts its
// 13 faults with a margin (they take about a minute, half of it with the
// job progressing), short enough to keep the suite near 80 s. Each gap
// after a leader kill contains one round of training.
func roundSeconds() float64 { return float64(envInt("DPFL_HA_ROUND_MS", 450)) / 1000 }

// calibrateEpochs runs a short job of haJob's shape on e and returns the
// local epochs that make one round take about roundSeconds here: round
// time grows with the epochs, and this machine's speed is not known in
// advance (a 2-core CI runner, a busy shared host). DPFL_HA_EPOCHS skips
// it.
func calibrateEpochs(t *testing.T, e *Env) int {
	const calRounds, calEpochs = 6, 20
	ctx := context.Background()
	st, err := e.Client(e.Replicas[0]).Submit(ctx, []byte(fmt.Sprintf(haJob, calRounds, calEpochs)))
	if err != nil {
		t.Fatalf("submit the calibration job: %v\n%s", err, e.Logs(40))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j, _, err := e.Job(ctx, st.ID)
		if err == nil && j.Terminal() {
			if j.State != "completed" {
				t.Fatalf("the calibration job ended %s: %s\n%s", j.State, j.Message, e.Logs(40))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the calibration job did not end in 2 minutes (last: %+v, %v)\n%s", j, err, e.Logs(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	leaves, err := AllLeaves(ctx, e.Live()[0].URL, e.Token)
	if err != nil {
		t.Fatal(err)
	}
	rel := ReadLog(leaves, st.ID).ReleaseTimes
	var gaps []float64
	for r := 3; r <= calRounds; r++ { // round 2 on: the first includes the job's start
		if len(rel[r]) == 1 && len(rel[r-1]) == 1 {
			gaps = append(gaps, rel[r][0].Sub(rel[r-1][0]).Seconds())
		}
	}
	if len(gaps) == 0 {
		t.Fatalf("the calibration job's log has no consecutive releases: %v", rel)
	}
	sort.Float64s(gaps)
	per := gaps[len(gaps)/2]
	epochs := int(math.Round(calEpochs * roundSeconds() / per))
	epochs = min(max(epochs, 10), 400)
	t.Logf("calibration: %d local epochs take %.3f s a round here (median of %d); %d epochs for %.2f s", calEpochs, per, len(gaps), epochs, roundSeconds())
	return epochs
}

// envInt reads a positive integer from the environment, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestHAFaults is issue 18's kill -9 suite on a DP logreg job: while it
// runs, kill -9 of its leader mid-round (5 times), SIGSTOP of the leader
// for 5 s (3 times), its leader's etcd link blackholed for 5 s, each etcd
// member killed in turn, two etcd members killed for 6 s. Then: the job
// completed; every gap from a leader kill to the next commit ≤ 4 s; no
// commit without a quorum, and one ≤ 10 s after it returns; every round
// committed once and charged at least once, extra charges ≤ faults; the
// audit bundle verifies offline with ε equal to the accountant over
// every logged charge.
func TestHAFaults(t *testing.T) {
	began := time.Now()
	dir := workDir(t, "faults")
	cfg, single := haConfig(t, dir)
	rounds := envInt("DPFL_HA_ROUNDS", 100)
	e := Setup(t, cfg)
	epochs := envInt("DPFL_HA_EPOCHS", 0)
	if epochs == 0 {
		epochs = calibrateEpochs(t, e)
	}
	st, err := e.Client(e.Replicas[0]).Submit(context.Background(), []byte(fmt.Sprintf(haJob, rounds, epochs)))
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, e.Logs(40))
	}
	t.Logf("job %s: %d rounds, %d local epochs; replicas %d, leader flags %v", st.ID, rounds, epochs, cfg.Replicas, cfg.Leader)
	s := startScenario(t, e, st.ID, nil)
	plan := Plan{Members: e.Etcd.Members, QuorumLoss: true}
	if !single {
		plan.Kills, plan.Stops, plan.Blackhole = 5, 3, true
	}
	runPlan(t, s, plan)
	final := finish(t, s, 4*time.Minute)
	checkOutcome(t, s, final, rounds, single, true)
	t.Logf("TestHAFaults took %v in all", time.Since(began).Round(time.Millisecond))
}

// startScenario watches job id on e and registers the summary (and, on
// failure, the logs; extra adds more) to be printed at the end of t.
func startScenario(t *testing.T, e *Env, id string, extra func() string) *Scenario {
	w := Watch(e, id)
	s := &Scenario{T: t, Env: e, W: w, Job: id, Settle: 20 * time.Second}
	t.Cleanup(func() { // before Env.Close: cleanups run last-in first-out
		w.Stop()
		Analyze(s.Faults, Commits{FirstSeen: w.FirstSeen(), Releases: ReadLog(w.Leaves(), id).ReleaseTimes, Obs: w.Observations()})
		t.Logf("faults (times from the replicas' start; gap: from the fault to the next commit seen, for the quorum loss from the members' return):\n%s", Table(s.Faults, e.T0))
		t.Logf("replicas' failed polls of the job (paused, cut off, store unavailable):\n%s", Outages(w.Observations(), e.T0))
		if t.Failed() {
			t.Logf("work directory: %s\n%s", e.Cfg.Dir, e.Logs(60))
			if extra != nil {
				t.Log(extra())
			}
		}
	})
	if _, err := w.WaitCommitAfter(0, time.Minute); err != nil {
		t.Fatalf("the job did not start: %v", err)
	}
	return s
}

// Plan is the faults a test injects, in this order: Kills leader kills,
// Stops leader pauses of 5 s, a 5 s blackhole of the leader's etcd link,
// each of Members killed for 2 s in turn, a 6 s quorum loss.
type Plan struct {
	Kills, Stops int
	Blackhole    bool
	Members      []*etcdtest.Member
	QuorumLoss   bool
}

// runPlan injects plan's faults one after another, each once the system
// has recovered from the last (Settled).
func runPlan(t *testing.T, s *Scenario, plan Plan) {
	type step struct {
		name string
		do   func() error
	}
	var steps []step
	for i := 0; i < plan.Kills; i++ {
		steps = append(steps, step{fmt.Sprintf("leader kill -9 #%d", i+1), s.KillLeader})
	}
	for i := 0; i < plan.Stops; i++ {
		steps = append(steps, step{fmt.Sprintf("leader SIGSTOP #%d", i+1), func() error { return s.PauseLeader(5 * time.Second) }})
	}
	if plan.Blackhole {
		steps = append(steps, step{"leader's etcd link blackholed", func() error { return s.BlackholeLeader(5 * time.Second) }})
	}
	for _, m := range plan.Members {
		steps = append(steps, step{"etcd member " + m.Name + " kill -9", func() error { return s.KillMember(m, 2*time.Second) }})
	}
	if plan.QuorumLoss {
		steps = append(steps, step{"etcd quorum loss", func() error { return s.LoseQuorum(6 * time.Second) }})
	}
	for i, st := range steps {
		if s.Done() {
			t.Fatalf("the job ended (%+v) before step %d (%s): its rounds are too quick to fit every fault (raise DPFL_HA_ROUND_MS, or DPFL_HA_EPOCHS)", s.W.Last(), i+1, st.name)
		}
		if err := st.do(); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, st.name, err)
		}
		if err := s.Settled(); err != nil {
			t.Fatalf("after step %d (%s): %v", i+1, st.name, err)
		}
	}
	s.logf("all %d faults injected; waiting for the job to end", len(s.Faults))
}

// finish waits for the job to end and returns its final state.
func finish(t *testing.T, s *Scenario, timeout time.Duration) JobView {
	if err := s.W.WaitFor(timeout, "the job to end", s.Done); err != nil {
		t.Fatalf("%v (last: %+v)", err, s.W.Last())
	}
	for _, r := range s.Env.Replicas {
		s.W.ScrapeNow(r)
	}
	final, _, err := s.Env.Job(context.Background(), s.Job)
	if err != nil {
		t.Fatal(err)
	}
	s.logf("job %s at round %d, %v after the replicas started", final.State, final.Round, time.Since(s.Env.T0).Round(time.Millisecond))
	return final
}

// devicesJob is the devices job: DP logreg over secure aggregation, a
// fixed cohort of all 10 devices, short stage timeouts so that a round
// abandoned by a killed leader is run again soon.
const devicesJob = `{
  "name": "ha-devices",
  "model": "logreg",
  "population": {"source": "devices", "size": 10},
  "sampling": {"scheme": "fixed", "cohort_size": 10},
  "rounds": %d,
  "client": {"epochs": 1, "batch_size": 10, "lr": 0.1},
  "dp": {"enabled": true, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": 1e-5},
  "secure_aggregation": true,
  "secagg": {"min_clients": 8, "stage_timeout_seconds": 3, "join_timeout_seconds": 3},
  "eval_every": 5
}`

// TestHADevices is the devices job of issue 18: 10 'dpfl-client
// participate' processes (device i polls replica i mod 3; one whose
// replica dies starts again against the next live one) take part in a
// DP job while its leader is killed twice and paused once, its etcd link
// blackholed, an etcd member killed and the quorum lost. The same
// checks as TestHAFaults, except that the gaps after leader kills are
// reported, not bounded (a devices round waits on its devices' polls and
// stage timeouts). It runs only with DPFL_HA_DEVICES=1, which
// scripts/test-ha.sh sets by default (about 70 s more).
func TestHADevices(t *testing.T) {
	if os.Getenv("DPFL_HA_DEVICES") != "1" {
		t.Skip("the devices job (10 dpfl-client participate processes, about 70 s) runs only with DPFL_HA_DEVICES=1")
	}
	began := time.Now()
	dir := workDir(t, "devices")
	cfg, single := haConfig(t, dir)
	if single {
		t.Skip("the devices job needs 3 replicas with the leader flags")
	}
	train, _, err := data.LoadFashionMNIST(data.DefaultFashionMNISTDir)
	if err != nil {
		t.Fatalf("the devices' data come from Fashion-MNIST: %v", err)
	}
	rounds := envInt("DPFL_HA_DEVICE_ROUNDS", 15)
	e := Setup(t, cfg)
	ctx := context.Background()
	admin := e.Client(e.Replicas[0])
	st, err := admin.Submit(ctx, []byte(fmt.Sprintf(devicesJob, rounds)))
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, e.Logs(40))
	}
	const devices = 10
	var parts []*Participant
	t.Cleanup(func() {
		for _, p := range parts {
			p.Stop()
		}
	})
	for i := 0; i < devices; i++ {
		en, err := admin.EnrollDevice(ctx, st.ID)
		if err != nil {
			t.Fatalf("enroll device %d: %v", i, err)
		}
		ddir := filepath.Join(dir, fmt.Sprintf("device-%d", i))
		if err := os.MkdirAll(ddir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteDeviceData(ddir, train, i*60, 60); err != nil {
			t.Fatal(err)
		}
		p, err := StartParticipant(e, clientBin, st.ID, i, en.Credential, ddir, filepath.Join(dir, fmt.Sprintf("device-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	t.Logf("job %s: %d rounds over %d devices", st.ID, rounds, devices)
	jobID := st.ID
	s := startScenario(t, e, st.ID, func() string {
		var b strings.Builder
		for _, p := range parts {
			fmt.Fprintf(&b, "----- device %d (full log: %s)\n%s\n", p.N, p.LogPath, p.Log(20))
		}
		// What each replica tells a device about the round now.
		for _, r := range e.Live() {
			var rs map[string]any
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := getJSON(ctx, r.URL, parts[0].Credential, "/v1/jobs/"+jobID+"/participate", &rs)
			cancel()
			fmt.Fprintf(&b, "----- GET /v1/jobs/%s/participate on %s (as device 0): %v %v\n", jobID, r.ID, rs, err)
		}
		return b.String()
	})
	runPlan(t, s, Plan{Kills: 2, Stops: 1, Blackhole: true, Members: e.Etcd.Members[:1], QuorumLoss: true})
	final := finish(t, s, 3*time.Minute)
	var restarts []string
	for _, p := range parts {
		for _, r := range p.Restarts() {
			restarts = append(restarts, fmt.Sprintf("device %d: %s", p.N, r))
		}
	}
	t.Logf("%d participant restarts after their replica failed:\n  %s", len(restarts), strings.Join(restarts, "\n  "))
	checkOutcome(t, s, final, rounds, false, false)
	t.Logf("TestHADevices took %v in all", time.Since(began).Round(time.Millisecond))
}

// checkOutcome checks a finished job of the scenario against issue 18's
// done-when; failoverBound asserts the ≤ 4 s gap from each leader kill
// to the next commit (else it is only reported).
func checkOutcome(t *testing.T, s *Scenario, final JobView, rounds int, single, failoverBound bool) {
	e, w := s.Env, s.W
	ctx := context.Background()
	if final.State != "completed" || final.Round != rounds {
		t.Errorf("FAILOVER: the job ended %s at round %d (%s), want completed at round %d", final.State, final.Round, final.Message, rounds)
	}
	for _, r := range e.Replicas {
		for _, c := range r.Crashes() {
			t.Errorf("CRASH: %s", c)
		}
	}

	// The whole log, read from one replica, against what the watcher read
	// from each in turn while the faults ran.
	live := e.Live()
	if len(live) == 0 {
		t.Fatal("no live replica at the end")
	}
	leaves, err := AllLeaves(ctx, live[0].URL, e.Token)
	if err != nil {
		t.Fatalf("reading the log: %v", err)
	}
	for i, l := range w.Leaves() {
		if i >= len(leaves) || l.Kind != leaves[i].Kind || l.Job != leaves[i].Job || l.Round != leaves[i].Round || !l.Time.Equal(leaves[i].Time) {
			t.Errorf("LOG: leaf %d read during the run (%s %s round %d) differs from the final log's", i, l.Kind, l.Job, l.Round)
			break
		}
	}
	lc := ReadLog(leaves, s.Job)
	for _, p := range lc.Problems(rounds) {
		t.Errorf("LOG: %s", p)
	}

	// Failover and quorum loss.
	Analyze(s.Faults, Commits{FirstSeen: w.FirstSeen(), Releases: lc.ReleaseTimes, Obs: w.Observations()})
	for i, f := range s.Faults {
		switch {
		case f.Kind == LeaderKill && (f.Next == 0 || failoverBound && f.Gap > 4*time.Second):
			t.Errorf("FAILOVER: fault %d (%s of %s): next commit round %d %.2fs later, want ≤ 4 s", i+1, f.Kind, f.Target, f.Next, f.Gap.Seconds())
		case f.Kind == QuorumLoss && len(f.During) > 0:
			t.Errorf("QUORUM: fault %d (%s): rounds %v were committed while 2 of 3 members were down", i+1, f.Target, f.During)
		case f.Kind == QuorumLoss && (f.Next == 0 || f.Gap > 10*time.Second):
			t.Errorf("QUORUM: fault %d (%s): next commit round %d %.2fs after the members returned, want ≤ 10 s", i+1, f.Target, f.Next, f.Gap.Seconds())
		}
	}

	// The ledger: every committed round has an event, extra events ≤
	// faults, and it matches the log's charges.
	rep, err := e.Client(live[0]).Privacy(ctx, s.Job)
	if err != nil {
		t.Fatalf("privacy report: %v", err)
	}
	perRound := map[int]int{}
	for _, ev := range rep.Events {
		perRound[ev.Round]++
	}
	for r := 1; r <= final.Round; r++ {
		if perRound[r] == 0 {
			t.Errorf("UNDER-COUNT: committed round %d has no ledger event", r)
		}
	}
	extra := len(rep.Events) - final.Round
	if extra > len(s.Faults) {
		t.Errorf("OVER-COUNT: %d ledger events for %d committed rounds: %d extra, more than the %d faults injected", len(rep.Events), final.Round, extra, len(s.Faults))
	}
	if extra < 0 || rep.ExtraEvents != extra {
		t.Errorf("LEDGER: the report says %d extra events, the ledger holds %d events for %d rounds", rep.ExtraEvents, len(rep.Events), final.Round)
	}
	if len(rep.Events) != lc.ChargeLeaves {
		t.Errorf("LEDGER: %d ledger events but %d charge leaves in the log", len(rep.Events), lc.ChargeLeaves)
	}
	var extraRounds []string
	for r := 1; r <= final.Round; r++ {
		if perRound[r] > 1 {
			extraRounds = append(extraRounds, fmt.Sprintf("%d×%d", r, perRound[r]))
		}
	}
	t.Logf("ledger: %d events for %d rounds, %d extra (≤ %d faults): %s", len(rep.Events), final.Round, extra, len(s.Faults), strings.Join(extraRounds, " "))

	// ε: the audit bundle verifies offline, and its claim (the reported ε)
	// is the accountant's bound over every logged charge.
	v, err := VerifyBundle(e, clientBinOf(e), e.Cfg.Dir, s.Job)
	switch {
	case err != nil:
		t.Errorf("VERIFY: %v", err)
	case v.Rounds != final.Round || v.Charges != len(rep.Events) || v.Extra != extra:
		t.Errorf("VERIFY: the bundle shows %d charges, %d rounds, %d extra; the ledger %d events, %d rounds, %d extra\n%s", v.Charges, v.Rounds, v.Extra, len(rep.Events), final.Round, extra, v.Output)
	case v.Warned || v.Claimed == "" || v.Claimed != v.Bound:
		t.Errorf("VERIFY: the claimed ε %q is not the recomputed bound %q (or a warning):\n%s", v.Claimed, v.Bound, v.Output)
	case rep.Epsilon == nil || v.BundleClaim == nil || math.Abs(*rep.Epsilon-*v.BundleClaim) > 1e-12*math.Abs(*rep.Epsilon):
		t.Errorf("VERIFY: the privacy report's ε %v differs from the bundle's claim %v", rep.Epsilon, v.BundleClaim)
	default:
		t.Logf("dpfl-client verify: OK, ε = %s (claimed) = %s (recomputed over %d charges)", v.Claimed, v.Bound, v.Charges)
	}

	// Fenced writes and phantom wins, summed over every replica's
	// incarnations.
	tot, missing := w.Totals()
	t.Logf("dpfl_store_fenced_writes_total = %g, dpfl_leader_phantom_wins_total = %g over every replica incarnation:\n%s",
		tot["dpfl_store_fenced_writes_total"], tot["dpfl_leader_phantom_wins_total"], w.PerReplica())
	if len(missing) > 0 && !single {
		t.Errorf("METRICS: no replica exported %s", strings.Join(missing, ", "))
	}
}

// clientBinOf is the dpfl-client binary of e.
func clientBinOf(e *Env) string { return e.Cfg.ClientBin }
