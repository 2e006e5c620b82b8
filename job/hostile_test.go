package job

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/storage"
)

// hostileCases are job bodies (over DefaultSpec) whose numbers are each
// finite JSON but outside the range the computation can carry, and the
// field whose rule must refuse them. Every one of them was accepted once
// and then crashed the server, allocated without bound, or stored NaN
// (issue 13).
var hostileCases = []struct{ body, field string }{
	// σ = z·C overflows float64 to +Inf and the noise sampler panics.
	{`{"dp":{"noise_multiplier":1e308,"clip_norm":1e308}}`, "dp.clip_norm"},
	{`{"dp":{"noise_multiplier":1e308}}`, "dp.noise_multiplier"},
	{`{"dp":{"noise_multiplier":1e-300}}`, "dp.noise_multiplier"},
	{`{"dp":{"clip_norm":1e-300}}`, "dp.clip_norm"},
	// Each within its own bound, their product is not.
	{`{"dp":{"noise_multiplier":1e4,"clip_norm":1e3}}`, "dp.noise_multiplier"},
	{`{"sampling":{"rate":1e-300}}`, "sampling.rate"},
	// q·N = 0.6: the expected cohort, the DP denominator, is below one user.
	{`{"sampling":{"rate":1e-4}}`, "sampling.rate"},
	{`{"server":{"lr":1e300}}`, "server.lr"},
	{`{"server":{"lr":1e-300}}`, "server.lr"},
	{`{"client":{"lr":1e300}}`, "client.lr"},
	{`{"client":{"prox_mu":1e300}}`, "client.prox_mu"},
	{`{"dp":{"epsilon_budget":1e300}}`, "dp.epsilon_budget"},
	{`{"dp":{"target_epsilon":1e300}}`, "dp.target_epsilon"},
	{`{"dp":{"target_epsilon":1e-300}}`, "dp.target_epsilon"},
	{`{"dp":{"delta":5e-324}}`, "dp.delta"},
	{`{"dataset":"synthetic","population":{"size":100},"synthetic":{"beta":1e300}}`, "synthetic.beta"},
	{`{"population":{"dirichlet_alpha":1e-300}}`, "population.dirichlet_alpha"},
	{`{"population":{"partition":"labels","labels_per_client":2,"labels_sigma":1e300}}`, "population.labels_sigma"},
	{`{"round_time":{"down_bandwidth":1e-300}}`, "round_time.down_bandwidth"},
	{`{"round_time":{"compute_overhead":1e308}}`, "round_time.compute_overhead"},
}

