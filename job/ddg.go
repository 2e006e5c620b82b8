package job

import (
	"fmt"
	"math"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
)

// The distributed discrete Gaussian (dp.mechanism
// "distributed_discrete_gaussian"; Kairouz, Liu & Steinke, ICML 2021,
// KLS21): every client adds its own discrete Gaussian share to its
// rotated, rounded update inside secure aggregation, and the server only
// ever holds noisy sums. The job's plan (dp.distributed) is fixed at
// submission from C, the model's dimension d, the planned survivors n
// and z (fl.ChooseDDGParams), and the ledger charges each round one
// unsampled zCDP event:
//
//	ρ = KLS21 Prop. 14 Eq. (17) at MinSurvivors shares and L2
//	    sensitivity 2Δ₂ (replace-one: a fixed cohort or devices),
//
// where MinSurvivors is secagg.min_clients, below which the protocol
// aborts before unmasking. A round in which more clients survive holds
// more noise than ρ assumes; one in which fewer than planned (but at
// least MinSurvivors) survive holds less than planned but no less than ρ
// assumes. No amplification by sampling is claimed (KLS21 §6 do not
// either): a fixed cohort is public, and an unsampled event is valid for
// any cohort.

// DefaultModulusBits is b when dp.distributed.modulus_bits is 0: the
// secure sum's own ring Z_2³², which costs no bandwidth beyond it.
const DefaultModulusBits = 32

// ddgSurvivorFloor is the least secagg.min_clients of a distributed DP
// job, as a fraction of the planned survivors n: a round whose
// survivors fall below it aborts before unmasking and is retried, and
// the ledger's ρ assumes only that many noise shares (at most 1.25 times
// the planned ρ).
const ddgSurvivorFloor = 0.8

// distributed says the job adds its noise as distributed discrete
// Gaussian shares.
func distributed(s types.Spec) bool {
	return s.DP.Enabled && s.DP.Mechanism == types.MechanismDistributedDiscreteGaussian
}

// ddgPlannedClients is n, the survivors each noise share is sized for:
// the cohort, less its planned dropouts (devices: secagg.dropout_rate;
// simulation: participation's unavailable and dropped users, at their
// worst).
func ddgPlannedClients(s types.Spec) int {
	k := float64(s.Sampling.CohortSize)
	keep := 1 - s.SecAgg.DropoutRate
	if s.Population.Source != "devices" {
		keep = (1 - s.Participation.DiurnalAmplitude) * (1 - s.Participation.DropoutRate)
	}
	return max(1, int(math.Floor(k*keep)))
}

// ddgMinSurvivors is the least secagg.min_clients of a distributed DP
// job: ⌈0.8·n⌉ of the planned survivors n, at least 2. A larger
// secagg.min_clients is kept; a smaller one is raised to it at
// submission, so that ε never rests on a handful of shares.
func ddgMinSurvivors(n int) int {
	return max(2, int(math.Ceil(ddgSurvivorFloor*float64(n))))
}

// ddgParams chooses the round parameters of spec (fl.ChooseDDGParams at
// C, dp.distributed.dimension, the planned survivors, b and z).
func ddgParams(s types.Spec) (fl.DDGParams, error) {
	d := s.DP.Distributed
	if d == nil || d.Dimension < 1 {
		return fl.DDGParams{}, fmt.Errorf("distributed DP: the model's dimension is not set (dp.distributed.dimension)")
	}
	bits := d.ModulusBits
	if bits == 0 {
		bits = DefaultModulusBits
	}
	return fl.ChooseDDGParams(s.DP.ClipNorm, d.Dimension, ddgPlannedClients(s), bits, s.DP.NoiseMultiplier)
}

// ddgFloor is the survivor floor of spec with parameters p:
// secagg.min_clients, raised to ddgMinSurvivors of the planned survivors.
func ddgFloor(s types.Spec, p fl.DDGParams) int {
	return max(s.SecAgg.MinClients, ddgMinSurvivors(p.Clients))
}

// ddgRho is ρ of one round of spec with parameters p: at ddgFloor
// shares and replace-one sensitivity 2Δ₂.
func ddgRho(s types.Spec, p fl.DDGParams) (float64, error) {
	return fl.DDGRhoAt(p, ddgFloor(s, p), fl.TwoClips)
}

// ddgEvent is the ledger event of one round of spec: the unsampled
// ZCDP{ρ} of ddgRho. A plan that cannot be made (it was checked at
// submission) gives NonPrivate, whose ε is infinite, so the runner fails
// the job before any release rather than charge too little.
func ddgEvent(s types.Spec) accounting.Event {
	p, err := ddgParams(s)
	if err != nil {
		return accounting.NonPrivate{}
	}
	rho, err := ddgRho(s, p)
	if err != nil {
		return accounting.NonPrivate{}
	}
	return accounting.ZCDP{Rho: rho}
}

