package job

import (
	"math"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
)

// released is what a DP job may publish of one round's metrics: every
// value is computed from public data, or is the output of a mechanism
// whose event is in the ledger, or is left out (README, "What is
// protected"). Kept: the round number, ε and its accountant, the commit
// time, the cohort size of a fixed cohort (the configured K, public), and
// the global model's score on the Fashion-MNIST test split, which is
// public data scored with a model that is itself a DP release. Left out:
// every count and statistic of the sampled users (realised cohort size
// under Poisson sampling, reports, examples, training loss, update norms,
// clipping, rejections, stragglers, availability, dropouts, late reports),
// the estimated and measured round times (they follow the cohort's largest
// dataset), secure aggregation's instance parameters (chosen from the
// cohort's size), and the test score of leaf and synthetic jobs, whose
// test split is the users' own data.
func released(met types.RoundMetrics, spec types.Spec) types.RoundMetrics {
	out := types.RoundMetrics{Round: met.Round, Epsilon: met.Epsilon, Accountant: met.Accountant, Time: met.Time,
		NoisyClipNorm: met.NoisyClipNorm, NoisyUnclippedFraction: met.NoisyUnclippedFraction}
	if spec.Sampling.Scheme == "fixed" && spec.Population.Source != "devices" {
		out.Selected = met.Selected
	}
	if spec.Dataset == "fashion-mnist" && met.Test != nil {
		t := *met.Test
		out.Test = &t
	}
	return out
}

// cohortBound is a public bound on the size of a cohort that s draws from
// n users, for secure aggregation's fixed-point encoding: K for a fixed
// cohort, and q·n + 10·√(q·n) + 10 (at most n) under Poisson sampling,
// exceeded with probability below 10^−20. A larger cohort may wrap the
// sum, which costs accuracy, not privacy.
func cohortBound(s fl.Sampler, n int) int {
	switch s := s.(type) {
	case fl.Fixed:
		return s.K
	default:
		mu := s.ExpectedSize(n)
		return min(n, int(mu+10*math.Sqrt(mu)+10))
	}
}
