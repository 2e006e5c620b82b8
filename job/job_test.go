package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/storage"
)

func small(t *testing.T, edit func(*types.Spec)) types.Spec {
	t.Helper()
	s := DefaultSpec()
	s.Population.Size = 300
	s.Sampling.Rate = 0.1
	s.Rounds = 10
	s.EvalEvery = 5
	edit(&s)
	return s
}

func runToEnd(t testing.TB, m *Manager, s types.Spec) types.Status {
	t.Helper()
	j, err := m.Submit(s)
	if err != nil {
		t.Fatal(err)
	}
	m.Wait(j.ID)
	st, err := m.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A round that would take ε past ε_max is not run; the ledger stays within
// budget and holds exactly the rounds that ran.
func TestBudgetStopsTheJob(t *testing.T) {
	m := manager(t)
	const budget = 3.0
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 200; s.DP.EpsilonBudget = budget }))
	if st.State != types.StateBudgetExhausted || st.Round == 0 || st.Round >= 200 {
		t.Fatalf("state %s after %d rounds: %s", st.State, st.Round, st.Message)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != st.Round || *rep.Epsilon > budget {
		t.Fatalf("%d events for %d rounds, ε = %v > budget %v", len(rep.Events), st.Round, *rep.Epsilon, budget)
	}
	// One more round would have crossed the budget.
	next, err := accounting.EpsilonPoissonGaussian(0.1, 1, st.Round+1, 1e-5)
	if err != nil || next <= budget {
		t.Fatalf("ε after one more round %v (err %v), want > %v", next, err, budget)
	}
	if !strings.Contains(st.Message, "budget") {
		t.Fatalf("message %q does not explain the stop", st.Message)
	}
}

// A budget too small for even one round is refused at submission and
// nothing is stored.
func TestBudgetBelowOneRoundIsRefused(t *testing.T) {
	m := manager(t)
	_, err := m.Submit(small(t, func(s *types.Spec) { s.DP.EpsilonBudget = 1 }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "dp.epsilon_budget" {
		t.Fatalf("got %v, want a validation error on dp.epsilon_budget", err)
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("%d jobs stored", len(jobs))
	}
}

// A job submitted with a target ε runs all its rounds, ends within the
// target, and its calibrated z is the smallest that does: 1% less noise
// would overshoot.
func TestTargetEpsilonCalibratesNoise(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.DP.TargetEpsilon = 4; s.Rounds = 8 }))
	if st.State != types.StateCompleted || st.Round != 8 {
		t.Fatalf("%s after %d rounds: %s", st.State, st.Round, st.Message)
	}
	z := st.Spec.DP.NoiseMultiplier
	rep, _ := m.Privacy(st.ID)
	if *rep.Epsilon > 4 || st.Spec.DP.EpsilonBudget != 4 {
		t.Fatalf("z = %v: ε = %v, budget %v", z, *rep.Epsilon, st.Spec.DP.EpsilonBudget)
	}
	less := accounting.SelfComposed{Event: accounting.PoissonSampled{SamplingProbability: 0.1, Event: accounting.Gaussian{NoiseMultiplier: 0.99 * z}}, Count: 8}
	r, _ := accounting.Account([]accounting.Event{less}, 1e-5)
	if r.Epsilon() <= 4 {
		t.Fatalf("z = %v is not minimal: 0.99z gives ε = %v", z, r.Epsilon())
	}
}

func TestNonPrivateJobRecordsNoEvents(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.DP.Enabled = false }))
	if st.State != types.StateCompleted || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.6 {
		t.Fatalf("non-DP job: %s, %+v", st.State, st.LatestTest)
	}
	rep, _ := m.Privacy(st.ID)
	if rep.Private || len(rep.Events) != 0 || rep.Epsilon != nil {
		t.Fatalf("non-DP privacy report %+v", rep)
	}
}

