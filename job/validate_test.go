package job

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
)

// A spec with several broken rules gets all of them, in the validators'
// fixed order, and the same list every time.
func TestValidateReportsEveryRuleInOrder(t *testing.T) {
	s, err := ParseSpec([]byte(`{
		"participation": {"dropout_rate": 1},
		"dp": {"delta": 0, "clip_norm": -1},
		"client": {"lr_schedule": {"kind": "a"}, "epochs": 0},
		"server": {"lr_schedule": {"kind": "b"}},
		"rounds": 0,
		"model": "resnet"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"model", "rounds", "client.epochs", "client.lr_schedule.kind", "server.lr_schedule.kind", "dp.clip_norm", "dp.delta", "participation.dropout_rate"}
	var first []types.FieldError
	for i := range 50 {
		err := Validate(s, 60000)
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("got %v, want a *ValidationError", err)
		}
		var fields []string
		for _, f := range ve.All {
			fields = append(fields, f.Field)
		}
		if !slices.Equal(fields, want) || ve.Field != "model" || ve.Rule != ve.All[0].Message {
			t.Fatalf("fields %q (first %s: %s), want %q", fields, ve.Field, ve.Rule, want)
		}
		if i == 0 {
			first = ve.All
		} else if !slices.Equal(ve.All, first) {
			t.Fatalf("run %d: %+v, first run %+v", i, ve.All, first)
		}
	}
}

// limitContexts make each limited field apply: a field is checked only
// in the configuration it belongs to (secagg.* with secure aggregation,
// and so on).
var limitContexts = map[string]string{
	"synthetic.":                    `{"dataset": "synthetic", "population": {"size": 100}}`,
	"leaf.":                         `{"dataset": "leaf", "leaf": {"train_dir": "train", "test_dir": "test"}}`,
	"population.labels_":            `{"population": {"partition": "labels", "labels_per_client": 2}}`,
	"population.shards_per_client":  `{"population": {"partition": "shards"}}`,
	"population.size_":              `{"population": {"on_demand": true}, "dp": {"enabled": false}}`,
	"population.max_examples":       `{"population": {"on_demand": true}, "dp": {"enabled": false}}`,
	"population.eval_user_fraction": `{"population": {"on_demand": true}, "dp": {"enabled": false}}`,
	"population.dirichlet_alpha/":   `{"population": {"on_demand": true}, "dp": {"enabled": false}}`,
	"population.held_out_fraction":  `{"dp": {"enabled": false}}`,
	"lr_schedule.":                  `{"client": {"lr_schedule": {"kind": "exp_decay"}}}`,
	"server.momentum":               `{"server": {"optimizer": "momentum"}}`,
	"server.beta":                   `{"server": {"optimizer": "adam"}}`,
	"server.tau":                    `{"server": {"optimizer": "adam"}}`,
	"secagg.":                       `{"secure_aggregation": true, "dp": {"enabled": false}}`,
	"participation.period_rounds":   `{"participation": {"diurnal_amplitude": 0.5}}`,
}

// limitPath is the JSON path a limits entry checks.
func limitPath(key string) string {
	key, _, _ = strings.Cut(key, "/")
	if strings.HasPrefix(key, "lr_schedule.") {
		return "client." + key
	}
	return key
}

// specWith is the spec of context with path set to v (JSON).
func specWith(t *testing.T, context, path string, v any) (types.Spec, error) {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal([]byte(context), &m); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(path, ".")
	cur := m
	for _, p := range parts[:len(parts)-1] {
		sub, ok := cur[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			cur[p] = sub
		}
		cur = sub
	}
	cur[parts[len(parts)-1]] = v
	b, _ := json.Marshal(m)
	return ParseSpec(b)
}

// isInt reports whether the field at JSON path holds an integer.
func isInt(t *testing.T, path string) bool {
	ty := reflect.TypeFor[types.Spec]()
	for _, k := range strings.Split(path, ".") {
		f, ok := fieldByKey(ty, k)
		if !ok {
			t.Fatalf("no field %s", path)
		}
		ty = f.Type
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
	}
	return ty.Kind() == reflect.Int
}

// rangeErr is the range rule broken on field, if any.
func rangeErr(s types.Spec, field string) *types.FieldError {
	for _, f := range validateSpec(s, 60000) {
		if f.Field == field && f.Rule == types.RuleRange {
			return &f
		}
	}
	return nil
}

// Every bound of limits is where Validate draws the line: a closed end
// is accepted, the next value outside refused with a range error that
// names the bound; and wherever Validate accepts the whole spec at a
// bound, fl's constructors accept it too (the limits are the ones they
// enforce, not other values).
func TestLimitsBoundaries(t *testing.T) {
	for key, b := range limits {
		path := limitPath(key)
		context := "{}"
		for prefix, c := range limitContexts {
			if strings.HasPrefix(key, prefix) {
				context = c
			}
		}
		integer := isInt(t, path)
		check := func(v float64, accept bool) {
			t.Helper()
			var jv any = v
			if integer {
				jv = int64(v)
			}
			s, err := specWith(t, context, path, jv)
			if err != nil {
				t.Fatalf("%s = %v: %v", path, v, err)
			}
			fe := rangeErr(s, path)
			switch {
			case accept && fe != nil:
				t.Errorf("%s = %v refused: %s", path, v, fe.Message)
			case !accept && fe == nil:
				t.Errorf("%s = %v accepted, want refused (%s)", path, v, b.rule())
			case !accept && !strings.ContainsAny(fe.Message, "0123456789"):
				t.Errorf("%s = %v: %q names no bound", path, v, fe.Message)
			case accept && len(validateSpec(s, 60000)) == 0:
				constructorsAccept(t, s, path, v)
			}
		}
		below, above := math.Nextafter(b.lo, math.Inf(-1)), math.Nextafter(b.hi, math.Inf(1))
		if integer {
			below, above = b.lo-1, b.hi+1
		}
		check(b.lo, !b.loOpen)
		check(below, false)
		if b.zero {
			check(0, true)
		}
		if !math.IsInf(b.hi, 1) {
			check(b.hi, !b.hiOpen)
			check(above, false)
		}
	}
}

// constructorsAccept checks that fl's own checks accept a spec that
// Validate accepted.
func constructorsAccept(t *testing.T, s types.Spec, path string, v float64) {
	t.Helper()
	for name, err := range map[string]error{
		"fl.ClientConfig":    clientConfig(s.Client).Validate(),
		"fl.ServerOptConfig": serverOptConfig(s.Server).Validate(),
		"client fl.Schedule": fl.Schedule(s.Client.LRSchedule).Validate(),
		"server fl.Schedule": fl.Schedule(s.Server.LRSchedule).Validate(),
		"fl.Participation":   participationModel(s.Participation, 0).Validate(),
		"fl.RoundTimeModel":  fl.RoundTimeModel(s.RoundTime).Validate(),
	} {
		if err != nil {
			t.Errorf("%s = %v: Validate accepts it, %s refuses it: %v", path, v, name, err)
		}
	}
}
