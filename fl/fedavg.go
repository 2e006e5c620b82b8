package fl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/simd"
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
	// Seed makes the clients' local shuffles and the stragglers
	// reproducible. It is simulation randomness only: privacy-critical
	// draws (sampling, noise) never derive from it.
	Seed uint64
	// Rounds is the job's T, for the cosine schedules.
	Rounds int
	// ClientSchedule decays Client.LR over rounds; ServerSchedule decays
	// ServerLR, the server optimizer's base learning rate (used only when
	// ServerSchedule is not constant).
	ClientSchedule, ServerSchedule Schedule
	ServerLR                       float64
	// Stragglers is the fraction of each cohort that cannot finish its
	// local work (FedProx's systems heterogeneity, Li et al. 2020 §5.2):
	// each such client runs a uniformly random number of epochs in
	// [1, E]. With DropStragglers their updates are discarded instead
	// (FedAvg's behaviour in that paper) — under DP a discarded update
	// only removes a contribution, so the accounted ε still holds.
	Stragglers     float64
	DropStragglers bool
	// Scaffold, when set, runs SCAFFOLD's controlled local steps and
	// keeps its control variates (cross-silo, not with DP).
	Scaffold *Scaffold
	// Normalize runs FedNova (Wang et al. 2020, "Tackling the Objective
	// Inconsistency Problem in Heterogeneous Federated Optimization",
	// eq. 6–7): each Δ_i is divided by ‖a_i‖₁, its number of local steps
	// τ_i (or Σ_k (1−β^k)/(1−β) with client momentum β), and the weighted
	// mean is multiplied by τ_eff = Σ p_i‖a_i‖₁, so that clients doing more
	// steps no longer pull the model towards their own optimum. Only with
	// the example-weighted mean (no DP).
	Normalize bool
	// RoundTime, when set, estimates each round's wall-clock time on real
	// devices (RoundStats.EstimatedSeconds): the model is downloaded as
	// float32 (4d bytes), uploaded as float32 or, under secure
	// aggregation, as the protocol's traffic (secagg.ClientTraffic), and
	// every client that reported counts towards the slowest device.
	RoundTime *RoundTimeModel
	// DeadlineSeconds, when > 0, discards reports whose estimated device
	// time exceeds it; Target, when > 0, keeps only the Target earliest
	// reports (over-selection: the round closes when Target devices have
	// reported). Both need RoundTime, and only remove contributions
	// (Participation's DP semantics). With Target the cohort's updates
	// are held until the round closes: memory O(cohort · d).
	DeadlineSeconds float64
	Target          int
	// Canaries, when set, adds the round's canary clients to the released
	// average (empirical privacy estimation; Canaries documents why this
	// is post-processing of the round's DP release).
	Canaries *Canaries

	workers []*worker
	accs    []Accumulator
	avg     []float32
	pseudo  []float32
}

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

// stragglerStream separates the straggler draws from the shuffles, and
// deviceStream the round-time model's device factors.
const (
	stragglerStream = 0x5354524147474c45 // "STRAGGLE"
	deviceStream    = 0x4445564943455321 // "DEVICES!"
)

// worker is one goroutine's state, all allocated in setup: the trainer's
// buffers, its accumulator, the delta buffer and the shuffle generator,
// reseeded per client, so that training a client allocates nothing.
type worker struct {
	trainer *clientTrainer
	acc     Accumulator
	delta   []float32
	pcg     *rand.PCG
	rng     *rand.Rand
	// spcg and srng draw the stragglers (a stream of their own), and the
	// device factors of the round-time model.
	spcg *rand.PCG
	srng *rand.Rand
	// devices holds this round's reporting clients' device times, and
	// pending their updates while a Target is waiting for the earliest.
	devices []DeviceTime
	pending []report
	// spare holds the delta buffers of last round's pending reports, for
	// reuse: a Target round would otherwise allocate d floats per client.
	spare [][]float32
	late  int
	// per-round results
	lossSum    float64
	examples   int
	clients    int
	rejected   int
	stragglers int
	tauSum     float64 // Σ n_i‖a_i‖₁ (FedNova)
	corr       []float32
	err        error
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
	// Stragglers counts the cohort's stragglers (kept with fewer epochs,
	// or dropped with DropStragglers).
	Stragglers int
	// EstimatedSeconds is the round's estimated wall-clock time on
	// devices (with FedAvg.RoundTime; 0 otherwise).
	EstimatedSeconds float64
	// Late counts reports discarded at the deadline or beyond the target.
	Late int
}

