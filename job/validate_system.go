package job

import (
	"github.com/dpfl/dpfl/api/types"
)

// validateParticipation checks participation (fl.Participation) and the
// combinations it allows.
func validateParticipation(e *fieldErrs, s types.Spec) {
	p := s.Participation
	e.rng("participation.diurnal_amplitude", p.DiurnalAmplitude)
	if p.DiurnalAmplitude > 0 {
		e.rng("participation.period_rounds", float64(p.PeriodRounds))
	}
	e.rng("participation.dropout_rate", p.DropoutRate)
	e.rng("participation.over_selection", p.OverSelection)
	e.rng("participation.deadline_seconds", p.DeadlineSeconds)
	if p.AmongAvailable && s.Sampling.Scheme != "fixed" {
		e.addf("participation.among_available", types.RuleConflict, "needs sampling.scheme fixed: Poisson sampling followed by availability is already sampling among available users, and is covered by the accountant")
	}
	if (p.OverSelection > 0 || p.DeadlineSeconds > 0) && (s.Population.Source == "devices" || s.SecureAggregation) {
		e.addf("participation", types.RuleConflict, "over_selection and deadline_seconds apply to simulated rounds without secure aggregation")
	}
	if p.OverSelection > 0 && s.Algorithm != "fedavg" && s.Algorithm != "" {
		e.addf("participation.over_selection", types.RuleConflict, "does not combine with %s", s.Algorithm)
	}
}

// validateRoundTime checks round_time (fl.RoundTimeModel).
func validateRoundTime(e *fieldErrs, rt types.RoundTimeSpec) {
	e.rng("round_time.down_bandwidth", rt.DownBandwidth)
	e.rng("round_time.up_bandwidth", rt.UpBandwidth)
	e.rng("round_time.compute_ratio", rt.ComputeRatio)
	e.rng("round_time.compute_overhead", rt.ComputeOverhead)
	e.rng("round_time.bandwidth_sigma", rt.BandwidthSigma)
	e.rng("round_time.compute_sigma", rt.ComputeSigma)
}

// validateDevices checks what a devices population needs: secure
// aggregation and a fixed cohort.
func validateDevices(e *fieldErrs, s types.Spec) {
	if s.Population.Source != "devices" {
		return
	}
	if !s.SecureAggregation {
		e.addf("secure_aggregation", types.RuleRequired, "must be true when population.source is devices: real participants send their updates only through secure aggregation")
	}
	if s.Sampling.Scheme != "fixed" {
		e.addf("sampling.scheme", types.RuleConflict, "must be fixed when population.source is devices: the server cannot Poisson-sample devices it does not know; sampling.cohort_size is the most devices per round")
	}
}

// validateSecAgg checks secagg and the clip norm that bounds its fixed
// point (with secure_aggregation only).
func validateSecAgg(e *fieldErrs, s types.Spec) {
	if !s.SecureAggregation {
		return
	}
	if !s.DP.Enabled {
		if fe := checkRange("dp.clip_norm", s.DP.ClipNorm); fe != nil {
			fe.Message += " (with secure_aggregation it bounds the fixed-point range)"
			e.add(fe)
		}
	}
	a := s.SecAgg
	e.rng("secagg.dropout_rate", a.DropoutRate)
	e.rng("secagg.min_clients", float64(a.MinClients))
	e.rng("secagg.max_attempts", float64(a.MaxAttempts))
	e.rng("secagg.stage_timeout_seconds", a.StageTimeoutSeconds)
	e.rng("secagg.join_timeout_seconds", a.JoinTimeoutSeconds)
	if s.Sampling.Scheme == "fixed" && s.Sampling.CohortSize < a.MinClients {
		e.addf("sampling.cohort_size", types.RuleConflict, "must be ≥ secagg.min_clients = %d with secure_aggregation, got %d", a.MinClients, s.Sampling.CohortSize)
	}
}
