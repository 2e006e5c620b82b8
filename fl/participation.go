package fl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Participation models which sampled users actually take part in a
// simulated cross-device round (Wang et al. 2021, the Field Guide, §2 and
// §7.1.2; Bonawitz et al. 2019, "Towards Federated Learning at Scale",
// §2–3): devices are only available part of the day, some drop out after
// being selected, and the server closes a round at a reporting deadline
// or once enough devices reported (over-selection).
//
// DP semantics. The accountant analyses the sampling the server performs
// over the whole population: Poisson sampling at rate q·(1+o) with
// over-selection o (or a fixed cohort). Everything this model adds after
// that sampling only removes contributions — an unavailable user, a
// dropout, a report past the deadline or beyond the target is discarded
// whole — and never adds or re-weights one: the sum's sensitivity stays C
// and the denominator stays the expected cohort size of the analysed
// sampling, so the accounted ε remains an upper bound. The one
// configuration outside that analysis is a fixed-size cohort drawn among
// the users available in the round (AmongAvailable), as production
// systems do: the chance of being selected then depends on how many
// others are online, which the sampling-without-replacement accountant
// over N users does not cover; jobs flag it in their privacy report.
type Participation struct {
	// DiurnalAmplitude a ∈ [0, 1] and PeriodRounds P model availability:
	// user u is available in round t with probability
	// 1 − a·(1 + cos(2π(t/P + φ_u)))/2, with a phase φ_u uniform in
	// [0, 1) per user (time zones). a = 0: always available.
	DiurnalAmplitude float64
	PeriodRounds     int
	// DropoutRate is the probability that an available, selected user
	// drops out before reporting.
	DropoutRate float64
	// OverSelection o ≥ 0: the server selects (1+o) times the target
	// cohort and keeps the Target earliest reports (by the round-time
	// model's device time).
	OverSelection float64
	// DeadlineSeconds, when > 0, discards reports whose estimated device
	// time exceeds it (needs the round-time model).
	DeadlineSeconds float64
	// Seed makes availability and dropouts reproducible (simulation
	// randomness).
	Seed uint64
}

// Validate reports the first parameter out of range; the error starts
// with the field's name.
func (p Participation) Validate() error {
	switch {
	case !(p.DiurnalAmplitude >= 0 && p.DiurnalAmplitude <= 1):
		return fmt.Errorf("diurnal_amplitude: must be in [0, 1], got %v", p.DiurnalAmplitude)
	case p.DiurnalAmplitude > 0 && p.PeriodRounds < 1:
		return fmt.Errorf("period_rounds: must be ≥ 1 with a diurnal amplitude, got %d", p.PeriodRounds)
	case !(p.DropoutRate >= 0 && p.DropoutRate < 1):
		return fmt.Errorf("dropout_rate: must be in [0, 1), got %v", p.DropoutRate)
	case !(p.OverSelection >= 0 && p.OverSelection <= 10):
		return fmt.Errorf("over_selection: must be in [0, 10], got %v", p.OverSelection)
	case !(p.DeadlineSeconds >= 0) || math.IsInf(p.DeadlineSeconds, 0):
		return fmt.Errorf("deadline_seconds: must be a finite number ≥ 0 (0: none), got %v", p.DeadlineSeconds)
	}
	return nil
}

// participationStream separates these draws from every other stream.
const participationStream = 0x5041525449434950 // "PARTICIP"

// draw returns user u's generator for round t and purpose k.
func (p Participation) draw(u, t, k int) *rand.Rand {
	return rand.New(rand.NewPCG(p.Seed^participationStream^uint64(k)<<56, uint64(t)<<32|uint64(u)))
}

// AvailableProb is user u's availability in round t.
func (p Participation) AvailableProb(u, t int) float64 {
	if p.DiurnalAmplitude == 0 {
		return 1
	}
	phase := p.draw(u, 0, 1).Float64()
	return 1 - p.DiurnalAmplitude*(1+math.Cos(2*math.Pi*(float64(t)/float64(p.PeriodRounds)+phase)))/2
}

// Available reports whether user u can take part in round t.
func (p Participation) Available(u, t int) bool {
	a := p.AvailableProb(u, t)
	return a >= 1 || p.draw(u, t, 2).Float64() < a
}

// Drops reports whether user u, selected in round t, drops out.
func (p Participation) Drops(u, t int) bool {
	return p.DropoutRate > 0 && p.draw(u, t, 3).Float64() < p.DropoutRate
}

// Filter splits a sampled cohort into the users that start training in
// round t and counts those unavailable and those that dropped out.
func (p Participation) Filter(cohort []int, t int) (kept []int, unavailable, dropped int) {
	kept = make([]int, 0, len(cohort))
	for _, u := range cohort {
		switch {
		case !p.Available(u, t):
			unavailable++
		case p.Drops(u, t):
			dropped++
		default:
			kept = append(kept, u)
		}
	}
	return kept, unavailable, dropped
}

// SampleAvailable draws k distinct users uniformly among those available
// in round t out of n, by rejection (expected k/availability draws; it
// gives up after 100·n draws and returns fewer). This is the production
// pattern that Participation's doc marks as outside the accountant's
// analysis. rng must be secure.
func (p Participation) SampleAvailable(n, k, t int, rng *rand.Rand) []int {
	seen := make(map[int]bool, k)
	out := make([]int, 0, k)
	for tries := 0; len(out) < k && tries < 100*n; tries++ {
		u := rng.IntN(n)
		if seen[u] {
			continue
		}
		seen[u] = true
		if p.Available(u, t) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}
