package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// blobs is a 784-dimensional, 10-class dataset of well-separated Gaussian
// clusters, small enough for unit tests.
func blobs(n int, seed uint64) *data.Dataset {
	const dim, classes = 784, 10
	r := rand.New(rand.NewPCG(seed, 99))
	centers := make([]float32, classes*dim)
	for i := range centers {
		centers[i] = float32(r.Float64())
	}
	ds := &data.Dataset{X: make([]float32, n*dim), Y: make([]uint8, n), Dim: dim, Classes: classes}
	for i := range n {
		c := i % classes
		ds.Y[i] = uint8(c)
		for j := range dim {
			ds.X[i*dim+j] = centers[c*dim+j] + float32(r.NormFloat64()*0.3)
		}
	}
	return ds
}

func population(t *testing.T, ds *data.Dataset, clients int) *data.Federated {
	t.Helper()
	fed, err := data.NewFederated(ds, data.Options{NumClients: clients, Partitioner: data.IID{}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return fed
}

// One round with a single client, no clipping in effect, no noise and
// server SGD with η_s = 1 must equal that client's local SGD exactly
// (Algorithm 1 with |S| = 1: x_{t+1} = x_t + Δ_1 = x_1).
func TestRoundWithOneClientIsLocalSGD(t *testing.T) {
	ds := blobs(200, 1)
	fed := population(t, ds, 4)
	m, _ := model.New("logreg", 784, 10)
	cfg := ClientConfig{Epochs: 2, BatchSize: 7, LR: 0.05}
	sec, _ := dp.NewSecureRand()
	for _, agg := range []Aggregator{
		WeightedMean{},
		&GaussianAggregator{Params: dp.Params{ClipNorm: 1e9, NoiseMultiplier: 0}, Rand: sec},
	} {
		alg := &FedAvg{Model: m, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: agg, Workers: 2, Seed: 5}
		params := make([]float32, m.NumParams())
		if _, err := alg.Round(context.Background(), 3, params, fed, []int{2}, 1); err != nil {
			t.Fatal(err)
		}
		// Brute force: replay the client's local SGD with the same shuffles.
		want := make([]float32, m.NumParams())
		tr := newClientTrainer(m, cfg)
		delta := make([]float32, m.NumParams())
		tr.train(delta, want, ds, fed.Client(2).Train, cfg.Epochs, float32(cfg.LR), rand.New(rand.NewPCG(5, 3<<32|2)))
		for i := range want {
			want[i] += delta[i]
		}
		for i := range want {
			if math.Abs(float64(params[i]-want[i])) > 1e-6 {
				t.Fatalf("%T: param %d = %v, local SGD gives %v", agg, i, params[i], want[i])
			}
		}
	}
}

// Without DP the aggregate is the example-weighted mean of the deltas
// (McMahan et al. 2017); computed here by brute force for clients of
// unequal sizes.
func TestWeightedMeanAggregation(t *testing.T) {
	d := 3
	w := WeightedMean{}
	a, b := w.NewAccumulator(d), w.NewAccumulator(d)
	a.Add([]float32{1, 0, 0}, 1)
	b.Add([]float32{0, 3, 0}, 3)
	a.Add([]float32{0, 0, 6}, 0) // a client without examples weighs nothing
	dst := make([]float32, d)
	st, err := w.Release(dst, []Accumulator{a, b}, 99)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0.25, 2.25, 0}
	for i := range want {
		if math.Abs(float64(dst[i]-want[i])) > 1e-6 {
			t.Fatalf("weighted mean %v, want %v", dst, want)
		}
	}
	if st.Clients != 3 {
		t.Fatalf("clients %d", st.Clients)
	}
	if err := a.Add([]float32{float32(math.NaN()), 0, 0}, 5); err == nil {
		t.Fatal("NaN update accepted")
	}
}

// DP-FedAvg learns the separable blobs: accuracy far above chance (10%)
// after a few rounds, with noise and clipping on (the worker count does
// not matter: TestRoundsAreTheSameForEveryWorkerCount).
func TestDPFedAvgLearns(t *testing.T) {
	ds := blobs(2000, 2)
	test := blobs(500, 2)
	fed := population(t, ds, 100)
	m, _ := model.New("logreg", 784, 10)
	sec, _ := dp.NewSecureRand()
	alg := &FedAvg{
		Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
		Aggregate: &GaussianAggregator{Params: dp.Params{ClipNorm: 1, NoiseMultiplier: 0.5}, Rand: sec},
		Seed:      1,
	}
	params := make([]float32, m.NumParams())
	s := Poisson{Q: 0.3}
	for r := 1; r <= 15; r++ {
		st, err := alg.Round(context.Background(), r, params, fed, s.Sample(100, sec), s.ExpectedSize(100))
		if err != nil {
			t.Fatal(err)
		}
		if st.Examples == 0 || st.ClippedFraction < 0 || st.ClippedFraction > 1 {
			t.Fatalf("round %d stats %+v", r, st)
		}
	}
	got := NewEvaluator(m, 2).Dataset(params, test)
	if got.Accuracy < 0.9 || got.Examples != 500 {
		t.Fatalf("test metrics %+v, want accuracy ≥ 0.9", got)
	}
}

func TestRoundCancelledLeavesParams(t *testing.T) {
	ds := blobs(100, 3)
	fed := population(t, ds, 10)
	m, _ := model.New("logreg", 784, 10)
	alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 5, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}}
	params := make([]float32, m.NumParams())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := alg.Round(ctx, 1, params, fed, []int{0, 1, 2}, 3); err == nil {
		t.Fatal("cancelled round succeeded")
	}
	for _, v := range params {
		if v != 0 {
			t.Fatal("cancelled round changed the model")
		}
	}
}

