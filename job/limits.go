package job

import (
	"fmt"

	"github.com/dpfl/dpfl/secagg"
)

// Numeric bounds of a job spec (Spec.Validate). Every number that feeds the
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
	// population.clients) from below: one user. Under DP the noisy sum is
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
)

// checkNoise checks z, and σ = z·C, against their bounds (C itself is
// checked with its field). field names the field that set z: the job's
// dp.noise_multiplier, or dp.target_epsilon when calibration chose it.
func (d DPSpec) checkNoise(field string) error {
	z, c := d.NoiseMultiplier, d.ClipNorm
	switch {
	case !(z >= MinNoiseMultiplier && z <= MaxNoiseMultiplier):
		return &ValidationError{Field: field, Rule: fmt.Sprintf("the noise multiplier must be in [%g, %g], got %v", MinNoiseMultiplier, MaxNoiseMultiplier, z)}
	case !(z*c <= MaxNoiseStd):
		return &ValidationError{Field: field, Rule: fmt.Sprintf("the noise standard deviation σ = noise_multiplier × clip_norm = %g × %g = %g must be at most %g; lower one of them", z, c, z*c, MaxNoiseStd)}
	}
	return nil
}

// checkExpectedCohort checks that Poisson sampling expects at least
// MinExpectedCohort users per round among population.clients.
func (s Spec) checkExpectedCohort() error {
	if s.Sampling.Scheme != "poisson" {
		return nil
	}
	q, n := s.Sampling.Rate, s.Population.Clients
	if mu := q * float64(n); !(mu >= MinExpectedCohort) {
		return &ValidationError{Field: "sampling.rate", Rule: fmt.Sprintf(
			"the expected cohort sampling.rate × population.clients = %g × %d = %.3g must be at least %g user: it is the DP denominator, and a smaller one amplifies the noise and leaves most rounds empty",
			q, n, mu, MinExpectedCohort)}
	}
	return nil
}

// checkSecureEncoding checks, for a job with secure aggregation and a
// model of d parameters, that the clip norm fits the 32-bit fixed point
// that the job's public cohort bound implies (secagg.NewEncoding: n·(C·2^f
// + 1) < 2^31 with f ≥ 8) and exceeds the rounding slack √d·2^−f that
// EncodeSecureInput subtracts from it. Otherwise every round would fail.
func (s Spec) checkSecureEncoding(d int) error {
	if !s.SecureAggregation {
		return nil
	}
	n := s.Sampling.CohortSize
	if s.Population.Source != "devices" {
		sampler, _ := s.sampler(s.Population.Clients)
		n = cohortBound(sampler, s.Population.Clients)
	}
	c := s.DP.ClipNorm
	enc, err := secagg.NewEncoding(n, c)
	if err != nil {
		return &ValidationError{Field: "dp.clip_norm", Rule: fmt.Sprintf(
			"%g does not fit secure aggregation's 32-bit fixed point for cohorts of up to %d clients: cohort × (clip_norm × 2^8 + 1) must be at most 2^31 − 1; lower dp.clip_norm or the cohort", c, n)}
	}
	if slack := enc.RoundingSlack(d); !(c > slack) {
		return &ValidationError{Field: "dp.clip_norm", Rule: fmt.Sprintf(
			"%g must exceed the rounding slack √d·2^−f = %.3g of secure aggregation's fixed point (d = %d parameters, f = %d fractional bits for cohorts of up to %d); raise dp.clip_norm", c, slack, d, enc.FracBits, n)}
	}
	return nil
}
