package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
)

// The privacy plan of a job, fixed at submission: its round event, the
// noise multiplier calibrated for a target ε, and the check that its
// budget pays for at least one round.

// errCalibrationDeadline stops calibrate's search at its deadline.
var errCalibrationDeadline = errors.New("calibration deadline exceeded")

// calibrate resolves dp.target_epsilon: it sets z to the smallest noise
// multiplier whose ε after spec.Rounds rounds stays within the target
// (accounting.CalibrateNoise over accounting.Account, so the tighter valid
// accountant decides), raised to MinNoiseMultiplier if below it (more
// noise only lowers ε), and makes the target the job's budget. The search
// runs inside the submission request, so it stops when ctx ends (a
// deadline): each of its accountant runs checks ctx first. Errors are
// *ValidationErrors naming dp.target_epsilon.
func calibrate(ctx context.Context, spec types.Spec) (types.Spec, error) {
	target := spec.DP.TargetEpsilon
	if !spec.DP.Enabled || target == 0 {
		return spec, nil
	}
	epsOf := func(_, z float64, steps int, delta float64) (float64, error) {
		if err := ctx.Err(); err != nil {
			return 0, errCalibrationDeadline
		}
		s := spec
		s.DP.NoiseMultiplier = z
		rep, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: roundEvent(s), Count: steps}}, delta)
		return rep.Epsilon(), err
	}
	// Under secure aggregation part of δ may pay for aborts (abort.go):
	// calibrate at δ/2, the least the accountant is left with.
	delta := spec.DP.Delta
	if spec.SecureAggregation && abortProbability(spec) > 0 {
		delta /= 2
	}
	z, err := accounting.CalibrateNoise(epsOf, target, delta, 0, spec.Rounds)
	if errors.Is(err, errCalibrationDeadline) {
		return spec, NewValidationError("dp.target_epsilon", types.RuleCapacity, "calibrating the noise multiplier for this target took longer than the server allows a submission; set dp.noise_multiplier instead (dpfl-client privacy calibrate finds it offline), or use fewer rounds")
	}
	if err != nil {
		return spec, NewValidationError("dp.target_epsilon", types.RuleRange, err.Error())
	}
	spec.DP.NoiseMultiplier = max(z, MinNoiseMultiplier)
	if err := checkNoise(spec.DP, "dp.target_epsilon"); err != nil {
		return spec, err
	}
	if spec.DP.EpsilonBudget == 0 || spec.DP.EpsilonBudget > target {
		spec.DP.EpsilonBudget = target
	}
	return spec, nil
}

// checkFirstRoundFits refuses a DP job whose budget cannot pay for even one
// round, rather than creating a job that stops before it starts.
func checkFirstRoundFits(spec types.Spec) error {
	if !spec.DP.Enabled || spec.DP.EpsilonBudget == 0 {
		return nil
	}
	rep, err := accounting.Account([]accounting.Event{roundEvent(spec)}, AccountingDelta(spec.DP))
	if err != nil {
		return err
	}
	eps := rep.Epsilon()
	if eps > spec.DP.EpsilonBudget {
		return NewValidationError("dp.epsilon_budget", types.RuleConflict, fmt.Sprintf(
			"one round already costs ε = %.4g at δ = %g, more than the budget %g; raise the budget or the noise multiplier, or lower the sampling rate",
			eps, spec.DP.Delta, spec.DP.EpsilonBudget))
	}
	return nil
}

// roundEvent is the DP event of one round of spec, from fl.RoundEvent:
// the Gaussian sum query with noise multiplier z under the sampling the
// server performs (Spec.sampler: Poisson at q·(1+o), or a fixed cohort of
// ⌈K·(1+o)⌉, replace-one). Under Poisson sampling a Target of reports
// (over-selection) lets one user's report push another's out: the sum's
// sensitivity is 2C and the Gaussian's multiplier z/2. Dropouts,
// availability, stragglers and deadlines decide each user's inclusion
// from its own data and seeded draws only, so they keep C.
//
// Devices join rounds of their own accord, so no sampling is credited,
// and the first cohort_size devices to join fill the round: a user can
// displace another, so the round is the plain Gaussian mechanism at
// sensitivity 2C (replace-one adjacency over enrolled devices, each of
// which joins a round at most once).
//
// The distributed discrete Gaussian's rounds are ddgEvent's unsampled
// zCDP events (ddg.go).
func roundEvent(spec types.Spec) accounting.Event {
	if distributed(spec) {
		return ddgEvent(spec)
	}
	z := spec.DP.NoiseMultiplier
	if spec.Population.Source == "devices" {
		return fl.RoundEvent(nil, 0, z, fl.TwoClips)
	}
	s, target := specSampler(spec, spec.Population.Size)
	return fl.RoundEvent(s, spec.Population.Size, z, fl.TargetSensitivity(target))
}