func TestEvaluatorMatchesHeldOutCounts(t *testing.T) {
	ds := blobs(300, 4)
	fed, err := data.NewFederated(ds, data.Options{NumClients: 10, Partitioner: data.IID{}, Seed: 2, HeldOutFraction: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.New("logreg", 784, 10)
	params := make([]float32, m.NumParams())
	cm, ok := NewEvaluator(m, 3).Clients(params, fed, nil)
	if !ok {
		t.Fatal("no held-out data reported")
	}
	held := 0
	for _, id := range fed.ClientIDs() {
		held += len(fed.Client(id).HeldOut)
	}
	// Zero parameters: uniform softmax, loss exactly log 10 per example.
	if cm.Weighted.Examples != held || math.Abs(cm.Weighted.Loss-math.Log(10)) > 1e-5 {
		t.Fatalf("client metrics %+v, want %d examples at loss log(10)", cm, held)
	}

	// Random parameters spread the per-client accuracies; their mean, 10th
	// percentile (nearest rank) and minimum, computed client by client.
	m.Init(params, rand.New(rand.NewPCG(3, 3)))
	for i := range params {
		params[i] = float32(0.02 * rand.New(rand.NewPCG(uint64(i), 7)).NormFloat64())
	}
	ids := []int{0, 2, 3, 5, 6, 7, 8, 9}
	cm, _ = NewEvaluator(m, 2).Clients(params, fed, ids)
	ws := m.NewWorkspace(64)
	var accs []float64
	for _, id := range ids {
		idx := fed.Client(id).HeldOut
		x, y := make([]float32, len(idx)*784), make([]uint8, len(idx))
		ds.Gather(x, y, idx)
		_, c := ws.Evaluate(params, x, y)
		accs = append(accs, float64(c)/float64(len(idx)))
	}
	slices.Sort(accs)
	var mean float64
	for _, a := range accs {
		mean += a / float64(len(accs))
	}
	if cm.Clients != len(ids) || math.Abs(cm.MeanAccuracy-mean) > 1e-12 || cm.MinAccuracy != accs[0] || cm.P10Accuracy != accs[0] {
		t.Fatalf("per-client distribution %+v, brute force mean %v min %v (10th percentile of 8 is the lowest)", cm, mean, accs[0])
	}
	if accs[0] == accs[len(accs)-1] {
		t.Fatal("all clients score alike: the check cannot tell the statistics apart")
	}
}

// BenchmarkLocalStep times one client's local training (ClientUpdate of
// McMahan et al. 2017, Algorithm 1) with the MLP at batch 20 on a worker's
// reused buffers: the whole steady state of a worker, which must report 0
// allocs/op. examples/s is one goroutine's training throughput.
func BenchmarkLocalStep(b *testing.B) {
	ds := blobs(400, 3)
	m, _ := model.New("mlp", 784, 10)
	params := make([]float32, m.NumParams())
	m.Init(params, rand.New(rand.NewPCG(1, 1)))
	tr := newClientTrainer(m, ClientConfig{Epochs: 1, BatchSize: 20, LR: 0.05})
	delta := make([]float32, m.NumParams())
	idx := make([]int32, 100) // a client of 100 examples: 5 local steps
	for i := range idx {
		idx[i] = int32(i * 3)
	}
	pcg := rand.NewPCG(0, 0)
	rng := rand.New(pcg)
	tr.train(delta, params, ds, idx, 1, 0.05, rng) // sizes the shuffle buffer
	b.ReportAllocs()
	for b.Loop() {
		pcg.Seed(1, 2)
		tr.train(delta, params, ds, idx, 1, 0.05, rng)
	}
	b.ReportMetric(float64(len(idx)*b.N)/b.Elapsed().Seconds(), "examples/s")
}

func TestLocalTrainingDoesNotAllocate(t *testing.T) {
	ds := blobs(100, 3)
	m, _ := model.New("mlp", 784, 10)
	params := make([]float32, m.NumParams())
	tr := newClientTrainer(m, ClientConfig{Epochs: 2, BatchSize: 20, LR: 0.05})
	delta := make([]float32, m.NumParams())
	idx := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69, 73, 77, 81, 85, 89}
	pcg := rand.NewPCG(0, 0)
	rng := rand.New(pcg)
	tr.train(delta, params, ds, idx, 2, 0.05, rng)
	if a := testing.AllocsPerRun(5, func() { pcg.Seed(1, 2); tr.train(delta, params, ds, idx, 2, 0.05, rng) }); a != 0 {
		t.Fatalf("local training allocates %v times per client", a)
	}
}
