package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/strictjson"
)

// ValidationError is a request that breaks one or more rules. Field and
// Rule are the first broken rule (the JSON path, e.g. "dp.delta", and its
// message); All holds every one in the validators' fixed order, the first
// included (one element when only one rule was checked).
type ValidationError struct {
	Field string
	Rule  string
	All   []types.FieldError
}

func (e *ValidationError) Error() string {
	msg := e.Field + ": " + e.Rule
	if len(e.All) > 1 {
		fields := make([]string, 0, len(e.All)-1)
		for _, f := range e.All[1:] {
			fields = append(fields, f.Field)
		}
		msg += fmt.Sprintf(" (and %d more: %s)", len(e.All)-1, strings.Join(fields, ", "))
	}
	return msg
}

// Errors is every broken rule of e, in order.
func (e *ValidationError) Errors() []types.FieldError {
	if len(e.All) > 0 {
		return e.All
	}
	return []types.FieldError{{Field: e.Field, Rule: types.RuleConflict, Message: e.Rule}}
}

// NewValidationError is one broken rule of kind rule (a types.Rule name)
// on field, as a *ValidationError.
func NewValidationError(field, rule, message string) *ValidationError {
	return &ValidationError{Field: field, Rule: message, All: []types.FieldError{{Field: field, Rule: rule, Message: message}}}
}

// asError is errs as a *ValidationError, nil when there are none.
func asError(errs []types.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Field: errs[0].Field, Rule: errs[0].Message, All: errs}
}

// maxLabelLen bounds a job's name, a free-form label.
const maxLabelLen = 128

// ParseSpec is DecodeSpec without its warnings.
func ParseSpec(b []byte) (types.Spec, error) {
	s, _, err := DecodeSpec(b)
	return s, err
}

// DecodeSpec decodes a submitted JSON job over DefaultSpec, strictly:
// exactly one JSON object, no repeated key (strictjson.Check), no key
// that names no field (a misspelt field must not silently fall back to a
// default), nothing after it; name must be a label of printable
// characters and dp.budget a valid name (CheckName). A refusal is a
// *ValidationError naming every offending field. The keys of earlier
// releases (types.DeprecatedKeys) are read, each with a warning;
// giving one together with its replacement is refused.
func DecodeSpec(b []byte) (types.Spec, []string, error) {
	if err := strictjson.Check(b); err != nil {
		return types.Spec{}, nil, bodyError(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return types.Spec{}, nil, bodyError(err)
	}
	var e fieldErrs
	var warnings []string
	checkKeys(&e, &warnings, top, reflect.TypeFor[types.Spec](), "")
	if len(e) > 0 {
		return types.Spec{}, nil, asError(e)
	}
	s := DefaultSpec()
	if err := strictjson.Decode(b, &s); err != nil {
		return types.Spec{}, nil, bodyError(err)
	}
	if len(s.Name) > maxLabelLen || strings.IndexFunc(s.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		e.addf("name", types.RuleFormat, "must be at most %d bytes of printable characters", maxLabelLen)
	}
	if s.DP.Budget != "" {
		e.err(CheckName("dp.budget", s.DP.Budget))
	}
	return s, warnings, asError(e)
}

// bodyError is a body that strictjson or encoding/json refused, as a
// *ValidationError on its path ("body" for the body as a whole).
func bodyError(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) && se.Path != "" {
		return asError([]types.FieldError{{Field: se.Path, Rule: types.RuleFormat, Message: se.Msg}})
	}
	return asError([]types.FieldError{{Field: "body", Rule: types.RuleFormat, Message: "must be one JSON job object: " + err.Error()}})
}

// checkKeys walks the JSON object obj beside struct type t (at JSON path
// path) and adds an error for every key that names no field of t, in
// sorted order, matching keys as encoding/json does (without regard to
// case). A deprecated key (types.DeprecatedKeys) is accepted with a
// warning, or refused when its replacement is given too.
func checkKeys(e *fieldErrs, warnings *[]string, obj map[string]json.RawMessage, t reflect.Type, path string) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := strictjson.JoinPath(path, k)
		f, ok := fieldByKey(t, k)
		if !ok {
			deprecatedKey(e, warnings, obj, p)
			continue
		}
		ft := f.Type
		var sub map[string]json.RawMessage
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() && json.Unmarshal(obj[k], &sub) == nil && sub != nil {
			checkKeys(e, warnings, sub, ft, p)
		}
	}
}

// deprecatedKey handles key path p that names no field: a deprecated key
// is a warning (or, beside its replacement, an error); any other is an
// unknown key.
func deprecatedKey(e *fieldErrs, warnings *[]string, obj map[string]json.RawMessage, p string) {
	repl, ok := types.DeprecatedKeys[p]
	if !ok {
		e.addf(p, types.RuleUnknown, "is not a field of the job spec (docs/job-spec.md lists them)")
		return
	}
	newKey := repl[strings.LastIndex(repl, ".")+1:]
	for k := range obj {
		if strings.EqualFold(k, newKey) {
			e.addf(p, types.RuleConflict, "is the deprecated name of %s; give %s only", repl, repl)
			return
		}
	}
	*warnings = append(*warnings, fmt.Sprintf("%s is deprecated and will not be read by the next release; use %s", p, repl))
}

// fieldByKey is the field of struct type t that JSON key k decodes into.
func fieldByKey(t reflect.Type, k string) (reflect.StructField, bool) {
	for t.Kind() == reflect.Pointer { // an optional sub-spec
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, k) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