// report is one client's trained update on its way into the aggregate.
type report struct {
	id       int
	dev      DeviceTime
	examples int
	loss     float64
	tau      float64
	delta    []float32 // held only while waiting for a Target
}

// hold copies delta into a spare buffer (or a new one) to keep it until
// the round closes.
func (w *worker) hold(delta []float32) []float32 {
	var buf []float32
	if n := len(w.spare); n > 0 {
		buf, w.spare = w.spare[n-1], w.spare[:n-1]
	} else {
		buf = make([]float32, len(delta))
	}
	copy(buf, delta)
	return buf
}

// add puts one client's update into the worker's accumulator.
func (w *worker) add(r report, delta []float32) {
	w.clients++
	if err := w.acc.Add(delta, r.examples); err != nil {
		w.rejected++
		return
	}
	w.tauSum += r.tau * float64(r.examples)
	w.devices = append(w.devices, r.dev)
	w.lossSum += r.loss * float64(r.examples)
	w.examples += r.examples
}

// closeAtTarget keeps the Target reports that finished first on their
// devices (the round closes when the Target-th arrives) and discards the
// rest as late.
func (f *FedAvg) closeAtTarget() {
	var all []report
	for _, w := range f.workers {
		all = append(all, w.pending...)
	}
	bytes := 4 * float64(f.Model.NumParams())
	at := func(r report) float64 { return f.RoundTime.ClientSeconds(bytes, bytes, r.dev) }
	// Ties go to the smaller client ID, never to the order in which the
	// workers finished (which depends on the other clients' work).
	slices.SortFunc(all, func(a, b report) int { return cmp.Or(cmp.Compare(at(a), at(b)), cmp.Compare(a.id, b.id)) })
	for i, r := range all {
		w := f.workers[i%len(f.workers)]
		if i >= f.Target {
			w.late++
			continue
		}
		w.add(r, r.delta)
	}
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
		spcg := rand.NewPCG(0, 0)
		w := &worker{
			trainer: newClientTrainer(f.Model, f.Client),
			acc:     f.Aggregate.NewAccumulator(d),
			delta:   make([]float32, d),
			pcg:     pcg,
			rng:     rand.New(pcg),
			spcg:    spcg,
			srng:    rand.New(spcg),
		}
		if f.Scaffold != nil {
			w.corr = make([]float32, d)
			w.trainer.correction = w.corr
		}
		f.workers[i] = w
		f.accs[i] = w.acc
	}
	if f.Scaffold != nil {
		f.Scaffold.init(d)
	}
	f.avg = make([]float32, d)
	f.pseudo = make([]float32, d)
}