// A fixed-size cohort is recorded as sampling without replacement with
// the replace-one noise multiplier z/2 (sensitivity 2C); its cohort size K
// is public and released. Per-client evaluation on held-out examples runs
// without DP only.
func TestFixedCohortEvent(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 30}
		s.Rounds = 3
	}))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	if st.Latest.Selected != 30 || st.Latest.Reported != 0 {
		t.Fatalf("latest round %+v: want the public K only", st.Latest)
	}
	held := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 30}
		s.Rounds, s.DP.Enabled = 3, false
		s.Population.HeldOutFraction = 0.2
	}))
	if held.Latest.HeldOut == nil || held.Latest.HeldOut.Clients == 0 {
		t.Fatalf("non-DP held-out evaluation %+v", held.Latest)
	}
	rep, _ := m.Privacy(st.ID)
	ev, err := accounting.UnmarshalEvent(rep.Events[0].Event)
	if err != nil {
		t.Fatal(err)
	}
	want := accounting.SampledWithoutReplacement{SourceDatasetSize: 300, SampleSize: 30, Event: accounting.Gaussian{NoiseMultiplier: 0.5}}
	if ev != want {
		t.Fatalf("event %#v, want %#v", ev, want)
	}
}

func TestCancel(t *testing.T) {
	m := manager(t)
	j, err := m.Submit(small(t, func(s *types.Spec) { s.Rounds = 100000 }))
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Cancel(j.ID)
	if err != nil || st.State != storage.StateCancelled {
		t.Fatalf("cancel: %s, %v", st.State, err)
	}
	if _, err := m.Cancel(j.ID); !errors.Is(err, ErrConflict) {
		t.Fatalf("second cancel: %v", err)
	}
	rep, _ := m.Privacy(j.ID)
	if n := len(rep.Events); n < st.Round || n > st.Round+1 {
		t.Fatalf("%d events for %d committed rounds", n, st.Round)
	}
}

