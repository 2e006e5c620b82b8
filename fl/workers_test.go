package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// workerConfigs covers every path of a round: FedProx with client
// momentum, schedules and an adaptive server; DP with canaries and dropped
// stragglers; SCAFFOLD; FedNova; a deadline with over-selection; DP with
// over-selection. (Secure aggregation is left out: its stochastic rounding
// draws from crypto/rand.)
func workerConfigs(n int) map[string]func(workers int, m model.Model) *FedAvg {
	rt := RoundTimeModel{DownBandwidth: 1e6, UpBandwidth: 0.5e6, ComputeRatio: 7, ComputeOverhead: 1, BandwidthSigma: 0.7, ComputeSigma: 0.5}
	gauss := func() Aggregator {
		return &GaussianAggregator{Params: dp.Params{ClipNorm: 0.5, NoiseMultiplier: 0.7}, Rand: rand.New(rand.NewPCG(1, 2))}
	}
	cfg := ClientConfig{Epochs: 1, BatchSize: 5, LR: 0.1}
	sgd := func() ServerUpdate { return ServerUpdate{Optimizer: &SGD{LR: 1}} }
	return map[string]func(int, model.Model) *FedAvg{
		"fedprox": func(w int, m model.Model) *FedAvg {
			opt := &Adaptive{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.99, Tau: 1e-3}
			return &FedAvg{Model: m, Client: ClientConfig{Epochs: 2, BatchSize: 7, LR: 0.05, Momentum: 0.5, ProxMu: 0.1},
				ClientSchedule: Schedule{Kind: "cosine"}, Rounds: 4,
				Server:    ServerUpdate{Optimizer: opt, LR: 0.01, Schedule: Schedule{Kind: "cosine"}, Rounds: 4},
				Aggregate: WeightedMean{}, Workers: w, Seed: 9, Simulation: Simulation{Stragglers: 0.4}}
		},
		"dp-canaries": func(w int, m model.Model) *FedAvg {
			c := &Canaries{K: 5, Rate: 0.5, ClipNorm: 0.5, Rand: rand.New(rand.NewPCG(7, 7)), Direction: func(j int, dst []float32) {
				clear(dst)
				dst[j] = 1
			}}
			return &FedAvg{Model: m, Client: cfg, Server: sgd(), Aggregate: gauss(), Canaries: c, Workers: w, Seed: 3,
				Simulation: Simulation{Stragglers: 0.3, DropStragglers: true}}
		},
		"scaffold": func(w int, m model.Model) *FedAvg {
			return &FedAvg{Model: m, Client: ClientConfig{Epochs: 2, BatchSize: 4, LR: 0.05}, Server: sgd(), Aggregate: WeightedMean{},
				Variant: &Scaffold{N: n}, Workers: w, Seed: 5, Simulation: Simulation{Stragglers: 0.3}}
		},
		"fednova": func(w int, m model.Model) *FedAvg {
			return &FedAvg{Model: m, Client: ClientConfig{Epochs: 2, BatchSize: 3, LR: 0.05, Momentum: 0.3}, Server: sgd(),
				Aggregate: WeightedMean{}, Variant: &FedNova{}, Workers: w, Seed: 6, Simulation: Simulation{Stragglers: 0.5}}
		},
		"deadline-target": func(w int, m model.Model) *FedAvg {
			r := rt
			return &FedAvg{Model: m, Client: cfg, Server: sgd(), Aggregate: WeightedMean{}, Workers: w, Seed: 8,
				Simulation: Simulation{RoundTime: &r, Target: 6, DeadlineSeconds: 70, Stragglers: 0.2}}
		},
		"dp-target": func(w int, m model.Model) *FedAvg {
			r := rt
			return &FedAvg{Model: m, Client: cfg, Server: sgd(), Aggregate: gauss(), Workers: w, Seed: 8,
				Simulation: Simulation{RoundTime: &r, Target: 5}}
		},
	}
}

// Every client's randomness is seeded per (round, client) and reports are
// aggregated in cohort order, so a round's result does not depend on how
// many workers train the cohort: with 1 and with 3 workers the parameters
// after each of four rounds, and the round's counts and train loss, are
// the same bit for bit. (A per-worker aggregate summed in the order the
// workers happen to finish fails this.)
func TestRoundsAreTheSameForEveryWorkerCount(t *testing.T) {
	const n = 30
	fed, err := data.NewFederated(blobs(600, 31), data.Options{NumClients: n, Partitioner: data.Dirichlet{Alpha: 0.5}, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.New("logreg", 784, 10)
	run := func(build func(int, model.Model) *FedAvg, workers int) (params [][]float32, stats []RoundStats) {
		alg := build(workers, m)
		x := make([]float32, m.NumParams())
		m.Init(x, rand.New(rand.NewPCG(1, 1)))
		for r := 1; r <= 4; r++ {
			cohort := Poisson{Q: 0.4}.Sample(n, rand.New(rand.NewPCG(uint64(r), 77)))
			st, err := alg.Round(context.Background(), r, x, fed, cohort, 12)
			if err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			st.EstimatedSeconds = 0 // includes the server's measured time
			params, stats = append(params, append([]float32(nil), x...)), append(stats, st)
		}
		return params, stats
	}
	for name, build := range workerConfigs(n) {
		p1, s1 := run(build, 1)
		p3, s3 := run(build, 3)
		for r := range p1 {
			if s1[r] != s3[r] {
				t.Errorf("%s round %d: stats %+v with 1 worker, %+v with 3", name, r+1, s1[r], s3[r])
			}
			for i := range p1[r] {
				if math.Float32bits(p1[r][i]) != math.Float32bits(p3[r][i]) {
					t.Errorf("%s round %d: param %d is %v with 1 worker, %v with 3", name, r+1, i, p1[r][i], p3[r][i])
					break
				}
			}
		}
		if s1[0].Clients == 0 || s1[0].Examples == 0 {
			t.Errorf("%s: nothing aggregated in round 1 (%+v): the comparison is empty", name, s1[0])
		}
	}
}
