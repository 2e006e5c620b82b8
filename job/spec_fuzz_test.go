package job

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseSpec: a submitted job body, whatever its bytes, never panics
// ParseSpec or Validate; every refusal is a *ValidationError (the API
// turns it into a 400 naming the field); and a spec that parses and
// validates re-encodes to JSON that parses to the same spec.
func FuzzParseSpec(f *testing.F) {
	b, err := json.Marshal(DefaultSpec())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, body := range []string{
		`{}`,
		`{"dataset":"synthetic","population":{"size":100}}`,
		`{"population":{"clients":300},"dp":{"privacy_unit":"pop"}}`,
		`{"dp":{"enabled":false},"secure_aggregation":true}`,
		`{"server":{"optimizer":"adam","lr":0.01}}`,
		`{"client":{"lr_schedule":{"kind":"exp_decay"}}}`,
		`{"dp":{"target_epsilon":2}}`,
		`{"dp":{"delta":5e-324}}`,
		`{"population":{"partition":"labels","labels_per_client":2}}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := ParseSpec(body)
		if err == nil {
			err = Validate(s, 60000)
		}
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("%q refused with %T %v, want a *ValidationError", body, err, err)
			}
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("valid spec from %q does not encode: %v", body, err)
		}
		back, err := ParseSpec(b)
		if err != nil || back != s {
			t.Fatalf("valid spec from %q re-encodes as %s, which parses to %+v, %v", body, b, back, err)
		}
	})
}
