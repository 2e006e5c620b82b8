package job

import (
	"math/rand/v2"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/model"
)

// fedAvg is the round algorithm of spec over n users, as the runner and
// the sensitivity harness build it: local training, the server optimizer,
// and the participation policy that decides which reports the aggregate
// takes (stragglers, the deadline, over-selection's Target). The caller
// sets Aggregate (and Scaffold).
func (spec Spec) fedAvg(mdl model.Model, server fl.ServerOptimizer, workers, n int) *fl.FedAvg {
	_, target := spec.sampler(n)
	alg := &fl.FedAvg{
		Model:   mdl,
		Client:  spec.Client.Config(),
		Server:  server,
		Workers: workers,
		Seed:    spec.Seed,
		Rounds:  spec.Rounds,

		ClientSchedule:  spec.Client.LRSchedule,
		ServerSchedule:  spec.Server.LRSchedule,
		ServerLR:        spec.Server.LR,
		Stragglers:      spec.Client.Stragglers,
		DropStragglers:  spec.Client.DropStragglers,
		Normalize:       spec.Algorithm == "fednova",
		Target:          target,
		DeadlineSeconds: spec.Participation.DeadlineSeconds,
	}
	// Jobs stored before the round-time model have none: they skip the
	// estimate rather than fail.
	if spec.RoundTime.Validate() == nil {
		rt := spec.RoundTime
		alg.RoundTime = &rt
	}
	return alg
}

// aggregator is the round's aggregation as spec configures it over n
// users: secure aggregation, DP-FedAvg's Gaussian aggregator with noise
// multiplier z, or (without DP) the example-weighted mean. secure is the
// noise source; the sensitivity harness passes z = 0 to see the pre-noise
// sum of the very aggregator the runner uses.
func (spec Spec) aggregator(z float64, n int, secure *rand.Rand, workers int) fl.Aggregator {
	switch {
	case spec.SecureAggregation:
		sampler, _ := spec.sampler(n)
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
		if spec.DP.Enabled {
			sa.Params.NoiseMultiplier = z
		}
		return sa
	case spec.DP.Enabled:
		return &fl.GaussianAggregator{Params: dp.Params{ClipNorm: spec.DP.ClipNorm, NoiseMultiplier: z}, Rand: secure}
	default:
		return fl.WeightedMean{}
	}
}