func TestSpecValidation(t *testing.T) {
	cases := map[string]string{
		`{"model":"resnet"}`:                                                        "model",
		`{"population":{"size":70000}}`:                                             "population.size",
		`{"population":{"partition":"zipf"}}`:                                       "population.partition",
		`{"population":{"dirichlet_alpha":0}}`:                                      "population.dirichlet_alpha",
		`{"population":{"held_out_fraction":1}}`:                                    "population.held_out_fraction",
		`{"sampling":{"rate":0}}`:                                                   "sampling.rate",
		`{"sampling":{"scheme":"fixed","cohort_size":0}}`:                           "sampling.cohort_size",
		`{"rounds":0}`:                                                              "rounds",
		`{"client":{"lr":-1}}`:                                                      "client.lr",
		`{"client":{"batch_size":0}}`:                                               "client.batch_size",
		`{"dp":{"clip_norm":0}}`:                                                    "dp.clip_norm",
		`{"dp":{"noise_multiplier":0}}`:                                             "dp.noise_multiplier",
		`{"dp":{"delta":0}}`:                                                        "dp.delta",
		`{"dp":{"epsilon_budget":-1}}`:                                              "dp.epsilon_budget",
		`{"population":{"source":"devices"},"sampling":{"scheme":"fixed"}}`:         "secure_aggregation",
		`{"population":{"source":"devices"},"secure_aggregation":true}`:             "sampling.scheme",
		`{"population":{"source":"phones"}}`:                                        "population.source",
		`{"secure_aggregation":true,"secagg":{"min_clients":1}}`:                    "secagg.min_clients",
		`{"secure_aggregation":true,"secagg":{"dropout_rate":0.7}}`:                 "secagg.dropout_rate",
		`{"secure_aggregation":true,"secagg":{"stage_timeout_seconds":0}}`:          "secagg.stage_timeout_seconds",
		`{"secure_aggregation":true,"dp":{"enabled":false,"clip_norm":0}}`:          "dp.clip_norm",
		`{"secure_aggregation":true,"sampling":{"scheme":"fixed","cohort_size":2}}`: "sampling.cohort_size",
		`{"eval_every":0}`:                                                          "eval_every",
		`{"server":{"optimizer":"lamb"}}`:                                           "server.optimizer",
		`{"server":{"optimizer":"adam","beta1":1}}`:                                 "server.beta1",
		`{"server":{"optimizer":"yogi","beta2":-0.5}}`:                              "server.beta2",
		`{"server":{"optimizer":"adagrad","tau":0}}`:                                "server.tau",
		`{"server":{"optimizer":"momentum","momentum":1}}`:                          "server.momentum",
		`{"server":{"lr":0}}`:                                                       "server.lr",
		`{"population":{"on_demand":true,"max_examples":0}}`:                        "population.max_examples",
		`{"population":{"on_demand":true,"size":20000000}}`:                         "population.size",
		`{"participation":{"dropout_rate":1}}`:                                      "participation.dropout_rate",
		`{"participation":{"among_available":true}}`:                                "participation.among_available",
		`{"participation":{"diurnal_amplitude":0.5}}`:                               "participation.period_rounds",
		`{"population":{"partition":"labels"}}`:                                     "population.labels_per_client",
		`{"dataset":"leaf"}`:                                                        "leaf.train_dir",
		`{"dataset":"synthetic","synthetic":{"alpha":-1}}`:                          "synthetic.alpha",
		`{"dataset":"synthetic","population":{"size":20000}}`:                       "population.size",
		`{"algorithm":"fedsplit"}`:                                                  "algorithm",
		`{"algorithm":"scaffold"}`:                                                  "algorithm",
		`{"algorithm":"fednova"}`:                                                   "algorithm",
		`{"algorithm":"scaffold","dp":{"enabled":false},"secure_aggregation":true}`: "algorithm",
		`{"client":{"momentum":1}}`:                                                 "client.momentum",
		`{"client":{"prox_mu":-1}}`:                                                 "client.prox_mu",
		`{"client":{"stragglers":1.5}}`:                                             "client.stragglers",
		`{"client":{"lr_schedule":{"kind":"step"}}}`:                                "client.lr_schedule.kind",
		`{"server":{"lr_schedule":{"kind":"exp_decay","decay_every":0}}}`:           "server.lr_schedule.decay_every",
		`{"dataset":"cifar10"}`:                                                     "dataset",
	}
	for body, field := range cases {
		s, err := ParseSpec([]byte(body))
		if err == nil {
			err = Validate(s, 60000)
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: got %v, want an error on %s", body, err, field)
		}
	}
	s, err := ParseSpec([]byte(`{}`))
	if err != nil || Validate(s, 60000) != nil {
		t.Fatalf("the empty job (all defaults) is invalid: %v", err)
	}
	for _, opt := range []string{"momentum", "adagrad", "adam", "yogi"} {
		s, err := ParseSpec([]byte(`{"server":{"optimizer":"` + opt + `","lr":0.01}}`))
		if err != nil || Validate(s, 60000) != nil {
			t.Fatalf("server optimizer %s with default hyperparameters is invalid: %v", opt, err)
		}
	}
	b, _ := json.Marshal(DefaultSpec())
	if back, err := ParseSpec(b); err != nil || back != DefaultSpec() {
		t.Fatalf("spec JSON round trip: %v", err)
	}
}

// Every FedOpt server optimizer trains a job end to end (its state
// checkpointed every round) well past chance (10%) on Fashion-MNIST.
func TestServerOptimizersTrainJobs(t *testing.T) {
	m := realManager(t)
	for opt, lr := range map[string]float64{"momentum": 0.5, "adagrad": 0.03, "adam": 0.01, "yogi": 0.01} {
		st := runToEnd(t, m, small(t, func(s *types.Spec) {
			s.Server.Optimizer, s.Server.LR = opt, lr
			s.DP.Enabled = false
		}))
		if st.State != types.StateCompleted || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.6 {
			t.Errorf("%s (η_s = %g): %s, test %+v", opt, lr, st.State, st.LatestTest)
		}
	}
}

