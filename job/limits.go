package job

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/secagg"
)

// Numeric bounds of a job spec: the one set of limits that Validate
// checks (the limits table below), that the fl constructors' own checks
// agree with (TestLimitsBoundaries) and that the runner checks
// again for jobs stored before a bound existed. Every number that feeds the
// computation is finite JSON, but finite is not enough: 1e308 overflows the
// first product it enters, 1e-300 underflows to zero, and either ends in a
// panic, an allocation without bound or a NaN that reaches storage (issue
// 13). Each bound below keeps its quantity inside the range where the
// float32 training, the float64 accounting and the 32-bit fixed point of
// secure aggregation stay finite and mean something, with orders of
// magnitude to spare around every configuration in the literature the
// server reproduces. A value outside is refused at submission with a
// *ValidationError that names the field and the bound.
const (
	// MinNoiseMultiplier bounds dp.noise_multiplier z from below. At
	// z = 0.01 one round of the Gaussian mechanism alone costs ε ≈ 5000
	// at δ = 1e-5, and 300 Poisson rounds at q = 0.02 cost ε ≈ 10^5: no
	// privacy is left to account. Below it the PLD accountant can no
	// longer discretise the privacy loss (its grid outgrows its bin
	// limit), and at z → 0 the RDP bound is +Inf, which would reach the
	// metrics as a non-finite ε. A calibrated z (dp.target_epsilon) below
	// it is raised to it: more noise, never less privacy.
	MinNoiseMultiplier = 0.01
	// MaxNoiseMultiplier bounds z from above: it is the ceiling of the
	// calibration search (accounting.CalibrateNoise), and at 10^6 even
	// 10^6 unsampled rounds (the most a job runs) cost ε < 0.01 at
	// δ = 1e-5; larger values add nothing but overflow risk.
	MaxNoiseMultiplier = 1e6
	// MinClipNorm bounds dp.clip_norm C from below. Updates are float32:
	// below 10^-6 the clipped update of a 10^6-parameter model has
	// coordinates near 10^-9, at the float32 resolution of parameters of
	// magnitude 0.01, so the clipped sum is mostly rounding; at 1e-300
	// every clipped coordinate underflows to 0 in float32.
	MinClipNorm = 1e-6
	// MaxClipNorm bounds C from above. C bounds the L2 norm of one
	// client's model delta; parameters start at magnitude ≤ 1, so a delta
	// of norm 10^4 is a diverged client and a larger C clips nothing while
	// scaling the noise σ = z·C. It also keeps C·2^f within 32-bit fixed
	// point for secure aggregation's smallest precision (f = 8) up to
	// cohorts of 800 (checked exactly at submission for the job's cohort).
	MaxClipNorm = 1e4
	// MaxNoiseStd bounds σ = z·C, the standard deviation of the noise on
	// every coordinate of the clipped sum. At 10^6 a round moves every
	// parameter by σ/(q·N) ≥ 0.1 even at the largest expected cohort
	// (10^7 users), which already destroys any model; bounding it keeps
	// the float32 noise draws (up to ~40σ) and the fixed-point noise
	// σ·2^f of secure aggregation (≤ 10^6·2^30 < 2^62) exactly
	// representable, so no product of the release overflows.
	MaxNoiseStd = 1e6
	// MaxClipLearningRate bounds adaptive clipping's η_C: one round moves
	// C by a factor of at most exp(η_C) (the paper uses 0.2).
	MaxClipLearningRate = 10
	// MinLearningRate and MaxLearningRate bound client.lr and server.lr.
	// An SGD step η·g on float32 parameters of magnitude ~0.1 (ulp ≈
	// 7.5e-9) is lost to rounding when η·|g| is below half an ulp, so a
	// rate below 10^-8 trains nothing for gradients of order 1. The
	// literature's grids stop at 10 (Reddi et al. 2021 search server and
	// client rates in 10^[-3, 1]); at 10^3 a single step already
	// overflows most models, and 1e300 overflows float32 itself (+Inf)
	// before the first step. Schedules only decay a rate (factor ≤ 1), so
	// the bound on the base rate covers every round.
	MinLearningRate = 1e-8
	MaxLearningRate = 1e3
	// MaxProxMu bounds client.prox_mu μ. FedProx's grid is {0.001, 0.01,
	// 0.1, 1} (Li et al. 2020); a proximal step with μ·η > 2 diverges by
	// itself, and 10^3 is far past any useful value while 1e300 overflows
	// float32.
	MaxProxMu = 1e3
	// MinExpectedCohort bounds the expected cohort q·N (sampling.rate ×
	// population.size) from below: one user. Under DP the noisy sum is
	// divided by q·N, so a smaller expected cohort amplifies the noise by
	// 1/(q·N) (at q = 1e-300, to +Inf), and most rounds sample nobody.
	// Since N ≤ MaxClients = 10^7 it also keeps q ≥ 10^-7, well inside
	// the accountants' range.
	MinExpectedCohort = 1.0
	// MinEpsilon and MaxEpsilon bound dp.epsilon_budget and
	// dp.target_epsilon when set (0 means unset). ε = 1000 bounds a
	// likelihood ratio by e^1000: no protection at all, and only a typo
	// goes beyond; 1e300 makes the calibration search for z → 0, where
	// ε is +Inf. Below 10^-3 a target asks for noise no job can learn
	// under (one unsampled Gaussian round needs z ≈ 4800 at δ = 1e-5), so
	// it is a unit mistake (a percentage, or δ in ε's place).
	MinEpsilon = 1e-3
	MaxEpsilon = 1e3
	// MinDelta bounds dp.delta from below: 10^-40 is beyond 2^-128, the
	// strength of the cryptography around it, and 30 orders of magnitude
	// below 1/N for the largest population. Below it δ/2 (the share left
	// to the accountant under secure aggregation's aborts) reaches the
	// subnormal range and, at 5e-324, rounds to 0, which the accountants
	// refuse.
	MinDelta = 1e-40
	// MaxSyntheticVariance bounds synthetic.alpha and synthetic.beta, the
	// variances of Synthetic(α, β)'s device models and feature means.
	// FedProx uses α, β ≤ 1; at 100 features already reach ±30 and the
	// logits of a linear model ±10^3. Beyond, features and logits
	// overflow float32.
	MaxSyntheticVariance = 100.0
	// MinDirichletAlpha and MaxDirichletAlpha bound
	// population.dirichlet_alpha. α = 0.01 already gives nearly every user
	// a single label (Hsu et al. 2019 use α ≥ 0.05); below, the log-Gamma
	// draws (log U/α) reach −∞ for every label and the proportions are
	// 0/0. At
	// α = 10^6 the partition is IID to within 10^-3; larger only costs
	// precision.
	MinDirichletAlpha = 0.01
	MaxDirichletAlpha = 1e6
	// MaxLabelsSigma bounds population.labels_sigma, the lognormal spread
	// of user sizes, like population.size_sigma: e^(5·6) ≈ 10^13 already
	// spans every population; 1e300 makes the sizes +Inf.
	MaxLabelsSigma = 5.0
	// MinBandwidth and MaxRoundTimeSeconds bound the round-time model
	// (round_time.down_bandwidth, up_bandwidth ≥ 1 byte/s; compute_ratio
	// and compute_overhead ≤ 10^6). Its estimate is bytes/bandwidth plus
	// compute_ratio·T_sim + compute_overhead per client, times lognormal
	// device factors (σ ≤ 5), summed over up to 10^6 rounds; within these
	// bounds it stays below 10^40 s, far inside float64, while a
	// bandwidth of 1e-300 or an overhead of 1e308 reach +Inf and the
	// metrics could not be stored.
	MinBandwidth        = 1.0
	MaxRoundTimeSeconds = 1e6
	// MaxClients bounds population.size: the largest population the
	// on-demand data and the accountants are exercised for.
	MaxClients = 10_000_000
	// MaxSyntheticDevices bounds a synthetic population (each device
	// holds about 450 examples on average, generated in memory).
	MaxSyntheticDevices = 10_000
	// MaxRounds bounds rounds T (the accountants' compositions are
	// exercised up to it).
	MaxRounds = 1_000_000
	// MaxEpochs and MaxBatchSize bound client.epochs and
	// client.batch_size: a client's work and its batch buffers.
	MaxEpochs    = 1000
	MaxBatchSize = 100_000
	// MaxLEAFClasses bounds leaf.classes (labels are bytes).
	MaxLEAFClasses = 256
	// MaxLabelsPerClient bounds population.labels_per_client: the classes
	// of Fashion-MNIST.
	MaxLabelsPerClient = 10
	// MinSizeMu, MaxSizeMu and MaxSizeSigma bound the lognormal size of an
	// on-demand user, exp(size_mu + size_sigma·Z): e^20 examples already
	// exceed any dataset, and e^(5·6) ≈ 10^13 spans every population.
	MinSizeMu    = -10.0
	MaxSizeMu    = 20.0
	MaxSizeSigma = 5.0
	// MaxExamplesPerUser bounds population.max_examples.
	MaxExamplesPerUser = 100_000
	// MaxSecAggDropoutRate bounds secagg.dropout_rate: the protocol's
	// threshold tolerates up to half the cohort dropping out.
	MaxSecAggDropoutRate = 0.5
	// MinSecAggClients bounds secagg.min_clients: one client's "sum" is
	// its update.
	MinSecAggClients = 2
	// MaxSecAggAttempts bounds secagg.max_attempts.
	MaxSecAggAttempts = 100
	// MaxStageTimeoutSeconds and MaxJoinTimeoutSeconds bound
	// secagg.stage_timeout_seconds (an hour) and
	// secagg.join_timeout_seconds (a day).
	MaxStageTimeoutSeconds = 3600.0
	MaxJoinTimeoutSeconds  = 86400.0
	// MaxOverSelection bounds participation.over_selection (fl.Participation
	// checks the same bound).
	MaxOverSelection = 10.0
	// MaxDeviceSigma bounds round_time.bandwidth_sigma and compute_sigma,
	// the lognormal spreads of the devices (fl.RoundTimeModel checks the
	// same bound).
	MaxDeviceSigma = 5.0
)

