package fl

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// FedAvg runs rounds of generalized FedAvg (Wang et al. 2021, Algorithm 1)
// on a simulated population, as four stages:
//
//	train     each client of the cohort trains from x_t      (train)
//	filter    the simulation keeps, holds or drops its report (filter)
//	aggregate Δ_t from the kept reports                     (Aggregate)
//	server    x_{t+1} = ServerOpt(x_t, −Δ_t)                (Server)
//
// Configure the exported fields, then call Round once per round; buffers
// are allocated on the first call and reused. Not safe for concurrent use.
type FedAvg struct {
	// Model is the architecture trained by every client.
	Model model.Model
	// Client is the local training of each client; ClientSchedule decays
	// Client.LR over the Rounds (T) of the job.
	Client         ClientConfig
	ClientSchedule Schedule
	Rounds         int
	// Variant is the client-side algorithm (nil: FedAvg, or FedProx with
	// Client.ProxMu > 0). Scaffold, when set, is the Variant.
	Variant  ClientVariant
	Scaffold *Scaffold
	// Server is the server step, the same as with real devices.
	Server ServerUpdate
	// Aggregate forms Δ_t from the Δ_i (GaussianAggregator under DP).
	Aggregate Aggregator
	// Canaries, when set, adds the round's canary clients to the released
	// average (empirical privacy estimation; Canaries documents why this
	// is post-processing of the round's DP release).
	Canaries *Canaries
	// Simulation is the population's stragglers, device times and report
	// rules (the zero value: every client reports).
	Simulation Simulation
	// Workers is the number of clients trained in parallel; ≤ 0 means
	// GOMAXPROCS. Results do not depend on it.
	Workers int
	// Seed makes the clients' local shuffles and the simulation's draws
	// reproducible. It is simulation randomness only: privacy-critical
	// draws (sampling, noise) never derive from it.
	Seed uint64

	s *roundState
}

// RoundStats reports one round.
type RoundStats struct {
	AggregateStats
	// Cohort is the number of clients sampled.
	Cohort int
	// Examples is the number of training examples per epoch of the
	// clients whose reports were aggregated.
	Examples int
	// TrainLoss is the example-weighted mean local training loss of those
	// clients.
	TrainLoss float64
	// Rejected counts client updates refused by the aggregator (NaN/Inf).
	Rejected int
	// Stragglers counts the cohort's stragglers (kept with fewer epochs,
	// or dropped with Simulation.DropStragglers).
	Stragglers int
	// EstimatedSeconds is the round's estimated wall-clock time on
	// devices (with Simulation.RoundTime; 0 otherwise).
	EstimatedSeconds float64
	// Late counts reports discarded at the deadline or beyond the target.
	Late int
}

// roundState is FedAvg's buffers, allocated by the first Round, and the
// running round's tally.
type roundState struct {
	variant ClientVariant
	workers []worker
	order   *inOrder
	accs    []Accumulator // one: reports are added in cohort order
	avg     []float32
	tally   tally
}

// roundInput is what every client of one round starts from.
type roundInput struct {
	round  int
	lr     float32 // η_l under its schedule
	params []float32
	fed    data.Population
}

// state returns f's buffers, allocating them on the first call: the
// variant set up for the model, one worker per Workers, one aggregate.
func (f *FedAvg) state() *roundState {
	if f.s != nil {
		return f.s
	}
	n := f.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	d := f.Model.NumParams()
	var v ClientVariant = plain{}
	switch {
	case f.Scaffold != nil:
		v = f.Scaffold
	case f.Variant != nil:
		v = f.Variant
	}
	v.setup(d, n, f.Client)
	s := &roundState{
		variant: v,
		workers: make([]worker, n),
		order:   newInOrder(d, n),
		accs:    []Accumulator{f.Aggregate.NewAccumulator(d)},
		avg:     make([]float32, d),
	}
	for i := range s.workers {
		s.workers[i] = newWorker(f.Model, f.Client)
	}
	f.s = s
	return s
}