// SCAFFOLD and FedNova jobs train on Fashion-MNIST, with stragglers
// varying the clients' step counts.
func TestCrossSiloAlgorithmsTrain(t *testing.T) {
	m := realManager(t)
	for _, alg := range []string{"scaffold", "fednova"} {
		st := runToEnd(t, m, small(t, func(s *types.Spec) {
			s.Algorithm = alg
			s.DP.Enabled = false
			s.Client.Epochs = 2
			s.Client.Stragglers = 0.5
		}))
		if st.State != types.StateCompleted || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.6 {
			t.Errorf("%s: %s, test %+v", alg, st.State, st.LatestTest)
		}
	}
}

// A job whose algorithm keeps state (SCAFFOLD's control variates, FedAdam's
// moments) stops with the server mid-way and resumes from its checkpoint in
// a new manager over the same database, committing every round once.
func TestStatefulAlgorithmsResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dpfl.db")
	open := func() (*Manager, *storage.DB) {
		db, err := storage.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return managerOn(t, db, Options{FashionMNIST: fakeFashionMNIST(smallTrain)}), db
	}
	m, db := open()
	// Each job waits before its round 4 until the server stops: the
	// restart finds 3 committed rounds, whatever the machine's speed.
	const rounds, stopAt = 8, 4
	waiting := make(chan string, 2)
	m.beforeRound = func(ctx context.Context, id string, r int) {
		if r == stopAt {
			waiting <- id
			<-ctx.Done()
		}
	}
	var ids []string
	for _, edit := range []func(*types.Spec){
		func(s *types.Spec) { s.Algorithm, s.DP.Enabled = "scaffold", false },
		func(s *types.Spec) { s.Server.Optimizer, s.Server.LR = "adam", 0.01 },
	} {
		j, err := m.Submit(small(t, func(s *types.Spec) { s.Rounds = rounds; edit(s) }))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	<-waiting
	<-waiting
	if err := m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if j, _ := db.Job(id); j.State.Terminal() || j.Round != stopAt-1 {
			t.Fatalf("job %s %s at round %d before the restart, want running at %d", id, j.State, j.Round, stopAt-1)
		}
	}
	db.Close()
	m, db = open()
	defer db.Close()
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		m.Wait(id)
		st, err := m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != types.StateCompleted || st.Round != rounds {
			t.Fatalf("resumed %s (%s): %s at round %d: %s", id, st.Spec.Algorithm, st.State, st.Round, st.Message)
		}
		met, err := m.Metrics(id)
		if err != nil || len(met) != rounds {
			t.Fatalf("%s: %d rounds of metrics, %v", id, len(met), err)
		}
		for i, r := range met {
			if r.Round != i+1 {
				t.Fatalf("%s: metrics of rounds %+v", id, met)
			}
		}
	}
}

