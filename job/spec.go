package job

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/strictjson"
)

// Spec is a training job as submitted over the API (JSON, snake_case).
// Fields left out of a submission keep the values of DefaultSpec, so the
// smallest valid job is {}. README.md documents every field.
type Spec struct {
	// Name is a free-form label.
	Name string `json:"name,omitempty"`
	// Dataset names the source data: "fashion-mnist" (partitioned among
	// population.clients users) or "synthetic" (FedProx's Synthetic(α, β),
	// naturally federated over population.clients devices).
	Dataset string `json:"dataset"`
	// Synthetic configures the synthetic dataset.
	Synthetic SyntheticSpec `json:"synthetic"`
	// LEAF locates a dataset in LEAF's JSON format on the server.
	LEAF LEAFSpec `json:"leaf"`
	// Model is the architecture: "logreg" or "mlp" (fl/model).
	Model string `json:"model"`
	// Population is the simulated population of users.
	Population PopulationSpec `json:"population"`
	// Sampling chooses each round's cohort.
	Sampling SamplingSpec `json:"sampling"`
	// Rounds is the number of training rounds T ≥ 1.
	Rounds int `json:"rounds"`
	// Algorithm is "fedavg" (generalized FedAvg/FedOpt; FedProx with
	// client.prox_mu > 0), "scaffold" (SCAFFOLD option II, stateful
	// clients) or "fednova" (FedNova's normalized averaging). The last two
	// are cross-silo algorithms without DP.
	Algorithm string `json:"algorithm"`
	// Client is the local training on each client.
	Client ClientSpec `json:"client"`
	// Server is the server optimizer.
	Server ServerSpec `json:"server"`
	// DP is the user-level differential privacy of the job.
	DP DPSpec `json:"dp"`
	// EvalEvery evaluates the global model on the test set every this
	// many rounds (and always after the last round).
	EvalEvery int `json:"eval_every"`
	// Seed fixes the simulation's randomness: data partition, model
	// initialisation, local shuffles. Privacy randomness (cohort sampling
	// under DP, noise) is never derived from it.
	Seed uint64 `json:"seed"`
	// SecureAggregation runs every round's aggregation through the secure
	// aggregation protocol (secagg: Bonawitz et al. 2017 with the SecAgg+
	// graph of Bell et al. 2020): the server learns only the sum of the
	// cohort's clipped, fixed-point-encoded updates. Clients then clip to
	// dp.clip_norm themselves and the mean is uniform over the cohort,
	// with or without DP.
	SecureAggregation bool `json:"secure_aggregation"`
	// SecAgg tunes the protocol; used only with SecureAggregation.
	SecAgg SecAggSpec `json:"secagg"`
	// RoundTime is the device model that turns a simulated round into an
	// estimated deployment time (Field Guide §5.4, fl.RoundTimeModel).
	RoundTime fl.RoundTimeModel `json:"round_time"`
	// Participation is who of the sampled users reports (fl.Participation).
	Participation ParticipationSpec `json:"participation"`
	// Audit inserts canary clients for an empirical ε (AuditSpec,
	// canary.go); left out of the JSON when off.
	Audit AuditSpec `json:"audit,omitzero"`
}

// ParticipationSpec models availability, dropouts, over-selection and the
// reporting deadline of simulated devices (fl.Participation documents
// the DP semantics).
type ParticipationSpec struct {
	DiurnalAmplitude float64 `json:"diurnal_amplitude"`
	PeriodRounds     int     `json:"period_rounds"`
	DropoutRate      float64 `json:"dropout_rate"`
	OverSelection    float64 `json:"over_selection"`
	DeadlineSeconds  float64 `json:"deadline_seconds"`
	// AmongAvailable draws a fixed cohort among the users available in the
	// round, as production systems do. Its privacy analysis is not covered
	// by the accountant, and the privacy report says so.
	AmongAvailable bool `json:"among_available"`
}

// Model is the spec as fl's participation model, with the job's seed.
func (p ParticipationSpec) Model(seed uint64) fl.Participation {
	return fl.Participation{DiurnalAmplitude: p.DiurnalAmplitude, PeriodRounds: p.PeriodRounds, DropoutRate: p.DropoutRate,
		OverSelection: p.OverSelection, DeadlineSeconds: p.DeadlineSeconds, Seed: seed}
}

// analysed is the sampling the accountant analyses: the configured rate
// or cohort, scaled by over-selection (the server selects that many).
func (s Spec) analysed() (rate float64, cohort int) {
	o := s.Participation.OverSelection
	return min(1, s.Sampling.Rate*(1+o)), min(s.Population.Clients, int(math.Ceil(float64(s.Sampling.CohortSize)*(1+o))))
}

