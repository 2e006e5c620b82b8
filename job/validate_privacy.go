package job

import (
	"github.com/dpfl/dpfl/api/types"
)

// validateDP checks dp (when enabled) and the releases DP must cover.
func validateDP(e *fieldErrs, s types.Spec) {
	d := s.DP
	if !d.Enabled {
		validateMechanism(e, s) // refuses the distributed mechanism without DP
		return
	}
	e.rng("dp.clip_norm", d.ClipNorm)
	e.err(checkNoise(d, "dp.noise_multiplier"))
	e.rng("dp.delta", d.Delta)
	e.rng("dp.epsilon_budget", d.EpsilonBudget)
	e.rng("dp.target_epsilon", d.TargetEpsilon)
	validateAdaptiveClipping(e, s)
	validateMechanism(e, s)
	validateReleases(e, s)
}

// validateAdaptiveClipping checks dp.adaptive_clipping (adaptive.go): its
// ranges (0 takes the default), and the configurations it does not run
// with yet (devices; canaries). z_Δ's existence needs the final z and σ_b, so planPrivacy
// checks it (checkAdaptiveNoise).
func validateAdaptiveClipping(e *fieldErrs, s types.Spec) {
	a := s.DP.AdaptiveClipping
	if a == nil {
		return
	}
	const f = "dp.adaptive_clipping."
	e.rng(f+"target_quantile", a.TargetQuantile)
	e.rng(f+"learning_rate", a.LearningRate)
	e.rng(f+"initial_clip", a.InitialClip)
	e.rng(f+"count_noise_multiplier", a.CountNoiseMultiplier)
	if s.Population.Source == "devices" {
		e.addf("dp.adaptive_clipping", types.RuleConflict, "runs with simulated populations only for now: devices would have to send their clipped bit in the secure sum, which dpfl-client participate does not do yet (issue 16); remove dp.adaptive_clipping")
	}
	if s.Audit.Canaries > 0 {
		e.addf("dp.adaptive_clipping", types.RuleConflict, "cannot run with audit.canaries: the canaries are clipped to a fixed dp.clip_norm; remove one of them")
	}
	// Where the kept reports depend on other users (a target, a deadline,
	// dropped stragglers), the sensitivity harness proves the clipped
	// sum's bound but not yet the count's: refuse rather than claim it.
	p := s.Participation
	if p.OverSelection > 0 || p.DeadlineSeconds > 0 || s.Client.DropStragglers {
		e.addf("dp.adaptive_clipping", types.RuleConflict, "cannot run yet with participation.over_selection, participation.deadline_seconds or client.drop_stragglers: which reports a round keeps then depends on other users, and no test yet bounds the noisy count's sensitivity there; remove those or dp.adaptive_clipping")
	}
}

// validateReleases refuses DP configurations whose releases no ledger
// event covers (package doc, "What is protected").
func validateReleases(e *fieldErrs, s types.Spec) {
	if s.Participation.AmongAvailable {
		e.addf("participation.among_available", types.RuleConflict, "cannot run with DP: a fixed cohort drawn among the users online in a round gives each user a selection probability that depends on how many others are online, which no accountant here covers; use Poisson sampling (availability then only removes users) or set dp.enabled false")
	}
	if s.Population.EvalUserFraction > 0 {
		e.addf("population.eval_user_fraction", types.RuleConflict, "cannot be used with DP: evaluation users are scored on their own data and their accuracy is released without noise, so they would have no protection; set it to 0 (the test split is evaluated) or set dp.enabled false")
	}
	if s.Population.HeldOutFraction > 0 {
		e.addf("population.held_out_fraction", types.RuleConflict, "cannot be used with DP: per-client evaluation on the users' held-out examples is released without noise; set it to 0 or set dp.enabled false")
	}
	if s.SecureAggregation && s.Population.Source != "devices" && s.SecAgg.DropoutRate > 0 {
		e.addf("secagg.dropout_rate", types.RuleConflict, "must be 0 with DP: whether a protocol instance aborts after dropouts depends on how many users were sampled, and the protocol bounds such aborts only below 2^-20 per round, far above a useful δ; model dropouts with participation.dropout_rate (users that drop before the protocol), which DP covers")
	}
}

// validateAuditSpec checks audit: canaries for an empirical ε (canary.go)
// need DP and a simulated population, and at least two canaries of each
// kind for the Gaussian fits.
func validateAuditSpec(e *fieldErrs, s types.Spec) {
	a := s.Audit
	e.rng("audit.canaries", float64(a.Canaries))
	e.rng("audit.held_out", float64(a.HeldOut))
	switch {
	case a.Canaries == 0 && a.HeldOut > 0:
		e.addf("audit.held_out", types.RuleRequired, "needs audit.canaries > 0")
	case a.Canaries <= 0 || a.Canaries > MaxCanaries:
	case a.Canaries < 2:
		e.addf("audit.canaries", types.RuleRange, "must be at least 2: the estimate fits a Gaussian to the inserted canaries (1000 or more give a useful interval), got %d", a.Canaries)
	case auditHeldOut(a) < 2:
		e.addf("audit.held_out", types.RuleRange, "must be at least 2: the estimate fits a Gaussian to the held-out canaries (1000 or more give a useful interval), got %d", a.HeldOut)
	}
	if a.Canaries > 0 && !s.DP.Enabled {
		e.addf("audit.canaries", types.RuleConflict, "needs dp.enabled: the empirical ε is checked against the job's analytical ε, and without noise the canaries would only pull the model off course")
	}
	if a.Canaries > 0 && s.Population.Source == "devices" {
		e.addf("audit.canaries", types.RuleConflict, "needs a simulated population: canaries are clients the server simulates in its own rounds, and a devices job's rounds are what the devices send")
	}
}
