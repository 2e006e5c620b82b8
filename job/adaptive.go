package job

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/secagg"
)

// Adaptive clipping (Andrew et al. 2021; fl.AdaptiveClip): the spec's
// defaults, the check that z_Δ exists, and the clip norm a resumed job
// goes on with.

// The defaults of the paper's experiments (§4): γ, η_C, C_0, and σ_b as
// a fraction of the expected cohort m.
const (
	defaultTargetQuantile  = 0.5
	defaultClipLearnRate   = 0.2
	defaultInitialClip     = 0.1
	defaultCountStdPerUser = 1.0 / 20
)

// withAdaptiveDefaults fills dp.adaptive_clipping's zero fields: γ = 0.5,
// η_C = 0.2, C_0 = 0.1 and σ_b = m/20 for the expected cohort m, so that
// the stored spec names every value its rounds use.
func withAdaptiveDefaults(spec types.Spec) types.Spec {
	a := spec.DP.AdaptiveClipping
	if a == nil || !spec.DP.Enabled {
		return spec
	}
	c := *a
	if c.TargetQuantile == 0 {
		c.TargetQuantile = defaultTargetQuantile
	}
	if c.LearningRate == 0 {
		c.LearningRate = defaultClipLearnRate
	}
	if c.InitialClip == 0 {
		c.InitialClip = defaultInitialClip
	}
	if c.CountNoiseMultiplier == 0 {
		sampler, _ := specSampler(spec, spec.Population.Size)
		c.CountNoiseMultiplier = sampler.ExpectedSize(spec.Population.Size) * defaultCountStdPerUser
	}
	spec.DP.AdaptiveClipping = &c
	return spec
}

// checkAdaptiveNoise refuses a job whose final z and σ_b leave z_Δ
// undefined (2σ_b ≤ z), or make the update's noise z_Δ·C exceed
// MaxNoiseStd at the largest clip norm. field names what set z.
func checkAdaptiveNoise(spec types.Spec, field string) error {
	a := spec.DP.AdaptiveClipping
	if a == nil || !spec.DP.Enabled {
		return nil
	}
	z := spec.DP.NoiseMultiplier
	zDelta, err := fl.DeltaNoiseMultiplier(z, a.CountNoiseMultiplier)
	if err != nil {
		return NewValidationError("dp.adaptive_clipping.count_noise_multiplier", types.RuleConflict, fmt.Sprintf(
			"σ_b = %g must exceed z/2 = %g (z from %s): the update's noise multiplier z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2) is undefined otherwise (Andrew et al. 2021, §3); raise it", a.CountNoiseMultiplier, z/2, field))
	}
	if !(zDelta*MaxClipNorm <= MaxNoiseStd) {
		return NewValidationError("dp.adaptive_clipping.count_noise_multiplier", types.RuleRange, fmt.Sprintf(
			"leaves the update a noise multiplier z_Δ = %.3g, and σ = z_Δ·C could reach %.3g at the largest clip norm %g, above %g; raise σ_b further above z/2 = %g", zDelta, zDelta*MaxClipNorm, float64(MaxClipNorm), float64(MaxNoiseStd), z/2))
	}
	return nil
}

// adaptiveClip is the fl state of spec's adaptive clipping (nil without
// it), starting at clip.
func adaptiveClip(spec types.Spec, clip float64) *fl.AdaptiveClip {
	a := spec.DP.AdaptiveClipping
	if a == nil || !spec.DP.Enabled {
		return nil
	}
	return &fl.AdaptiveClip{Clip: clip, TargetQuantile: a.TargetQuantile, LearningRate: a.LearningRate,
		CountStd: a.CountNoiseMultiplier, MinClip: MinClipNorm, MaxClip: MaxClipNorm}
}

// resumeClip is the clip norm of round round+1 of a job whose rounds up
// to round are committed: C_0 (spec's initial clip, clamped to a's
// range) before the first, otherwise C_{t+1} from round t's released
// noisy_clip_norm and noisy_unclipped_fraction, by a.Next (the live
// round's own computation, with the same range).
func resumeClip(a *fl.AdaptiveClip, spec types.Spec, round int, metrics []json.RawMessage) (float64, error) {
	if round == 0 {
		return a.Clamp(spec.DP.AdaptiveClipping.InitialClip), nil
	}
	if len(metrics) < round {
		return 0, fmt.Errorf("adaptive clipping: %d rounds committed but %d rounds of metrics stored", round, len(metrics))
	}
	var met types.RoundMetrics
	if err := json.Unmarshal(metrics[round-1], &met); err != nil {
		return 0, fmt.Errorf("adaptive clipping: reading round %d's metrics: %w", round, err)
	}
	if met.Round != round || met.NoisyClipNorm == nil || met.NoisyUnclippedFraction == nil {
		return 0, fmt.Errorf("adaptive clipping: round %d's metrics hold no clip norm to resume from", round)
	}
	return a.Next(*met.NoisyClipNorm, *met.NoisyUnclippedFraction), nil
}

// adaptiveOf is agg's adaptive clipping state (nil without one).
func adaptiveOf(agg fl.Aggregator) *fl.AdaptiveClip {
	switch a := agg.(type) {
	case *fl.GaussianAggregator:
		return a.Adaptive
	case *fl.SecureAggregator:
		return a.Adaptive
	}
	return nil
}

// secureClipRange is the clip norms secure aggregation's 32-bit fixed
// point can carry for cohorts of up to bound clients and d parameters
// (secagg.NewEncoding): at most the largest C that NewEncoding accepts,
// and at least twice the rounding slack √d·2^−f that EncodeSecureInput
// takes off C, so that half of C is left to the update. Adaptive
// clipping keeps C_t inside it (a clamp on public values, which costs no
// privacy). ok is false when no clip norm fits.
func secureClipRange(bound, d int) (lo, hi float64, ok bool) {
	fits := func(c float64) bool { _, err := secagg.NewEncoding(bound, c); return err == nil }
	roomy := func(c float64) bool {
		enc, err := secagg.NewEncoding(bound, c)
		return err == nil && c >= 2*enc.RoundingSlack(d)
	}
	lo, hi = MinClipNorm, MaxClipNorm
	if !fits(lo) {
		return 0, 0, false
	}
	if !fits(hi) {
		hi = bisectLog(lo, hi, fits) // the largest that fits
	}
	if !roomy(lo) {
		if !roomy(hi) {
			return 0, 0, false
		}
		lo = bisectLog(hi, lo, roomy) // the smallest with room
	}
	return lo, hi, lo <= hi
}

// bisectLog returns the point nearest to the end bad of [good, bad] (or
// [bad, good]) at which ok still holds, bisecting in log scale; ok(good)
// must hold and ok be monotone between the two.
func bisectLog(good, bad float64, ok func(float64) bool) float64 {
	for range 100 {
		mid := math.Sqrt(good * bad)
		if mid == good || mid == bad {
			break
		}
		if ok(mid) {
			good = mid
		} else {
			bad = mid
		}
	}
	return good
}
