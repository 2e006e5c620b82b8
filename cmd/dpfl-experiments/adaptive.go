package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
)

// adaptiveGrid is the fixed clip norms adaptive clipping is compared
// with: half-decades around the MLP's update norms in this setting.
var adaptiveGrid = []float64{0.03, 0.1, 0.3, 1, 3}

// adaptiveClipping runs issue 16's experiment: the demo job's DP-FedAvg
// (N = 6,000 users of Fashion-MNIST, Poisson q = 0.02, z = 1, E = 1,
// B = 20, client lr 0.1, server SGD at 1) with the MLP on Dirichlet(0.1)
// label skew, with adaptive clipping (Andrew et al. 2021: γ = 0.5,
// η_C = 0.2, C_0 = 0.1, σ_b = m/20) and with each C of adaptiveGrid. It
// writes the accuracy table and plot, and a plot of C_t with the true
// fraction of updates below it.
func adaptiveClipping(e *env) error {
	trainSet, test, err := e.fashionMNIST()
	if err != nil {
		return err
	}
	const n, q, z = 6000, 0.02, 1.0
	fed, err := data.NewFederated(trainSet, data.Options{NumClients: n, Partitioner: data.Dirichlet{Alpha: 0.1}, Seed: 1})
	if err != nil {
		return err
	}
	rounds := e.rounds(300)
	base := func(name string, c float64) setup {
		cfg := fl.DefaultServerOptConfig()
		cfg.Name, cfg.LR = "sgd", 1
		return setup{name: name, model: "mlp", fed: fed, test: test, client: fl.ClientConfig{Epochs: 1, BatchSize: 20, LR: 0.1},
			server: cfg, sampler: fl.Poisson{Q: q}, rounds: rounds, evalEvery: 10, seed: 1, dp: &dp.Params{ClipNorm: c, NoiseMultiplier: z}}
	}
	m := q * n
	ad := base("adaptive C, γ = 0.5", 0)
	ad.adaptive = &fl.AdaptiveClip{Clip: 0.1, TargetQuantile: 0.5, LearningRate: 0.2, CountStd: m / 20, MinClip: 1e-6, MaxClip: 1e4}
	setups := []setup{ad}
	for _, c := range adaptiveGrid {
		setups = append(setups, base(fmt.Sprintf("fixed C = %g", c), c))
	}
	// Three repetitions of each run (fresh noise and cohorts each), the
	// end of training measured as the mean test accuracy of the last five
	// evaluations (rounds 260–300), less noisy than the last one alone.
	reps := 3
	if e.quick {
		reps = 1
	}
	curves, ends, err := e.repeat(setups, reps)
	if err != nil {
		return err
	}
	zd, err := fl.DeltaNoiseMultiplier(z, m/20)
	if err != nil {
		return err
	}
	a := curves[0]
	best := 1
	for i := 2; i < len(setups); i++ {
		if mean(ends[i]) > mean(ends[best]) {
			best = i
		}
	}
	tail := len(a.clip) / 2
	var summary strings.Builder
	fmt.Fprintf(&summary, "\n\nEnd of training, mean test accuracy of the last five evaluations, over %d repetitions:\n\n| run | mean | repetitions |\n|---|---|---|\n", reps)
	for i, s := range setups {
		parts := make([]string, len(ends[i]))
		for k, v := range ends[i] {
			parts[k] = fmt.Sprintf("%.4f", v)
		}
		fmt.Fprintf(&summary, "| %s | %.4f | %s |\n", s.name, mean(ends[i]), strings.Join(parts, ", "))
	}
	intro := fmt.Sprintf("Fashion-MNIST, %d users with Dirichlet(0.1) label skew, Poisson sampling q = %g (m = %g expected per round), MLP 784-200-200-10, E = 1, B = 20, client lr 0.1, server SGD at 1, z = %g, %d rounds. Adaptive clipping (Andrew et al. 2021): γ = 0.5, η_C = 0.2, C_0 = 0.1, σ_b = m/20 = %g, so the update's noise multiplier is z_Δ = %.4f; the ε of every run is the same, since the round is one Gaussian mechanism of multiplier z either way.\n\nAdaptive C ends at %.4f against %.4f for the best fixed C (%s): %+.1f points (means over the repetitions below). Over the second half of the rounds of its first repetition C_t averaged %.3g, the true fraction of updates with norm at most C_t %.3f and the released noisy one %.3f (target 0.5).%s\nThe first repetition of each run, round by round:",
		n, q, m, z, rounds, m/20, zd, mean(ends[0]), mean(ends[best]), setups[best].name, 100*(mean(ends[0])-mean(ends[best])), mean(a.clip[tail:]), mean(a.trueFrac[tail:]), mean(a.noisyFrac[tail:]), summary.String())
	if err := e.report("adaptive-clipping", "Adaptive clipping (Andrew et al. 2021) against fixed clip norms, under DP", intro, curves, nil); err != nil {
		return err
	}
	return e.plotClip(a)
}

// plotClip draws the adaptive run's C_t (log scale in the legend's
// words: log10 C_t), its true and noisy unclipped fractions and γ per
// round into adaptive-clipping-trajectory.png.
func (e *env) plotClip(a curve) error {
	rounds := make([]int, len(a.clip))
	logC := make([]float64, len(a.clip))
	target := make([]float64, len(a.clip))
	for i := range a.clip {
		rounds[i], logC[i], target[i] = i+1, math.Log10(a.clip[i]), 0.5
	}
	series := []curve{
		{name: "log10 C_t", rounds: rounds, acc: logC},
		{name: "true fraction ≤ C_t", rounds: rounds, acc: a.trueFrac},
		{name: "released b̃_t", rounds: rounds, acc: a.noisyFrac},
		{name: "γ = 0.5", rounds: rounds, acc: target},
	}
	return e.plot("adaptive-clipping-trajectory", "Adaptive clipping: C_t and the fraction of updates below it", "value", series, nil, func(c curve) []float64 { return c.acc })
}

// repeat runs each setup reps times (seeds 1 … reps; DP noise and
// cohorts fresh from crypto/rand each time) and returns the first
// repetition's curves and, per setup, each repetition's end of training:
// the mean test accuracy of its last five evaluations, less noisy than
// the last one alone.
func (e *env) repeat(setups []setup, reps int) ([]curve, [][]float64, error) {
	var curves []curve
	ends := make([][]float64, len(setups))
	for i, s := range setups {
		for rep := range reps {
			s.seed = uint64(1 + rep)
			c, err := train(s)
			if err != nil {
				return nil, nil, err
			}
			ends[i] = append(ends[i], tailMean(c.acc, 5))
			fmt.Fprintf(e.out, "  %s (rep %d): final %.4f, last five %.4f, ε %.3f (unamplified %.3f) in %.0fs\n", s.name, rep+1, c.final(), ends[i][rep], c.epsilon, c.epsNoAmp, c.seconds)
			if rep == 0 {
				curves = append(curves, c)
			}
		}
	}
	return curves, ends, nil
}

// tailMean is the mean of the last k values of x (all of them if fewer).
func tailMean(x []float64, k int) float64 { return mean(x[max(0, len(x)-k):]) }

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
