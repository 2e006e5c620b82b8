package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/simd"
)

// refClientUpdate is ClientUpdate written out independently: local SGD
// with heavy-ball momentum (buffer from 0) on the data gradient plus
// FedProx's μ(x − x_t), in the same shuffle order as the trainer.
func refClientUpdate(m model.Model, cfg ClientConfig, global []float32, fedIdx []int32, ds interface {
	Gather([]float32, []uint8, []int32)
}, dim int, rng *rand.Rand) []float32 {
	x := append([]float32(nil), global...)
	v := make([]float64, len(x))
	grad := make([]float32, len(x))
	ws := m.NewWorkspace(cfg.BatchSize)
	order := append([]int32(nil), fedIdx...)
	for range cfg.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for s := 0; s < len(order); s += cfg.BatchSize {
			b := order[s:min(s+cfg.BatchSize, len(order))]
			bx, by := make([]float32, len(b)*dim), make([]uint8, len(b))
			ds.Gather(bx, by, b)
			ws.LossGrad(x, bx, by, grad)
			for i := range x {
				g := float64(grad[i]) + cfg.ProxMu*float64(x[i]-global[i])
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

func TestClientUpdateMatchesReference(t *testing.T) {
	ds := blobs(120, 4)
	fed := population(t, ds, 3)
	m, _ := model.New("logreg", 784, 10)
	global := make([]float32, m.NumParams())
	m.Init(global, rand.New(rand.NewPCG(1, 1)))
	for _, cfg := range []ClientConfig{
		{Epochs: 2, BatchSize: 8, LR: 0.05, ProxMu: 1},
		{Epochs: 2, BatchSize: 8, LR: 0.05, Momentum: 0.9},
		{Epochs: 3, BatchSize: 5, LR: 0.02, Momentum: 0.5, ProxMu: 0.3},
	} {
		tr := newClientTrainer(m, cfg)
		got := make([]float32, m.NumParams())
		idx := fed.Client(1).Train
		tr.train(got, global, ds, idx, cfg.Epochs, float32(cfg.LR), rand.New(rand.NewPCG(9, 9)))
		want := refClientUpdate(m, cfg, global, idx, ds, ds.Dim, rand.New(rand.NewPCG(9, 9)))
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%+v: Δ[%d] = %v, reference %v", cfg, i, got[i], want[i])
			}
		}
		// A trainer reused across rounds starts its momentum from 0.
		again := make([]float32, m.NumParams())
		tr.train(again, global, ds, idx, cfg.Epochs, float32(cfg.LR), rand.New(rand.NewPCG(9, 9)))
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("%+v: second round differs at %d: momentum leaked across rounds", cfg, i)
			}
		}
	}
}

// The proximal term pulls the local model towards x_t: the client's
// update shrinks as μ grows (Li et al. 2020, eq. 2).
func TestProxShrinksUpdate(t *testing.T) {
	ds := blobs(200, 5)
	fed := population(t, ds, 2)
	m, _ := model.New("logreg", 784, 10)
	global := make([]float32, m.NumParams())
	prev := math.Inf(1)
	for _, mu := range []float64{0, 0.1, 1, 10} {
		cfg := ClientConfig{Epochs: 5, BatchSize: 10, LR: 0.05, ProxMu: mu}
		delta := make([]float32, m.NumParams())
		newClientTrainer(m, cfg).train(delta, global, ds, fed.Client(0).Train, cfg.Epochs, float32(cfg.LR), rand.New(rand.NewPCG(2, 2)))
		n := simd.Norm2(delta)
		if !(n < prev) {
			t.Fatalf("‖Δ‖ = %v at μ = %v, not below %v at the smaller μ", n, mu, prev)
		}
		prev = n
	}
}

// Stragglers with E = 1 run 1 + IntN(1) = 1 epoch: the round is bit for
// bit the round without stragglers, so the straggler draws do not disturb
// the shuffles (one worker, so the merge order is fixed too). Dropped
// stragglers leave nothing to aggregate.
func TestStragglers(t *testing.T) {
	ds := blobs(300, 6)
	fed := population(t, ds, 10)
	m, _ := model.New("logreg", 784, 10)
	cohort := []int{0, 2, 3, 5, 7, 9}
	run := func(stragglers float64, drop bool) ([]float32, RoundStats) {
		alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
			Aggregate: WeightedMean{}, Workers: 1, Seed: 3, Simulation: Simulation{Stragglers: stragglers, DropStragglers: drop}}
		params := make([]float32, m.NumParams())
		st, err := alg.Round(context.Background(), 1, params, fed, cohort, 6)
		if err != nil {
			t.Fatal(err)
		}
		return params, st
	}
	plain, _ := run(0, false)
	kept, st := run(1, false)
	if st.Stragglers != len(cohort) {
		t.Fatalf("fraction 1: %d stragglers of %d", st.Stragglers, len(cohort))
	}
	for i := range plain {
		if plain[i] != kept[i] {
			t.Fatalf("stragglers at E = 1 changed param %d: %v vs %v", i, kept[i], plain[i])
		}
	}
	dropped, st := run(1, true)
	if st.Stragglers != len(cohort) || st.Examples != 0 {
		t.Fatalf("all dropped: %+v", st)
	}
	for i := range dropped {
		if dropped[i] != 0 {
			t.Fatalf("a round of dropped stragglers moved the model")
		}
	}
}

func TestScheduleFactors(t *testing.T) {
	exp := Schedule{Kind: "exp_decay", DecayRate: 0.1, DecayEvery: 500}
	cos := Schedule{Kind: "cosine"}
	for _, c := range []struct {
		s    Schedule
		t, T int
		want float64
	}{
		{Schedule{}, 7, 10, 1},
		{exp, 1, 1500, 1}, {exp, 500, 1500, 1}, {exp, 501, 1500, 0.1}, {exp, 1001, 1500, 0.01},
		{cos, 1, 100, 1}, {cos, 51, 100, 0.5}, {cos, 101, 100, 0},
	} {
		if got := c.s.Factor(c.t, c.T); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v at round %d of %d: %v, want %v", c.s, c.t, c.T, got, c.want)
		}
	}
	for _, bad := range []Schedule{{Kind: "step"}, {Kind: "exp_decay", DecayRate: 0, DecayEvery: 5}, {Kind: "exp_decay", DecayRate: 0.5}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