// A bound is the interval a numeric field must lie in. Every value
// outside, NaN and ±Inf included, is refused; hi = +Inf means only
// "finite".
type bound struct {
	lo, hi         float64
	loOpen, hiOpen bool
	// zero also accepts 0, which then means "unset" (said by note).
	zero bool
	// note follows the interval in the message, e.g. "(0: no budget)".
	note string
}

// unbounded is an upper bound of +Inf: the value need only be finite.
var unbounded = math.Inf(1)

// limits are the numeric rules of a spec, by JSON path. The validators
// (validate*.go) decide when a field applies (e.g. secagg.* only with
// secure_aggregation) and in which order fields are reported; the bounds
// themselves are here and nowhere else.
var limits = map[string]bound{
	"synthetic.alpha":                             {lo: 0, hi: MaxSyntheticVariance, note: "(a variance; larger overflows the model's float32 logits)"},
	"synthetic.beta":                              {lo: 0, hi: MaxSyntheticVariance, note: "(a variance; larger overflows the float32 features)"},
	"leaf.classes":                                {lo: 0, hi: MaxLEAFClasses, note: "(0: infer)"},
	"population.size":                             {lo: 1, hi: MaxClients},
	"population.labels_per_client":                {lo: 1, hi: MaxLabelsPerClient, note: "(the classes) with the labels partition"},
	"population.labels_sigma":                     {lo: 0, hi: MaxLabelsSigma},
	"population.dirichlet_alpha":                  {lo: MinDirichletAlpha, hi: MaxDirichletAlpha},
	"population.dirichlet_alpha/on_demand":        {lo: MinDirichletAlpha, hi: MaxDirichletAlpha, zero: true, note: "(0: IID) with on_demand"},
	"population.shards_per_client":                {lo: 1, hi: unbounded},
	"population.held_out_fraction":                {lo: 0, hi: 1, hiOpen: true},
	"population.size_mu":                          {lo: MinSizeMu, hi: MaxSizeMu},
	"population.size_sigma":                       {lo: 0, hi: MaxSizeSigma},
	"population.max_examples":                     {lo: 1, hi: MaxExamplesPerUser},
	"population.eval_user_fraction":               {lo: 0, hi: 1, hiOpen: true},
	"sampling.rate":                               {lo: 0, hi: 1, loOpen: true},
	"rounds":                                      {lo: 1, hi: MaxRounds},
	"client.epochs":                               {lo: 1, hi: MaxEpochs},
	"client.batch_size":                           {lo: 1, hi: MaxBatchSize},
	"client.lr":                                   {lo: MinLearningRate, hi: MaxLearningRate},
	"client.momentum":                             {lo: 0, hi: 1, hiOpen: true},
	"client.prox_mu":                              {lo: 0, hi: MaxProxMu},
	"client.stragglers":                           {lo: 0, hi: 1},
	"lr_schedule.decay_rate":                      {lo: 0, hi: 1, loOpen: true},
	"lr_schedule.decay_every":                     {lo: 1, hi: unbounded},
	"server.lr":                                   {lo: MinLearningRate, hi: MaxLearningRate},
	"server.momentum":                             {lo: 0, hi: 1, hiOpen: true},
	"server.beta1":                                {lo: 0, hi: 1, hiOpen: true},
	"server.beta2":                                {lo: 0, hi: 1, hiOpen: true},
	"server.tau":                                  {lo: 0, hi: 1, loOpen: true, hiOpen: true},
	"dp.clip_norm":                                {lo: MinClipNorm, hi: MaxClipNorm},
	"dp.noise_multiplier":                         {lo: MinNoiseMultiplier, hi: MaxNoiseMultiplier},
	"dp.delta":                                    {lo: MinDelta, hi: 1, hiOpen: true},
	"dp.adaptive_clipping.target_quantile":        {lo: 0.01, hi: 0.99, zero: true, note: "(0: 0.5)"},
	"dp.adaptive_clipping.learning_rate":          {lo: 1e-3, hi: MaxClipLearningRate, zero: true, note: "(0: 0.2)"},
	"dp.adaptive_clipping.initial_clip":           {lo: MinClipNorm, hi: MaxClipNorm, zero: true, note: "(0: 0.1)"},
	"dp.adaptive_clipping.count_noise_multiplier": {lo: 1e-3, hi: MaxNoiseStd, zero: true, note: "(0: the expected cohort / 20)"},
	"dp.epsilon_budget":                           {lo: MinEpsilon, hi: MaxEpsilon, zero: true, note: "(0: no budget)"},
	"dp.target_epsilon":                           {lo: MinEpsilon, hi: MaxEpsilon, zero: true, note: "(0: use noise_multiplier)"},
	"dp.distributed.modulus_bits":                 {lo: 8, hi: 32, zero: true, note: "(0: 32)"},
	"eval_every":                                  {lo: 1, hi: unbounded},
	"secagg.dropout_rate":                         {lo: 0, hi: MaxSecAggDropoutRate},
	"secagg.min_clients":                          {lo: MinSecAggClients, hi: unbounded, note: "(one client's sum is its update)"},
	"secagg.max_attempts":                         {lo: 1, hi: MaxSecAggAttempts},
	"secagg.stage_timeout_seconds":                {lo: 0, hi: MaxStageTimeoutSeconds, loOpen: true},
	"secagg.join_timeout_seconds":                 {lo: 0, hi: MaxJoinTimeoutSeconds, loOpen: true},
	"audit.canaries":                              {lo: 0, hi: MaxCanaries, note: "(0: no canaries)"},
	"audit.held_out":                              {lo: 0, hi: MaxCanaries, note: "(0: as many as audit.canaries)"},
	"participation.diurnal_amplitude":             {lo: 0, hi: 1},
	"participation.period_rounds":                 {lo: 1, hi: unbounded, note: "with a diurnal amplitude"},
	"participation.dropout_rate":                  {lo: 0, hi: 1, hiOpen: true},
	"participation.over_selection":                {lo: 0, hi: MaxOverSelection},
	"participation.deadline_seconds":              {lo: 0, hi: unbounded, note: "(0: none)"},
	"round_time.down_bandwidth":                   {lo: MinBandwidth, hi: unbounded, note: "byte/s"},
	"round_time.up_bandwidth":                     {lo: MinBandwidth, hi: unbounded, note: "byte/s"},
	"round_time.compute_ratio":                    {lo: 0, hi: MaxRoundTimeSeconds},
	"round_time.compute_overhead":                 {lo: 0, hi: MaxRoundTimeSeconds, note: "seconds"},
	"round_time.bandwidth_sigma":                  {lo: 0, hi: MaxDeviceSigma},
	"round_time.compute_sigma":                    {lo: 0, hi: MaxDeviceSigma},
}

