package job

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/dpfl/dpfl/api/types"
)

// An adaptive-clipping job (Andrew et al. 2021) runs with the paper's
// defaults filled into its stored spec, releases C_t and b̃_t every round
// as noisy_ values, charges exactly the events of a fixed-clip job with
// the same z (its ε is the same number), and a resumed job's next clip
// norm, recomputed from the stored metrics, is the one the live run used.
func TestAdaptiveClippingJob(t *testing.T) {
	m := manager(t)
	const rounds = 8
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Rounds = rounds
		s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{}
	}))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	a := st.Spec.DP.AdaptiveClipping
	if a == nil || a.TargetQuantile != 0.5 || a.LearningRate != 0.2 || a.InitialClip != 0.1 || a.CountNoiseMultiplier != 300*0.1/20 {
		t.Fatalf("stored adaptive clipping %+v, want the paper's defaults with σ_b = m/20 = 1.5", a)
	}
	met, err := m.Metrics(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(met) != rounds {
		t.Fatalf("%d rounds of metrics", len(met))
	}
	if c := met[0].NoisyClipNorm; c == nil || *c != a.InitialClip {
		t.Fatalf("round 1 clipped at %v, want C_0 = %v", c, a.InitialClip)
	}
	raw := make([]json.RawMessage, len(met))
	for i, r := range met {
		if r.NoisyClipNorm == nil || r.NoisyUnclippedFraction == nil {
			t.Fatalf("round %d released no clip norm or fraction: %+v", r.Round, r)
		}
		if raw[i], err = json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	}
	for r := 1; r < rounds; r++ {
		next, err := resumeClip(adaptiveClip(st.Spec, 0), st.Spec, r, raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := *met[r].NoisyClipNorm; next != want {
			t.Errorf("resumed after round %d: C = %v, the live run used %v", r, next, want)
		}
		// The geometric update, by hand.
		prev := met[r-1]
		if want := *prev.NoisyClipNorm * math.Exp(-a.LearningRate*(*prev.NoisyUnclippedFraction-a.TargetQuantile)); math.Abs(next-want) > 1e-12*want {
			t.Errorf("round %d: C = %v, want C·exp(−η(b̃ − γ)) = %v", r+1, next, want)
		}
	}
	fixed := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = rounds }))
	pa, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := m.Privacy(fixed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa.Events) != rounds || pa.Epsilon == nil || pf.Epsilon == nil || *pa.Epsilon != *pf.Epsilon {
		t.Fatalf("adaptive job: %d events, ε %v; fixed clip: ε %v; want %d events and the same ε", len(pa.Events), pa.Epsilon, pf.Epsilon, rounds)
	}
	if _, err := resumeClip(adaptiveClip(st.Spec, 0), st.Spec, 2, raw[:1]); err == nil {
		t.Error("resuming past the stored metrics succeeded")
	}
}

// Configurations adaptive clipping cannot run with are refused at
// submission, naming the field, and nothing is stored.
func TestAdaptiveClippingRefusals(t *testing.T) {
	m := manager(t)
	for _, c := range []struct {
		field string
		edit  func(*types.AdaptiveClippingSpec, *types.Spec)
	}{
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) {
			s.Population.Source, s.Sampling = "devices", types.SamplingSpec{Scheme: "fixed", CohortSize: 3}
			s.SecureAggregation = true
		}},
		{"dp.adaptive_clipping.initial_clip", func(a *types.AdaptiveClippingSpec, s *types.Spec) {
			// 1,000 clients leave C ≤ 2^31/(1000·2^8) ≈ 8,389 in fixed point.
			s.SecureAggregation, a.InitialClip = true, 9000
			s.Population.Size, s.Sampling = 2000, types.SamplingSpec{Scheme: "fixed", CohortSize: 1000}
		}},
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) { s.Audit.Canaries = 4 }},
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) { s.Participation.OverSelection = 0.5 }},
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) { s.Participation.DeadlineSeconds = 30 }},
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) {
			s.Client.Stragglers, s.Client.DropStragglers = 0.2, true
		}},
		{"dp.adaptive_clipping.target_quantile", func(a *types.AdaptiveClippingSpec, _ *types.Spec) { a.TargetQuantile = 1 }},
		{"dp.adaptive_clipping.learning_rate", func(a *types.AdaptiveClippingSpec, _ *types.Spec) { a.LearningRate = -0.1 }},
		{"dp.adaptive_clipping.initial_clip", func(a *types.AdaptiveClippingSpec, _ *types.Spec) { a.InitialClip = math.Inf(1) }},
		// z = 1 needs σ_b > 1/2.
		{"dp.adaptive_clipping.count_noise_multiplier", func(a *types.AdaptiveClippingSpec, s *types.Spec) {
			s.DP.NoiseMultiplier, a.CountNoiseMultiplier = 1, 0.5
		}},
	} {
		spec := small(t, func(s *types.Spec) {
			s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{}
			c.edit(s.DP.AdaptiveClipping, s)
		})
		_, err := m.Submit(spec)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a refusal naming it", c.field, err)
		}
	}
	if jobs, _ := m.List(); len(jobs) != 0 {
		t.Fatalf("refused submissions stored %d jobs", len(jobs))
	}
}

// Adaptive clipping over simulated secure aggregation: the job runs, the
// bit travels in the secure sum, every round releases C_t and b̃_t, the
// ledger is that of the same job with a fixed clip, and resuming
// reproduces the live trajectory inside the fixed point's clip range.
func TestAdaptiveClippingSecureJob(t *testing.T) {
	m := manager(t)
	const rounds = 4
	edit := func(s *types.Spec) {
		s.Rounds = rounds
		s.Sampling = types.SamplingSpec{Scheme: "fixed", CohortSize: 20}
		s.SecureAggregation = true
	}
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		edit(s)
		s.DP.AdaptiveClipping = &types.AdaptiveClippingSpec{}
	}))
	if st.State != types.StateCompleted {
		t.Fatalf("%s: %s", st.State, st.Message)
	}
	met, err := m.Metrics(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := adaptiveClip(st.Spec, 0)
	var ok bool
	if a.MinClip, a.MaxClip, ok = secureClipRange(20, 7850); !ok {
		t.Fatal("no clip range for 20 clients")
	}
	raw := make([]json.RawMessage, len(met))
	for i, r := range met {
		if r.NoisyClipNorm == nil || r.NoisyUnclippedFraction == nil || r.SecAgg != nil {
			t.Fatalf("round %d: %+v, want C_t and b̃_t and no instance parameters", r.Round, r)
		}
		raw[i], _ = json.Marshal(r)
	}
	for r := 1; r < rounds; r++ {
		if next, err := resumeClip(a, st.Spec, r, raw); err != nil || next != *met[r].NoisyClipNorm {
			t.Errorf("resumed after round %d: C = %v (%v), the live run used %v", r, next, err, *met[r].NoisyClipNorm)
		}
	}
	fixed := runToEnd(t, m, small(t, edit))
	pa, _ := m.Privacy(st.ID)
	pf, _ := m.Privacy(fixed.ID)
	if pa.Epsilon == nil || pf.Epsilon == nil || *pa.Epsilon != *pf.Epsilon || len(pa.Events) != len(pf.Events) {
		t.Fatalf("adaptive ε %v (%d events), fixed clip ε %v (%d events): want the same", pa.Epsilon, len(pa.Events), pf.Epsilon, len(pf.Events))
	}
}
