package fl

import (
	"math"

	"github.com/dpfl/dpfl/simd"
)

// FedNova is normalized averaging (Wang et al. 2020, "Tackling the
// Objective Inconsistency Problem in Heterogeneous Federated
// Optimization", eq. 6–7): each Δ_i is divided by ‖a_i‖₁, its number of
// local steps τ_i (or Σ_{k=1..τ_i} (1−β^k)/(1−β) with client momentum β),
// and the weighted mean is multiplied by τ_eff = Σ p_i‖a_i‖₁, so that
// clients doing more steps no longer pull the model towards their own
// optimum. Only with the example-weighted mean (no DP): the rescaled
// updates have no fixed sensitivity. Use it as FedAvg.Variant; the zero
// value is ready.
type FedNova struct {
	beta float64 // the clients' momentum β
}

func (n *FedNova) setup(_, _ int, cfg ClientConfig) { n.beta = cfg.Momentum }

func (n *FedNova) beforeTraining(int, int) []float32 { return nil }

// afterTraining divides Δ_i by ‖a_i‖₁ and returns it.
func (n *FedNova) afterTraining(_ int, delta []float32, steps int, _ float32) float64 {
	a := stepWeight(steps, n.beta)
	simd.Scale(delta, float32(1/a))
	return a
}

// beforeServerStep multiplies the mean of the normalized updates by τ_eff.
func (n *FedNova) beforeServerStep(avg []float32, tauEff float64) {
	simd.Scale(avg, float32(tauEff))
}

func (n *FedNova) afterRound() {}

// stepWeight is FedNova's ‖a_i‖₁ for τ local steps of SGD with momentum
// β: Σ_{k=1..τ} (1 − β^k)/(1 − β), which is τ when β = 0.
func stepWeight(tau int, beta float64) float64 {
	if beta == 0 {
		return float64(tau)
	}
	var a float64
	for k := 1; k <= tau; k++ {
		a += (1 - math.Pow(beta, float64(k))) / (1 - beta)
	}
	return a
}
