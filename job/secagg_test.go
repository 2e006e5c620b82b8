package job

import (
	"errors"
	"math"
	"testing"

	"github.com/dpfl/dpfl/api/types"
)

// binomialBelow against a brute-force sum of the binomial pmf.
func TestBinomialBelow(t *testing.T) {
	for _, c := range []struct {
		n, m int
		p    float64
	}{{10, 3, 0.3}, {299, 31, 0.1}, {5999, 3, 0.02}, {50, 50, 0.9}} {
		want := 0.0
		for i := 0; i < c.m; i++ {
			coef := 1.0
			for j := 0; j < i; j++ {
				coef *= float64(c.n-j) / float64(j+1)
			}
			want += coef * math.Pow(c.p, float64(i)) * math.Pow(1-c.p, float64(c.n-i))
		}
		if got := binomialBelow(c.n, c.p, c.m); math.Abs(got-want) > 1e-9*want+1e-300 {
			t.Errorf("P[Bin(%d, %g) < %d] = %g, want %g", c.n, c.p, c.m, got, want)
		}
	}
}

// Under DP, secure aggregation's aborts are paid for in δ (abort.go): a
// configuration whose cohorts often fall below secagg.min_clients is
// refused, and one where that is negligible runs with one event per
// round and reports its abort_delta and its ε at δ − abort_delta. Without
// DP, aborted rounds are retried with a fresh cohort until one is large
// enough.
func TestSecureAggregationAborts(t *testing.T) {
	m := manager(t)
	// Cohorts are Binomial(300, 0.1), mean 30: about half fall below 31.
	_, err := m.Submit(small(t, func(s *types.Spec) { s.SecureAggregation, s.SecAgg.MinClients = true, 31 }))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "secagg.min_clients" {
		t.Fatalf("DP job whose rounds abort half the time: %v, want a validation error", err)
	}

	const rounds = 3
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds, s.SecureAggregation, s.SecAgg.MinClients = rounds, true, 5 }))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	// P[Bin(299, 0.1) < 5] ≈ 1.2e-9 per round.
	if len(rep.Events) != rounds || !(rep.AbortDelta > 0 && rep.AbortDelta < 1e-6) {
		t.Fatalf("%d events, abort_delta %g", len(rep.Events), rep.AbortDelta)
	}

	// Cohorts are Binomial(100, 0.1): 70% fall below 12 and abort before
	// the protocol runs; a round fails all 60 attempts with probability
	// below 10^-9.
	st = runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Rounds, s.DP.Enabled, s.DP.ClipNorm = 10, false, 0.5
		s.Population.Size, s.SecureAggregation = 100, true
		s.SecAgg.MinClients, s.SecAgg.MaxAttempts, s.SecAgg.DropoutRate = 12, 60, 0.05
	}))
	if st.State != types.StateCompleted || st.Round != 10 {
		t.Fatalf("non-DP job ended %s at round %d: %s", st.State, st.Round, st.Message)
	}
	met, err := m.Metrics(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	retried := 0
	for _, r := range met {
		if r.SecAgg == nil || r.SecAgg.Clients < 12 || r.SecAgg.Survivors+r.SecAgg.Dropped != r.SecAgg.Clients {
			t.Fatalf("round %d: secure aggregation stats %+v", r.Round, r.SecAgg)
		}
		if r.SecAgg.Attempt > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatal("no round was retried; P(cohort ≥ 12 in all 10 rounds) ≈ 5e-6")
	}
}
