package accounting

import (
	"errors"
	"fmt"
	"math"
)

// Accounting for the distributed discrete Gaussian mechanism of Kairouz,
// Liu & Steinke, "The Distributed Discrete Gaussian Mechanism for
// Federated Learning with Secure Aggregation" (ICML 2021; arXiv
// 2102.06387, cited here by the numbering of its v4, "KLS21"): n clients
// each add independent discrete Gaussian noise N_Z(0, σ²) to every
// coordinate of their d-dimensional integer vectors, and only the sum
// (computed under secure aggregation) is released. The sum of discrete
// Gaussians is not a discrete Gaussian; KLS21 bound how far it is from
// one, at a slack τ that vanishes quickly as σ grows.

// DistributedDiscreteGaussianTau is the slack τ of KLS21 Theorem 1 for n
// noise shares of parameter σ:
//
//	τ = 10 · Σ_{k=1}^{n−1} exp(−2π²σ² · k/(k+1)),
//
// 0 for n = 1. It is summed term by term for the first 2²⁰ terms; any
// further terms (the terms decrease in k) are bounded above by their count
// times the first of them, so the value returned is never below τ beyond
// rounding. σ ≥ 1/2 and n ≥ 1 are the caller's to check.
func DistributedDiscreteGaussianTau(n int, sigma float64) float64 {
	c := 2 * math.Pi * math.Pi * sigma * sigma
	last := n - 1 // the terms are k = 1 … n−1
	exact := min(last, ddgTauExactTerms)
	var s float64
	for k := 1; k <= exact; k++ {
		s += math.Exp(-c * float64(k) / float64(k+1))
	}
	if last > exact {
		k := float64(exact + 1)
		s += float64(last-exact) * math.Exp(-c*k/(k+1))
	}
	return 10 * s
}

// ddgTauExactTerms is how many terms of τ DistributedDiscreteGaussianTau
// sums exactly before it bounds the rest.
const ddgTauExactTerms = 1 << 20

// DistributedDiscreteGaussianRho is the ρ such that releasing the sum of n
// clients' integer vectors in Z^d, each client having added its own
// independent N_Z(0, σ²) noise to every coordinate, is ρ-zCDP (Rényi
// divergence ≤ ρ·α at every order α > 1) when one client's vector changes
// by at most l2Sensitivity (Δ₂) in L2 norm, every one of the n noise
// shares staying in the sum.
//
// It is the zCDP form of KLS21 Proposition 14, Eq. (17) (arXiv v4,
// p. 16), with τ = DistributedDiscreteGaussianTau(n, σ) as in KLS21
// Theorem 1: for σ ≥ 1/2 and every α ≥ 1 the sum's Rényi divergence is at
// most
//
//	min{ α·Δ₂²/(2nσ²) + τ·d,  (α/2)·(Δ₂/(√n·σ) + τ·√d)² },
//
// (the L1 form is DistributedDiscreteGaussianRhoL1), and the largest ratio
// of each bound to α over α > 1 gives
//
//	ρ = min{ Δ₂²/(2nσ²) + τ·d,  ½·(Δ₂/(√n·σ) + τ·√d)² }.
//
// Only Eq. (17) is used: its first bound gives no ρ below
// Δ₂²/(2nσ²) + τ·d, because at orders α → 1 it allows a divergence of
// Δ₂²/(2nσ²) + τ·d, which ρ·α must cover. For n = 1, τ = 0
// and ρ = Δ₂²/(2σ²), the discrete Gaussian's own bound (Canonne, Kamath,
// Steinke 2020, "The Discrete Gaussian for Differential Privacy"), which
// holds for every σ > 0.
//
// Units: σ and Δ₂ are in the integer domain the noise is added in (after
// the scaling and randomized rounding of KLS21 §4; Δ₂ must bound the
// rounded vectors, e.g. by KLS21 Theorem 1's inflated norm), and σ is the
// discrete Gaussian's parameter (its pmf ∝ exp(−x²/(2σ²))), not its
// standard deviation. n is the number of noise shares that are surely in
// the sum (the minimum number of surviving clients, counting only clients
// trusted to add their noise); fewer shares than planned make ρ larger.
//
// Errors: n < 1, d < 1, σ not finite or ≤ 0, σ < 1/2 when n ≥ 2 (KLS21's
// hypothesis), Δ₂ not finite or ≤ 0, or a ρ that overflows.
func DistributedDiscreteGaussianRho(n, d int, sigma, l2Sensitivity float64) (float64, error) {
	return ddgRho(n, d, sigma, l2Sensitivity, math.Inf(1))
}