// withDistributedDimension records the model's dimension d in a
// distributed DP spec (dp.distributed.dimension), which its plan and its
// ledger event need; other specs are returned unchanged.
func withDistributedDimension(s types.Spec, d int) types.Spec {
	if !distributed(s) {
		return s
	}
	c := types.DistributedDPSpec{}
	if s.DP.Distributed != nil {
		c.ModulusBits = s.DP.Distributed.ModulusBits
	}
	c.Dimension = d
	s.DP.Distributed = &c
	return s
}

// withDistributedPlan fills in dp.distributed from the final z
// (after calibration): secagg.min_clients (ddgFloor), and the
// chosen parameters and ρ, which the job's spec then shows. Errors are
// *ValidationErrors: parameters that would wrap or lose more than
// fl.DDGMaxAccuracyLoss.
func withDistributedPlan(s types.Spec) (types.Spec, error) {
	if !distributed(s) {
		return s, nil
	}
	p, err := ddgParams(s)
	if err != nil {
		return s, NewValidationError("dp.distributed.modulus_bits", types.RuleConflict, fmt.Sprintf(
			"no distributed discrete Gaussian parameters fit: %v; use more modulus bits (up to 32), a smaller cohort or a smaller noise multiplier", err))
	}
	// ≤ the cohort: validation keeps secagg.min_clients there, and the
	// planned survivors are at most the cohort.
	s.SecAgg.MinClients = ddgFloor(s, p)
	rho, err := ddgRho(s, p)
	if err != nil {
		return s, NewValidationError("secagg.min_clients", types.RuleRange, err.Error())
	}
	c := *s.DP.Distributed
	c.ModulusBits, c.PaddedDimension, c.Clients, c.MinSurvivors = p.Bits, p.PaddedDim, p.Clients, s.SecAgg.MinClients
	c.Gamma, c.Beta, c.Sigma2, c.L2Sensitivity = p.Gamma, p.Beta, p.Sigma2.RatString(), fl.DDGSensitivity(p)
	c.Rho, c.WrapStdDevs, c.AccuracyLoss = rho, p.WrapStdDevs, p.AccuracyLoss
	s.DP.Distributed = &c
	return s, nil
}

// validateMechanism checks dp.mechanism and dp.distributed: the
// distributed discrete Gaussian needs DP, secure aggregation (the shares
// only hide in a secure sum) and a public cohort size (a fixed cohort,
// or devices' cohort_size), and is refused where the kept reports
// depend on other users or where another release reads the clip norm.
func validateMechanism(e *fieldErrs, s types.Spec) {
	if d := s.DP.Distributed; d != nil && d.ModulusBits != 0 {
		e.rng("dp.distributed.modulus_bits", float64(d.ModulusBits))
	}
	switch s.DP.Mechanism {
	case "", types.MechanismCentralGaussian:
		if s.DP.Distributed != nil {
			e.addf("dp.distributed", types.RuleConflict, "only with dp.mechanism %q", types.MechanismDistributedDiscreteGaussian)
		}
		return
	case types.MechanismDistributedDiscreteGaussian:
	default:
		e.addf("dp.mechanism", types.RuleRange, "must be %q or %q, got %q", types.MechanismCentralGaussian, types.MechanismDistributedDiscreteGaussian, s.DP.Mechanism)
		return
	}
	const f = "dp.mechanism"
	switch {
	case !s.DP.Enabled:
		e.addf(f, types.RuleConflict, "the distributed discrete Gaussian is a DP mechanism: set dp.enabled true or remove dp.mechanism")
	case !s.SecureAggregation:
		e.addf(f, types.RuleConflict, "needs secure_aggregation true: each client's noise share protects it only inside the secure sum")
	case s.Population.Source != "devices" && s.Sampling.Scheme != "fixed":
		e.addf(f, types.RuleConflict, "needs sampling.scheme \"fixed\": its accounting (KLS21) claims no amplification by sampling and sizes each client's share for a known cohort")
	case s.DP.AdaptiveClipping != nil:
		e.addf(f, types.RuleConflict, "cannot run with dp.adaptive_clipping yet: the clip norm is part of the public parameters the clients' shares are sized for")
	case s.Audit.Canaries > 0:
		e.addf(f, types.RuleConflict, "cannot run with audit.canaries: canaries are inserted by the server, which adds no noise here")
	case s.Participation.OverSelection > 0 || s.Participation.DeadlineSeconds > 0 || s.Client.DropStragglers:
		e.addf(f, types.RuleConflict, "cannot run with participation.over_selection, participation.deadline_seconds or client.drop_stragglers: which reports a round keeps would depend on other users, and the noise shares are sized for the cohort")
	}
}
