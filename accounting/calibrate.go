package accounting

import (
	"fmt"
	"math"
)

// EpsilonFunc is ε(δ) after steps rounds of a Poisson-sampled Gaussian with
// rate q and noise multiplier z, e.g. EpsilonPoissonGaussian or
// pld.EpsilonPoissonGaussian.
type EpsilonFunc func(q, z float64, steps int, delta float64) (float64, error)

// CalibrateNoise returns the smallest noise multiplier z (to relative
// precision 1e-4, always on the safe side: ε(z) ≤ target) such that steps
// rounds at sampling rate q stay within (target, δ) under epsFn. It brackets
// z by doubling/halving, then bisects; ε is decreasing in z.
func CalibrateNoise(epsFn EpsilonFunc, target, delta, q float64, steps int) (float64, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return 0, fmt.Errorf("accounting: target ε must be a finite number > 0, got %v", target)
	}
	if steps < 1 {
		return 0, fmt.Errorf("accounting: steps must be ≥ 1, got %d", steps)
	}
	at := func(z float64) (float64, error) { return epsFn(q, z, steps, delta) }
	lo, hi := 0.0, 1.0
	for {
		e, err := at(hi)
		if err != nil {
			return 0, err
		}
		if e <= target {
			break
		}
		lo, hi = hi, hi*2
		if hi > 1e6 {
			return 0, fmt.Errorf("accounting: no noise multiplier ≤ 1e6 reaches ε = %v at δ = %v", target, delta)
		}
	}
	if lo == 0 {
		lo = hi / 2
		for {
			e, err := at(lo)
			if err != nil {
				return 0, err
			}
			if e > target {
				break
			}
			hi, lo = lo, lo/2
			if lo < 1e-3 {
				return hi, nil // any z this small already meets the target
			}
		}
	}
	for hi-lo > 1e-4*hi {
		mid := (lo + hi) / 2
		e, err := at(mid)
		if err != nil {
			return 0, err
		}
		if e <= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}

// MaxSteps returns the largest number of rounds (≤ limit) that rounds at
// sampling rate q and noise multiplier z can run within (budget, δ) under
// epsFn; 0 if not even one fits. ε is increasing in rounds, so it
// bisects.
func MaxSteps(epsFn EpsilonFunc, budget, delta, q, z float64, limit int) (int, error) {
	if !(budget > 0) || math.IsInf(budget, 0) {
		return 0, fmt.Errorf("accounting: budget ε must be a finite number > 0, got %v", budget)
	}
	fits := func(n int) (bool, error) {
		e, err := epsFn(q, z, n, delta)
		return e <= budget, err
	}
	lo, hi := 0, limit // fits(lo) holds; find the last n ≤ limit that fits
	if ok, err := fits(hi); err != nil || ok {
		return hi, err
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}