// DistributedDiscreteGaussianRhoL1 is DistributedDiscreteGaussianRho when
// one client's vector also changes by at most l1Sensitivity (Δ₁) in L1
// norm, adding the middle bound of KLS21 Proposition 14, Eq. (17):
// (α/2)·(Δ₂²/(nσ²) + 2·Δ₁·τ/(√n·σ) + τ²·d), that is
//
//	ρ = min{ Δ₂²/(2nσ²) + τ·d,  ½·(Δ₂²/(nσ²) + 2Δ₁τ/(√n·σ) + τ²d),  ½·(Δ₂/(√n·σ) + τ√d)² }.
//
// Since Δ₁ ≤ √d·Δ₂ for every vector, the third bound is the second at
// Δ₁ = √d·Δ₂; a smaller Δ₁ can only lower ρ. Errors are
// DistributedDiscreteGaussianRho's, and Δ₁ not finite or ≤ 0.
func DistributedDiscreteGaussianRhoL1(n, d int, sigma, l2Sensitivity, l1Sensitivity float64) (float64, error) {
	if !(l1Sensitivity > 0) || !finite(l1Sensitivity) {
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: L1 sensitivity must be a finite number > 0, got %v", l1Sensitivity)
	}
	return ddgRho(n, d, sigma, l2Sensitivity, l1Sensitivity)
}

// ddgRho is ρ of Eq. (17)'s bounds, the L1 one only for a finite l1.
func ddgRho(n, d int, sigma, l2, l1 float64) (float64, error) {
	switch {
	case n < 1:
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: need n ≥ 1 noise shares, got %d", n)
	case d < 1:
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: need dimension d ≥ 1, got %d", d)
	case !(sigma > 0) || !finite(sigma):
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: σ must be a finite number > 0, got %v", sigma)
	case n >= 2 && !(sigma >= 0.5):
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: KLS21's bound for a sum of %d shares needs σ ≥ 1/2, got %v", n, sigma)
	case !(l2 > 0) || !finite(l2):
		return 0, fmt.Errorf("accounting: distributed discrete Gaussian: L2 sensitivity must be a finite number > 0, got %v", l2)
	}
	tau := DistributedDiscreteGaussianTau(n, sigma)
	fd := float64(d)
	a := l2 / (math.Sqrt(float64(n)) * sigma) // Δ₂/(√n·σ)
	rho := math.Min(a*a/2+tau*fd, (a+tau*math.Sqrt(fd))*(a+tau*math.Sqrt(fd))/2)
	if !math.IsInf(l1, 1) {
		b := l1 / (math.Sqrt(float64(n)) * sigma) // Δ₁/(√n·σ)
		rho = math.Min(rho, (a*a+2*b*tau+tau*tau*fd)/2)
	}
	if !finite(rho) {
		return 0, errors.New("accounting: distributed discrete Gaussian: ρ overflows")
	}
	return rho, nil
}

// DistributedDiscreteGaussianEvent is the ledger event of one release of
// the distributed discrete Gaussian: ZCDP{Rho: DistributedDiscreteGaussianRho(…)}.
// Record it unsampled, once per round: accountants refuse a sampled ZCDP
// (see ZCDP), so a job using it claims no amplification by sampling.
func DistributedDiscreteGaussianEvent(n, d int, sigma, l2Sensitivity float64) (ZCDP, error) {
	rho, err := DistributedDiscreteGaussianRho(n, d, sigma, l2Sensitivity)
	if err != nil {
		return ZCDP{}, err
	}
	return ZCDP{Rho: rho}, nil
}

// DistributedDiscreteGaussianEpsilon is ε(δ) after rounds releases of the
// distributed discrete Gaussian with these parameters
// (DistributedDiscreteGaussianRho), each a fixed cohort without
// amplification: EpsilonZCDP of its ρ.
func DistributedDiscreteGaussianEpsilon(n, d int, sigma, l2Sensitivity float64, rounds int, delta float64) (float64, error) {
	rho, err := DistributedDiscreteGaussianRho(n, d, sigma, l2Sensitivity)
	if err != nil {
		return 0, err
	}
	return EpsilonZCDP(rho, rounds, delta)
}

// EpsilonZCDP is ε(δ) after rounds compositions of a ρ-zCDP mechanism,
// through the RDP accountant: RDP rounds·ρ·α at DefaultOrders, converted
// by RDPAccountant.Epsilon, as Account does for a ledger of rounds
// ZCDP{Rho: rho} events.
func EpsilonZCDP(rho float64, rounds int, delta float64) (float64, error) {
	a := NewRDPAccountant(nil)
	if err := a.Compose(ZCDP{Rho: rho}, rounds); err != nil {
		return 0, err
	}
	eps, _, err := a.Epsilon(delta)
	return eps, err
}
