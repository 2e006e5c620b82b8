package audit

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/dpfl/dpfl/accounting"
)

// mechanismDDG is dp.mechanism's value for the distributed discrete
// Gaussian (types.MechanismDistributedDiscreteGaussian; audit reads
// specs as JSON and does not import the wire types).
const mechanismDDG = "distributed_discrete_gaussian"

// ddgFields are the parts of dp.distributed that the verifier reads
// (types.DistributedDPSpec).
type ddgFields struct {
	PaddedDimension int     `json:"padded_dimension"`
	Clients         int     `json:"clients"`
	MinSurvivors    int     `json:"min_survivors"`
	Sigma2          string  `json:"sigma2"`
	L2Sensitivity   float64 `json:"l2_sensitivity"`
	Rho             float64 `json:"rho"`
}

// ddgRhoTolerance is the relative difference between a charged ρ and
// the verifier's recomputation that is put down to floating point.
const ddgRhoTolerance = 1e-9

// checkDDGEvent checks the first charge of a distributed discrete
// Gaussian job: it must be an unsampled ZCDP event whose ρ is, within
// ddgRhoTolerance, KLS21 Proposition 14 Eq. (17)
// (accounting.DistributedDiscreteGaussianRho) recomputed from the
// spec's published parameters at its survivor floor and replace-one
// sensitivity 2Δ₂; and the published shares must carry the spec's noise
// multiplier (√n·σ ≥ z·Δ₂ for the n planned shares). Δ₂ itself is taken
// from the spec, as the server computed it (KLS21 Theorem 1).
func checkDDGEvent(e accounting.Event, spec specFields) error {
	z, ok := e.(accounting.ZCDP)
	if !ok {
		return fmt.Errorf("event %T, but a distributed discrete Gaussian job charges an unsampled zCDP event", e)
	}
	d := spec.DP.Distributed
	if d == nil {
		return errors.New("the spec sets dp.mechanism distributed_discrete_gaussian but publishes no dp.distributed parameters")
	}
	s2, ok := new(big.Rat).SetString(d.Sigma2)
	if !ok || s2.Sign() <= 0 {
		return fmt.Errorf("dp.distributed.sigma2 %q is not a positive rational", d.Sigma2)
	}
	f, _ := s2.Float64()
	sigma := math.Nextafter(math.Sqrt(math.Nextafter(f, 0)), 0) // ≤ σ, as the server rounds
	if need := spec.DP.NoiseMultiplier * d.L2Sensitivity; math.Sqrt(float64(d.Clients))*sigma < need*(1-ddgRhoTolerance) {
		return fmt.Errorf("the published shares have total standard deviation √n·σ = %g, below z·Δ₂ = %g: they do not carry dp.noise_multiplier", math.Sqrt(float64(d.Clients))*sigma, need)
	}
	rho, err := accounting.DistributedDiscreteGaussianRho(d.MinSurvivors, d.PaddedDimension, sigma, 2*d.L2Sensitivity)
	if err != nil {
		return fmt.Errorf("recomputing ρ from dp.distributed: %w", err)
	}
	if !(math.Abs(z.Rho-rho) <= ddgRhoTolerance*rho) || z.Rho != d.Rho {
		return fmt.Errorf("event ρ = %v, but KLS21 Eq. (17) at the spec's %d survivors, p = %d, σ² = %s and 2Δ₂ = %g gives %v (spec publishes %v)",
			z.Rho, d.MinSurvivors, d.PaddedDimension, d.Sigma2, 2*d.L2Sensitivity, rho, d.Rho)
	}
	return nil
}
