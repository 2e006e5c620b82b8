package fl

import (
	"math"
	"testing"
)

// With server SGD the step is x − η_s·(−Δ) = x + η_s·Δ, with η_s the
// optimizer's own rate under a constant schedule and LR·(1 + cos(π(t−1)/T))/2
// under a cosine one.
func TestServerUpdateClosedForm(t *testing.T) {
	avg := []float32{1, -2, 0.5, 4}
	for _, tc := range []struct {
		name   string
		sched  Schedule
		round  int
		wantLR float64
	}{
		{"constant keeps the optimizer's rate", Schedule{}, 3, 0.25},
		{"cosine round 1 is the base rate", Schedule{Kind: "cosine"}, 1, 2},
		{"cosine round 3 of 5", Schedule{Kind: "cosine"}, 3, 2 * (1 + math.Cos(math.Pi*2/5)) / 2},
		{"exp_decay after one period", Schedule{Kind: "exp_decay", DecayRate: 0.5, DecayEvery: 2}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := []float32{10, 20, 30, 40}
			opt := &SGD{LR: 0.25}
			s := &ServerUpdate{Optimizer: opt, LR: 2, Schedule: tc.sched, Rounds: 5}
			s.Apply(params, avg, tc.round)
			if math.Abs(float64(opt.LR)-tc.wantLR) > 1e-6 {
				t.Fatalf("η_s = %v, want %v", opt.LR, tc.wantLR)
			}
			for i, p := range params {
				want := float64([]float32{10, 20, 30, 40}[i]) + tc.wantLR*float64(avg[i])
				if math.Abs(float64(p)-want) > 1e-5*math.Abs(want) {
					t.Errorf("params[%d] = %v, want %v", i, p, want)
				}
			}
		})
	}
}

// FedAvgM over two rounds: m₁ = g₁, m₂ = β·g₁ + g₂ with g = −Δ, so
// x₂ = x₀ + η·Δ₁ + η·(β·Δ₁ + Δ₂); the pseudo-gradient buffer must not leak
// between rounds.
func TestServerUpdateMomentumTwoRounds(t *testing.T) {
	params := []float32{1, 2}
	s := &ServerUpdate{Optimizer: &Momentum{LR: 0.5, Beta: 0.9}}
	d1, d2 := []float32{1, -1}, []float32{2, 4}
	s.Apply(params, d1, 1)
	s.Apply(params, d2, 2)
	for i, p := range params {
		x0 := []float64{1, 2}[i]
		want := x0 + 0.5*float64(d1[i]) + 0.5*(0.9*float64(d1[i])+float64(d2[i]))
		if math.Abs(float64(p)-want) > 1e-5 {
			t.Errorf("params[%d] = %v, want %v", i, p, want)
		}
	}
}
