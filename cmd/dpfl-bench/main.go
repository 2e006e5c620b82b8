// Command bench times dpfl's DP-FedAvg round loop on the same job as the
// PyTorch reference ../shared/bench/torch_fedavg.py, for the side-by-side
// comparison of scripts/bench.sh: Fashion-MNIST over a simulated population
// (Dirichlet(alpha) label skew), the MLP 784-200-200-10 (or logreg, or the
// CNN of Reddi et al. 2021, Table 4), E local epochs of SGD with batch B on
// every client of a fixed-size cohort, per-client clipping to C, Gaussian
// noise z·C on the sum, server SGD with learning rate 1. It prints one line
// per round and a RESULT line in the reference's format.
//
// examples_per_s counts every local training example over the whole round
// time, aggregation and noise included (the reference divides by its
// training time only, so this comparison favours PyTorch slightly);
// examples_per_cpu_s divides by the process's CPU time over the rounds
// instead, which is robust to other processes sharing the machine.
//
// Usage:
//
//	go run ./cmd/dpfl-bench --population 1000 --cohort-size 100 --rounds 20 --workers 1 [--cpuprofile f]
//
// The flags are dpfl's names (--population, --cohort-size, --clip-norm,
// --noise-multiplier, --data-dir); the reference's names (--clients,
// --cohort, --clip, --z, --data) still work for one release and warn.
//
// Build with GOEXPERIMENT=simd for the archsimd kernels (see
// docs/performance.md, "Builds and kernel paths").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/cliflag"
)

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		log.Fatal(err)
	}
	if err := bench(cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// config is the benchmark's job, from the flags.
type config struct {
	dataDir, model, cpuprofile     string
	population, cohort, rounds     int
	epochs, batch, workers         int
	lr, clipNorm, noiseMult, alpha float64
}

// parseFlags parses the flags; the names of the reference
// (--data, --clients, --cohort, --clip, --z) still work for one release,
// with a warning on stderr.
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("dpfl-bench", flag.ContinueOnError)
	fs.StringVar(&c.dataDir, "data-dir", data.DefaultFashionMNISTDir, "folder with the Fashion-MNIST IDX .gz files")
	fs.IntVar(&c.population, "population", 1000, "population size N")
	fs.IntVar(&c.cohort, "cohort-size", 100, "clients per round K (fixed cohort)")
	fs.IntVar(&c.rounds, "rounds", 20, "rounds to run")
	fs.IntVar(&c.epochs, "epochs", 1, "local epochs")
	fs.IntVar(&c.batch, "batch", 20, "local batch size")
	fs.Float64Var(&c.lr, "lr", 0.05, "client learning rate")
	fs.Float64Var(&c.clipNorm, "clip-norm", 1, "clip norm C")
	fs.Float64Var(&c.noiseMult, "noise-multiplier", 1, "noise multiplier z")
	fs.Float64Var(&c.alpha, "alpha", 0.5, "Dirichlet label-skew concentration")
	fs.IntVar(&c.workers, "workers", 1, "clients trained in parallel (0: GOMAXPROCS)")
	fs.StringVar(&c.model, "model", "mlp", "mlp, logreg or cnn")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the rounds to this file")
	for old, name := range map[string]string{"data": "data-dir", "clients": "population", "cohort": "cohort-size", "clip": "clip-norm", "z": "noise-multiplier"} {
		cliflag.Deprecated(fs, old, name)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	return c, nil
}

// bench sets the job up, runs its rounds and prints one line per round,
// the final test accuracy and the RESULT line to out.
func bench(c config, out io.Writer) error {
	train, test, err := data.LoadFashionMNIST(c.dataDir)
	if err != nil {
		return err
	}
	fed, err := data.NewFederated(train, data.Options{NumClients: c.population, Partitioner: data.Dirichlet{Alpha: c.alpha}, Seed: 0})
	if err != nil {
		return err
	}
	m, err := model.New(c.model, train.Dim, 10)
	if err != nil {
		return err
	}
	noise, err := dp.NewSecureRand()
	if err != nil {
		return err
	}
	f := &fl.FedAvg{
		Model:     m,
		Client:    fl.ClientConfig{Epochs: c.epochs, BatchSize: c.batch, LR: c.lr},
		Server:    fl.ServerUpdate{Optimizer: &fl.SGD{LR: 1}},
		Aggregate: &fl.GaussianAggregator{Params: dp.Params{ClipNorm: c.clipNorm, NoiseMultiplier: c.noiseMult}, Rand: noise},
		Workers:   c.workers,
		Seed:      1,
	}
	params := make([]float32, m.NumParams())
	rng := rand.New(rand.NewPCG(0, 0))
	m.Init(params, rng)
	fmt.Fprintf(out, "params=%d population=%d cohort_size=%d workers=%d GOMAXPROCS=%d model=%s\n",
		m.NumParams(), c.population, c.cohort, c.workers, runtime.GOMAXPROCS(0), c.model)
	t, err := c.runRounds(f, params, fed, rng, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "test_acc=%.4f\n", fl.NewEvaluator(m, 0).Dataset(params, test).Accuracy)
	fmt.Fprintf(out, "RESULT round_s=%.3f cpu_s=%.3f examples=%d examples_per_s=%.0f examples_per_cpu_s=%.0f clients_per_s=%.1f mean_round_s=%.3f\n",
		t.wall.Seconds(), t.cpu.Seconds(), t.examples, float64(t.examples)/t.wall.Seconds(), float64(t.examples)/t.cpu.Seconds(),
		float64(c.rounds*c.cohort)/t.wall.Seconds(), t.wall.Seconds()/float64(c.rounds))
	return nil
}

// timing is what the rounds took: wall and process CPU time, and the
// local training examples they processed (epochs counted).
type timing struct {
	wall, cpu time.Duration
	examples  int
}

// runRounds runs c.rounds rounds of f over fixed cohorts of c.cohort,
// timing only the rounds (and profiling them with --cpuprofile).
func (c config) runRounds(f *fl.FedAvg, params []float32, fed *data.Federated, rng *rand.Rand, out io.Writer) (timing, error) {
	var t timing
	if c.cpuprofile != "" {
		pf, err := os.Create(c.cpuprofile)
		if err != nil {
			return t, err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return t, err
		}
		defer pprof.StopCPUProfile() // the profile covers the rounds only
	}
	sampler := fl.Fixed{K: c.cohort}
	for r := 1; r <= c.rounds; r++ {
		ids := sampler.Sample(fed.NumClients(), rng)
		c0, t0 := cpuTime(), time.Now()
		st, err := f.Round(context.Background(), r, params, fed, ids, sampler.ExpectedSize(fed.NumClients()))
		if err != nil {
			return t, err
		}
		dt := time.Since(t0)
		t.cpu += cpuTime() - c0
		t.wall += dt
		t.examples += st.Examples * c.epochs
		fmt.Fprintf(out, "round %d %.3fs\n", r, dt.Seconds())
	}
	return t, nil
}

// cpuTime is the user+system CPU time of the process so far (all threads),
// which unlike wall time does not count time the machine gave to other
// processes.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
