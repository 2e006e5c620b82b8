package job

import (
	"math"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
)

// participationModel is the spec as fl's participation model, with the job's seed.
func participationModel(p types.ParticipationSpec, seed uint64) fl.Participation {
	return fl.Participation{DiurnalAmplitude: p.DiurnalAmplitude, PeriodRounds: p.PeriodRounds, DropoutRate: p.DropoutRate,
		OverSelection: p.OverSelection, DeadlineSeconds: p.DeadlineSeconds, Seed: seed}
}

// analysed is the sampling the accountant analyses: the configured rate
// or cohort, scaled by over-selection (the server selects that many).
func analysed(s types.Spec) (rate float64, cohort int) {
	o := s.Participation.OverSelection
	return min(1, s.Sampling.Rate*(1+o)), min(s.Population.Size, int(math.Ceil(float64(s.Sampling.CohortSize)*(1+o))))
}

// specSampler is the sampling the server performs over n users, and the
// Target of reports it keeps (0: all): Poisson at rate q·(1+o), or a fixed
// cohort of ⌈K·(1+o)⌉, with Target q·N or K under over-selection o > 0.
func specSampler(s types.Spec, n int) (fl.Sampler, int) {
	rate, size := analysed(s)
	if s.Sampling.Scheme == "fixed" {
		if s.Participation.OverSelection > 0 {
			return fl.Fixed{K: size}, s.Sampling.CohortSize
		}
		return fl.Fixed{K: size}, 0
	}
	if s.Participation.OverSelection > 0 {
		return fl.Poisson{Q: rate}, max(1, int(math.Round(s.Sampling.Rate*float64(n))))
	}
	return fl.Poisson{Q: rate}, 0
}

// Uncovered says why the job's privacy analysis does not cover its
// configuration ("" when it does).
func Uncovered(s types.Spec) string {
	if s.Participation.AmongAvailable {
		return "participation.among_available draws each round's fixed cohort among the users available in that round: a user's chance of selection then depends on how many others are online, which the sampling-without-replacement accountant over the whole population does not cover; the reported ε assumes uniform sampling over all population.size users and is not a proven bound"
	}
	return ""
}

// onDemandOptions is the population's data.OnDemand configuration.
func onDemandOptions(p types.PopulationSpec, seed uint64) data.OnDemandOptions {
	return data.OnDemandOptions{
		NumClients: p.Size, Alpha: p.DirichletAlpha, SizeMu: p.SizeMu, SizeSigma: p.SizeSigma,
		MaxExamples: p.MaxExamples, HeldOutFraction: p.HeldOutFraction, EvalUserFraction: p.EvalUserFraction, Seed: seed,
	}
}

// clientConfig is the spec as fl's client configuration.
func clientConfig(c types.ClientSpec) fl.ClientConfig {
	return fl.ClientConfig{Epochs: c.Epochs, BatchSize: c.BatchSize, LR: c.LR, Momentum: c.Momentum, ProxMu: c.ProxMu}
}

// serverOptConfig is the spec as fl's optimizer configuration.
func serverOptConfig(s types.ServerSpec) fl.ServerOptConfig {
	return fl.ServerOptConfig{Name: s.Optimizer, LR: s.LR, Momentum: s.Momentum, Beta1: s.Beta1, Beta2: s.Beta2, Tau: s.Tau}
}

// AccountingDelta is the δ at which the accountants report ε: the job's
// δ less what secure aggregation's aborts cost (AbortDelta).
func AccountingDelta(d types.DPSpec) float64 { return d.Delta - d.AbortDelta }

// DefaultSpec is the job every submission starts from: the demo job of
// README.md, DP-FedAvg with logistic regression on Fashion-MNIST over 6,000
// users.
func DefaultSpec() types.Spec {
	return types.Spec{
		Dataset: "fashion-mnist",
		Model:   "logreg",
		Population: types.PopulationSpec{
			Source: "simulated", Size: 6000, Partition: "dirichlet", DirichletAlpha: 1, ShardsPerClient: 2,
			SizeMu: math.Log(10), MaxExamples: 1000,
		},
		Sampling:  types.SamplingSpec{Scheme: "poisson", Rate: 0.02, CohortSize: 120},
		Rounds:    300,
		Algorithm: "fedavg",
		Client:    types.ClientSpec{Epochs: 1, BatchSize: 20, LR: 0.1, LRSchedule: defaultSchedule},
		Server:    defaultServer(),
		DP:        types.DPSpec{Enabled: true, ClipNorm: 0.5, NoiseMultiplier: 1, Delta: 1e-5},
		EvalEvery: 10,
		Seed:      1,
		SecAgg:    types.SecAggSpec{MinClients: 3, MaxAttempts: 3, StageTimeoutSeconds: 30, JoinTimeoutSeconds: 60},
		RoundTime: types.RoundTimeSpec(fl.DefaultRoundTimeModel()),
	}
}

// defaultSchedule is constant, with exp_decay's parameters at Reddi et
// al.'s EXPDECAY (×0.1 every 500 rounds) for when kind is switched.
var defaultSchedule = types.Schedule{Kind: "constant", DecayRate: 0.1, DecayEvery: 500}

func defaultServer() types.ServerSpec {
	d := fl.DefaultServerOptConfig()
	return types.ServerSpec{Optimizer: d.Name, LR: d.LR, LRSchedule: defaultSchedule, Momentum: d.Momentum, Beta1: d.Beta1, Beta2: d.Beta2, Tau: d.Tau}
}

// Adjacency names the neighbouring relation of the job's (ε, δ): two
// populations are neighbours if one has one more user ("add_remove", the
// relation of Poisson sampling; McMahan et al. 2018, §2) or if they differ
// in one user's data ("replace_one", the relation of a fixed-size cohort,
// Wang, Balle, Kasiviswanathan 2019, and of devices jobs). Guarantees
// under different relations do not compose into one ε.
func Adjacency(s types.Spec) string {
	if s.Population.Source == "devices" || s.Sampling.Scheme == "fixed" {
		return AdjacencyReplaceOne
	}
	return AdjacencyAddRemove
}

// The two neighbouring relations a job's ε can be stated under.
const (
	AdjacencyAddRemove  = "add_remove"
	AdjacencyReplaceOne = "replace_one"
)
