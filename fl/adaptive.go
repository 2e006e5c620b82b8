package fl

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// AdaptiveClip is the state of adaptive clipping (Andrew, Thakkar,
// McMahan and Ramaswamy, NeurIPS 2021, "Differentially private learning
// with adaptive clipping", Algorithm 1 with the geometric update). With
// it, GaussianAggregator clips round t's updates to C_t = Clip, counts
// the updates with ‖Δ_i‖ ≤ C_t (the bits b_i), releases
//
//	b̃_t = (Σ_i (b_i − 1/2) + N(0, σ_b²)) / m + 1/2
//
// (m the expected cohort size, public) and sets Clip to
// C_{t+1} = C_t·exp(−η_C·(b̃_t − γ)), clamped to [MinClip, MaxClip].
//
// Privacy (§3 of the paper): the centred count Σ(b_i − 1/2) has
// sensitivity 1/2 and the clipped sum C_t, so releasing the sum with
// noise multiplier z_Δ and the count with noise σ_b is, jointly, one
// Gaussian mechanism of multiplier z with z⁻² = z_Δ⁻² + (2σ_b)⁻²
// (DeltaNoiseMultiplier); the ledger's event for the round is unchanged.
// C_{t+1} and b̃_t are post-processing of releases so covered.
type AdaptiveClip struct {
	// Clip is C_t, the clip norm of the next round (> 0).
	Clip float64
	// TargetQuantile is γ ∈ (0, 1).
	TargetQuantile float64
	// LearningRate is η_C > 0.
	LearningRate float64
	// CountStd is σ_b > 0, the noise's standard deviation on the count,
	// in updates.
	CountStd float64
	// MinClip and MaxClip bound C_t (0: no bound); the bound is
	// post-processing, so it costs no privacy.
	MinClip, MaxClip float64
}

// DeltaNoiseMultiplier is z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2), the noise
// multiplier left for the clipped sum when the count takes noise σ_b out
// of a round whose total multiplier is z (Andrew et al. 2021, §3). It is
// an error unless z > 0, σ_b > 0 and 2σ_b > z (otherwise z_Δ is
// undefined: the count alone would need more than the whole budget).
func DeltaNoiseMultiplier(z, countStd float64) (float64, error) {
	if !(z > 0) || !(countStd > 0) || math.IsInf(z, 0) || math.IsInf(countStd, 0) {
		return 0, fmt.Errorf("fl: adaptive clipping needs finite z > 0 and σ_b > 0, got z = %v, σ_b = %v", z, countStd)
	}
	inv := 1/(z*z) - 1/(4*countStd*countStd)
	if !(inv > 0) {
		return 0, fmt.Errorf("fl: adaptive clipping's count noise σ_b = %v must exceed z/2 = %v: z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2) is undefined otherwise", countStd, z/2)
	}
	return 1 / math.Sqrt(inv), nil
}

// NoisyFraction is b̃ = (unclipped − n/2 + N(0, σ_b²))/m + 1/2 for n
// updates of which unclipped had norm at most C, over an expected cohort
// m > 0, drawing the noise from rng (a secure source). Only the centred
// count Σ(b_i − 1/2) = unclipped − n/2 enters, so that its sensitivity is
// 1/2 under add/remove and 1 under replace-one, as the clipped sum's is
// C and 2C.
func (a *AdaptiveClip) NoisyFraction(unclipped, n int, m float64, rng *rand.Rand) float64 {
	centred := float64(unclipped) - float64(n)/2
	return (centred+rng.NormFloat64()*a.CountStd)/m + 0.5
}

// Next is C_{t+1} = C_t·exp(−η_C·(b̃ − γ)) for the round's clip c = C_t and
// noisy fraction b̃, clamped to [MinClip, MaxClip]. It depends on released
// values only, so a resumed job recomputes it from its stored metrics.
func (a *AdaptiveClip) Next(c, noisyFraction float64) float64 {
	return a.Clamp(c * math.Exp(-a.LearningRate*(noisyFraction-a.TargetQuantile)))
}

// Clamp is c within [MinClip, MaxClip] (a zero bound is none).
func (a *AdaptiveClip) Clamp(c float64) float64 {
	if a.MinClip > 0 {
		c = max(c, a.MinClip)
	}
	if a.MaxClip > 0 {
		c = min(c, a.MaxClip)
	}
	return c
}
