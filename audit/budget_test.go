package audit_test

import (
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
)

// A job charged to a shared budget (dp.budget) verifies: its spec names
// the budget that every charge leaf names; and a bundle whose spec names
// another budget fails on the first charge.
func TestVerifyBudgetedJob(t *testing.T) {
	s := newServer(t, "")
	if _, err := s.m.CreateBudget("cohort-a", 50, 1e-5); err != nil {
		t.Fatal(err)
	}
	id := s.run(t, 2, func(sp *types.Spec) { sp.DP.Budget = "cohort-a" })
	b := read(t, s.bundle(t, id, 0))
	if !strings.Contains(b.Spec, `"budget":"cohort-a"`) && !strings.Contains(b.Spec, `"privacy_unit":"cohort-a"`) {
		t.Fatalf("the bundle's spec does not name the budget: %s", b.Spec)
	}
	res, err := audit.Verify(b, audit.Options{Key: s.vkey})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unit != "cohort-a" || res.Charges != 2 || b.Claim.PrivacyUnit != "cohort-a" {
		t.Fatalf("budget %q, %d charges, claim's budget %q; want cohort-a, 2, cohort-a", res.Unit, res.Charges, b.Claim.PrivacyUnit)
	}
	b.Spec = strings.Replace(b.Spec, "cohort-a", "cohort-b", 1)
	if _, err := audit.Verify(b, audit.Options{Key: s.vkey}); err == nil || !strings.Contains(err.Error(), "records spec SHA-256") {
		t.Fatalf("a spec naming another budget: got %v", err)
	}
}