// Finding 1 and 3 of issue 13: numbers that overflow, underflow or make
// the computation meaningless are refused at submission, naming the field
// and its bound.
func TestHostileNumbersRefused(t *testing.T) {
	for _, c := range hostileCases {
		s, err := ParseSpec([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		err = Validate(s, 60000)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: got %v, want an error on %s", c.body, err, c.field)
			continue
		}
		// The rule states the bound, as a number.
		if !strings.ContainsAny(ve.Rule, "0123456789") {
			t.Errorf("%s: rule %q names no bound", c.body, ve.Rule)
		}
	}
}

// With several broken rules, Validate reports the same one every time
// (it once ranged over a map).
func TestValidateReportsTheFirstRuleDeterministically(t *testing.T) {
	s, err := ParseSpec([]byte(`{"client":{"lr_schedule":{"kind":"a"}},"server":{"lr_schedule":{"kind":"b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		var ve *ValidationError
		if err := Validate(s, 60000); !errors.As(err, &ve) || ve.Field != "client.lr_schedule.kind" {
			t.Fatalf("got %v, want client.lr_schedule.kind first", err)
		}
	}
}

// Finding 3: a job that diverges (here a non-DP MLP at learning rates
// within their bounds but far too large) fails with a message that says
// so, stores no NaN, and every read path answers with JSON.
func TestDivergingJobFailsAndReadsStayValid(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		// On the code before issue 13 this failed with "encoding
		// metrics: json: unsupported value: NaN".
		s.Model, s.DP.Enabled, s.Rounds = "mlp", false, 20
		s.Client.LR, s.Server.LR = 1000, 1000
		// Every client in every round, so that the run does not depend
		// on crypto/rand cohorts: with Poisson cohorts, lr 10/1000
		// diverged in some runs and settled on dead ReLUs in others.
		s.Population.Size, s.Sampling = 30, types.SamplingSpec{Scheme: "fixed", CohortSize: 30}
	}))
	if st.State != types.StateFailed || !strings.Contains(st.Message, "training diverged at round") || !strings.Contains(st.Message, "client.lr") {
		t.Fatalf("%s: %q, want a failure saying training diverged", st.State, st.Message)
	}
	reads := map[string]func() (any, error){
		"Get":     func() (any, error) { return m.Get(st.ID) },
		"List":    func() (any, error) { return m.List() },
		"Metrics": func() (any, error) { return m.Metrics(st.ID) },
		"Rounds":  func() (any, error) { return m.Rounds(st.ID) },
		"Privacy": func() (any, error) { return m.Privacy(st.ID) },
		"Model":   func() (any, error) { return m.Model(st.ID) },
	}
	for name, read := range reads {
		v, err := read()
		if err != nil {
			// Only "no committed round yet" may be refused, as a conflict
			// (409), never as a server error.
			if name == "Model" && errors.Is(err, ErrConflict) {
				continue
			}
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("%s does not encode: %v", name, err)
		}
	}
	ex, err := m.Model(st.ID)
	if err == nil {
		for i, v := range ex.Params {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("stored model parameter %d is %v", i, v)
			}
		}
	}
}

// A checkpoint that holds non-finite parameters (a database written
// before runners checked every round) is refused as a conflict (409),
// never a failure to encode (500).
func TestModelWithNonFiniteCheckpointIsAConflict(t *testing.T) {
	m := manager(t)
	storeRunning(t, m.db, "job-nan", specJSON(t, small(t, func(s *types.Spec) { s.DP.Enabled = false })))
	params := make([]float32, 7850)
	params[3] = float32(math.NaN())
	if err := m.db.CommitRound("job-nan", 1, json.RawMessage(`{"round":1}`), storage.Checkpoint{Params: params}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Model("job-nan"); !errors.Is(err, ErrConflict) {
		t.Fatalf("Model: %v, want a conflict", err)
	}
	st, err := m.Get("job-nan")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(st); err != nil {
		t.Fatal(err)
	}
}

// randomDataset is n examples of dim uniform features and labels < 10.
func randomDataset(n, dim int) *data.Dataset {
	rng := rand.New(rand.NewPCG(1, 2))
	d := &data.Dataset{Dim: dim, Classes: 10, X: make([]float32, n*dim), Y: make([]uint8, n)}
	for i := range d.X {
		d.X[i] = rng.Float32()
	}
	for i := range d.Y {
		d.Y[i] = uint8(rng.IntN(10))
	}
	return d
}

// allocated is the bytes that f allocates (runtime.MemStats.TotalAlloc:
// every allocation, even those already garbage).
func allocated(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// The memory estimate is a real bound and not a wild one: for the MLP
// and the CNN at two batch sizes each, the parts that cover a round's
// training (activations, the worker's model copies, the server's
// buffers) are at least what setting up and training one client at that
// batch size allocates, and at most 4 times it; the evaluator's part
// likewise covers fl.NewEvaluator.
func TestMemoryEstimateCoversAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the CNN")
	}
	for _, c := range []struct {
		model string
		batch int
	}{{"mlp", 20}, {"mlp", 2000}, {"cnn", 10}, {"cnn", 100}} {
		spec := DefaultSpec()
		spec.Model, spec.Client.BatchSize = c.model, c.batch
		mdl, err := model.New(c.model, 784, 10)
		if err != nil {
			t.Fatal(err)
		}
		base := randomDataset(c.batch, 784)
		idx := make([]int32, c.batch)
		for i := range idx {
			idx[i] = int32(i)
		}
		pop := &harnessPop{base: base, users: []data.Client{{ID: 0, Train: idx}}}
		params := make([]float32, mdl.NumParams())
		mdl.Init(params, rand.New(rand.NewPCG(1, 1)))
		server, err := fl.NewServerOptimizer(serverOptConfig(spec.Server))
		if err != nil {
			t.Fatal(err)
		}
		alg := fedAvg(spec, mdl, server, 1, 1)
		agg, err := aggregator(spec, spec.DP.NoiseMultiplier, 1, rand.New(rand.NewPCG(3, 4)), 1)
		if err != nil {
			t.Fatal(err)
		}
		alg.Aggregate = agg
		var roundErr error
		got := allocated(func() { _, roundErr = alg.Round(context.Background(), 1, params, pop, []int{0}, 1) })
		if roundErr != nil {
			t.Fatal(roundErr)
		}
		e := estimateMemory(spec, mdl, 1)
		est := e.Activations + e.WorkerModels + e.Server
		if est < got || est > 4*got {
			t.Errorf("%s at batch %d: estimate %d bytes for a round that allocated %d (ratio %.2f), want within [1, 4]", c.model, c.batch, est, got, float64(est)/float64(got))
		}
		gotEval := allocated(func() { fl.NewEvaluator(mdl, 1) })
		if e.Eval < gotEval || e.Eval > 4*gotEval {
			t.Errorf("%s: evaluator estimate %d bytes, allocated %d", c.model, e.Eval, gotEval)
		}
	}
}

// Findings 2 and 8: a job whose estimated peak memory exceeds the
// server's limit is refused at submission, naming the estimate, the limit
// and the field most responsible, and nothing is stored.
func TestAdmissionRefusesJobsOverTheMemoryLimit(t *testing.T) {
	m := managerOn(t, openDB(t), Options{MaxJobMemory: 1 << 30})
	cases := []struct{ body, field string }{
		// Finding 2: the CNN at the largest batch once asked for ~66 GB.
		{`{"model":"cnn","client":{"batch_size":100000}}`, "client.batch_size"},
		// SCAFFOLD keeps a model per client: 60,000 MLPs are 48 GB.
		{`{"algorithm":"scaffold","dp":{"enabled":false},"model":"mlp","population":{"size":60000}}`, "population.size"},
		// Secure aggregation holds every sampled update: q = 1 of 6,000.
		{`{"secure_aggregation":true,"model":"mlp","sampling":{"rate":1}}`, "sampling.rate"},
		{`{"secure_aggregation":true,"model":"mlp","sampling":{"scheme":"fixed","cohort_size":5000}}`, "sampling.cohort_size"},
	}
	for _, c := range cases {
		spec, err := ParseSpec([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		_, err = m.Submit(spec)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: got %v, want a refusal naming %s", c.body, err, c.field)
			continue
		}
		if !strings.Contains(ve.Rule, "estimated peak memory") || !strings.Contains(ve.Rule, "limit of 1.0 GiB") {
			t.Errorf("%s: %q names no estimate or limit", c.body, ve.Rule)
		}
	}
	// Whatever the layout, training at batch B holds conv1's output for
	// every example: B·26·26·32 floats, 8.65 GB at B = 100,000 (the CNN
	// once asked for ~66 GB there, finding 2).
	huge := DefaultSpec()
	huge.Model, huge.Client.BatchSize = "cnn", 100_000
	cnn, _ := model.New("cnn", 784, 10)
	if e, floor := estimateMemory(huge, cnn, 1).Total(), int64(100_000*26*26*32*4); e < floor {
		t.Errorf("the CNN at batch 100000 estimated at %d bytes on one worker, below conv1's activations alone (%d)", e, floor)
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("%d jobs stored", len(jobs))
	}
	// The default job fits with every model: the CNN's evaluator holds a
	// few MB per worker (model.WorkspaceBytes; it used to hold 256
	// examples' activations, 500 MB, and the CNN did not fit).
	for _, name := range []string{"logreg", "mlp", "cnn"} {
		s := DefaultSpec()
		s.Model = name
		mdl, _ := model.New(name, 784, 10)
		if err := m.checkMemory(s, mdl); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}

// Secure aggregation's fixed point must hold the clip norm: too large for
// the cohort, or below the rounding slack of the model, is refused at
// submission instead of failing every round.
func TestSecureAggregationEncodingChecked(t *testing.T) {
	m := manager(t)
	for _, c := range []struct {
		body  string
		rule  string
		model string
	}{
		{`{"secure_aggregation":true,"dp":{"clip_norm":1e4},"sampling":{"scheme":"fixed","cohort_size":6000}}`, "2^31", "logreg"},
		{`{"secure_aggregation":true,"model":"cnn","dp":{"clip_norm":1e-6}}`, "rounding slack", "cnn"},
	} {
		spec, err := ParseSpec([]byte(c.body))
		if err == nil {
			err = Validate(spec, 60000)
		}
		if err != nil {
			t.Fatalf("%s: %v (the spec alone is valid)", c.body, err)
		}
		_, err = m.Submit(spec)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "dp.clip_norm" || !strings.Contains(ve.Rule, c.rule) {
			t.Errorf("%s: got %v, want dp.clip_norm refused (%s)", c.body, err, c.rule)
		}
	}
}

// Finding 8: Submit beyond Options.MaxRunningJobs is refused with
// ErrCapacity, also under concurrent submissions, and a finished job
// frees its place. Devices jobs wait for devices, so they keep running
// without using the CPU.
func TestMaxRunningJobs(t *testing.T) {
	m := managerOn(t, openDB(t), Options{MaxRunningJobs: 2})
	const tries = 6
	ids := make(chan string, tries)
	var capacity, other atomicCounter
	var wg sync.WaitGroup
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := m.Submit(devicesSpec(t))
			switch {
			case err == nil:
				ids <- j.ID
			case errors.Is(err, ErrCapacity):
				capacity.add()
			default:
				other.add()
				t.Errorf("submit: %v", err)
			}
		}()
	}
	wg.Wait()
	close(ids)
	var started []string
	for id := range ids {
		started = append(started, id)
	}
	if len(started) != 2 || capacity.get() != tries-2 {
		t.Fatalf("%d started, %d refused for capacity, want 2 and %d", len(started), capacity.get(), tries-2)
	}
	if _, err := m.Cancel(started[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Submit(devicesSpec(t)); err != nil {
		t.Fatalf("after a job ended: %v", err)
	}
	if _, err := m.Submit(devicesSpec(t)); !errors.Is(err, ErrCapacity) {
		t.Fatalf("third running job: %v, want ErrCapacity", err)
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *atomicCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Calibration (dp.target_epsilon) runs in the submission request, so it
// has a deadline; past it the submission is refused on
// dp.target_epsilon and nothing is stored.
func TestCalibrationDeadline(t *testing.T) {
	m := manager(t)
	m.calibrationTimeout = 0 // expired before the first accountant run
	_, err := m.Submit(small(t, func(s *types.Spec) { s.DP.TargetEpsilon = 4 }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "dp.target_epsilon" || !strings.Contains(ve.Rule, "longer than") {
		t.Fatalf("got %v, want a refusal on dp.target_epsilon for the deadline", err)
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("%d jobs stored", len(jobs))
	}
	// Without a deadline the same search succeeds. Here (q = 10^-5 ≤ δ,
	// so any z gives ε = 0 at δ) the search would go below the bound: its
	// result is raised to the bound (more noise, never more ε).
	spec := small(t, func(s *types.Spec) {
		s.Population.OnDemand, s.Population.Size, s.Sampling.Rate = true, 100_000, 1e-5
		s.Rounds, s.DP.TargetEpsilon = 1, 1
	})
	if err := Validate(spec, 60000); err != nil {
		t.Fatal(err)
	}
	atBound := spec
	atBound.DP.NoiseMultiplier = MinNoiseMultiplier
	rep, err := accounting.Account([]accounting.Event{roundEvent(atBound)}, spec.DP.Delta)
	if err != nil || rep.Epsilon() > 1 {
		t.Fatalf("ε at z = %g is %v (%v): the case does not reach below the bound", MinNoiseMultiplier, rep.Epsilon(), err)
	}
	s, err := calibrate(context.Background(), spec)
	if err != nil || s.DP.NoiseMultiplier != MinNoiseMultiplier || s.DP.EpsilonBudget != 1 {
		t.Fatalf("calibrating for ε = 1: z = %v, budget %v, %v; want z at the bound %g", s.DP.NoiseMultiplier, s.DP.EpsilonBudget, err, MinNoiseMultiplier)
	}
}

// DefaultMaxJobMemory is half of the physical memory that sysinfo(2)
// reports (or of a smaller cgroup limit).
func TestDefaultMaxJobMemory(t *testing.T) {
	for in, want := range map[string]int64{
		"MemFree: 5 kB\nMemTotal:       16384 kB\n": 16384 * 1024,
		"MemTotal: 12 MB\n":                         0,
		"MemTotal: x kB\n":                          0,
		"":                                          0,
	} {
		if got := parseMemTotal([]byte(in)); got != want {
			t.Errorf("parseMemTotal(%q) = %d, want %d", in, got, want)
		}
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Skip(err)
	}
	total := int64(si.Totalram) * int64(si.Unit)
	want := total / 2
	if lim := cgroupLimit(); lim > 0 && lim < total {
		want = lim / 2
	}
	if got := DefaultMaxJobMemory(); got != want {
		t.Fatalf("DefaultMaxJobMemory = %d, want %d (half of %d bytes of RAM, cgroup limit %d)", got, want, total, cgroupLimit())
	}
}
