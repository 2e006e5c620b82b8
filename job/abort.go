package job

import (
	"fmt"
	"math"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
)

// Secure aggregation aborts an attempt when too few clients reach its
// end, and the runner then retries the round with a fresh cohort. Whether
// an attempt aborts depends on how many users were sampled, so an abort,
// and the retry's second chance to be sampled, are not covered by the
// round's PoissonSampled event. The analysis used here:
//
// Let A be the real job and I the ideal job in which no attempt ever
// aborts (every round releases the noisy sum of its first cohort). A and
// I coincide unless some round's first attempt aborts, so their output
// distributions differ in total variation by at most p = T·p_round, where
// p_round bounds the abort probability of one round on either of two
// neighbouring populations. If I is (ε, δ_I)-DP (the ledger's events),
// then for every output set E,
//
//	P[A(D) ∈ E] ≤ P[I(D) ∈ E] + p ≤ e^ε·P[I(D') ∈ E] + δ_I + p
//	           ≤ e^ε·P[A(D') ∈ E] + δ_I + (1 + e^ε)·p,
//
// so A is (ε, δ_I + (1 + e^ε)·p)-DP. The job's δ is split accordingly:
// DPSpec.AbortDelta = (1 + e^ε̂)·T·p_round with ε̂ the planned job's ε at
// δ/2 (an upper bound on the ε finally reported, as the accountant then
// runs at δ − AbortDelta ≥ δ/2), and a configuration whose AbortDelta
// exceeds δ/2 is refused.
//
// With secagg.dropout_rate 0 the simulated protocol aborts exactly when
// fewer than m = max(secagg.min_clients, 2) clients report, so p_round is
// a binomial tail: the cohort of the other users, thinned by availability
// and dropouts (each user stays with probability at least
// (1 − diurnal_amplitude)·(1 − dropout_rate)), is stochastically larger
// than Bin(N − 1, q·keep) under Poisson sampling. Protocol dropouts (secagg.dropout_rate > 0)
// are refused under DP: the protocol guarantees their aborts only below
// 2^−20 per instance, far above any useful δ.

// abortProbability bounds p_round for a simulated secure aggregation job
// under Poisson sampling. A fixed cohort needs none: under replace-one
// adjacency both neighbours sample the same user IDs and draw the same
// seeded availability and dropouts, so whether an attempt aborts does not
// depend on any user's data.
func abortProbability(s types.Spec) float64 {
	if s.Sampling.Scheme == "fixed" {
		return 0
	}
	m := max(s.SecAgg.MinClients, 2)
	keep := (1 - s.Participation.DiurnalAmplitude) * (1 - s.Participation.DropoutRate)
	rate, _ := analysed(s)
	return binomialBelow(s.Population.Size-1, rate*keep, m)
}

// binomialBelow is P[Bin(n, p) < m], summed in log space (exact up to
// floating point; n may be millions).
func binomialBelow(n int, p float64, m int) float64 {
	if n < m {
		return 1
	}
	if p <= 0 {
		return 1
	}
	if p >= 1 {
		return 0
	}
	lgn, _ := math.Lgamma(float64(n + 1))
	var total float64
	for i := 0; i < m; i++ {
		lgi, _ := math.Lgamma(float64(i + 1))
		lgr, _ := math.Lgamma(float64(n - i + 1))
		total += math.Exp(lgn - lgi - lgr + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return min(total, 1)
}

// abortDelta is the δ that secure aggregation's aborts cost the job
// (AbortDelta, above), or a *ValidationError when it exceeds half of δ.
func abortDelta(s types.Spec) (float64, error) {
	if !s.DP.Enabled || !s.SecureAggregation || s.Population.Source == "devices" {
		return 0, nil
	}
	p := abortProbability(s)
	if p == 0 {
		return 0, nil
	}
	rep, err := accounting.Account([]accounting.Event{accounting.SelfComposed{Event: roundEvent(s), Count: s.Rounds}}, s.DP.Delta/2)
	if err != nil {
		return 0, err
	}
	slack := (1 + math.Exp(rep.Epsilon())) * float64(s.Rounds) * p
	if !(slack <= s.DP.Delta/2) {
		return 0, NewValidationError("secagg.min_clients", types.RuleConflict, fmt.Sprintf(
			"a round's secure aggregation aborts with probability up to %.3g (fewer than %d clients report), and the abort and its retry depend on who was sampled; over %d rounds that costs δ ≥ %.3g, more than half of dp.delta = %g; raise the sampling rate or lower secagg.min_clients",
			p, max(s.SecAgg.MinClients, 2), s.Rounds, slack, s.DP.Delta))
	}
	return slack, nil
}
