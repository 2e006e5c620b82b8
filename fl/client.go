package fl

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/simd"
)

// ClientConfig is the local training of one client in a round: E epochs of
// minibatch SGD with batch size B and client learning rate η_l over the
// client's own examples (McMahan et al. 2017, Algorithm 1, ClientUpdate).
type ClientConfig struct {
	// Epochs is E ≥ 1.
	Epochs int
	// BatchSize is B ≥ 1; the last batch of an epoch may be smaller.
	BatchSize int
	// LR is the client learning rate η_l > 0 (of round 1 when a
	// schedule decays it).
	LR float64
	// Momentum is the client's heavy-ball β_l ∈ [0, 1): v ← β_l·v + g,
	// x ← x − η_l·v. The buffer starts at 0 every round: cross-device
	// clients keep no optimizer state between rounds. 0 is plain SGD.
	Momentum float64
	// ProxMu is FedProx's μ ≥ 0 (Li et al. 2020, "Federated Optimization
	// in Heterogeneous Networks", eq. 2): the local objective gains
	// μ/2·‖x − x_t‖², so every local step adds μ(x − x_t) to the
	// gradient. μ = 0 is FedAvg, bit for bit.
	ProxMu float64
}

// Validate reports the first field that breaks its rule.
func (c ClientConfig) Validate() error {
	switch {
	case c.Epochs < 1:
		return fmt.Errorf("client.epochs must be ≥ 1, got %d", c.Epochs)
	case c.BatchSize < 1:
		return fmt.Errorf("client.batch_size must be ≥ 1, got %d", c.BatchSize)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("client.lr must be a finite number > 0, got %v", c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return fmt.Errorf("client.momentum must be in [0, 1), got %v", c.Momentum)
	case !(c.ProxMu >= 0) || math.IsInf(c.ProxMu, 0):
		return fmt.Errorf("client.prox_mu must be a finite number ≥ 0, got %v", c.ProxMu)
	}
	return nil
}

// clientTrainer holds one worker's buffers for local training; all
// allocation happens in newClientTrainer.
type clientTrainer struct {
	cfg    ClientConfig
	ws     model.Workspace
	local  []float32 // x_i
	grad   []float32
	vel    []float32 // momentum buffer (nil unless Momentum > 0)
	batchX []float32
	batchY []uint8
	order  []int32
	// correction, when set, is added to every local gradient (SCAFFOLD's
	// c − c_i); steps counts the local steps of the last train call.
	correction []float32
	steps      int
}

func newClientTrainer(m model.Model, cfg ClientConfig) *clientTrainer {
	d := m.NumParams()
	t := &clientTrainer{
		cfg:    cfg,
		ws:     m.NewWorkspace(cfg.BatchSize),
		local:  make([]float32, d),
		grad:   make([]float32, d),
		batchX: make([]float32, cfg.BatchSize*m.InputDim()),
		batchY: make([]uint8, cfg.BatchSize),
	}
	if cfg.Momentum != 0 {
		t.vel = make([]float32, d)
	}
	return t
}

// train runs ClientUpdate from the global model on the examples idx of ds
// and leaves Δ_i = x_i − x_t in delta. It returns the mean training loss
// over all local steps' examples (0 for a client with no examples, whose
// Δ_i is 0). It runs epochs local epochs (cfg.Epochs, or fewer for a
// straggler) with learning rate lr (cfg.LR under its schedule). rng drives
// the per-epoch shuffles (simulation randomness).
func (t *clientTrainer) train(delta, global []float32, ds *data.Dataset, idx []int32, epochs int, lr float32, rng *rand.Rand) (loss float64) {
	copy(t.local, global)
	clear(t.vel)
	if s, ok := t.ws.(model.Seeder); ok {
		// Dropout from the client's own stream (model.Seeder's doc).
		s.Seed(rng.Uint64(), rng.Uint64())
	}
	t.order = append(t.order[:0], idx...)
	B, dim := t.cfg.BatchSize, ds.Dim
	mu, beta := float32(t.cfg.ProxMu), float32(t.cfg.Momentum)
	var lossSum float64
	var seen int
	t.steps = 0
	for range epochs {
		rng.Shuffle(len(t.order), func(i, j int) { t.order[i], t.order[j] = t.order[j], t.order[i] })
		for s := 0; s < len(t.order); s += B {
			b := t.order[s:min(s+B, len(t.order))]
			x, y := t.batchX[:len(b)*dim], t.batchY[:len(b)]
			ds.Gather(x, y, b)
			t.steps++
			lossSum += float64(len(b)) * t.step(x, y, global, lr, mu, beta)
			seen += len(b)
		}
	}
	simd.Sub(delta, t.local, global)
	if seen == 0 {
		return 0
	}
	return lossSum / float64(seen)
}

// step takes one local SGD step from t.local on the batch (x, y),
//
//	x ← x − η_l·(∇L(x) + μ·(x − x_t) + (c − c_i)),
//
// with FedProx's proximal term (μ = 0 without it) and SCAFFOLD's
// correction (nil without it), and returns the batch's mean loss. Where
// the workspace has a fused step (model.Stepper), ∇L is never written
// out: the proximal term is computed first (it needs x before the step),
// the fused step applies ∇L, and the other terms are subtracted after.
// A zero correction then leaves the fused step's result bit for bit
// (x + (−η)·0 = x), so SCAFFOLD's first round is FedAvg's exactly.
// Momentum (v ← β·v + ∇L) needs the gradient itself and takes it from
// LossGrad. FedNova only rescales Δ_i afterwards and steps like FedAvg.
func (t *clientTrainer) step(x []float32, y []uint8, global []float32, lr, mu, beta float32) float64 {
	if s, ok := t.ws.(model.Stepper); ok && beta == 0 {
		extra := t.correction
		if mu != 0 {
			proxTerm(t.grad, mu, t.local, global)
			if t.correction != nil {
				simd.Add(t.grad, t.correction)
			}
			extra = t.grad
		}
		l := s.LossStep(t.local, x, y, lr)
		if extra != nil {
			simd.Axpy(t.local, -lr, extra)
		}
		return l
	}
	l := t.ws.LossGrad(t.local, x, y, t.grad)
	if mu != 0 {
		proxGrad(t.grad, mu, t.local, global)
	}
	if t.correction != nil {
		simd.Add(t.grad, t.correction)
	}
	step := t.grad
	if beta != 0 {
		simd.Scale(t.vel, beta)
		simd.Add(t.vel, t.grad)
		step = t.vel
	}
	simd.Axpy(t.local, -lr, step)
	return l
}

// proxTerm writes FedProx's proximal gradient: p = μ·(x − x_t).
func proxTerm(p []float32, mu float32, x, xt []float32) {
	x, xt = x[:len(p)], xt[:len(p)]
	for i := range p {
		p[i] = mu * (x[i] - xt[i])
	}
}

// proxGrad adds FedProx's proximal gradient: g += μ·(x − x_t).
func proxGrad(g []float32, mu float32, x, xt []float32) {
	x, xt = x[:len(g)], xt[:len(g)]
	for i := range g {
		g[i] += mu * (x[i] - xt[i])
	}
}
