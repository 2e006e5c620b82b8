package job

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/storage"
)

// roundRunner runs a job's rounds: the simulated population's
// (simulatedRunner) or the enrolled devices' (devicesRunner). run runs
// attempt (from 1) of round r from params and leaves the new global
// model in params; an attempt that fails leaves params as they were.
type roundRunner interface {
	run(ctx context.Context, r, attempt int, params []float32) (roundResult, error)
}

// roundResult is one round's statistics: fl's, and the selected users
// that participation took out before training (simulated rounds only).
type roundResult struct {
	fl.RoundStats
	unavailable, droppedOut int
}

// jobRun is one run of a job in its goroutine, from its last committed
// round to its end or its interruption.
type jobRun struct {
	m *Manager
	// db is where the run writes: the manager's store, or the job's fenced
	// view while this replica leads the job (lead.go).
	db     *storage.DB
	ctx    context.Context
	job    storage.Job
	spec   types.Spec
	state  *modelState
	runner roundRunner
	scores *scorer
	// ledger is the job's privacy spend (nil without DP).
	ledger *ledgerState
	// estimatedTotal is the estimated deployment time of the rounds so far.
	estimatedTotal float64
}

// newJobRun builds j's run: its data, model and round runner, its state
// restored from the last committed round, and its ledger. Every error
// fails the job with the error as its message.
func (m *Manager) newJobRun(ctx context.Context, db *storage.DB, j storage.Job, spec types.Spec) (*jobRun, error) {
	// A job stored before the numeric bounds (limits.go) may carry a
	// noise σ that overflows the release and panics.
	if sigma := spec.DP.NoiseMultiplier * spec.DP.ClipNorm; spec.DP.Enabled && !(sigma > 0 && sigma <= MaxNoiseStd) {
		return nil, fmt.Errorf("not started: the noise standard deviation σ = dp.noise_multiplier × dp.clip_norm = %g must be in (0, %g]", sigma, MaxNoiseStd)
	}
	pop, test, err := m.population(spec)
	if err != nil {
		return nil, err
	}
	mdl, err := model.New(spec.Model, test.Dim, test.Classes)
	if err != nil {
		return nil, err
	}
	// Again at every (re)start, before the job allocates its buffers: a
	// job resumed under a lower limit must fail, not take the process's
	// memory.
	if err := m.checkMemory(spec, mdl); err != nil {
		return nil, fmt.Errorf("not started: %w", err)
	}
	state, err := restore(m.db, j, spec, mdl, pop)
	if err != nil {
		return nil, err
	}
	jr := &jobRun{m: m, db: db, ctx: ctx, job: j, spec: spec, state: state, scores: newScorer(mdl, test, pop, m.workers)}
	if jr.estimatedTotal, err = estimatedSoFar(m.db, j); err != nil {
		return nil, err
	}
	if jr.runner, err = jr.newRoundRunner(mdl, pop); err != nil {
		return nil, err
	}
	if spec.DP.Enabled {
		if jr.ledger, err = m.openLedger(db, j.ID, spec); err != nil {
			return nil, err
		}
	}
	return jr, nil
}

// newRoundRunner builds the job's round runner over pop (nil for
// devices). Sampling and noise draw from one crypto/rand-seeded stream.
func (jr *jobRun) newRoundRunner(mdl model.Model, pop data.Population) (roundRunner, error) {
	secure, err := dp.NewSecureRand()
	if err != nil {
		return nil, err
	}
	if jr.spec.Population.Source == "devices" {
		return jr.newDevicesRunner(secure)
	}
	return jr.newSimulatedRunner(mdl, pop, secure)
}

// simulatedRunner runs rounds of FedAvg on a simulated population: it
// samples the cohort, lets the participation model take out the users
// that are unavailable or drop out, and trains the rest.
type simulatedRunner struct {
	pop     data.Population
	alg     *fl.FedAvg
	sampler fl.Sampler
	part    fl.Participation
	// amongAvailable draws a fixed cohort of size among the users
	// available in the round (participation.among_available).
	amongAvailable bool
	size           int
	// secAgg is alg's secure aggregator (nil without one), told each
	// attempt's number.
	secAgg *fl.SecureAggregator
	secure *rand.Rand
}

