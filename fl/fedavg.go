package fl

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// FedAvg runs rounds of generalized FedAvg (Wang et al. 2021, Algorithm 1)
// on a simulated population. Configure the exported fields, then call
// Round once per round; buffers are allocated on the first call and reused.
// Not safe for concurrent use.
type FedAvg struct {
	// Model is the architecture trained by every client.
	Model model.Model
	// Client is the local training of each client.
	Client ClientConfig
	// Server applies the pseudo-gradient −Δ_t.
	Server ServerOptimizer
	// Aggregate forms Δ_t from the Δ_i (GaussianAggregator under DP).
	Aggregate Aggregator
	// Workers is the number of clients trained in parallel; ≤ 0 means
	// GOMAXPROCS.
	Workers int
	// Seed makes the clients' local shuffles reproducible. It is
	// simulation randomness only: privacy-critical draws (sampling, noise)
	// never derive from it.
	Seed uint64

	workers []*worker
	accs    []Accumulator
	avg     []float32
	pseudo  []float32
}

// worker is one goroutine's state, all allocated in setup: the trainer's
// buffers, its accumulator, the delta buffer and the shuffle generator,
// reseeded per client, so that training a client allocates nothing.
type worker struct {
	trainer *clientTrainer
	acc     Accumulator
	delta   []float32
	pcg     *rand.PCG
	rng     *rand.Rand
	// per-round results
	lossSum  float64
	examples int
	clients  int
	rejected int
	err      error
}

// RoundStats reports one round.
type RoundStats struct {
	AggregateStats
	// Cohort is the number of clients sampled.
	Cohort int
	// Examples is the number of training examples the cohort processed per
	// epoch.
	Examples int
	// TrainLoss is the example-weighted mean local training loss.
	TrainLoss float64
	// Rejected counts client updates refused by the aggregator (NaN/Inf).
	Rejected int
}

func (f *FedAvg) setup() {
	if f.workers != nil {
		return
	}
	n := f.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	d := f.Model.NumParams()
	f.workers = make([]*worker, n)
	f.accs = make([]Accumulator, n)
	for i := range f.workers {
		pcg := rand.NewPCG(0, 0)
		f.workers[i] = &worker{
			trainer: newClientTrainer(f.Model, f.Client),
			acc:     f.Aggregate.NewAccumulator(d),
			delta:   make([]float32, d),
			pcg:     pcg,
			rng:     rand.New(pcg),
		}
		f.accs[i] = f.workers[i].acc
	}
	f.avg = make([]float32, d)
	f.pseudo = make([]float32, d)
}

// Round trains the cohort (client IDs of fed) from params, aggregates their
// deltas and applies the server step to params in place. round numbers the
// round (1-based) for the shuffles' seeds; expected is the sampler's
// expected cohort size, the DP denominator. On error (cancelled ctx, failed
// aggregation) params are left unchanged.
func (f *FedAvg) Round(ctx context.Context, round int, params []float32, fed *data.Federated, cohort []int, expected float64) (RoundStats, error) {
	if len(params) != f.Model.NumParams() {
		return RoundStats{}, fmt.Errorf("fl: params have %d values, model %s has %d", len(params), f.Model.Name(), f.Model.NumParams())
	}
	f.setup()
	next := make(chan int)
	var wg sync.WaitGroup
	for _, w := range f.workers {
		w.acc.Reset()
		w.lossSum, w.examples, w.clients, w.rejected, w.err = 0, 0, 0, 0, nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				c := fed.Client(id)
				// The same stream as rand.New(rand.NewPCG(f.Seed, …)).
				w.pcg.Seed(f.Seed, uint64(round)<<32|uint64(id))
				loss := w.trainer.train(w.delta, params, fed.Base(), c.Train, w.rng)
				w.clients++
				if err := w.acc.Add(w.delta, len(c.Train)); err != nil {
					w.rejected++
					continue
				}
				w.lossSum += loss * float64(len(c.Train))
				w.examples += len(c.Train)
			}
		}()
	}
	var cancelled error
	for _, id := range cohort {
		if err := ctx.Err(); err != nil {
			cancelled = err
			break
		}
		next <- id
	}
	close(next)
	wg.Wait()
	if cancelled != nil {
		return RoundStats{}, cancelled
	}
	st := RoundStats{Cohort: len(cohort)}
	for _, w := range f.workers {
		st.Examples += w.examples
		st.Rejected += w.rejected
		st.TrainLoss += w.lossSum
	}
	if st.Examples > 0 {
		st.TrainLoss /= float64(st.Examples)
	}
	agg, err := f.Aggregate.Release(f.avg, f.accs, expected)
	st.AggregateStats = agg
	if errors.Is(err, ErrEmptyCohort) {
		return st, nil // nothing to learn from; the model stays as it is
	}
	if err != nil {
		return st, err
	}
	for i, v := range f.avg {
		f.pseudo[i] = -v
	}
	f.Server.Step(params, f.pseudo)
	return st, nil
}