// sampler is the sampling the server performs over n users, and the
// Target of reports it keeps (0: all): Poisson at rate q·(1+o), or a fixed
// cohort of ⌈K·(1+o)⌉, with Target q·N or K under over-selection o > 0.
func (s Spec) sampler(n int) (fl.Sampler, int) {
	rate, size := s.analysed()
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
func (s Spec) Uncovered() string {
	if s.Participation.AmongAvailable {
		return "participation.among_available draws each round's fixed cohort among the users available in that round: a user's chance of selection then depends on how many others are online, which the sampling-without-replacement accountant over the whole population does not cover; the reported ε assumes uniform sampling over all population.clients users and is not a proven bound"
	}
	return ""
}

// SecAggSpec tunes secure aggregation.
type SecAggSpec struct {
	// DropoutRate is, for simulated clients, the probability that a
	// sampled client drops out of the protocol (at a uniformly chosen
	// stage); for the protocol's parameters it is the expected dropout
	// fraction that the threshold must tolerate. In [0, 0.5].
	DropoutRate float64 `json:"dropout_rate"`
	// MinClients is the smallest cohort the protocol runs with (≥ 2);
	// below it, or below the threshold after dropouts, the attempt aborts
	// without revealing a sum and the round is retried.
	MinClients int `json:"min_clients"`
	// MaxAttempts bounds the retries of an aborted round before the job
	// fails.
	MaxAttempts int `json:"max_attempts"`
	// StageTimeoutSeconds is, with devices, how long the server waits for
	// the cohort in each protocol stage before going on without the late
	// clients.
	StageTimeoutSeconds float64 `json:"stage_timeout_seconds"`
	// JoinTimeoutSeconds is, with devices, how long a round stays open for
	// devices to join before it starts with those present (at least
	// MinClients; otherwise it keeps waiting).
	JoinTimeoutSeconds float64 `json:"join_timeout_seconds"`
}

// SyntheticSpec is FedProx's Synthetic(α, β) (Li et al. 2020, §5.1):
// device models and feature means drawn with variances α and β, or the
// IID variant; population.clients is the number of devices, job seed the
// data's seed.
type SyntheticSpec struct {
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
	IID   bool    `json:"iid"`
}

// LEAFSpec points at a LEAF dataset (Caldas et al. 2018: FEMNIST and the
// like with numeric features): directories of JSON files {"users",
// "num_samples", "user_data"} on the server. Its users are the population:
// at submit, population.clients becomes their number. Both directories
// are required and are relative to the server's data root (Options.
// DataRoot), the only directory a spec may name; data.CheckLEAFDir gives
// the rules.
type LEAFSpec struct {
	TrainDir string `json:"train_dir,omitempty"`
	TestDir  string `json:"test_dir,omitempty"`
	// Classes is the number of labels (62 for FEMNIST); 0 infers the
	// largest label + 1.
	Classes int `json:"classes,omitempty"`
}

// MaxSyntheticDevices bounds a synthetic population (each device holds
// about 450 examples on average).
const MaxSyntheticDevices = 10_000

// PopulationSpec describes how the training set is split into users.
type PopulationSpec struct {
	// Source is "simulated" (the default: the server simulates every
	// client on a partition of the dataset) or "devices": real
	// participants (dpfl-client participate) join each round with their
	// own data, over secure aggregation.
	Source string `json:"source"`
	// Clients is the population size N.
	Clients int `json:"clients"`
	// Partition is "iid", "dirichlet" (label skew, Hsu et al. 2019),
	// "shards" (McMahan et al. 2017) or "labels" (K labels per client, Li
	// et al. 2020).
	Partition string `json:"partition"`
	// DirichletAlpha is the concentration α of the dirichlet partition.
	DirichletAlpha float64 `json:"dirichlet_alpha"`
	// ShardsPerClient is the shards per client of the shards partition.
	ShardsPerClient int `json:"shards_per_client"`
	// LabelsPerClient is K of the labels partition (FedProx's "2 digits
	// per device"); LabelsSigma spreads its sizes lognormally (0: equal).
	LabelsPerClient int     `json:"labels_per_client,omitempty"`
	LabelsSigma     float64 `json:"labels_sigma,omitempty"`
	// HeldOutFraction of every client's examples is kept for per-client
	// evaluation, in [0, 1).
	HeldOutFraction float64 `json:"held_out_fraction"`
	// OnDemand derives every user's data from (seed, user id) when the
	// user is sampled (data.OnDemand) instead of partitioning the dataset:
	// populations of up to MaxClients users in memory that grows with the
	// cohort. Users then draw Dirichlet(dirichlet_alpha) label proportions
	// (0: IID) and round(exp(size_mu + size_sigma·Z)) examples, at most
	// max_examples, from the training set, which they share when the
	// population outgrows it; eval_user_fraction of them never train and
	// are scored on all their examples (Field Guide §4.2.1).
	OnDemand         bool    `json:"on_demand,omitempty"`
	SizeMu           float64 `json:"size_mu,omitempty"`
	SizeSigma        float64 `json:"size_sigma,omitempty"`
	MaxExamples      int     `json:"max_examples,omitempty"`
	EvalUserFraction float64 `json:"eval_user_fraction,omitempty"`
}

// onDemand is the population's data.OnDemand configuration.
func (p PopulationSpec) onDemand(seed uint64) data.OnDemandOptions {
	return data.OnDemandOptions{
		NumClients: p.Clients, Alpha: p.DirichletAlpha, SizeMu: p.SizeMu, SizeSigma: p.SizeSigma,
		MaxExamples: p.MaxExamples, HeldOutFraction: p.HeldOutFraction, EvalUserFraction: p.EvalUserFraction, Seed: seed,
	}
}

// SamplingSpec chooses each round's cohort.
type SamplingSpec struct {
	// Scheme is "poisson" (each client independently with probability
	// Rate) or "fixed" (CohortSize clients uniformly without replacement).
	Scheme string `json:"scheme"`
	// Rate is the Poisson sampling rate q ∈ (0, 1].
	Rate float64 `json:"rate"`
	// CohortSize is the fixed cohort size K.
	CohortSize int `json:"cohort_size"`
}

// ClientSpec is local training (fl.ClientConfig) and the cohort's
// systems heterogeneity.
type ClientSpec struct {
	Epochs    int     `json:"epochs"`
	BatchSize int     `json:"batch_size"`
	LR        float64 `json:"lr"`
	// LRSchedule decays LR over rounds.
	LRSchedule fl.Schedule `json:"lr_schedule"`
	// Momentum is the client's heavy-ball β_l (reset every round).
	Momentum float64 `json:"momentum"`
	// ProxMu is FedProx's μ (0: FedAvg).
	ProxMu float64 `json:"prox_mu"`
	// Stragglers is the fraction of each simulated cohort that runs only
	// a random number of epochs in [1, epochs]; DropStragglers discards
	// their updates instead.
	Stragglers     float64 `json:"stragglers"`
	DropStragglers bool    `json:"drop_stragglers"`
}

// Config is the spec as fl's client configuration.
func (c ClientSpec) Config() fl.ClientConfig {
	return fl.ClientConfig{Epochs: c.Epochs, BatchSize: c.BatchSize, LR: c.LR, Momentum: c.Momentum, ProxMu: c.ProxMu}
}

// ServerSpec is the server optimizer (fl.NewServerOptimizer): "sgd"
// (FedAvg), "momentum" (FedAvgM), or FedAdagrad, FedAdam, FedYogi of Reddi
// et al. 2021, Algorithm 2.
type ServerSpec struct {
	Optimizer string  `json:"optimizer"`
	LR        float64 `json:"lr"`
	// LRSchedule decays LR over rounds.
	LRSchedule fl.Schedule `json:"lr_schedule"`
	// Momentum is FedAvgM's β.
	Momentum float64 `json:"momentum"`
	// Beta1, Beta2 and Tau are the adaptive optimizers' β1, β2 and τ.
	Beta1 float64 `json:"beta1"`
	Beta2 float64 `json:"beta2"`
	Tau   float64 `json:"tau"`
}

// OptConfig is the spec as fl's optimizer configuration.
func (s ServerSpec) OptConfig() fl.ServerOptConfig {
	return fl.ServerOptConfig{Name: s.Optimizer, LR: s.LR, Momentum: s.Momentum, Beta1: s.Beta1, Beta2: s.Beta2, Tau: s.Tau}
}

// DPSpec is the job's user-level DP (McMahan et al. 2018).
type DPSpec struct {
	// Enabled turns DP on (the default). Without it the job trains with
	// example-weighted FedAvg and no privacy guarantee.
	Enabled bool `json:"enabled"`
	// ClipNorm is the L2 clip norm C of each client's delta.
	ClipNorm float64 `json:"clip_norm"`
	// NoiseMultiplier is z; the noise on the sum has σ = z·C.
	NoiseMultiplier float64 `json:"noise_multiplier"`
	// Delta is the job's δ ∈ (0, 1); it should be well below 1/N.
	Delta float64 `json:"delta"`
	// EpsilonBudget, when > 0, is ε_max: a round that would take ε past it
	// is not run and the job ends in state budget_exhausted.
	EpsilonBudget float64 `json:"epsilon_budget"`
	// TargetEpsilon, when > 0, asks the server to calibrate z: the job's
	// noise_multiplier becomes the smallest z whose ε after all rounds is
	// at most TargetEpsilon at Delta (tighter valid accountant), and the
	// budget becomes TargetEpsilon unless a smaller one is set.
	TargetEpsilon float64 `json:"target_epsilon,omitempty"`
	// PrivacyUnit names a shared budget (PUT /v1/budgets/{name}) that this
	// job's events are charged to as well; the job then uses the unit's δ
	// and is refused if its planned rounds do not fit.
	PrivacyUnit string `json:"privacy_unit,omitempty"`
	// AbortDelta is set by the server at submit, never by the user: the
	// part of Delta that secure aggregation's aborts and retries cost
	// (abort.go); the accountant reports ε at Delta − AbortDelta.
	AbortDelta float64 `json:"abort_delta,omitempty"`
}

// AccountingDelta is the δ at which the accountants report ε: the job's
// δ less what secure aggregation's aborts cost (AbortDelta).
func (d DPSpec) AccountingDelta() float64 { return d.Delta - d.AbortDelta }

// DefaultSpec is the job every submission starts from: the demo job of
// README.md, DP-FedAvg with logistic regression on Fashion-MNIST over 6,000
// users.
func DefaultSpec() Spec {
	return Spec{
		Dataset: "fashion-mnist",
		Model:   "logreg",
		Population: PopulationSpec{
			Source: "simulated", Clients: 6000, Partition: "dirichlet", DirichletAlpha: 1, ShardsPerClient: 2,
			SizeMu: math.Log(10), MaxExamples: 1000,
		},
		Sampling:  SamplingSpec{Scheme: "poisson", Rate: 0.02, CohortSize: 120},
		Rounds:    300,
		Algorithm: "fedavg",
		Client:    ClientSpec{Epochs: 1, BatchSize: 20, LR: 0.1, LRSchedule: defaultSchedule},
		Server:    defaultServer(),
		DP:        DPSpec{Enabled: true, ClipNorm: 0.5, NoiseMultiplier: 1, Delta: 1e-5},
		EvalEvery: 10,
		Seed:      1,
		SecAgg:    SecAggSpec{MinClients: 3, MaxAttempts: 3, StageTimeoutSeconds: 30, JoinTimeoutSeconds: 60},
		RoundTime: fl.DefaultRoundTimeModel(),
	}
}

// defaultSchedule is constant, with exp_decay's parameters at Reddi et
// al.'s EXPDECAY (×0.1 every 500 rounds) for when kind is switched.
var defaultSchedule = fl.Schedule{Kind: "constant", DecayRate: 0.1, DecayEvery: 500}

func defaultServer() ServerSpec {
	d := fl.DefaultServerOptConfig()
	return ServerSpec{Optimizer: d.Name, LR: d.LR, LRSchedule: defaultSchedule, Momentum: d.Momentum, Beta1: d.Beta1, Beta2: d.Beta2, Tau: d.Tau}
}

// ParseSpec decodes a JSON job over DefaultSpec, strictly
// (strictjson.Decode): exactly one JSON object, no unknown field (a
// misspelt field must not silently fall back to a default), no repeated
// key, nothing after it. A repeated key is a *ValidationError naming it;
// dp.privacy_unit must be a valid name (CheckName) and name a label of
// printable characters.
func ParseSpec(b []byte) (Spec, error) {
	s := DefaultSpec()
	if err := strictjson.Decode(b, &s); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			return Spec{}, &ValidationError{Field: se.Path, Rule: se.Msg}
		}
		return Spec{}, &ValidationError{Field: "body", Rule: "must be one JSON job object: " + err.Error()}
	}
	if len(s.Name) > maxLabelLen || strings.IndexFunc(s.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return Spec{}, &ValidationError{Field: "name", Rule: fmt.Sprintf("must be at most %d bytes of printable characters", maxLabelLen)}
	}
	if s.DP.PrivacyUnit != "" {
		if err := CheckName("dp.privacy_unit", s.DP.PrivacyUnit); err != nil {
			return Spec{}, err
		}
	}
	return s, nil
}

