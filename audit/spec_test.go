package audit

import (
	"encoding/json"
	"testing"
)

// A bundle's spec names the job's shared budget as dp.budget, or, for
// a job submitted before the rename, as dp.privacy_unit; Verify must
// read either, or it would reject every budgeted job of one of them.
func TestSpecBudgetEitherName(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{`{"dp":{"enabled":true,"budget":"cohort-a"}}`, "cohort-a"},
		{`{"dp":{"enabled":true,"privacy_unit":"cohort-a"}}`, "cohort-a"},
		{`{"dp":{"enabled":true,"budget":"new","privacy_unit":"old"}}`, "new"},
		{`{"dp":{"enabled":true}}`, ""},
	} {
		var s specFields
		if err := json.Unmarshal([]byte(c.spec), &s); err != nil {
			t.Fatal(err)
		}
		if got := s.budget(); got != c.want {
			t.Errorf("%s: budget %q, want %q", c.spec, got, c.want)
		}
	}
}
