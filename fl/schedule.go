package fl

import (
	"fmt"
	"math"
)

// Schedule decays a learning rate over the rounds of a job (client η_l and
// server η_s separately), as in Reddi et al. 2021, Appendix D: constant,
// staircase exponential decay (their EXPDECAY: ×DecayRate every
// DecayEvery rounds) and cosine.
type Schedule struct {
	// Kind is "constant" (or ""), "exp_decay" or "cosine".
	Kind string `json:"kind"`
	// DecayRate is exp_decay's factor in (0, 1]; default 0.1.
	DecayRate float64 `json:"decay_rate,omitempty"`
	// DecayEvery is exp_decay's period in rounds (≥ 1); default 500.
	DecayEvery int `json:"decay_every,omitempty"`
}

// Factor is the multiplier of the base learning rate in round t (1-based)
// of a job of T rounds: 1 (constant), DecayRate^⌊(t−1)/DecayEvery⌋
// (exp_decay), or (1 + cos(π(t−1)/T))/2 (cosine, from 1 at the first
// round towards 0 after the last).
func (s Schedule) Factor(t, T int) float64 {
	switch s.Kind {
	case "exp_decay":
		return math.Pow(s.DecayRate, float64((t-1)/s.DecayEvery))
	case "cosine":
		return (1 + math.Cos(math.Pi*float64(t-1)/float64(T))) / 2
	}
	return 1
}

// Validate reports a parameter out of range; the error starts with the
// field's name.
func (s Schedule) Validate() error {
	switch s.Kind {
	case "", "constant", "cosine":
		return nil
	case "exp_decay":
		if !(s.DecayRate > 0 && s.DecayRate <= 1) {
			return fmt.Errorf("decay_rate: must be in (0, 1], got %v", s.DecayRate)
		}
		if s.DecayEvery < 1 {
			return fmt.Errorf("decay_every: must be ≥ 1, got %d", s.DecayEvery)
		}
		return nil
	}
	return fmt.Errorf("kind: unknown schedule %q (known: constant, exp_decay, cosine)", s.Kind)
}
