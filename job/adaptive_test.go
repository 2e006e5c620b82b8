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
		next, err := resumeClip(st.Spec, r, raw)
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
	if _, err := resumeClip(st.Spec, 2, raw[:1]); err == nil {
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
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) { s.SecureAggregation = true }},
		{"dp.adaptive_clipping", func(_ *types.AdaptiveClippingSpec, s *types.Spec) { s.Audit.Canaries = 4 }},
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
