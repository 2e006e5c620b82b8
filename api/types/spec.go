package types

// Spec is a training job as submitted over the API (JSON, snake_case).
// Fields left out of a submission keep the server's defaults
// (job.DefaultSpec: the demo job), so the smallest valid job is {}. The
// doc comments below are the reference of every field; docs/job-spec.md
// indexes them with their defaults and limits.
type Spec struct {
	// Name is a free-form label.
	Name string `json:"name,omitempty"`
	// Dataset names the source data: "fashion-mnist" (partitioned among
	// population.size users), "synthetic" (FedProx's Synthetic(α, β),
	// naturally federated over population.size devices) or "leaf" (a LEAF
	// dataset on the server, whose users are the population).
	Dataset string `json:"dataset"`
	// Synthetic configures the synthetic dataset.
	Synthetic SyntheticSpec `json:"synthetic"`
	// LEAF locates a dataset in LEAF's JSON format on the server.
	LEAF LEAFSpec `json:"leaf"`
	// Model is the architecture: "logreg", "mlp" or "cnn" (fl/model).
	Model string `json:"model"`
	// Population is the population of users: simulated on the server, or
	// real devices.
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
	RoundTime RoundTimeSpec `json:"round_time"`
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
	// DiurnalAmplitude is the amplitude a ∈ [0, 1] of the users' daily
	// availability cycle: user u is online in round t with probability
	// 1 − a·(1 + cos(2π(t/P + φ_u)))/2, P = period_rounds and φ_u a
	// per-user phase (time zones); 0: always online.
	DiurnalAmplitude float64 `json:"diurnal_amplitude"`
	// PeriodRounds is P, the cycle's length in rounds (a "day"; ≥ 1 with
	// a diurnal amplitude).
	PeriodRounds int `json:"period_rounds"`
	// DropoutRate is the probability, in [0, 1), that a selected, online
	// user drops out before reporting.
	DropoutRate float64 `json:"dropout_rate"`
	// OverSelection o ∈ [0, 10] selects (1 + o) times the target cohort
	// and keeps the target's earliest reports by the round-time model's
	// device time.
	OverSelection float64 `json:"over_selection"`
	// DeadlineSeconds, when > 0, discards the reports whose estimated
	// device time (round_time) exceeds it.
	DeadlineSeconds float64 `json:"deadline_seconds"`
	// AmongAvailable draws a fixed cohort among the users available in the
	// round, as production systems do. Its privacy analysis is not covered
	// by the accountant, and the privacy report says so.
	AmongAvailable bool `json:"among_available"`
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
// IID variant; population.size is the number of devices, job seed the
// data's seed.
type SyntheticSpec struct {
	// Alpha is α, the variance of the devices' model means (how much the
	// devices' labelling functions differ).
	Alpha float64 `json:"alpha"`
	// Beta is β, the variance of the devices' feature means (how much
	// their inputs differ).
	Beta float64 `json:"beta"`
	// IID draws every device's data from one distribution instead.
	IID bool `json:"iid"`
}

// LEAFSpec points at a LEAF dataset (Caldas et al. 2018: FEMNIST and the
// like with numeric features): directories of JSON files {"users",
// "num_samples", "user_data"} on the server. Its users are the population:
// at submit, population.size becomes their number. Both directories
// are required and are relative to the server's data root (Options.
// DataRoot), the only directory a spec may name; data.CheckLEAFDir gives
// the rules.
type LEAFSpec struct {
	// TrainDir holds the training users' JSON files.
	TrainDir string `json:"train_dir,omitempty"`
	// TestDir holds the test split the model is scored on.
	TestDir string `json:"test_dir,omitempty"`
	// Classes is the number of labels (62 for FEMNIST); 0 infers the
	// largest label + 1.
	Classes int `json:"classes,omitempty"`
}

// PopulationSpec describes how the training set is split into users.
type PopulationSpec struct {
	// Source is "simulated" (the default: the server simulates every
	// client on a partition of the dataset) or "devices": real
	// participants (dpfl-client participate) join each round with their
	// own data, over secure aggregation.
	Source string `json:"source"`
	// Size is the population size N: the users (or, with devices, the
	// most devices) the job samples from. Earlier releases called it
	// population.clients, which is still read, with a warning.
	Size int `json:"size"`
	// Partition is "iid", "dirichlet" (label skew, Hsu et al. 2019),
	// "shards" (McMahan et al. 2017) or "labels" (K labels per client, Li
	// et al. 2020).
	Partition string `json:"partition"`
	// DirichletAlpha is the concentration α of the dirichlet partition.
	DirichletAlpha float64 `json:"dirichlet_alpha"`
	// ShardsPerClient is the shards per client of the shards partition.
	ShardsPerClient int `json:"shards_per_client"`
	// LabelsPerClient is the number of labels per user of the labels
	// partition (FedProx's "2 digits per device").
	LabelsPerClient int `json:"labels_per_client,omitempty"`
	// LabelsSigma spreads the labels partition's user sizes lognormally
	// (0: equal sizes).
	LabelsSigma float64 `json:"labels_sigma,omitempty"`
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
	OnDemand bool `json:"on_demand,omitempty"`
	// SizeMu is μ of an on-demand user's lognormal number of examples.
	SizeMu float64 `json:"size_mu,omitempty"`
	// SizeSigma is σ of an on-demand user's lognormal number of examples.
	SizeSigma float64 `json:"size_sigma,omitempty"`
	// MaxExamples caps an on-demand user's examples.
	MaxExamples int `json:"max_examples,omitempty"`
	// EvalUserFraction is the fraction of on-demand users that never
	// train and are scored instead, in [0, 1).
	EvalUserFraction float64 `json:"eval_user_fraction,omitempty"`
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
	// Epochs is the number of local epochs E over the user's examples.
	Epochs int `json:"epochs"`
	// BatchSize is the local minibatch size B.
	BatchSize int `json:"batch_size"`
	// LR is the client learning rate η_l.
	LR float64 `json:"lr"`
	// LRSchedule decays LR over rounds.
	LRSchedule Schedule `json:"lr_schedule"`
	// Momentum is the client's heavy-ball β_l (reset every round).
	Momentum float64 `json:"momentum"`
	// ProxMu is FedProx's μ (0: FedAvg).
	ProxMu float64 `json:"prox_mu"`
	// Stragglers is the fraction of each simulated cohort that runs only
	// a random number of epochs in [1, epochs].
	Stragglers float64 `json:"stragglers"`
	// DropStragglers discards the stragglers' updates instead of
	// aggregating their partial work.
	DropStragglers bool `json:"drop_stragglers"`
}

// ServerSpec is the server optimizer (fl.NewServerOptimizer): "sgd"
// (FedAvg), "momentum" (FedAvgM), or FedAdagrad, FedAdam, FedYogi of Reddi
// et al. 2021, Algorithm 2.
type ServerSpec struct {
	// Optimizer is "sgd", "momentum", "adagrad", "adam" or "yogi".
	Optimizer string `json:"optimizer"`
	// LR is the server learning rate η_s.
	LR float64 `json:"lr"`
	// LRSchedule decays LR over rounds.
	LRSchedule Schedule `json:"lr_schedule"`
	// Momentum is FedAvgM's β.
	Momentum float64 `json:"momentum"`
	// Beta1 is the adaptive optimizers' first-moment decay β1.
	Beta1 float64 `json:"beta1"`
	// Beta2 is the adaptive optimizers' second-moment decay β2.
	Beta2 float64 `json:"beta2"`
	// Tau is the adaptive optimizers' adaptivity τ (added to the root of
	// the second moment).
	Tau float64 `json:"tau"`
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
	// Budget names a shared privacy budget (PUT /v1/budgets/{name}) that
	// this job's events are charged to as well; the job then uses the
	// budget's δ and is refused if its planned rounds do not fit. Earlier
	// releases called it dp.privacy_unit, which is still read, with a
	// warning.
	Budget string `json:"budget,omitempty"`
	// AdaptiveClipping, when set, adapts C each round towards a quantile
	// of the clients' update norms instead of keeping dp.clip_norm
	// (Andrew et al. 2021); ClipNorm is then unused.
	AdaptiveClipping *AdaptiveClippingSpec `json:"adaptive_clipping,omitempty"`
	// AbortDelta is set by the server at submit, never by the user: the
	// part of Delta that secure aggregation's aborts and retries cost
	// (abort.go); the accountant reports ε at Delta − AbortDelta.
	AbortDelta float64 `json:"abort_delta,omitempty"`
	// Mechanism is where the noise is added: MechanismCentralGaussian
	// ("central_gaussian", the default when empty: the server adds
	// N(0, (z·C)²) to the cohort's sum) or MechanismDistributedDiscreteGaussian
	// ("distributed_discrete_gaussian": each client adds its own discrete
	// Gaussian share inside the secure sum, Kairouz, Liu & Steinke, ICML
	// 2021; needs secure_aggregation and a fixed cohort or devices).
	Mechanism string `json:"mechanism,omitempty"`
	// Distributed configures the distributed discrete Gaussian; only with
	// that mechanism. The user may set ModulusBits; the server fills in
	// the rest at submission and the job's spec shows the parameters
	// chosen.
	Distributed *DistributedDPSpec `json:"distributed,omitempty"`
}

// The values of DPSpec.Mechanism.
const (
	// MechanismCentralGaussian: the server adds Gaussian noise of
	// standard deviation z·C to the clipped sum (McMahan et al. 2018).
	MechanismCentralGaussian = "central_gaussian"
	// MechanismDistributedDiscreteGaussian: every client adds a discrete
	// Gaussian share to its rotated, rounded update inside secure
	// aggregation (Kairouz, Liu & Steinke, ICML 2021, Algorithm 1), so
	// the server only ever holds noisy sums.
	MechanismDistributedDiscreteGaussian = "distributed_discrete_gaussian"
)

// DistributedDPSpec holds the distributed discrete Gaussian's parameters
// (Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian Mechanism
// for Federated Learning with Secure Aggregation", ICML 2021, KLS21
// below): ModulusBits is the user's; every other field is set by the
// server at submission from C, the model's dimension d, the planned
// survivors n and z (fl.ChooseDDGParams) and is refused or overwritten
// if given. Integer-domain quantities are in units of the rounding
// granularity γ.
type DistributedDPSpec struct {
	// ModulusBits is b: the sum is computed modulo 2^b (0: 32, the
	// secure sum's own ring). In [8, 32]. Fewer bits wrap sooner; the
	// server refuses a b that would lose more than 10% accuracy
	// (fl.DDGMaxAccuracyLoss) or wrap.
	ModulusBits int `json:"modulus_bits,omitempty"`
	// Dimension is d, the model's parameter count; PaddedDimension the
	// next power of two, the length of the rotated vectors.
	Dimension       int `json:"dimension,omitempty"`
	PaddedDimension int `json:"padded_dimension,omitempty"`
	// Clients is n, the noise shares each share is sized for: the
	// expected survivors of a round (the cohort, less its expected
	// dropouts). MinSurvivors is secagg.min_clients, raised at
	// submission to at least ⌈0.8·Clients⌉: no sum with fewer
	// surviving clients is unmasked, and the ledger's ρ assumes only
	// that many shares, so more dropouts than planned cost accuracy
	// only, and ε is a bound whatever happens.
	Clients      int `json:"clients,omitempty"`
	MinSurvivors int `json:"min_survivors,omitempty"`
	// Gamma is γ, the rounding granularity (model units per integer
	// step); Beta the conditional rounding's β (KLS21 Theorem 1).
	Gamma float64 `json:"gamma,omitempty"`
	Beta  float64 `json:"beta,omitempty"`
	// Sigma2 is σ², each client's discrete Gaussian parameter, the exact
	// rational ("num/den") the clients sample with.
	Sigma2 string `json:"sigma2,omitempty"`
	// L2Sensitivity is Δ₂, the bound on one client's rounded vector
	// (KLS21 Theorem 1); replace-one adjacency charges 2Δ₂.
	L2Sensitivity float64 `json:"l2_sensitivity,omitempty"`
	// Rho is the ρ of one round's zCDP event in the ledger (KLS21
	// Proposition 14, Eq. 17, at MinSurvivors shares and sensitivity
	// 2Δ₂), without amplification by sampling.
	Rho float64 `json:"rho,omitempty"`
	// WrapStdDevs is how many standard deviations of the noisy sum fit
	// in the modulus; AccuracyLoss the expected squared error of the
	// decoded sum relative to the central Gaussian's at the same z,
	// minus 1 (0.02 = 2% more).
	WrapStdDevs  float64 `json:"wrap_std_devs,omitempty"`
	AccuracyLoss float64 `json:"accuracy_loss,omitempty"`
}

// AdaptiveClippingSpec configures adaptive clipping (Andrew, Thakkar,
// McMahan and Ramaswamy, NeurIPS 2021, "Differentially private learning
// with adaptive clipping", Algorithm 1 with the geometric update): each
// client also reports the bit b_i = [‖Δ_i‖ ≤ C_t]; the server releases
// b̃_t = (Σ(b_i − 1/2) + N(0, σ_b²))/m + 1/2 (m the expected cohort) and
// sets C_{t+1} = C_t·exp(−η_C·(b̃_t − γ)). The round stays one Gaussian
// mechanism of the declared z: the update's noise multiplier is z_Δ =
// (z⁻² − (2σ_b)⁻²)^(−1/2) (§3), defined only for 2σ_b > z. Zero fields
// take the defaults of the paper's experiments.
type AdaptiveClippingSpec struct {
	// TargetQuantile is γ ∈ (0, 1), the fraction of updates to leave
	// unclipped; default 0.5 (the median).
	TargetQuantile float64 `json:"target_quantile"`
	// LearningRate is η_C > 0 of the geometric update; default 0.2.
	LearningRate float64 `json:"learning_rate"`
	// InitialClip is C_0 > 0; default 0.1.
	InitialClip float64 `json:"initial_clip"`
	// CountNoiseMultiplier is σ_b, the standard deviation of the noise on
	// the count of unclipped updates, in updates; the centred count has
	// sensitivity 1/2, so its own noise multiplier is 2σ_b. Default (0):
	// m/20 for an expected cohort of m, as in the paper; the server
	// stores the value it used.
	CountNoiseMultiplier float64 `json:"count_noise_multiplier"`
}

// AuditSpec configures a DP job's empirical privacy estimate: canary
// clients in the manner of Andrew, Kairouz, Oh, Oprea, McMahan and
// Suriyakumar (ICLR 2024, "One-shot Empirical Privacy Estimation for
// Federated Learning"). README.md and docs/auditing.md ("Canaries")
// document the fields, what the estimate means and what it costs.
type AuditSpec struct {
	// Canaries is k, the number of canary clients inserted into training
	// (0: no audit), at most MaxCanaries.
	Canaries int `json:"canaries"`
	// HeldOut is k', the number of canary directions never inserted, whose
	// statistic is the null distribution (0: as many as Canaries), at
	// most MaxCanaries.
	HeldOut int `json:"held_out,omitempty"`
}

// Schedule decays a learning rate over the rounds of a job (client η_l and
// server η_s separately), as in Reddi et al. 2021, Appendix D: constant,
// staircase exponential decay (their EXPDECAY: ×DecayRate every
// DecayEvery rounds) and cosine. It is the wire form of fl.Schedule.
type Schedule struct {
	// Kind is "constant" (or ""), "exp_decay" or "cosine".
	Kind string `json:"kind"`
	// DecayRate is exp_decay's factor in (0, 1]; default 0.1.
	DecayRate float64 `json:"decay_rate,omitempty"`
	// DecayEvery is exp_decay's period in rounds (≥ 1); default 500.
	DecayEvery int `json:"decay_every,omitempty"`
}

// RoundTimeSpec is the device model that turns a simulated round into an
// estimated deployment time: Wang et al. 2021 ("A Field Guide to
// Federated Optimization"), §5.4, eqs. 9–10 (fl.RoundTimeModel documents
// the estimate). It is the wire form of fl.RoundTimeModel.
type RoundTimeSpec struct {
	// DownBandwidth is B_down, the devices' download bandwidth in bytes/s
	// (the Field Guide's 0.75 MB/s).
	DownBandwidth float64 `json:"down_bandwidth"`
	// UpBandwidth is B_up, the devices' upload bandwidth in bytes/s (the
	// Field Guide's 0.25 MB/s).
	UpBandwidth float64 `json:"up_bandwidth"`
	// ComputeRatio is R_comp, the ratio of device to simulation compute
	// time (7).
	ComputeRatio float64 `json:"compute_ratio"`
	// ComputeOverhead is C_comp, a fixed per-round device overhead in
	// seconds (10).
	ComputeOverhead float64 `json:"compute_overhead"`
	// BandwidthSigma is the log-normal spread σ of the devices' bandwidth
	// factors (0: identical devices).
	BandwidthSigma float64 `json:"bandwidth_sigma"`
	// ComputeSigma is the log-normal spread σ of the devices' compute
	// factors (0: identical devices).
	ComputeSigma float64 `json:"compute_sigma"`
}
