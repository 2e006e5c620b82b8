package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/accounting"
)

// The verifier refuses a distributed job whose charged ρ is not the one
// its published parameters give, whose shares do not carry its noise
// multiplier, or a central job that charges a zCDP event.
func TestVerifyDistributedEventMismatch(t *testing.T) {
	spec := `{"dp":{"enabled":true,"noise_multiplier":1,"mechanism":"distributed_discrete_gaussian","distributed":` +
		`{"padded_dimension":8192,"clients":30,"min_survivors":24,"sigma2":"2944486632486882","l2_sensitivity":297211370.8703058,"rho":2.5000000000000013}}}`
	good := accounting.ZCDP{Rho: 2.5000000000000013}
	if err := checkFirstEvent(good, spec); err != nil {
		t.Fatalf("the job's own event: %v", err)
	}
	for _, c := range []struct {
		name, spec string
		ev         accounting.Event
		want       string
	}{
		{"smaller ρ", spec, accounting.ZCDP{Rho: 2}, "KLS21"},
		{"sampled", spec, accounting.PoissonSampled{SamplingProbability: 0.1, Event: good}, "unsampled zCDP"},
		{"weaker shares", strings.Replace(spec, `"clients":30`, `"clients":20`, 1), good, "do not carry"},
		{"floor raised", strings.Replace(spec, `"min_survivors":24`, `"min_survivors":30`, 1), good, "KLS21"},
		{"central", `{"dp":{"enabled":true,"noise_multiplier":1}}`, good, "zCDP"},
	} {
		if err := checkFirstEvent(c.ev, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// checkFirstEvent is checkEventParams on a spec given as JSON.
func checkFirstEvent(e accounting.Event, spec string) error {
	var s specFields
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	return checkEventParams(e, s)
}