// Round trains the cohort (client IDs of fed) from params, aggregates their
// deltas and applies the server step to params in place. round numbers the
// round (1-based) for the shuffles' seeds; expected is the sampler's
// expected cohort size, the DP denominator. On error (cancelled ctx, failed
// aggregation, a *PanicError from a client's training) params are left
// unchanged.
func (f *FedAvg) Round(ctx context.Context, round int, params []float32, fed data.Population, cohort []int, expected float64) (RoundStats, error) {
	if len(params) != f.Model.NumParams() {
		return RoundStats{}, fmt.Errorf("fl: params have %d values, model %s has %d", len(params), f.Model.Name(), f.Model.NumParams())
	}
	f.setup()
	lr := float32(f.Client.LR * f.ClientSchedule.Factor(round, f.Rounds))
	if k := f.ServerSchedule.Kind; k != "" && k != "constant" {
		f.Server.SetLR(float32(f.ServerLR * f.ServerSchedule.Factor(round, f.Rounds)))
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for _, w := range f.workers {
		w.acc.Reset()
		w.lossSum, w.examples, w.clients, w.rejected, w.stragglers, w.tauSum, w.late, w.err = 0, 0, 0, 0, 0, 0, 0, nil
		for _, r := range w.pending {
			w.spare = append(w.spare, r.delta)
		}
		w.devices, w.pending = w.devices[:0], w.pending[:0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A panic here would end the process: fail the round
				// instead, and keep taking the cohort so that the sender
				// is not left blocked.
				if p := recover(); p != nil {
					w.err = newPanicError(p)
					for range next {
					}
				}
			}()
			for id := range next {
				c := fed.Client(id)
				// The same stream as rand.New(rand.NewPCG(f.Seed, …)).
				w.pcg.Seed(f.Seed, uint64(round)<<32|uint64(id))
				epochs := f.Client.Epochs
				if f.Stragglers > 0 {
					// A stream of its own, so that stragglers leave the
					// shuffles of the other clients unchanged.
					w.spcg.Seed(f.Seed^stragglerStream, uint64(round)<<32|uint64(id))
					if w.srng.Float64() < f.Stragglers {
						w.stragglers++
						if f.DropStragglers {
							continue
						}
						epochs = 1 + w.srng.IntN(f.Client.Epochs)
					}
				}
				if f.Scaffold != nil {
					f.Scaffold.correction(w.corr, id)
				}
				loss := w.trainer.train(w.delta, params, fed.Base(), c.Train, epochs, lr, w.rng)
				// Modelled, never measured: a measured time would depend on
				// the other clients' work through CPU contention, and the
				// deadline and the Target must decide each report from its
				// own data alone.
				simSeconds := SimulatedSeconds(len(w.delta), len(c.Train), epochs)
				steps := w.trainer.steps
				if f.Scaffold != nil && steps > 0 {
					f.Scaffold.clientDone(id, w.delta, steps, lr)
				}
				var a float64
				if f.Normalize && steps > 0 {
					a = stepWeight(steps, f.Client.Momentum)
					simd.Scale(w.delta, float32(1/a))
				}
				var dev DeviceTime
				if f.RoundTime != nil {
					w.spcg.Seed(f.Seed^deviceStream, uint64(round)<<32|uint64(id))
					dev = f.RoundTime.Device(simSeconds, w.srng)
					bytes := 4 * float64(len(w.delta))
					if f.DeadlineSeconds > 0 && f.RoundTime.ClientSeconds(bytes, bytes, dev) > f.DeadlineSeconds {
						w.late++
						continue
					}
				}
				r := report{id: id, dev: dev, examples: len(c.Train), loss: loss, tau: a}
				if f.Target > 0 {
					r.delta = w.hold(w.delta)
					w.pending = append(w.pending, r)
					continue
				}
				w.add(r, w.delta)
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
	for _, w := range f.workers {
		if w.err != nil {
			return RoundStats{}, w.err
		}
	}
	if cancelled != nil {
		return RoundStats{}, cancelled
	}
	if f.Target > 0 {
		f.closeAtTarget()
	}
	st := RoundStats{Cohort: len(cohort)}
	for _, w := range f.workers {
		st.Late += w.late
		st.Examples += w.examples
		st.Rejected += w.rejected
		st.Stragglers += w.stragglers
		st.TrainLoss += w.lossSum
	}
	if st.Examples > 0 {
		st.TrainLoss /= float64(st.Examples)
	}
	var tauSum float64
	for _, w := range f.workers {
		tauSum += w.tauSum
	}
	serverStart := time.Now()
	agg, err := f.Aggregate.Release(f.avg, f.accs, expected)
	st.AggregateStats = agg
	if f.Scaffold != nil {
		defer f.Scaffold.serverDone()
	}
	if errors.Is(err, ErrEmptyCohort) {
		return st, nil // nothing to learn from; the model stays as it is
	}
	if err != nil {
		return st, err
	}
	if f.Canaries != nil {
		f.Canaries.insert(f.avg, expected)
	}
	if f.Normalize && st.Examples > 0 {
		simd.Scale(f.avg, float32(tauSum/float64(st.Examples))) // τ_eff
	}
	for i, v := range f.avg {
		f.pseudo[i] = -v
	}
	f.Server.Step(params, f.pseudo)
	if f.RoundTime != nil {
		st.EstimatedSeconds = f.estimate(st, time.Since(serverStart).Seconds())
	}
	return st, nil
}

// estimate applies the round-time model to the reporting clients.
func (f *FedAvg) estimate(st RoundStats, serverSeconds float64) float64 {
	d := f.Model.NumParams()
	down, up := 4*float64(d), 4*float64(d)
	if st.SecAgg != nil {
		up = float64(secagg.ClientTraffic(st.SecAgg.Neighbors, d).Sent)
	}
	var all []DeviceTime
	for _, w := range f.workers {
		all = append(all, w.devices...)
	}
	return f.RoundTime.RoundSeconds(down, up, all, serverSeconds)
}