// in reports whether x lies within b.
func (b bound) in(x float64) bool {
	if b.zero && x == 0 {
		return true
	}
	above := x > b.lo || !b.loOpen && x == b.lo
	below := x < b.hi || !b.hiOpen && x == b.hi && !math.IsInf(x, 0)
	return above && below
}

// rule states b, e.g. "must be in [1, 1000]" or "must be a finite number
// ≥ 1 byte/s".
func (b bound) rule() string {
	var r string
	if math.IsInf(b.hi, 1) {
		op := "≥"
		if b.loOpen {
			op = ">"
		}
		r = fmt.Sprintf("must be a finite number %s %s", op, formatBound(b.lo))
	} else {
		l, h := "[", "]"
		if b.loOpen {
			l = "("
		}
		if b.hiOpen {
			h = ")"
		}
		r = fmt.Sprintf("must be in %s%s, %s%s", l, formatBound(b.lo), formatBound(b.hi), h)
	}
	if b.zero {
		r = "must be 0 or " + strings.TrimPrefix(r, "must be ")
	}
	if b.note != "" {
		r += " " + b.note
	}
	return r
}

// formatBound formats a bound: integers in full, others in %g.
func formatBound(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e15 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// checkRange checks x against field's bound in limits (limitKey, when
// given, names the entry; schedules share theirs). It panics on a field
// without a bound: a programming error caught by every test.
func checkRange(field string, x float64, limitKey ...string) *types.FieldError {
	key := field
	if len(limitKey) > 0 {
		key = limitKey[0]
	}
	b, ok := limits[key]
	if !ok {
		panic("job: no limit for " + key)
	}
	if b.in(x) {
		return nil
	}
	return &types.FieldError{Field: field, Rule: types.RuleRange, Message: b.rule() + ", got " + formatBound(x)}
}

// checkNoise checks z, and σ = z·C, against their bounds (C itself is
// checked with its field). field names the field that set z: the job's
// dp.noise_multiplier, or dp.target_epsilon when calibration chose it.
func checkNoise(d types.DPSpec, field string) error {
	z, c := d.NoiseMultiplier, d.ClipNorm
	if fe := checkRange(field, z, "dp.noise_multiplier"); fe != nil {
		fe.Message = "the noise multiplier " + fe.Message
		return asError([]types.FieldError{*fe})
	}
	if !(z*c <= MaxNoiseStd) {
		return asError([]types.FieldError{{Field: field, Rule: types.RuleRange, Message: fmt.Sprintf(
			"the noise standard deviation σ = noise_multiplier × clip_norm = %g × %g = %g must be at most %g; lower one of them", z, c, z*c, MaxNoiseStd)}})
	}
	return nil
}

// checkExpectedCohort checks that Poisson sampling expects at least
// MinExpectedCohort users per round among population.size.
func checkExpectedCohort(s types.Spec) error {
	if s.Sampling.Scheme != "poisson" {
		return nil
	}
	q, n := s.Sampling.Rate, s.Population.Size
	if mu := q * float64(n); !(mu >= MinExpectedCohort) {
		return asError([]types.FieldError{{Field: "sampling.rate", Rule: types.RuleRange, Message: fmt.Sprintf(
			"the expected cohort sampling.rate × population.size = %g × %d = %.3g must be at least %g user: it is the DP denominator, and a smaller one amplifies the noise and leaves most rounds empty",
			q, n, mu, MinExpectedCohort)}})
	}
	return nil
}

// checkSecureEncoding checks, for a job with secure aggregation and a
// model of d parameters, that the clip norm fits the 32-bit fixed point
// that the job's public cohort bound implies (secagg.NewEncoding: n·(C·2^f
// + 1) < 2^31 with f ≥ 8) and exceeds the rounding slack √d·2^−f that
// EncodeSecureInput subtracts from it. Otherwise every round would fail.
func checkSecureEncoding(s types.Spec, d int) error {
	if !s.SecureAggregation || distributed(s) { // ChooseDDGParams checks its own encoding
		return nil
	}
	n := s.Sampling.CohortSize
	if s.Population.Source != "devices" {
		sampler, _ := specSampler(s, s.Population.Size)
		n = cohortBound(sampler, s.Population.Size)
	}
	c := s.DP.ClipNorm
	if a := s.DP.AdaptiveClipping; a != nil && s.DP.Enabled {
		// C_t moves, inside the range the fixed point carries.
		lo, hi, ok := secureClipRange(n, d)
		switch {
		case !ok:
			return asError([]types.FieldError{{Field: "dp.adaptive_clipping", Rule: types.RuleRange, Message: fmt.Sprintf(
				"no clip norm fits secure aggregation's 32-bit fixed point for cohorts of up to %d clients and %d parameters; lower the cohort", n, d)}})
		case a.InitialClip != 0 && (a.InitialClip < lo || a.InitialClip > hi):
			return asError([]types.FieldError{{Field: "dp.adaptive_clipping.initial_clip", Rule: types.RuleRange, Message: fmt.Sprintf(
				"%g is outside [%.3g, %.3g], the clip norms secure aggregation's fixed point carries for cohorts of up to %d clients and %d parameters", a.InitialClip, lo, hi, n, d)}})
		}
		return nil
	}
	enc, err := secagg.NewEncoding(n, c)
	if err != nil {
		return asError([]types.FieldError{{Field: "dp.clip_norm", Rule: types.RuleRange, Message: fmt.Sprintf(
			"%g does not fit secure aggregation's 32-bit fixed point for cohorts of up to %d clients: cohort × (clip_norm × 2^8 + 1) must be at most 2^31 − 1; lower dp.clip_norm or the cohort", c, n)}})
	}
	if slack := enc.RoundingSlack(d); !(c > slack) {
		return asError([]types.FieldError{{Field: "dp.clip_norm", Rule: types.RuleRange, Message: fmt.Sprintf(
			"%g must exceed the rounding slack √d·2^−f = %.3g of secure aggregation's fixed point (d = %d parameters, f = %d fractional bits for cohorts of up to %d); raise dp.clip_norm", c, slack, d, enc.FracBits, n)}})
	}
	return nil
}
