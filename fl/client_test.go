package fl

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// A client's update depends only on its own data and seed, never on what
// the trainer (a simulation worker) trained before: otherwise one user
// more would change the updates of every later user on that worker, and
// the clipped sum would move by more than C. The CNN's dropout masks are
// the state at risk (model.Seeder); every model is checked.
func TestClientUpdateIndependentOfEarlierClients(t *testing.T) {
	const dim, n = 784, 6
	ds := &data.Dataset{Dim: dim, Classes: 10}
	src := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		for range dim {
			ds.X = append(ds.X, src.Float32())
		}
		ds.Y = append(ds.Y, uint8(i%10))
	}
	a, b := []int32{0, 1, 2}, []int32{3, 4, 5}
	for _, name := range model.Names() {
		m, err := model.New(name, dim, 10)
		if err != nil {
			t.Fatal(err)
		}
		global := make([]float32, m.NumParams())
		m.Init(global, rand.New(rand.NewPCG(1, 1)))
		cfg := ClientConfig{Epochs: 1, BatchSize: 3, LR: 0.1}
		update := func(tr *clientTrainer, idx []int32, id uint64) []float32 {
			delta := make([]float32, len(global))
			tr.train(delta, global, ds, idx, 1, 0.1, rand.New(rand.NewPCG(9, id)))
			return delta
		}
		fresh := update(newClientTrainer(m, cfg), b, 2)
		used := newClientTrainer(m, cfg)
		update(used, a, 1)
		if after := update(used, b, 2); !slices.Equal(fresh, after) {
			t.Errorf("%s: client 2's update changed because the trainer trained client 1 first", name)
		}
	}
}

// refUpdate is ClientUpdate written out from LossGrad in float64: local
// SGD on ∇L + μ(x − x_t) + corr with heavy-ball momentum (buffer from 0),
// drawing the dropout seed and the shuffles from rng as the trainer does.
func refUpdate(m model.Model, cfg ClientConfig, global, corr []float32, ds *data.Dataset, idx []int32, rng *rand.Rand) []float32 {
	ws := m.NewWorkspace(cfg.BatchSize)
	if s, ok := ws.(model.Seeder); ok {
		s.Seed(rng.Uint64(), rng.Uint64())
	}
	x := slices.Clone(global)
	v := make([]float64, len(x))
	grad := make([]float32, len(x))
	order := slices.Clone(idx)
	for range cfg.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for s := 0; s < len(order); s += cfg.BatchSize {
			b := order[s:min(s+cfg.BatchSize, len(order))]
			bx, by := make([]float32, len(b)*ds.Dim), make([]uint8, len(b))
			ds.Gather(bx, by, b)
			ws.LossGrad(x, bx, by, grad)
			for i := range x {
				g := float64(grad[i]) + cfg.ProxMu*float64(x[i]-global[i])
				if corr != nil {
					g += float64(corr[i])
				}
				v[i] = cfg.Momentum*v[i] + g
				x[i] -= float32(cfg.LR * v[i])
			}
		}
	}
	for i := range x {
		x[i] -= global[i]
	}
	return x
}

