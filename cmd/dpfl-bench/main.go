// Command bench times dpfl's DP-FedAvg round loop on the same job as the
// PyTorch reference ../shared/bench/torch_fedavg.py, for the side-by-side
// comparison of scripts/bench.sh: Fashion-MNIST over a simulated population
// (Dirichlet(alpha) label skew), the MLP 784-200-200-10 (or logreg),
// E local epochs of SGD with batch B on every client of a fixed-size
// cohort, per-client clipping to C, Gaussian noise z·C on the sum, server
// SGD with learning rate 1. It prints one line per round and a RESULT line
// in the reference's format.
//
// examples_per_s counts every local training example over the whole round
// time, aggregation and noise included (the reference divides by its
// training time only, so this comparison favours PyTorch slightly);
// examples_per_cpu_s divides by the process's CPU time over the rounds
// instead, which is robust to other processes sharing the machine.
//
// Usage:
//
//	go run ./cmd/dpfl-bench --clients 1000 --cohort 100 --rounds 20 --workers 1 [--cpuprofile f]
//
// Build with GOEXPERIMENT=simd for the archsimd kernels (see README,
// "Performance and the SIMD build").
package main

import (
	"context"
	"flag"
	"fmt"
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
)

func main() {
	dir := flag.String("data", "/usr/share/datasets/fashion-mnist", "folder with the Fashion-MNIST IDX .gz files")
	clients := flag.Int("clients", 1000, "population size")
	cohort := flag.Int("cohort", 100, "clients per round (fixed cohort)")
	rounds := flag.Int("rounds", 20, "rounds to run")
	epochs := flag.Int("epochs", 1, "local epochs")
	batch := flag.Int("batch", 20, "local batch size")
	lr := flag.Float64("lr", 0.05, "client learning rate")
	clip := flag.Float64("clip", 1, "clip norm C")
	z := flag.Float64("z", 1, "noise multiplier z")
	alpha := flag.Float64("alpha", 0.5, "Dirichlet label-skew concentration")
	workers := flag.Int("workers", 1, "clients trained in parallel (0: GOMAXPROCS)")
	name := flag.String("model", "mlp", "mlp or logreg")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the rounds to this file")
	flag.Parse()

	train, test, err := data.LoadFashionMNIST(*dir)
	if err != nil {
		log.Fatal(err)
	}
	fed, err := data.NewFederated(train, data.Options{NumClients: *clients, Partitioner: data.Dirichlet{Alpha: *alpha}, Seed: 0})
	if err != nil {
		log.Fatal(err)
	}
	m, err := model.New(*name, train.Dim, 10)
	if err != nil {
		log.Fatal(err)
	}
	noise, err := dp.NewSecureRand()
	if err != nil {
		log.Fatal(err)
	}
	f := &fl.FedAvg{
		Model:     m,
		Client:    fl.ClientConfig{Epochs: *epochs, BatchSize: *batch, LR: *lr},
		Server:    &fl.SGD{LR: 1},
		Aggregate: &fl.GaussianAggregator{Params: dp.Params{ClipNorm: *clip, NoiseMultiplier: *z}, Rand: noise},
		Workers:   *workers,
		Seed:      1,
	}
	params := make([]float32, m.NumParams())
	rng := rand.New(rand.NewPCG(0, 0))
	m.Init(params, rng)
	eval := fl.NewEvaluator(m, 0)
	sampler := fl.Fixed{K: *cohort}
	fmt.Printf("params=%d clients=%d cohort=%d workers=%d GOMAXPROCS=%d model=%s\n",
		m.NumParams(), *clients, *cohort, *workers, runtime.GOMAXPROCS(0), *name)

	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			log.Fatal(err)
		}
	}
	var total, cpu time.Duration
	var examples int
	for r := 1; r <= *rounds; r++ {
		ids := sampler.Sample(fed.NumClients(), rng)
		c0 := cpuTime()
		t0 := time.Now()
		st, err := f.Round(context.Background(), r, params, fed, ids, sampler.ExpectedSize(fed.NumClients()))
		if err != nil {
			log.Fatal(err)
		}
		dt := time.Since(t0)
		cpu += cpuTime() - c0
		total += dt
		examples += st.Examples * *epochs
		fmt.Printf("round %d %.3fs\n", r, dt.Seconds())
	}
	if *cpuprofile != "" {
		pprof.StopCPUProfile() // the profile covers the rounds only
	}
	fmt.Printf("test_acc=%.4f\n", eval.Dataset(params, test).Accuracy)
	fmt.Printf("RESULT round_s=%.3f cpu_s=%.3f examples=%d examples_per_s=%.0f examples_per_cpu_s=%.0f clients_per_s=%.1f mean_round_s=%.3f\n",
		total.Seconds(), cpu.Seconds(), examples, float64(examples)/total.Seconds(), float64(examples)/cpu.Seconds(),
		float64(*rounds**cohort)/total.Seconds(), total.Seconds()/float64(*rounds))
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
