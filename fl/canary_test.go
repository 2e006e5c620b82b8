package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl/model"
)

// basis writes the unit vector e_j.
func basis(j int, dst []float32) {
	clear(dst)
	dst[j] = 1
}

// A round with canaries at rate 1 and no noise moves the model by exactly
// the users' average plus C/expected along every canary's direction, and
// the round's stats do not count the canaries.
func TestCanariesEnterTheAverage(t *testing.T) {
	ds := blobs(200, 1)
	fed := population(t, ds, 4)
	m, _ := model.New("logreg", 784, 10)
	cfg := ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.05}
	const clip, expected = 0.5, 4.0
	run := func(c *Canaries) ([]float32, RoundStats) {
		sec, _ := dp.NewSecureRand()
		alg := &FedAvg{Model: m, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Workers: 2, Seed: 5, Canaries: c,
			Aggregate: &GaussianAggregator{Params: dp.Params{ClipNorm: clip, NoiseMultiplier: 0}, Rand: sec}}
		params := make([]float32, m.NumParams())
		st, err := alg.Round(context.Background(), 1, params, fed, []int{0, 1, 2}, expected)
		if err != nil {
			t.Fatal(err)
		}
		return params, st
	}
	plain, st0 := run(nil)
	with, st1 := run(&Canaries{K: 3, Rate: 1, ClipNorm: clip, Direction: basis, Rand: rand.New(rand.NewPCG(1, 1))})
	// The workers' merge order can change the last bits of the sum.
	for i := range plain {
		want := float64(plain[i])
		if i < 3 {
			want += clip / expected
		}
		if math.Abs(float64(with[i])-want) > 1e-6 {
			t.Fatalf("param %d = %v, want %v", i, with[i], want)
		}
	}
	if st0.Clients != st1.Clients || st1.Clients != 3 || math.Abs(st0.MeanNorm-st1.MeanNorm) > 1e-12 || st0.ClippedFraction != st1.ClippedFraction {
		t.Fatalf("canaries changed the round's stats: %+v vs %+v", st0.AggregateStats, st1.AggregateStats)
	}
}

// Each canary takes part in a round with probability Rate, independently:
// over many rounds the count per round has the Binomial(K, Rate) mean and
// variance, and every canary is drawn about equally often.
func TestCanarySamplingIsPoisson(t *testing.T) {
	const k, rate, rounds = 200, 0.1, 2000
	counts := make([]int, k)
	var sum, sumSq float64
	c := &Canaries{K: k, Rate: rate, ClipNorm: 1, Rand: rand.New(rand.NewPCG(3, 4)),
		Direction: func(j int, dst []float32) { counts[j]++; basis(0, dst) }}
	avg := make([]float32, 1)
	for range rounds {
		n := float64(c.insert(avg, 1))
		sum += n
		sumSq += n * n
	}
	mean, variance := sum/rounds, sumSq/rounds-(sum/rounds)*(sum/rounds)
	// Binomial(200, 0.1): mean 20, variance 18; the mean's standard error
	// over 2000 rounds is 0.095, the variance's about 0.6.
	if math.Abs(mean-k*rate) > 0.5 || math.Abs(variance-k*rate*(1-rate)) > 3 {
		t.Fatalf("canaries per round: mean %.2f, variance %.2f; want %v and %v", mean, variance, k*rate, k*rate*(1-rate))
	}
	if float64(avg[0]) != sum {
		t.Fatalf("average moved by %v for %v canaries of norm 1", avg[0], sum)
	}
	// Each canary: Binomial(2000, 0.1), mean 200, sd 13.4.
	for j, n := range counts {
		if n < 140 || n > 260 {
			t.Fatalf("canary %d drawn %d times in %d rounds, want about %v", j, n, rounds, rounds*rate)
		}
	}
}