// FedProx's Synthetic(1, 1) trains as a job: 30 devices, logistic
// regression on 60 features, well above chance (10%); a CNN does not fit
// 60 features and is refused at submit, naming the model.
func TestSyntheticJob(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Dataset = "synthetic"
		s.Synthetic = types.SyntheticSpec{Alpha: 1, Beta: 1}
		s.Population.Size = 30
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 10}
		s.Client = types.ClientSpec{Epochs: 5, BatchSize: 10, LR: 0.01, ProxMu: 1}
		s.DP.Enabled = false
		s.Rounds = 30
	}))
	if st.State != types.StateCompleted || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.4 {
		t.Fatalf("synthetic job: %s, test %+v: %s", st.State, st.LatestTest, st.Message)
	}
	_, err := m.Submit(small(t, func(s *types.Spec) { s.Dataset, s.Model, s.Population.Size = "synthetic", "cnn", 30 }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "model" {
		t.Fatalf("cnn on synthetic: %v, want a validation error on model", err)
	}
}

// A LEAF dataset (its JSON format, written here) is a job's population:
// its users become population.clients at submit, and an unreadable one
// is refused, naming leaf. The labels partition runs too.
func TestLEAFAndLabelsJobs(t *testing.T) {
	dir := t.TempDir()
	m := managerWithDataRoot(t, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	users := map[string]any{}
	var names []string
	var counts []int
	for u := range 6 {
		var xs [][]float64
		var ys []int
		for range 30 {
			y := rng.IntN(3)
			x := make([]float64, 4)
			for j := range x {
				x[j] = rng.NormFloat64() * 0.3
			}
			x[y] += 2
			xs, ys = append(xs, x), append(ys, y)
		}
		name := fmt.Sprintf("f%04d", u)
		names, counts = append(names, name), append(counts, 30)
		users[name] = map[string]any{"x": xs, "y": ys}
	}
	for _, split := range []string{"train", "test"} {
		b, _ := json.Marshal(map[string]any{"users": names, "num_samples": counts, "user_data": users})
		os.MkdirAll(filepath.Join(dir, split), 0o755)
		if err := os.WriteFile(filepath.Join(dir, split, "all.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Dataset = "leaf"
		s.LEAF = types.LEAFSpec{TrainDir: "train", TestDir: "test", Classes: 3} // under the data root
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 3}
		s.DP.Enabled = false
	}))
	if st.State != types.StateCompleted || st.Spec.Population.Size != 6 || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.8 {
		t.Fatalf("leaf job: %s, %d clients, test %+v: %s", st.State, st.Spec.Population.Size, st.LatestTest, st.Message)
	}
	_, err := m.Submit(small(t, func(s *types.Spec) { s.Dataset, s.LEAF.TrainDir, s.LEAF.TestDir = "leaf", "nope", "test" }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "leaf.train_dir" {
		t.Fatalf("missing LEAF directory: %v, want a validation error on leaf.train_dir", err)
	}
	st = runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Population.Partition, s.Population.LabelsPerClient = "labels", 2
		s.DP.Enabled = false
	}))
	// Cohorts are sampled from crypto/rand, so accuracy varies from run to
	// run: over 100 runs it ranged 0.42–0.70 after 10 rounds. The check is
	// that training learns (three times chance, 0.1), not how well.
	if st.State != types.StateCompleted || st.LatestTest == nil || st.LatestTest.Test.Accuracy < 0.3 {
		t.Fatalf("labels partition job: %s, test %+v: %s", st.State, st.LatestTest, st.Message)
	}
}

// Every round records its participation and the round-time model's
// estimate; the job's total is the running sum, and
// GET /v1/jobs/{id}/rounds (Manager.Rounds) shows both. With a tenth of
// the cohort dropped as stragglers and no other participation effect,
// every selected user either reported or was a straggler.
func TestRoundsRecordParticipationAndTime(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.DP.Enabled = false // under DP these counts are private (TestDPReleases)
		s.Client.Stragglers, s.Client.DropStragglers = 0.1, true
		s.RoundTime.ComputeSigma = 0.5
	}))
	rs, err := m.Rounds(st.ID)
	if err != nil || len(rs) != st.Spec.Rounds {
		t.Fatalf("%d round records, err %v", len(rs), err)
	}
	var total float64
	straggled := 0
	for _, r := range rs {
		total += r.EstimatedSeconds
		straggled += r.Stragglers
		if r.EstimatedSeconds < st.Spec.RoundTime.ComputeOverhead || math.Abs(r.EstimatedTotalSeconds-total) > 1e-6*total {
			t.Fatalf("round %d: estimate %v s, total %v s (running sum %v)", r.Round, r.EstimatedSeconds, r.EstimatedTotalSeconds, total)
		}
		if r.Unavailable+r.DroppedOut+r.Late != 0 || r.Reported+r.Stragglers != r.Selected {
			t.Fatalf("round %d: %+v", r.Round, r)
		}
	}
	if straggled == 0 {
		t.Fatal("no straggler in 10 rounds of ~30 clients at rate 0.1")
	}
	if _, err := m.Rounds("job-nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}

// Availability, dropouts and over-selection: without DP every selected
// user is accounted for as offline, dropped, late or reported, and no
// round keeps more than the target q·N. Under DP the ledger accounts the
// sampling the server performs (rate q·(1+o)) at sensitivity 2C (z/2),
// since a report kept by over-selection can push another out
// (TestSensitivityConformance). A fixed cohort drawn among available
// users is refused under DP.
func TestParticipation(t *testing.T) {
	m := manager(t)
	part := types.ParticipationSpec{DiurnalAmplitude: 0.5, PeriodRounds: 4, DropoutRate: 0.1, OverSelection: 0.5}
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Participation, s.DP.Enabled = part, false }))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	met, err := m.Metrics(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	offline := 0
	for _, r := range met {
		if r.Reported > 30 || r.Unavailable+r.DroppedOut+r.Late+r.Reported != r.Selected {
			t.Fatalf("round %d: %+v", r.Round, r)
		}
		offline += r.Unavailable
	}
	if offline == 0 {
		t.Fatal("diurnal amplitude 0.5 left every selected user online")
	}

	st = runToEnd(t, m, small(t, func(s *types.Spec) { s.Participation = part }))
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := accounting.UnmarshalEvent(rep.Events[0].Event)
	if err != nil {
		t.Fatal(err)
	}
	want := accounting.PoissonSampled{SamplingProbability: 0.1 * 1.5, Event: accounting.Gaussian{NoiseMultiplier: 0.5}}
	if ps, ok := ev.(accounting.PoissonSampled); !ok || math.Abs(ps.SamplingProbability-want.SamplingProbability) > 1e-12 || ps.Event != want.Event {
		t.Fatalf("ledger event %+v, want %+v", ev, want)
	}

	_, err = m.Submit(small(t, func(s *types.Spec) {
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 20}
		s.Participation = types.ParticipationSpec{DiurnalAmplitude: 0.8, PeriodRounds: 10, AmongAvailable: true}
	}))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "participation.among_available" {
		t.Fatalf("among_available under DP: %v, want a validation error", err)
	}
}