// Round trains the cohort (client IDs of fed) from params, aggregates their
// deltas and applies the server step to params in place. round numbers the
// round (1-based) for the shuffles' seeds and the schedules; expected is
// the sampler's expected cohort size, the DP denominator. On error
// (cancelled ctx, failed aggregation, a *PanicError from a client's
// training) params are left unchanged.
func (f *FedAvg) Round(ctx context.Context, round int, params []float32, fed data.Population, cohort []int, expected float64) (RoundStats, error) {
	if len(params) != f.Model.NumParams() {
		return RoundStats{}, fmt.Errorf("fl: params have %d values, model %s has %d", len(params), f.Model.Name(), f.Model.NumParams())
	}
	s := f.state()
	s.tally.reset()
	s.accs[0].Reset()
	in := roundInput{round: round, lr: float32(f.Client.LR * f.ClientSchedule.Factor(round, f.Rounds)), params: params, fed: fed}
	err := s.order.run(ctx, len(s.workers), len(cohort),
		func(w, i int, delta []float32) report { return f.train(s, w, in, cohort[i], delta) },
		func(r report, delta []float32) { f.filter(s, r, delta, in.lr) })
	if err != nil {
		return RoundStats{}, err
	}
	if f.Simulation.Target > 0 {
		keep := f.Simulation.earliest(s.tally.held, len(params))
		s.tally.closeAt(keep, s.accs[0])
	}
	return f.update(s, params, round, len(cohort), expected)
}

// train is the first stage: client id's local training from x_t on
// worker w into delta, with the simulation's draws for that client.
func (f *FedAvg) train(s *roundState, w int, in roundInput, id int, delta []float32) report {
	wk := &s.workers[w]
	c := in.fed.Client(id)
	r := report{id: id, examples: len(c.Train)}
	epochs, straggler, drop := f.Simulation.epochs(wk.sim, f.Seed, in.round, id, f.Client.Epochs)
	r.straggler, r.dropped = straggler, drop
	if drop {
		return r
	}
	wk.trainer.correction = s.variant.beforeTraining(w, id)
	r.loss = wk.trainer.train(delta, in.params, in.fed.Base(), c.Train, epochs, in.lr, wk.shuffles.at(f.Seed, 0, in.round, id))
	r.steps = wk.trainer.steps
	r.dev = f.Simulation.device(wk.sim, f.Seed, in.round, id, SimulatedSeconds(len(delta), len(c.Train), epochs))
	return r
}

// filter is the second stage, in cohort order: the variant sees the
// update, then the simulation's rules decide whether the report enters
// the aggregate now, waits for the Target, or is discarded.
func (f *FedAvg) filter(s *roundState, r report, delta []float32, lr float32) {
	t := &s.tally
	if r.straggler {
		t.stragglers++
	}
	if r.dropped {
		return
	}
	if r.steps > 0 {
		r.weight = s.variant.afterTraining(r.id, delta, r.steps, lr)
	}
	switch {
	case f.Simulation.late(r.dev, len(delta)):
		t.late++
	case f.Simulation.Target > 0:
		t.hold(r, delta)
	default:
		t.add(s.accs[0], r, delta)
	}
}

// update is the last two stages: release Δ_t (with the canaries and the
// variant's adjustment) and apply the server step to params.
func (f *FedAvg) update(s *roundState, params []float32, round, cohort int, expected float64) (RoundStats, error) {
	st := s.tally.stats(cohort)
	start := time.Now()
	agg, err := f.Aggregate.Release(s.avg, s.accs, expected)
	st.AggregateStats = agg
	defer s.variant.afterRound()
	if errors.Is(err, ErrEmptyCohort) {
		return st, nil // nothing to learn from; the model stays as it is
	}
	if err != nil {
		return st, err
	}
	if f.Canaries != nil {
		f.Canaries.insert(s.avg, expected)
	}
	if t := &s.tally; t.examples > 0 {
		s.variant.beforeServerStep(s.avg, t.weightSum/float64(t.examples))
	}
	f.Server.Apply(params, s.avg, round)
	if rt := f.Simulation.RoundTime; rt != nil {
		d := float64(len(params))
		st.EstimatedSeconds = rt.RoundSeconds(4*d, f.uploadBytes(st.AggregateStats), s.tally.devices, time.Since(start).Seconds())
	}
	return st, nil
}

// uploadSizer is implemented by an Aggregator whose clients upload
// something else than their d float32s (secure aggregation: the
// protocol's traffic), for the round-time model's S_up.
type uploadSizer interface {
	// uploadBytes is what each client of the round st describes sends
	// for a model of d parameters.
	uploadBytes(d int, st AggregateStats) float64
}

// uploadBytes is S_up of the round st describes.
func (f *FedAvg) uploadBytes(st AggregateStats) float64 {
	d := f.Model.NumParams()
	if u, ok := f.Aggregate.(uploadSizer); ok {
		return u.uploadBytes(d, st)
	}
	return 4 * float64(d)
}
