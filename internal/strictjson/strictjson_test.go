package strictjson

import (
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Delta float64 `json:"delta"`
	Z     float64 `json:"z"`
}

type outer struct {
	Rounds int     `json:"rounds"`
	DP     inner   `json:"dp"`
	List   []inner `json:"list"`
}

func TestDecodeRefuses(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	for _, c := range []struct{ body, path, says string }{
		{``, "", "empty body"},
		{`   `, "", "empty body"},
		{`null`, "", "got null"},
		{`[]`, "", "got an array"},
		{`3`, "", "got a number"},
		{`"x"`, "", "got a string"},
		{`{"rounds": 3} {"rounds": 5}`, "", "after the JSON object"},
		{`{"rounds": 3} x`, "", "after the JSON object"},
		{`{"rounds": 3}}`, "", "after the JSON object"},
		{`{"rounds": 3, "rounds": 5}`, "rounds", "repeated key"},
		{`{"rounds": 3, "Rounds": 5}`, "Rounds", "repeated key"},
		{`{"dp": {"delta": 1e-5, "z": 1, "delta": 0.5}}`, "dp.delta", "repeated key"},
		{`{"list": [{"z": 1}, {"z": 1, "z": 2}]}`, "list[1].z", "repeated key"},
		{`{"rounds": 3`, "", "malformed"},
		{deep, strings.TrimSuffix(strings.Repeat("a.", MaxDepth), "."), "nested deeper"},
		{`{"` + strings.Repeat("k", 100) + `": 1, "` + strings.Repeat("K", 100) + `": 2}`, strings.Repeat("K", 64) + "…", "repeated key"},
	} {
		var v outer
		err := Decode([]byte(c.body), &v)
		var se *Error
		if !errors.As(err, &se) || se.Path != c.path || !strings.Contains(se.Msg, c.says) {
			t.Errorf("%.40q: got %v, want an *Error at %q saying %q", c.body, err, c.path, c.says)
		}
	}
	// Unknown fields are refused by encoding/json itself.
	var v outer
	if err := Decode([]byte(`{"rouds": 3}`), &v); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestDecodeAccepts(t *testing.T) {
	v := outer{Rounds: 7}
	body := " {\"dp\": {\"delta\": 1e-5, \"z\": 1.5}, \"list\": [{\"z\": 1}, {\"z\": 2}], \"rounds\": 3}\n"
	if err := Decode([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Rounds != 3 || v.DP.Delta != 1e-5 || v.DP.Z != 1.5 || len(v.List) != 2 || v.List[1].Z != 2 {
		t.Fatalf("decoded %+v", v)
	}
	// The same key in different objects is no repetition; nor are fields
	// left out (they keep v's values).
	w := outer{Rounds: 7}
	if err := Decode([]byte(`{"dp": {"z": 1}, "list": [{"z": 2}]}`), &w); err != nil || w.Rounds != 7 {
		t.Fatalf("got %+v, %v", w, err)
	}
	// Exactly MaxDepth levels is allowed.
	ok := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	if err := Check([]byte(ok)); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
}

func TestFold(t *testing.T) {
	// The Kelvin sign folds to k, as encoding/json matches it.
	if fold("\u212a") != fold("k") || fold("K") != fold("k") || fold("a") == fold("b") {
		t.Fatal("fold")
	}
}
