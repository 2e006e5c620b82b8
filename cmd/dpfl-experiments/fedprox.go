package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
)

// fedProx reproduces the setting of Li et al. 2020, §5.2 and Figure 1:
// multinomial logistic regression on Synthetic-IID and Synthetic(α, β) for
// (α, β) ∈ {(0, 0), (0.5, 0.5), (1, 1)}, 30 devices, 3 per round (about
// 10%), E = 20, B = 10, lr 0.01, 200 rounds. For each dataset: FedAvg
// (μ = 0, stragglers dropped), FedProx with μ = 0 (stragglers' partial
// work kept) and FedProx with μ = 1, each with 0% and 50% stragglers.
func fedProx(e *env) error {
	rounds := e.rounds(200)
	sets := []struct {
		name string
		cfg  data.SyntheticConfig
	}{
		{"Synthetic-IID", func() data.SyntheticConfig { c := data.FedProxSynthetic(0, 0); c.IID = true; return c }()},
		{"Synthetic(0,0)", data.FedProxSynthetic(0, 0)},
		{"Synthetic(0.5,0.5)", data.FedProxSynthetic(0.5, 0.5)},
		{"Synthetic(1,1)", data.FedProxSynthetic(1, 1)},
	}
	var stab []string
	for i, ds := range sets {
		ds.cfg.Seed = 7
		trn, test, err := data.Synthetic(ds.cfg)
		if err != nil {
			return err
		}
		var curves []curve
		for _, strag := range []float64{0, 0.5} {
			for _, v := range []struct {
				label string
				mu    float64
				drop  bool
			}{{"FedAvg", 0, true}, {"FedProx μ=0", 0, false}, {"FedProx μ=1", 1, false}} {
				if strag == 0 && v.label == "FedProx μ=0" {
					continue // without stragglers it is FedAvg, bit for bit
				}
				name := fmt.Sprintf("%s %s, %g%% stragglers", ds.name, v.label, 100*strag)
				c, err := train(setup{
					name: name, model: "logreg", fed: trn, test: test.Base(),
					client:  fl.ClientConfig{Epochs: 20, BatchSize: 10, LR: 0.01, ProxMu: v.mu},
					server:  fl.DefaultServerOptConfig(),
					sampler: fl.Fixed{K: 3}, rounds: rounds, evalEvery: 5, seed: uint64(11 + i),
					stragglers: strag, dropStrag: v.drop, trainLoss: true,
				})
				if err != nil {
					return err
				}
				c.label = fmt.Sprintf("%s, %g%% stragglers", v.label, 100*strag)
				fmt.Fprintf(e.out, "  %s: final accuracy %.4f, training loss %.4f\n", name, c.final(), c.trainLoss[len(c.trainLoss)-1])
				curves = append(curves, c)
			}
		}
		for _, c := range curves {
			stab = append(stab, fmt.Sprintf("| %s | %.4f | %.4f | %.4f |", c.name, c.trainLoss[len(c.trainLoss)-1], roughness(c.trainLoss), c.final()))
		}
		if err := e.plot(fmt.Sprintf("fedprox-%d", i), ds.name+": training loss", "training loss", curves, nil, func(c curve) []float64 { return c.trainLoss }); err != nil {
			return err
		}
	}
	intro := fmt.Sprintf("FedProx's synthetic setting (Li et al. 2020, §5.2): 30 devices with lognormal sizes, 3 per round, E = 20, B = 10, lr 0.01, multinomial logistic regression, %d rounds. \"Roughness\" is the mean absolute change of the training loss between evaluations (every 5 rounds): lower is more stable.\n\n| run | final training loss | roughness | final test accuracy |\n|---|---|---|---|\n", rounds)
	return e.writeTable("fedprox", "FedProx on Synthetic(α, β)", intro+strings.Join(stab, "\n")+"\n")
}

// roughness is the mean |L_{k+1} − L_k| over a loss curve.
func roughness(l []float64) float64 {
	var s float64
	for k := 1; k < len(l); k++ {
		s += math.Abs(l[k] - l[k-1])
	}
	return s / float64(max(len(l)-1, 1))
}