// maxLabelLen bounds a job's name, a free-form label.
const maxLabelLen = 128

// ValidationError names the field of a job that breaks a rule.
type ValidationError struct {
	Field string // JSON path, e.g. "dp.delta"
	Rule  string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Rule }

// MaxClients bounds the population of one job.
const MaxClients = 10_000_000

// Validate checks every field and returns the first broken rule, in a
// fixed order, as a *ValidationError. trainSize is the number of training
// examples of the dataset (clients cannot outnumber examples). Numbers
// must lie within the bounds of limits.go (the rule names the bound), so
// that none overflows, underflows or loses its meaning in the training,
// the noise or the accounting.
func (s Spec) Validate(trainSize int) error {
	bad := func(field, format string, a ...any) error {
		return &ValidationError{Field: field, Rule: fmt.Sprintf(format, a...)}
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch s.Dataset {
	case "fashion-mnist":
	case "synthetic":
		y := s.Synthetic
		switch {
		case !(y.Alpha >= 0 && finite(y.Alpha)):
			return bad("synthetic.alpha", "must be a finite number ≥ 0, got %v", y.Alpha)
		case !(y.Beta >= 0 && finite(y.Beta)):
			return bad("synthetic.beta", "must be a finite number ≥ 0, got %v", y.Beta)
		case y.Alpha > MaxSyntheticVariance:
			return bad("synthetic.alpha", "must be at most %g (a variance; larger overflows the model's float32 logits), got %v", MaxSyntheticVariance, y.Alpha)
		case y.Beta > MaxSyntheticVariance:
			return bad("synthetic.beta", "must be at most %g (a variance; larger overflows the float32 features), got %v", MaxSyntheticVariance, y.Beta)
		case s.Population.Clients > MaxSyntheticDevices:
			return bad("population.clients", "is the number of synthetic devices, at most %d, got %d", MaxSyntheticDevices, s.Population.Clients)
		case s.Population.Source == "devices":
			return bad("dataset", "synthetic data lives on the server; devices bring their own data")
		}
		trainSize = math.MaxInt // devices are generated, not carved from a fixed set
	case "leaf":
		switch {
		case s.LEAF.TrainDir == "":
			return bad("leaf.train_dir", "is required with dataset leaf")
		case s.LEAF.TestDir == "":
			return bad("leaf.test_dir", "is required with dataset leaf: the model is scored on it")
		case data.CheckLEAFDir(s.LEAF.TrainDir) != nil:
			return bad("leaf.train_dir", "%v", data.CheckLEAFDir(s.LEAF.TrainDir))
		case data.CheckLEAFDir(s.LEAF.TestDir) != nil:
			return bad("leaf.test_dir", "%v", data.CheckLEAFDir(s.LEAF.TestDir))
		case s.LEAF.Classes < 0 || s.LEAF.Classes > 256:
			return bad("leaf.classes", "must be in [0, 256] (0: infer), got %d", s.LEAF.Classes)
		case s.Population.Source == "devices":
			return bad("dataset", "leaf data lives on the server; devices bring their own data")
		}
		trainSize = math.MaxInt // the files' users are the population
	default:
		return bad("dataset", "unknown dataset %q (known: fashion-mnist, synthetic, leaf)", s.Dataset)
	}
	if !slices.Contains(model.Names(), s.Model) {
		return bad("model", "unknown model %q (known: %s)", s.Model, strings.Join(model.Names(), ", "))
	}
	p := s.Population
	if p.OnDemand {
		switch {
		case s.Dataset != "fashion-mnist" || p.Source == "devices":
			return bad("population.on_demand", "derives users from the fashion-mnist training set for simulated jobs only")
		case s.Algorithm == "scaffold":
			return bad("population.on_demand", "cannot keep SCAFFOLD's per-client control variates for a population derived on demand")
		case !(p.SizeSigma >= 0 && p.SizeSigma <= 5) || !finite(p.SizeMu) || p.SizeMu < -10 || p.SizeMu > 20:
			return bad("population.size_mu", "size_mu must be in [−10, 20] and size_sigma in [0, 5], got %v and %v", p.SizeMu, p.SizeSigma)
		case p.MaxExamples < 1 || p.MaxExamples > 100_000:
			return bad("population.max_examples", "must be in [1, 100000], got %d", p.MaxExamples)
		case !(p.EvalUserFraction >= 0 && p.EvalUserFraction < 1):
			return bad("population.eval_user_fraction", "must be in [0, 1), got %v", p.EvalUserFraction)
		}
		trainSize = math.MaxInt // users share examples when they outnumber them
	}
	switch {
	case p.Source != "simulated" && p.Source != "devices":
		return bad("population.source", "unknown source %q (known: simulated, devices)", p.Source)
	case p.Clients < 1 || p.Clients > MaxClients:
		return bad("population.clients", "must be in [1, %d], got %d", MaxClients, p.Clients)
	case p.Clients > trainSize:
		return bad("population.clients", "must not exceed the %d training examples, got %d", trainSize, p.Clients)
	case p.Partition != "iid" && p.Partition != "dirichlet" && p.Partition != "shards" && p.Partition != "labels":
		return bad("population.partition", "unknown partition %q (known: iid, dirichlet, shards, labels)", p.Partition)
	case p.Partition == "labels" && (p.LabelsPerClient < 1 || p.LabelsPerClient > 10):
		return bad("population.labels_per_client", "must be in [1, 10] (the classes) with the labels partition, got %d", p.LabelsPerClient)
	case p.Partition == "labels" && !(p.LabelsSigma >= 0 && p.LabelsSigma <= MaxLabelsSigma):
		return bad("population.labels_sigma", "must be in [0, %g], got %v", MaxLabelsSigma, p.LabelsSigma)
	case p.OnDemand && !(p.DirichletAlpha == 0 || p.DirichletAlpha >= MinDirichletAlpha && p.DirichletAlpha <= MaxDirichletAlpha):
		return bad("population.dirichlet_alpha", "must be 0 (IID) or in [%g, %g] with on_demand, got %v", MinDirichletAlpha, MaxDirichletAlpha, p.DirichletAlpha)
	case !p.OnDemand && p.Partition == "dirichlet" && !(p.DirichletAlpha >= MinDirichletAlpha && p.DirichletAlpha <= MaxDirichletAlpha):
		return bad("population.dirichlet_alpha", "must be in [%g, %g], got %v", MinDirichletAlpha, MaxDirichletAlpha, p.DirichletAlpha)
	case p.Partition == "shards" && (p.ShardsPerClient < 1 || p.Clients*p.ShardsPerClient > trainSize):
		return bad("population.shards_per_client", "must be ≥ 1 with clients × shards ≤ %d, got %d", trainSize, p.ShardsPerClient)
	case !(p.HeldOutFraction >= 0 && p.HeldOutFraction < 1):
		return bad("population.held_out_fraction", "must be in [0, 1), got %v", p.HeldOutFraction)
	}
	switch s.Sampling.Scheme {
	case "poisson":
		if !(s.Sampling.Rate > 0 && s.Sampling.Rate <= 1) {
			return bad("sampling.rate", "must be in (0, 1], got %v", s.Sampling.Rate)
		}
		if err := s.checkExpectedCohort(); err != nil {
			return err
		}
	case "fixed":
		if s.Sampling.CohortSize < 1 || s.Sampling.CohortSize > p.Clients {
			return bad("sampling.cohort_size", "must be in [1, population.clients = %d], got %d", p.Clients, s.Sampling.CohortSize)
		}
	default:
		return bad("sampling.scheme", "unknown scheme %q (known: poisson, fixed)", s.Sampling.Scheme)
	}
	if s.Rounds < 1 || s.Rounds > 1_000_000 {
		return bad("rounds", "must be in [1, 1000000], got %d", s.Rounds)
	}
	switch c := s.Client; {
	case c.Epochs < 1 || c.Epochs > 1000:
		return bad("client.epochs", "must be in [1, 1000], got %d", c.Epochs)
	case c.BatchSize < 1 || c.BatchSize > 100_000:
		return bad("client.batch_size", "must be in [1, 100000], got %d", c.BatchSize)
	case !(c.LR >= MinLearningRate && c.LR <= MaxLearningRate):
		return bad("client.lr", "must be in [%g, %g], got %v", MinLearningRate, MaxLearningRate, c.LR)
	case !(c.Momentum >= 0 && c.Momentum < 1):
		return bad("client.momentum", "must be in [0, 1), got %v", c.Momentum)
	case !(c.ProxMu >= 0 && c.ProxMu <= MaxProxMu):
		return bad("client.prox_mu", "must be in [0, %g], got %v", MaxProxMu, c.ProxMu)
	case !(c.Stragglers >= 0 && c.Stragglers <= 1):
		return bad("client.stragglers", "must be in [0, 1], got %v", c.Stragglers)
	}
	// In field order, so that the first broken rule is the one reported
	// (a map's order would pick one at random).
	for _, sch := range []struct {
		field string
		s     fl.Schedule
	}{{"client.lr_schedule", s.Client.LRSchedule}, {"server.lr_schedule", s.Server.LRSchedule}} {
		if err := sch.s.Validate(); err != nil {
			f, rule, _ := strings.Cut(err.Error(), ": ")
			return bad(sch.field+"."+f, "%s", rule)
		}
	}
	if !slices.Contains(fl.ServerOptimizerNames(), s.Server.Optimizer) {
		return bad("server.optimizer", "unknown optimizer %q (known: %s)", s.Server.Optimizer, strings.Join(fl.ServerOptimizerNames(), ", "))
	}
	if err := s.Server.OptConfig().Validate(); err != nil {
		field, rule, _ := strings.Cut(err.Error(), ": ")
		return bad("server."+field, "%s", rule)
	}
	if !(s.Server.LR >= MinLearningRate && s.Server.LR <= MaxLearningRate) {
		return bad("server.lr", "must be in [%g, %g], got %v", MinLearningRate, MaxLearningRate, s.Server.LR)
	}
	if s.DP.Enabled {
		d := s.DP
		switch {
		case !(d.ClipNorm >= MinClipNorm && d.ClipNorm <= MaxClipNorm):
			return bad("dp.clip_norm", "must be in [%g, %g], got %v", MinClipNorm, MaxClipNorm, d.ClipNorm)
		case !(d.Delta >= MinDelta && d.Delta < 1):
			return bad("dp.delta", "must be in [%g, 1), got %v", MinDelta, d.Delta)
		case !(d.EpsilonBudget == 0 || d.EpsilonBudget >= MinEpsilon && d.EpsilonBudget <= MaxEpsilon):
			return bad("dp.epsilon_budget", "must be 0 (no budget) or in [%g, %g], got %v", MinEpsilon, MaxEpsilon, d.EpsilonBudget)
		case !(d.TargetEpsilon == 0 || d.TargetEpsilon >= MinEpsilon && d.TargetEpsilon <= MaxEpsilon):
			return bad("dp.target_epsilon", "must be 0 (use noise_multiplier) or in [%g, %g], got %v", MinEpsilon, MaxEpsilon, d.TargetEpsilon)
		}
		if err := d.checkNoise("dp.noise_multiplier"); err != nil {
			return err
		}
	}
	if err := s.validateReleases(); err != nil {
		return err
	}
	if err := s.validateAudit(); err != nil {
		return err
	}
	if s.EvalEvery < 1 {
		return bad("eval_every", "must be ≥ 1, got %d", s.EvalEvery)
	}
	switch s.Algorithm {
	case "fedavg", "":
	case "scaffold", "fednova":
		switch {
		case s.DP.Enabled && s.Algorithm == "scaffold":
			return bad("algorithm", "scaffold cannot run with DP: every client's control variate c_i and the server's c are functions of the clients' data that the server receives unclipped and without noise, outside DP-FedAvg's analysis; set dp.enabled false (cross-silo)")
		case s.DP.Enabled:
			return bad("algorithm", "fednova cannot run with DP: it weights each update by the client's number of local steps, so one user's contribution is no longer bounded by the clip norm; set dp.enabled false (cross-silo)")
		case s.SecureAggregation || p.Source == "devices":
			return bad("algorithm", "%s needs per-client state or step counts on the server; it runs only with simulated clients and without secure_aggregation", s.Algorithm)
		}
	default:
		return bad("algorithm", "unknown algorithm %q (known: fedavg, scaffold, fednova)", s.Algorithm)
	}
	if err := s.Participation.Model(0).Validate(); err != nil {
		f, rule, _ := strings.Cut(err.Error(), ": ")
		return bad("participation."+f, "%s", rule)
	}
	switch pa := s.Participation; {
	case pa.AmongAvailable && s.Sampling.Scheme != "fixed":
		return bad("participation.among_available", "needs sampling.scheme fixed: Poisson sampling followed by availability is already sampling among available users, and is covered by the accountant")
	case (pa.OverSelection > 0 || pa.DeadlineSeconds > 0) && (p.Source == "devices" || s.SecureAggregation):
		return bad("participation", "over_selection and deadline_seconds apply to simulated rounds without secure aggregation")
	case pa.OverSelection > 0 && s.Algorithm != "fedavg" && s.Algorithm != "":
		return bad("participation.over_selection", "does not combine with %s", s.Algorithm)
	}
	if err := s.RoundTime.Validate(); err != nil {
		f, rule, _ := strings.Cut(err.Error(), ": ")
		return bad("round_time."+f, "%s", rule)
	}
	switch rt := s.RoundTime; {
	case rt.DownBandwidth < MinBandwidth:
		return bad("round_time.down_bandwidth", "must be at least %g byte/s, got %v", MinBandwidth, rt.DownBandwidth)
	case rt.UpBandwidth < MinBandwidth:
		return bad("round_time.up_bandwidth", "must be at least %g byte/s, got %v", MinBandwidth, rt.UpBandwidth)
	case rt.ComputeRatio > MaxRoundTimeSeconds:
		return bad("round_time.compute_ratio", "must be at most %g, got %v", MaxRoundTimeSeconds, rt.ComputeRatio)
	case rt.ComputeOverhead > MaxRoundTimeSeconds:
		return bad("round_time.compute_overhead", "must be at most %g seconds, got %v", MaxRoundTimeSeconds, rt.ComputeOverhead)
	}
	if p.Source == "devices" {
		switch {
		case !s.SecureAggregation:
			return bad("secure_aggregation", "must be true when population.source is devices: real participants send their updates only through secure aggregation")
		case s.Sampling.Scheme != "fixed":
			return bad("sampling.scheme", "must be fixed when population.source is devices: the server cannot Poisson-sample devices it does not know; sampling.cohort_size is the most devices per round")
		}
	}
	if s.SecureAggregation {
		a := s.SecAgg
		switch {
		case !s.DP.Enabled && !(s.DP.ClipNorm >= MinClipNorm && s.DP.ClipNorm <= MaxClipNorm):
			return bad("dp.clip_norm", "must be in [%g, %g] with secure_aggregation (it bounds the fixed-point range), got %v", MinClipNorm, MaxClipNorm, s.DP.ClipNorm)
		case !(a.DropoutRate >= 0 && a.DropoutRate <= 0.5):
			return bad("secagg.dropout_rate", "must be in [0, 0.5], got %v", a.DropoutRate)
		case a.MinClients < 2:
			return bad("secagg.min_clients", "must be ≥ 2 (one client's sum is its update), got %d", a.MinClients)
		case a.MaxAttempts < 1 || a.MaxAttempts > 100:
			return bad("secagg.max_attempts", "must be in [1, 100], got %d", a.MaxAttempts)
		case !(a.StageTimeoutSeconds > 0 && a.StageTimeoutSeconds <= 3600):
			return bad("secagg.stage_timeout_seconds", "must be in (0, 3600], got %v", a.StageTimeoutSeconds)
		case !(a.JoinTimeoutSeconds > 0 && a.JoinTimeoutSeconds <= 86400):
			return bad("secagg.join_timeout_seconds", "must be in (0, 86400], got %v", a.JoinTimeoutSeconds)
		case s.Sampling.Scheme == "fixed" && s.Sampling.CohortSize < a.MinClients:
			return bad("sampling.cohort_size", "must be ≥ secagg.min_clients = %d with secure_aggregation, got %d", a.MinClients, s.Sampling.CohortSize)
		}
	}
	return nil
}

// Adjacency names the neighbouring relation of the job's (ε, δ): two
// populations are neighbours if one has one more user ("add_remove", the
// relation of Poisson sampling; McMahan et al. 2018, §2) or if they differ
// in one user's data ("replace_one", the relation of a fixed-size cohort,
// Wang, Balle, Kasiviswanathan 2019, and of devices jobs). Guarantees
// under different relations do not compose into one ε.
func (s Spec) Adjacency() string {
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

// validateReleases refuses DP configurations whose releases no ledger
// event covers (package doc, "What is protected").
func (s Spec) validateReleases() error {
	if !s.DP.Enabled {
		return nil
	}
	bad := func(field, rule string) error { return &ValidationError{Field: field, Rule: rule} }
	switch {
	case s.Participation.AmongAvailable:
		return bad("participation.among_available", "cannot run with DP: a fixed cohort drawn among the users online in a round gives each user a selection probability that depends on how many others are online, which no accountant here covers; use Poisson sampling (availability then only removes users) or set dp.enabled false")
	case s.Population.EvalUserFraction > 0:
		return bad("population.eval_user_fraction", "cannot be used with DP: evaluation users are scored on their own data and their accuracy is released without noise, so they would have no protection; set it to 0 (the test split is evaluated) or set dp.enabled false")
	case s.Population.HeldOutFraction > 0:
		return bad("population.held_out_fraction", "cannot be used with DP: per-client evaluation on the users' held-out examples is released without noise; set it to 0 or set dp.enabled false")
	case s.SecureAggregation && s.Population.Source != "devices" && s.SecAgg.DropoutRate > 0:
		return bad("secagg.dropout_rate", "must be 0 with DP: whether a protocol instance aborts after dropouts depends on how many users were sampled, and the protocol bounds such aborts only below 2^-20 per round, far above a useful δ; model dropouts with participation.dropout_rate (users that drop before the protocol), which DP covers")
	}
	return nil
}