// Every way the trainer takes a step (the fused model.Stepper step for
// plain SGD, with FedProx's term and SCAFFOLD's correction added around
// it; LossGrad with momentum) gives the reference's update, for the
// dense models and the CNN (whose dropout masks both draw alike).
func TestClientUpdateMatchesReferenceEveryPath(t *testing.T) {
	ds := blobs(60, 6)
	idx := []int32{2, 5, 7, 11, 13, 17, 19, 23, 29}
	for _, name := range model.Names() {
		m, _ := model.New(name, 784, 10)
		global := make([]float32, m.NumParams())
		m.Init(global, rand.New(rand.NewPCG(1, 1)))
		corr := make([]float32, m.NumParams())
		src := rand.New(rand.NewPCG(2, 2))
		for i := range corr {
			corr[i] = float32(0.01 * src.NormFloat64())
		}
		for _, c := range []struct {
			cfg  ClientConfig
			corr []float32
		}{
			{ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05}, nil},
			{ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05, ProxMu: 1}, nil},
			{ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05}, corr},
			{ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05, ProxMu: 0.5}, corr},
			{ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05, Momentum: 0.9, ProxMu: 0.3}, corr},
		} {
			tr := newClientTrainer(m, c.cfg)
			tr.correction = c.corr
			got := make([]float32, m.NumParams())
			tr.train(got, global, ds, idx, c.cfg.Epochs, float32(c.cfg.LR), rand.New(rand.NewPCG(9, 9)))
			want := refUpdate(m, c.cfg, global, c.corr, ds, idx, rand.New(rand.NewPCG(9, 9)))
			var scale float64
			for _, w := range want {
				scale = max(scale, math.Abs(float64(w)))
			}
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 1e-4*(math.Abs(float64(want[i]))+1e-2*scale)+1e-7 {
					t.Fatalf("%s %+v (correction %v): Δ[%d] = %v, reference %v", name, c.cfg, c.corr != nil, i, got[i], want[i])
				}
			}
		}
	}
}

// The steady state of a worker allocates nothing, for every model and
// every step path (the MLP alone is checked in fedavg_test.go).
func TestLocalTrainingDoesNotAllocateEveryPath(t *testing.T) {
	ds := blobs(40, 3)
	idx := []int32{1, 5, 9, 13, 17, 21, 25}
	for _, name := range model.Names() {
		m, _ := model.New(name, 784, 10)
		params := make([]float32, m.NumParams())
		m.Init(params, rand.New(rand.NewPCG(1, 1)))
		for _, cfg := range []ClientConfig{
			{Epochs: 1, BatchSize: 4, LR: 0.05},
			{Epochs: 1, BatchSize: 4, LR: 0.05, ProxMu: 0.1},
			{Epochs: 1, BatchSize: 4, LR: 0.05, Momentum: 0.5},
		} {
			tr := newClientTrainer(m, cfg)
			delta := make([]float32, m.NumParams())
			pcg := rand.NewPCG(0, 0)
			rng := rand.New(pcg)
			for _, corr := range [][]float32{nil, make([]float32, m.NumParams())} {
				tr.correction = corr
				run := func() { pcg.Seed(1, 2); tr.train(delta, params, ds, idx, 1, 0.05, rng) }
				run()
				if a := testing.AllocsPerRun(2, run); a != 0 {
					t.Errorf("%s %+v (correction %v): local training allocates %v times per client", name, cfg, corr != nil, a)
				}
			}
		}
	}
}

// BenchmarkLocalStepCNN is BenchmarkLocalStep (fedavg_test.go) with the
// CNN: one client of 60 examples (three steps of batch 20, the bench job's
// mean client) on a worker's reused buffers, 0 allocs/op.
func BenchmarkLocalStepCNN(b *testing.B) {
	ds := blobs(200, 3)
	m, _ := model.New("cnn", 784, 10)
	params := make([]float32, m.NumParams())
	m.Init(params, rand.New(rand.NewPCG(1, 1)))
	tr := newClientTrainer(m, ClientConfig{Epochs: 1, BatchSize: 20, LR: 0.05})
	delta := make([]float32, m.NumParams())
	idx := make([]int32, 60)
	for i := range idx {
		idx[i] = int32(i * 3)
	}
	pcg := rand.NewPCG(0, 0)
	rng := rand.New(pcg)
	tr.train(delta, params, ds, idx, 1, 0.05, rng)
	b.ReportAllocs()
	for b.Loop() {
		pcg.Seed(1, 2)
		tr.train(delta, params, ds, idx, 1, 0.05, rng)
	}
	b.ReportMetric(float64(len(idx)*b.N)/b.Elapsed().Seconds(), "examples/s")
}
