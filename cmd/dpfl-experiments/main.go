// Command dpfl-experiments reproduces the experiments of the papers dpfl
// implements, in-process on the fl package, and writes for each a
// markdown table and a PNG plot (gonum/plot) of test accuracy per round:
//
//		dpfl-experiments [--out docs/experiments] [--data-dir DIR] [--quick] fedopt|fedopt-dp|fedprox|adaptive-clipping|distributed-dp|all
//
//	  - fedopt: Reddi et al. 2021 ("Adaptive Federated Optimization"):
//	    FedAvg, FedAvgM, FedAdagrad, FedAdam and FedYogi over a few server
//	    learning rates each, on Fashion-MNIST split among 500 clients with
//	    Dirichlet(0.1) label skew, 10 clients per round, E = 1, B = 20, the
//	    2NN MLP.
//	  - fedopt-dp: the best server learning rate of each optimizer again,
//	    under user-level DP (DP-FedAvg's clipping and Gaussian noise), with
//	    ε reported by the accountant.
//	  - fedprox: Li et al. 2020 ("Federated Optimization in Heterogeneous
//	    Networks"), Figure 1's setting: Synthetic(α, β) with 30 devices,
//	    about 10% per round, E = 20, B = 10, lr 0.01, μ ∈ {0, 1}, with and
//	    without 50% stragglers.
//	  - adaptive-clipping: Andrew et al. 2021 ("Differentially private
//	    learning with adaptive clipping"): the demo's DP-FedAvg (6,000
//	    users, q = 0.02, z = 1) with the MLP on Dirichlet(0.1) label skew,
//	    adaptive C (γ = 0.5) against a grid of five fixed C.
//	  - distributed-dp: Kairouz, Liu & Steinke 2021 ("The Distributed
//	    Discrete Gaussian Mechanism for Federated Learning with Secure
//	    Aggregation"): the demo's logreg with a fixed cohort of 120 under
//	    central DP and under the distributed discrete Gaussian at several
//	    moduli, at the same ε without amplification.
//
// Simulation randomness (partition, shuffles, non-DP cohorts) is seeded;
// DP runs draw cohorts and noise from crypto/rand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/cliflag"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dpfl-experiments:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dpfl-experiments", flag.ContinueOnError)
	dir := fs.String("out", "docs/experiments", "directory for the tables (.md) and plots (.png)")
	dataDir := fs.String("data-dir", data.DefaultFashionMNISTDir, "Fashion-MNIST IDX files")
	cliflag.Deprecated(fs, "data", "data-dir")
	quick := fs.Bool("quick", false, "a fifth of the rounds (a smoke test, not the reported numbers)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: dpfl-experiments [--out DIR] [--data-dir DIR] [--quick] fedopt|fedopt-dp|fedprox|adaptive-clipping|distributed-dp|all")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	x := &env{dir: *dir, dataDir: *dataDir, quick: *quick, out: out}
	exps := map[string]func(*env) error{"fedopt": fedOpt, "fedopt-dp": fedOptDP, "fedprox": fedProx, "adaptive-clipping": adaptiveClipping, "distributed-dp": distributedDP}
	names := []string{fs.Arg(0)}
	if fs.Arg(0) == "all" {
		names = []string{"fedopt", "fedprox", "adaptive-clipping", "distributed-dp"} // fedopt runs fedopt-dp at its best rates
	}
	for _, n := range names {
		f, ok := exps[n]
		if !ok {
			return fmt.Errorf("unknown experiment %q (known: fedopt, fedopt-dp, fedprox, adaptive-clipping, distributed-dp, all)", n)
		}
		if err := f(x); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

type env struct {
	dir, dataDir string
	quick        bool
	out          io.Writer
	fmnist       [2]*data.Dataset
}

func (e *env) rounds(n int) int {
	if e.quick {
		return max(n/5, 2)
	}
	return n
}

func (e *env) fashionMNIST() (train, test *data.Dataset, err error) {
	if e.fmnist[0] == nil {
		if e.fmnist[0], e.fmnist[1], err = data.LoadFashionMNIST(e.dataDir); err != nil {
			return nil, nil, err
		}
	}
	return e.fmnist[0], e.fmnist[1], nil
}

// setup is one training run.
type setup struct {
	name      string
	model     string
	fed       *data.Federated
	test      *data.Dataset
	client    fl.ClientConfig
	server    fl.ServerOptConfig
	sampler   fl.Sampler
	rounds    int
	evalEvery int
	seed      uint64
	// dp, when set, clips and noises (DP-FedAvg) with cohorts and noise
	// from crypto/rand.
	dp *dp.Params
	// adaptive, when set with dp, adapts the clip norm (Andrew et al.
	// 2021) from this starting state.
	adaptive *fl.AdaptiveClip
	// distributed, when set with dp and a fixed sampler, runs the
	// distributed discrete Gaussian with these parameters inside
	// simulated secure aggregation instead of the server's noise.
	distributed *fl.DDGParams
	stragglers  float64
	dropStrag   bool
	// trainLoss also evaluates the global model on the pooled training
	// examples (the FedProx paper's training loss).
	trainLoss bool
}

// curve is a run's test accuracy (and loss) after evaluated rounds.
type curve struct {
	name string
	// label names the curve in a plot's legend (name when empty).
	label  string
	rounds []int
	acc    []float64
	// trainLoss is the loss on the pooled training examples (when asked).
	trainLoss []float64
	seconds   float64
	epsilon   float64
	// epsNoAmp is ε without amplification by sampling: the event of one
	// round's release composed over the rounds.
	epsNoAmp float64
	// clip is, under adaptive clipping, every round's C_t, with the noisy
	// fraction b̃_t the server released and the true fraction of updates
	// with norm at most C_t (which the experiment may look at; a job never
	// releases it).
	clip, noisyFrac, trueFrac []float64
}

func (c curve) final() float64 { return c.acc[len(c.acc)-1] }
func (c curve) best() float64  { return slices.Max(c.acc) }

func train(s setup) (curve, error) {
	m, err := model.New(s.model, s.fed.Base().Dim, s.fed.Base().Classes)
	if err != nil {
		return curve{}, err
	}
	server, err := fl.NewServerOptimizer(s.server)
	if err != nil {
		return curve{}, err
	}
	alg := &fl.FedAvg{Model: m, Client: s.client, Server: fl.ServerUpdate{Optimizer: server}, Aggregate: fl.WeightedMean{},
		Seed: s.seed, Rounds: s.rounds, Simulation: fl.Simulation{Stragglers: s.stragglers, DropStragglers: s.dropStrag}}
	sampleRand := rand.New(rand.NewPCG(s.seed, 0x5a))
	if s.dp != nil {
		secure, err := dp.NewSecureRand()
		if err != nil {
			return curve{}, err
		}
		g := &fl.GaussianAggregator{Params: *s.dp, Rand: secure}
		if s.adaptive != nil {
			a := *s.adaptive
			g.Adaptive = &a
		}
		alg.Aggregate = g
		if s.distributed != nil {
			alg.Aggregate = ddgAggregator(s.distributed, s.sampler.(fl.Fixed).K, secure, s.seed)
		}
		if sampleRand, err = dp.NewSecureRand(); err != nil {
			return curve{}, err
		}
	}
	params := make([]float32, m.NumParams())
	m.Init(params, rand.New(rand.NewPCG(s.seed, 0x1a17)))
	eval := fl.NewEvaluator(m, 0)
	c := curve{name: s.name}
	start := time.Now()
	n := s.fed.NumClients()
	for r := 1; r <= s.rounds; r++ {
		st, err := alg.Round(context.Background(), r, params, s.fed, s.sampler.Sample(n, sampleRand), s.sampler.ExpectedSize(n))
		if err != nil {
			return c, fmt.Errorf("%s round %d: %w", s.name, r, err)
		}
		if a := st.Adaptive; a != nil {
			c.clip, c.noisyFrac = append(c.clip, a.ClipNorm), append(c.noisyFrac, a.NoisyUnclippedFraction)
			c.trueFrac = append(c.trueFrac, 1-st.ClippedFraction)
		}
		if r%s.evalEvery == 0 || r == s.rounds {
			met := eval.Dataset(params, s.test)
			c.rounds, c.acc = append(c.rounds, r), append(c.acc, met.Accuracy)
			if s.trainLoss {
				c.trainLoss = append(c.trainLoss, eval.Dataset(params, s.fed.Base()).Loss)
			}
		}
	}
	c.seconds = time.Since(start).Seconds()
	switch {
	case s.distributed != nil:
		if c.epsilon, err = ddgEpsilon(*s.distributed, s.sampler.(fl.Fixed).K, s.rounds); err != nil {
			return c, err
		}
		c.epsNoAmp = c.epsilon
	case s.dp != nil:
		// The event of the mechanism the rounds ran (fl.RoundEvent), as
		// the job runner charges it, and the same without sampling.
		ev := fl.RoundEvent(s.sampler, n, s.dp.NoiseMultiplier, alg.Sensitivity())
		if c.epsilon, err = composedEpsilon(ev, s.rounds); err != nil {
			return c, err
		}
		sens := alg.Sensitivity()
		if _, fixed := s.sampler.(fl.Fixed); fixed {
			sens = fl.TwoClips // replace-one
		}
		if c.epsNoAmp, err = composedEpsilon(fl.RoundEvent(nil, n, s.dp.NoiseMultiplier, sens), s.rounds); err != nil {
			return c, err
		}
	}
	return c, nil
}

// composedEpsilon is ε(δ = 1e-5) of rounds compositions of ev (the
// tighter valid accountant).
func composedEpsilon(ev accounting.Event, rounds int) (float64, error) {
	rep, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: ev, Count: rounds}}, 1e-5)
	return rep.Epsilon(), err
}

