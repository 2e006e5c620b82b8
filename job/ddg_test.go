package job

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
)

// ddgSpec is a small distributed-DP job: a fixed cohort of 30 of 300
// users over secure aggregation.
func ddgSpec(t *testing.T, edit func(*types.Spec)) types.Spec {
	return small(t, func(s *types.Spec) {
		s.Rounds, s.EvalEvery = 3, 3
		s.Sampling.Scheme, s.Sampling.CohortSize = "fixed", 30
		s.SecureAggregation = true
		s.DP.Mechanism = types.MechanismDistributedDiscreteGaussian
		if edit != nil {
			edit(s)
		}
	})
}

// A distributed discrete Gaussian job runs its rounds through secure
// aggregation and charges each one the unsampled zCDP event whose ρ an
// independent recomputation from the spec's published parameters gives
// (KLS21 Eq. 17 at the survivor floor and replace-one sensitivity 2Δ₂):
// the reported ε is that of rounds·ρ, and ρ is close to the central
// Gaussian's 2/z² at the planned survivors, inflated by n/floor.
func TestDistributedDiscreteGaussianJob(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, ddgSpec(t, nil))
	if st.State != types.StateCompleted || st.Round != 3 {
		t.Fatalf("%s at round %d: %s", st.State, st.Round, st.Message)
	}
	d := st.Spec.DP.Distributed
	if d == nil || d.Dimension != 7850 || d.PaddedDimension != 8192 || d.ModulusBits != 32 || d.Clients != 30 {
		t.Fatalf("dp.distributed = %+v, want the logreg's d = 7850, p = 8192, b = 32 and n = 30", d)
	}
	if d.MinSurvivors != 24 || st.Spec.SecAgg.MinClients != 24 {
		t.Fatalf("survivor floor %d (secagg.min_clients %d), want ⌈0.8·30⌉ = 24", d.MinSurvivors, st.Spec.SecAgg.MinClients)
	}
	s2, ok := new(big.Rat).SetString(d.Sigma2)
	if !ok {
		t.Fatalf("σ² %q", d.Sigma2)
	}
	f, _ := s2.Float64()
	sigma := math.Sqrt(f)
	// The shares are sized so that the planned survivors' noise has
	// standard deviation z·Δ₂.
	if got := math.Sqrt(float64(d.Clients)) * sigma / d.L2Sensitivity; math.Abs(got-st.Spec.DP.NoiseMultiplier) > 1e-9 {
		t.Errorf("√n·σ/Δ₂ = %v, want z = %v", got, st.Spec.DP.NoiseMultiplier)
	}
	rho, err := accounting.DistributedDiscreteGaussianRho(d.MinSurvivors, d.PaddedDimension, sigma*(1-1e-12), 2*d.L2Sensitivity)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rho-d.Rho) > 1e-9*rho {
		t.Errorf("published ρ %v, recomputed %v", d.Rho, rho)
	}
	z := st.Spec.DP.NoiseMultiplier
	if want := 2 / (z * z) * 30 / 24; math.Abs(rho-want) > 1e-6*want {
		t.Errorf("ρ = %v, want 2/z²·n/floor = %v (τ negligible at σ = %.1f)", rho, want, sigma)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Events) != 3 {
		t.Fatalf("%d ledger events, want 3", len(rep.Events))
	}
	for _, e := range rep.Events {
		ev, err := accounting.UnmarshalEvent(e.Event)
		if err != nil {
			t.Fatal(err)
		}
		if z, ok := ev.(accounting.ZCDP); !ok || z.Rho != d.Rho {
			t.Fatalf("round %d charged %s, want ZCDP{ρ = %v}", e.Round, e.Event, d.Rho)
		}
	}
	want, err := accounting.EpsilonZCDP(d.Rho, 3, st.Spec.DP.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Epsilon == nil || math.Abs(*rep.Epsilon-want) > 1e-9*want {
		t.Fatalf("reported ε %v, want %v", rep.Epsilon, want)
	}
	raw, _ := json.Marshal(st.Spec.DP)
	t.Logf("dp: %s; ε after 3 rounds %.4g", raw, *rep.Epsilon)
}

