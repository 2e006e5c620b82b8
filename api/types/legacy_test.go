package types

import (
	"encoding/json"
	"testing"
)

// The keys of the previous release decode into the fields that replaced
// them; beside the new key, the new key wins; absent, the value already
// in the struct (a default) stays.
func TestDeprecatedKeysDecode(t *testing.T) {
	var s Spec
	s.Population.Partition = "dirichlet"
	if err := json.Unmarshal([]byte(`{"population": {"clients": 300}, "dp": {"privacy_unit": "pop", "delta": 1e-6}}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Population.Size != 300 || s.Population.Partition != "dirichlet" || s.DP.Budget != "pop" || s.DP.Delta != 1e-6 {
		t.Fatalf("old keys read as %+v / %+v", s.Population, s.DP)
	}
	if err := json.Unmarshal([]byte(`{"population": {"clients": 1, "size": 2}, "dp": {"privacy_unit": "a", "budget": "b"}}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Population.Size != 2 || s.DP.Budget != "b" {
		t.Fatalf("with both keys: size %d, budget %q; want the new keys'", s.Population.Size, s.DP.Budget)
	}
	var m RoundMetrics
	if err := json.Unmarshal([]byte(`{"round": 3, "cohort": 30, "clients": {"mean_accuracy": 0.5, "clients": 7}}`), &m); err != nil {
		t.Fatal(err)
	}
	if m.Round != 3 || m.Selected != 30 || m.HeldOut == nil || m.HeldOut.Clients != 7 || m.HeldOut.MeanAccuracy != 0.5 {
		t.Fatalf("old metrics read as %+v", m)
	}
	b, _ := json.Marshal(m)
	var back map[string]json.RawMessage
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["selected"] == nil || back["held_out"] == nil || back["cohort"] != nil || back["clients"] != nil {
		t.Fatalf("re-encoded as %s", b)
	}
}

// A type error inside a section is still an error.
func TestLegacyDecodeKeepsErrors(t *testing.T) {
	var s Spec
	if err := json.Unmarshal([]byte(`{"population": {"size": "many"}}`), &s); err == nil {
		t.Fatal("a string population size decoded")
	}
	if err := json.Unmarshal([]byte(`{"dp": {"privacy_unit": 3}}`), &s); err == nil {
		t.Fatal("a numeric budget name decoded")
	}
}
