package fl

import (
	"fmt"

	"github.com/dpfl/dpfl/accounting"
)

// Sensitivity is the L2 sensitivity of a round's pre-noise sum, in units
// of the clip norm C, under the adjacency of the round's event.
type Sensitivity int

const (
	// OneClip (C): a neighbouring population adds or removes one user,
	// whose clipped update enters the sum whole or not at all. Every
	// filter that decides a user's inclusion from that user's own data
	// and seeded simulation draws only (availability, dropouts,
	// stragglers, a deadline on the user's own modelled device time)
	// keeps this bound.
	OneClip Sensitivity = 1
	// TwoClips (2C): one user's presence can push another user's update
	// out (over-selection keeps the Target earliest reports; a device cap
	// keeps the first arrivals), or one user's update is replaced by
	// another's (replace-one adjacency).
	TwoClips Sensitivity = 2
)

// RoundEvent is the DpEvent of one DP-FedAvg round (McMahan et al. 2018,
// Algorithm 1): the Gaussian sum query with noise standard deviation z·C
// on a sum of sensitivity sens·C, hence noise multiplier z/sens, run on
// the cohort that s draws from n users. s nil credits no sampling (devices
// that join of their own accord): the plain Gaussian mechanism.
//
//   - Poisson{Q}: PoissonSampledDpEvent(Q, Gaussian(z/sens)), add/remove
//     adjacency (Mironov, Talwar, Zhang 2019; Zhu, Dong, Wang 2022 for the
//     PLD). With a TwoClips sum the mixture bound still holds: for every
//     fixed draw of the other users the two outputs are Gaussians whose
//     means differ by at most 2C, and the divergences are jointly convex
//     in the mixture.
//   - Fixed{K}: SampledWithoutReplacementDpEvent(n, K, Gaussian(z/2)),
//     replace-one adjacency (Wang, Balle, Kasiviswanathan 2019): replacing
//     a user moves the sum by 2C whatever sens says, and a Target or cap
//     on top of a fixed cohort still changes at most two of its reports
//     (the replaced one and the one it lets in or pushes out).
//
// z must be > 0 and n ≥ 1; it panics on another Sampler (programmer
// error). Every place that charges or plans a round (the job runner,
// admission, calibration, the experiments) calls this function, so the
// mechanism and its ledger event cannot drift apart.
func RoundEvent(s Sampler, n int, z float64, sens Sensitivity) accounting.Event {
	switch s := s.(type) {
	case nil:
		return accounting.Gaussian{NoiseMultiplier: z / float64(sens)}
	case Poisson:
		return accounting.PoissonSampled{SamplingProbability: s.Q, Event: accounting.Gaussian{NoiseMultiplier: z / float64(sens)}}
	case Fixed:
		return accounting.SampledWithoutReplacement{SourceDatasetSize: n, SampleSize: s.K, Event: accounting.Gaussian{NoiseMultiplier: z / 2}}
	default:
		panic(fmt.Sprintf("fl: no DP event for sampler %T", s))
	}
}

// TargetSensitivity is the sensitivity, in clip norms under add/remove
// adjacency, of a round that keeps only its target earliest reports
// (target > 0: one user's report can push another's out, TwoClips) or
// every report (target 0: OneClip). Deadlines, dropouts and stragglers
// decide each user's inclusion from its own data and seeded draws, so
// they keep OneClip.
func TargetSensitivity(target int) Sensitivity {
	if target > 0 {
		return TwoClips
	}
	return OneClip
}

// Sensitivity is the sensitivity of f's pre-noise sum: TargetSensitivity
// of f.Simulation.Target.
func (f *FedAvg) Sensitivity() Sensitivity { return TargetSensitivity(f.Simulation.Target) }
