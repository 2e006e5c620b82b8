package job

import (
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
)

// signed gives m's database a fresh log signing key and returns its
// verifier key.
func signed(t *testing.T, m *Manager) string {
	t.Helper()
	skey, _, err := note.GenerateKey(crand.Reader, "dpfl/test")
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := m.db.SetLogSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.db.SignLogHead(); err != nil {
		t.Fatal(err)
	}
	return vkey
}

// verifyBundle fetches job id's bundle, round-trips it through JSON as a
// file would, and verifies it under vkey.
func verifyBundle(t *testing.T, m *Manager, id, vkey string) (*audit.Bundle, *audit.Result) {
	t.Helper()
	b, err := m.AuditBundle(id, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(&b)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := audit.ReadBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(rb, audit.Options{Key: vkey})
	if err != nil {
		t.Fatal(err)
	}
	return rb, res
}

// A job on a shared budget: its charges name the budget, the budget's
// creation is a leaf, and the bundle's claim is the privacy report.
func TestAuditBundleOfABudgetJob(t *testing.T) {
	m := manager(t)
	vkey := signed(t, m)
	onUnit := unitFor15(t, m, "pop")
	st := runToEnd(t, m, onUnit(3))
	b, res := verifyBundle(t, m, st.ID, vkey)
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unit != "pop" || b.Claim.PrivacyUnit != "pop" || *b.Claim.Epsilon != *rep.Epsilon || b.Claim.Events != 3 || res.Charges != 3 || res.Rounds != 3 {
		t.Fatalf("claim %+v, result %+v, report ε %v", b.Claim, res, *rep.Epsilon)
	}
	for _, e := range b.Entries {
		l, _ := audit.ParseLeaf([]byte(e.Leaf))
		if l.Kind == audit.KindCharge && l.Unit != "pop" {
			t.Fatalf("charge leaf without the unit: %s", e.Leaf)
		}
	}
	leaves, err := m.LogLeaves(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := audit.ParseLeaf(leaves[0]); err != nil || l.Kind != audit.KindUnit || l.Unit != "pop" || l.Delta != 1e-6 {
		t.Fatalf("first leaf %s (%v), want the unit's creation", leaves[0], err)
	}
}

// A job interrupted after its round events (extra events) resumes and
// its bundle still verifies: the extra charges are in the chain, counted
// in the claim and in the recomputed ε.
func TestAuditBundleWithExtraEvents(t *testing.T) {
	m := manager(t)
	vkey := signed(t, m)
	id := stored(t, m, small(t, func(s *types.Spec) { s.Rounds = 4 }), 2, []int{1, 2, 2, 3})
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	m.Wait(id)
	st, err := m.Get(id)
	if err != nil || st.State != types.StateCompleted {
		t.Fatalf("resumed job %v: %v", st.State, err)
	}
	b, res := verifyBundle(t, m, id, vkey)
	if res.Charges != 6 || res.Rounds != 4 || res.ExtraEvents != 2 || b.Claim.ExtraEvents != 2 {
		t.Fatalf("%d charges, %d rounds, %d extra (claim %d); want 6, 4, 2", res.Charges, res.Rounds, res.ExtraEvents, b.Claim.ExtraEvents)
	}
	if got, want := res.Recomputed.Epsilon(), epsAfterAt(t, 6, 1e-5); got != want {
		t.Fatalf("recomputed ε %v, want ε of 6 events %v", got, want)
	}
}

// The model export carries a certificate that verifies against the
// model; without a signing key there is none, and no bundle either.
func TestModelCertificate(t *testing.T) {
	m := manager(t)
	st := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 2 }))
	me, err := m.Model(st.ID)
	if err != nil || me.Certificate != nil {
		t.Fatalf("unsigned log: certificate %v, %v", me.Certificate, err)
	}
	if _, err := m.AuditBundle(st.ID, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("bundle of an unsigned log: %v", err)
	}
	vkey := signed(t, m)
	me, err = m.Model(st.ID)
	if err != nil || me.Certificate == nil {
		t.Fatalf("certificate %v, %v", me.Certificate, err)
	}
	var c audit.ModelCertificate
	if err := json.Unmarshal(me.Certificate, &c); err != nil {
		t.Fatal(err)
	}
	rep, err := m.Privacy(st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Round != 2 || *c.Epsilon != *rep.Epsilon || c.Accountant != rep.Accountant || c.Delta != rep.Delta || c.Adjacency != rep.Adjacency {
		t.Fatalf("certificate %+v, report ε %v (%s)", c, *rep.Epsilon, rep.Accountant)
	}
	if _, err := audit.VerifyModel(&c, me.Params, vkey); err != nil {
		t.Fatal(err)
	}
	if _, b := verifyBundle(t, m, st.ID, vkey); b.Rounds != 2 {
		t.Fatalf("bundle of %d rounds", b.Rounds)
	}
}

// epsAfterAt is ε at delta after n rounds of small(), each its own event
// as in a ledger.
func epsAfterAt(t *testing.T, n int, delta float64) float64 {
	t.Helper()
	events := make([]accounting.Event, n)
	for i := range events {
		events[i] = unitEvent
	}
	r, err := accounting.Account(events, delta)
	if err != nil {
		t.Fatal(err)
	}
	return r.Epsilon()
}

// Bundles of a fixed-cohort job (replace-one adjacency, z/2 in its event)
// and of a job without DP verify too; the latter claims no ε.
func TestAuditBundleOfOtherJobs(t *testing.T) {
	m := manager(t)
	vkey := signed(t, m)
	fixed := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Rounds, s.Sampling = 2, types.SamplingSpec{Scheme: "fixed", CohortSize: 30}
	}))
	b, res := verifyBundle(t, m, fixed.ID, vkey)
	if b.Claim.Adjacency != AdjacencyReplaceOne || res.Rounds != 2 || res.Recomputed == nil {
		t.Fatalf("fixed cohort: claim %+v, result %+v", b.Claim, res)
	}
	plain := runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds, s.DP.Enabled = 2, false }))
	b, res = verifyBundle(t, m, plain.ID, vkey)
	if res.Private || b.Claim.Epsilon != nil || res.Charges != 0 || res.Rounds != 2 {
		t.Fatalf("job without DP: claim %+v, result %+v", b.Claim, res)
	}
}