// A target ε calibrates z through the distributed mechanism's own
// event: the job's planned ε is at most the target, and a slightly
// smaller z would exceed it.
func TestDistributedDiscreteGaussianCalibrates(t *testing.T) {
	m := manager(t)
	j, err := m.Submit(ddgSpec(t, func(s *types.Spec) { s.Rounds, s.DP.TargetEpsilon = 50, 8 }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Cancel(j.ID); err != nil {
		t.Fatal(err)
	}
	m.Wait(j.ID)
	st, err := m.Get(j.ID)
	if err != nil {
		t.Fatal(err)
	}
	eps := func(z float64) float64 {
		s := st.Spec
		s.DP.NoiseMultiplier = z
		e, err := accounting.EpsilonZCDP(ddgEvent(s).(accounting.ZCDP).Rho, 50, s.DP.Delta)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	z := st.Spec.DP.NoiseMultiplier
	if e := eps(z); !(e <= 8) || !(eps(z*0.99) > 8) {
		t.Fatalf("calibrated z = %v gives ε %v (z·0.99: %v), want the smallest z with ε ≤ 8", z, e, eps(z*0.99))
	}
}

// Configurations the distributed discrete Gaussian cannot cover are
// refused with the field that conflicts.
func TestDistributedDiscreteGaussianRefusals(t *testing.T) {
	m := manager(t)
	for _, c := range []struct {
		field string
		edit  func(*types.Spec)
	}{
		{"dp.mechanism", func(s *types.Spec) { s.SecureAggregation = false }},
		{"dp.mechanism", func(s *types.Spec) { s.DP.Enabled = false }},
		{"dp.mechanism", func(s *types.Spec) { s.Sampling.Scheme = "poisson" }},
		{"dp.mechanism", func(s *types.Spec) { s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{} }},
		{"dp.mechanism", func(s *types.Spec) { s.Audit.Canaries = 4 }},
		{"dp.mechanism", func(s *types.Spec) { s.Participation.OverSelection = 0.2 }},
		{"dp.mechanism", func(s *types.Spec) { s.DP.Mechanism = "laplace" }},
		{"dp.distributed.modulus_bits", func(s *types.Spec) { s.DP.Distributed = &types.DistributedDPSpec{ModulusBits: 40} }},
		// 8 bits cannot hold 30 clients' noisy sum at this z.
		{"dp.distributed.modulus_bits", func(s *types.Spec) { s.DP.Distributed = &types.DistributedDPSpec{ModulusBits: 8} }},
		{"dp.distributed", func(s *types.Spec) {
			s.DP.Mechanism, s.DP.Distributed = "", &types.DistributedDPSpec{ModulusBits: 16}
		}},
	} {
		_, err := m.Submit(ddgSpec(t, c.edit))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("want a refusal naming %s, got %v", c.field, err)
		}
	}
}

// A distributed job on a shared budget (dp.budget) runs and charges its
// zCDP events there: the budget's ε is the RDP accountant's over them
// (PLD does not represent zCDP).
func TestDistributedDiscreteGaussianOnBudget(t *testing.T) {
	m := manager(t)
	if _, err := m.CreateBudget("ddg", 1000, 1e-5); err != nil {
		t.Fatal(err)
	}
	st := runToEnd(t, m, ddgSpec(t, func(s *types.Spec) { s.DP.Budget = "ddg" }))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := accounting.EpsilonZCDP(st.Spec.DP.Distributed.Rho, 3, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Epsilon == nil || math.Abs(*rep.Epsilon-want) > 1e-9*want || rep.Accountant != "rdp" {
		t.Fatalf("ε %v by %q, want %v by rdp", rep.Epsilon, rep.Accountant, want)
	}
	b, err := m.Budget("ddg")
	if err != nil {
		t.Fatal(err)
	}
	if b.Events != 3 || b.Epsilon == nil || math.Abs(*b.Epsilon-want) > 1e-9*want {
		t.Fatalf("budget: %d events, ε %v; want 3 and %v", b.Events, b.Epsilon, want)
	}
}