// A population of a million users derived on demand trains like a
// partitioned one: users that never train are scored separately (mean,
// 10th percentile, minimum), eval users are kept out of every cohort, and
// the status notes that users share examples.
func TestOnDemandPopulationJob(t *testing.T) {
	m := realManager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Population = types.PopulationSpec{Source: "simulated", Size: 1_000_000, Partition: "dirichlet", DirichletAlpha: 1,
			OnDemand: true, SizeMu: math.Log(20), SizeSigma: 0.5, MaxExamples: 200, EvalUserFraction: 0.01}
		s.Sampling.Rate = 0.0001
		s.EvalEvery = 10
		s.DP.Enabled = false // evaluation users would have no protection under DP
	}))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	ev := st.LatestTest
	// Chance is 0.1; 10 rounds of ~100 users reach about 0.6.
	if ev == nil || ev.Test.Accuracy < 0.45 || ev.EvalUsers == nil || ev.EvalUsers.Clients != 1000 {
		t.Fatalf("evaluation %+v %+v", ev.Test, ev.EvalUsers)
	}
	u := ev.EvalUsers
	if !(u.MinAccuracy <= u.P10Accuracy && u.P10Accuracy < u.MeanAccuracy && u.MeanAccuracy > 0.4) {
		t.Fatalf("per-user accuracy distribution %+v", u)
	}
	if len(st.Notes) != 1 || !strings.Contains(st.Notes[0], "group level") {
		t.Fatalf("notes %q, want one on examples shared across users", st.Notes)
	}
	ds, _ := m.dataset()
	pop, err := data.NewOnDemand(ds.train, data.OnDemandOptions{NumClients: 5000, SizeMu: 2, MaxExamples: 50, EvalUserFraction: 0.3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	cohort := make([]int, 5000)
	for i := range cohort {
		cohort[i] = i
	}
	kept := trainingUsers(pop, cohort)
	for _, u := range kept {
		if pop.IsEvalUser(u) {
			t.Fatalf("eval user %d kept in a training cohort", u)
		}
	}
	if n := len(kept); n < 3300 || n > 3700 {
		t.Fatalf("%d of 5000 users train with an eval fraction of 0.3", n)
	}
}
