package audit_test

import (
	"encoding/json"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
)

// A distributed discrete Gaussian job verifies: the verifier recomputes
// the charged ρ from the spec's published parameters (KLS21 Eq. 17) and
// its ε from the zCDP events.
func TestVerifyDistributedDiscreteGaussianJob(t *testing.T) {
	s := newServer(t, "")
	id := s.run(t, 2, func(sp *types.Spec) {
		sp.Sampling.Scheme, sp.Sampling.CohortSize, sp.SecureAggregation = "fixed", 20, true
		sp.DP.Mechanism = types.MechanismDistributedDiscreteGaussian
	})
	b := read(t, s.bundle(t, id, 0))
	res, err := audit.Verify(b, audit.Options{Key: s.vkey})
	if err != nil {
		t.Fatal(err)
	}
	var spec types.Spec
	if err := json.Unmarshal([]byte(b.Spec), &spec); err != nil {
		t.Fatal(err)
	}
	want, err := accounting.EpsilonZCDP(spec.DP.Distributed.Rho, 2, spec.DP.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if res.Charges != 2 || res.Recomputed == nil || res.Recomputed.Epsilon() != want {
		t.Fatalf("%d charges, recomputed %+v, want 2 and ε %v", res.Charges, res.Recomputed, want)
	}
}
