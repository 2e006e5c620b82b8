package job

import (
	"math/rand/v2"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/model"
)

// fedAvg is the round algorithm of spec over n users, as the runner and
// the sensitivity harness build it: local training, the server optimizer,
// and the participation policy that decides which reports the aggregate
// takes (stragglers, the deadline, over-selection's Target). The caller
// sets Aggregate (and Scaffold).
func fedAvg(spec types.Spec, mdl model.Model, server fl.ServerOptimizer, workers, n int) *fl.FedAvg {
	_, target := specSampler(spec, n)
	alg := &fl.FedAvg{
		Model:          mdl,
		Client:         clientConfig(spec.Client),
		ClientSchedule: fl.Schedule(spec.Client.LRSchedule),
		Rounds:         spec.Rounds,
		Server: fl.ServerUpdate{
			Optimizer: server,
			LR:        spec.Server.LR,
			Schedule:  fl.Schedule(spec.Server.LRSchedule),
			Rounds:    spec.Rounds,
		},
		Simulation: fl.Simulation{
			Stragglers:      spec.Client.Stragglers,
			DropStragglers:  spec.Client.DropStragglers,
			Target:          target,
			DeadlineSeconds: spec.Participation.DeadlineSeconds,
		},
		Workers: workers,
		Seed:    spec.Seed,
	}
	if spec.Algorithm == "fednova" {
		alg.Variant = &fl.FedNova{}
	}
	// Jobs stored before the round-time model have none: they skip the
	// estimate rather than fail.
	if rt := fl.RoundTimeModel(spec.RoundTime); rt.Validate() == nil {
		alg.Simulation.RoundTime = &rt
	}
	return alg
}

// aggregator is the round's aggregation as spec configures it over n
// users: secure aggregation, DP-FedAvg's Gaussian aggregator with noise
// multiplier z, or (without DP) the example-weighted mean. secure is the
// noise source; the sensitivity harness passes z = 0 to see the pre-noise
// sum of the very aggregator the runner uses. Under the distributed
// discrete Gaussian the clients add the noise, sized by z (ddgParams);
// its parameters' errors are the only errors.
func aggregator(spec types.Spec, z float64, n int, secure *rand.Rand, workers int) (fl.Aggregator, error) {
	switch {
	case spec.SecureAggregation:
		sampler, _ := specSampler(spec, n)
		sa := &fl.SecureAggregator{
			Params:      dp.Params{ClipNorm: spec.DP.ClipNorm},
			DP:          spec.DP.Enabled,
			MinClients:  spec.SecAgg.MinClients,
			DropoutRate: spec.SecAgg.DropoutRate,
			Rand:        secure,
			Dropouts:    rand.New(rand.NewPCG(spec.Seed, 0xd409)),
			Workers:     workers,
			MaxClients:  cohortBound(sampler, n),
		}
		switch {
		case distributed(spec):
			s := spec
			s.DP.NoiseMultiplier = z
			p, err := ddgParams(s)
			if err != nil {
				return nil, err
			}
			sa.Distributed = &p
		case spec.DP.Enabled:
			sa.Params.NoiseMultiplier = z
			if a := spec.DP.AdaptiveClipping; a != nil {
				sa.Adaptive = adaptiveClip(spec, a.InitialClip) // the runner sets its clip and range
			}
		}
		return sa, nil
	case spec.DP.Enabled:
		g := &fl.GaussianAggregator{Params: dp.Params{ClipNorm: spec.DP.ClipNorm, NoiseMultiplier: z}, Rand: secure}
		if a := spec.DP.AdaptiveClipping; a != nil {
			g.Adaptive = adaptiveClip(spec, a.InitialClip) // the runner sets a resumed job's clip
		}
		return g, nil
	default:
		return fl.WeightedMean{}, nil
	}
}