// report writes name.md (a table of the curves) and name.png (test
// accuracy per round of the runs named in plotted) and prints the table.
func (e *env) report(name, title, intro string, curves []curve, plotted []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n| run | final test accuracy | best | ε (δ = 1e-5) | seconds |\n|---|---|---|---|---|\n", intro)
	for _, c := range curves {
		eps := "–"
		if c.epsilon > 0 {
			eps = fmt.Sprintf("%.2f", c.epsilon)
		}
		fmt.Fprintf(&b, "| %s | %.4f | %.4f | %s | %.0f |\n", c.name, c.final(), c.best(), eps, c.seconds)
	}
	if err := e.writeTable(name, title, b.String()); err != nil {
		return err
	}
	return e.plot(name, title, "test accuracy", curves, plotted, func(c curve) []float64 { return c.acc })
}

// writeTable writes text to name.md and prints it under title.
func (e *env) writeTable(name, title, text string) error {
	fmt.Fprintf(e.out, "## %s\n\n%s\n", title, text)
	return os.WriteFile(filepath.Join(e.dir, name+".md"), []byte(text), 0o644)
}

// plot draws y(c) per evaluated round for the curves named in only (all
// when nil) into name.png.
func (e *env) plot(name, title, ylabel string, curves []curve, only []string, y func(curve) []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "round"
	p.Y.Label.Text = ylabel
	p.Legend.Top = ylabel != "test accuracy"
	p.Legend.Left = false
	i := 0
	for _, c := range curves {
		if only != nil && !slices.Contains(only, c.name) {
			continue
		}
		ys := y(c)
		pts := make(plotter.XYs, len(c.rounds))
		for k := range c.rounds {
			pts[k].X, pts[k].Y = float64(c.rounds[k]), ys[k]
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		label := c.label
		if label == "" {
			label = c.name
		}
		p.Legend.Add(label, l)
		i++
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(e.dir, name+".png"))
}

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}