// newSimulatedRunner builds the spec's FedAvg over pop with the model
// state's server optimizer and SCAFFOLD variates, the spec's aggregator
// (noise from secure) and, for an audited job, its canaries.
func (jr *jobRun) newSimulatedRunner(mdl model.Model, pop data.Population, secure *rand.Rand) (*simulatedRunner, error) {
	m, spec, n := jr.m, jr.spec, pop.NumClients()
	// The server samples at the analysed rate (over-selection included)
	// and the round keeps at most the target of reports (fedAvg).
	sampler, _ := specSampler(spec, n)
	_, size := analysed(spec)
	alg := fedAvg(spec, mdl, jr.state.server, m.workers, n)
	alg.Scaffold = jr.state.scaffold
	var err error
	if alg.Aggregate, err = aggregator(spec, spec.DP.NoiseMultiplier*m.noiseFactor(), n, secure, m.workers); err != nil {
		return nil, fmt.Errorf("not started: %w", err)
	}
	s := &simulatedRunner{pop: pop, alg: alg, sampler: sampler, part: participationModel(spec.Participation, spec.Seed),
		amongAvailable: spec.Participation.AmongAvailable, size: size, secure: secure}
	s.secAgg, _ = alg.Aggregate.(*fl.SecureAggregator)
	if a := adaptiveOf(alg.Aggregate); a != nil {
		metrics, err := m.db.Metrics(jr.job.ID)
		if err != nil {
			return nil, err
		}
		if s.secAgg != nil {
			var ok bool
			if a.MinClip, a.MaxClip, ok = secureClipRange(s.secAgg.MaxClients, mdl.NumParams()); !ok {
				return nil, fmt.Errorf("not started: no clip norm fits secure aggregation's fixed point for %d clients", s.secAgg.MaxClients)
			}
		}
		if a.Clip, err = resumeClip(a, spec, jr.job.Round, metrics); err != nil {
			return nil, err
		}
	}
	if spec.Audit.Canaries > 0 {
		var err error
		if alg.Canaries, err = m.canaries(jr.job.ID, spec, n); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// run samples a fresh cohort and trains it.
func (s *simulatedRunner) run(ctx context.Context, r, attempt int, params []float32) (roundResult, error) {
	if s.secAgg != nil {
		s.secAgg.Attempt = attempt
	}
	n := s.pop.NumClients()
	var cohort []int
	if s.amongAvailable {
		cohort = s.part.SampleAvailable(n, s.size, r, s.secure)
	} else {
		cohort = s.sampler.Sample(n, s.secure)
	}
	selected := len(cohort)
	var res roundResult
	cohort, res.unavailable, res.droppedOut = s.part.Filter(trainingUsers(s.pop, cohort), r)
	st, err := s.alg.Round(ctx, r, params, s.pop, cohort, s.sampler.ExpectedSize(n))
	st.Cohort = selected
	res.RoundStats = st
	return res, err
}

// devicesRunner runs a devices job's rounds: each is one secure
// aggregation instance among the enrolled devices that join it
// (deviceRunner.round, devices.go).
type devicesRunner struct{ d *deviceRunner }

// newDevicesRunner builds the devices job's runner: the noise of the
// spec's DP (none without), added by the server after unmasking or, under
// the distributed discrete Gaussian, by the devices (its parameters'
// errors are the only errors), and the model state's server optimizer.
func (jr *jobRun) newDevicesRunner(secure *rand.Rand) (devicesRunner, error) {
	spec := jr.spec
	d := &deviceRunner{m: jr.m, jobID: jr.job.ID, spec: spec, server: jr.state.server, secure: secure, noise: dp.Params{ClipNorm: spec.DP.ClipNorm}}
	switch {
	case distributed(spec):
		p, err := ddgParams(spec)
		if err != nil {
			return devicesRunner{}, fmt.Errorf("not started: %w", err)
		}
		d.ddg = &p
	case spec.DP.Enabled:
		d.noise.NoiseMultiplier = spec.DP.NoiseMultiplier
	}
	return devicesRunner{d: d}, nil
}

// run runs the round with the devices that join it.
func (r devicesRunner) run(ctx context.Context, round, attempt int, params []float32) (roundResult, error) {
	st, err := r.d.round(ctx, round, attempt, params)
	return roundResult{RoundStats: st}, err
}

// scorer scores the global model on evaluation rounds: on the test split
// and, for a simulated population, on the clients' held-out examples or
// on the users that never train. Devices keep their data, so a devices
// job is scored on the server's test split only.
type scorer struct {
	eval *fl.Evaluator
	test *data.Dataset
	pop  data.Population
	// evalIDs are the on-demand population's users that never train (at
	// most 1,000 of them).
	evalIDs []int
}

// newScorer scores with mdl on workers goroutines.
func newScorer(mdl model.Model, test *data.Dataset, pop data.Population, workers int) *scorer {
	s := &scorer{eval: fl.NewEvaluator(mdl, workers), test: test, pop: pop}
	if od, ok := pop.(*data.OnDemand); ok {
		s.evalIDs = evalUsers(od, 1000)
	}
	return s
}

// score writes params' scores into met.
func (s *scorer) score(params []float32, met *types.RoundMetrics) {
	t := s.eval.Dataset(params, s.test)
	met.Test = wireMetrics(&t)
	switch pop := s.pop.(type) {
	case *data.Federated:
		if c, ok := s.eval.Clients(params, pop, nil); ok {
			met.HeldOut = wireClientMetrics(&c)
		}
	case *data.OnDemand:
		if c, ok := s.eval.Users(params, pop, s.evalIDs); ok {
			met.EvalUsers = wireClientMetrics(&c)
		}
	}
}
