package api

// The OpenAPI contract (api/openapi.json) is checked four ways:
//
//   - it loads and validates as an OpenAPI 3.0 document
//     (TestOpenAPIDocumentValid), and GET /v1/openapi.json serves exactly
//     its bytes without a token;
//   - it names every route the echo instance registers, and nothing else
//     (TestOpenAPIRoutes);
//   - its component schemas have the JSON fields, required fields and
//     types of the Go wire types they describe (TestOpenAPISchemasMatchGoTypes),
//     so that a field added, renamed or given omitempty in api/types,
//     secagg or audit fails here with the edit to make;
//   - every request and response the API's tests make goes through
//     contractCheck (newTestServerWith installs it), which fails the test
//     on any mismatch, error responses included; TestContractTour makes
//     every route answer a success at least once, and
//     TestContractCheckerRejects shows the checker failing on wrong
//     responses, so that it cannot pass silently.
//
// The checker is package internal/contracttest/check:
// github.com/getkin/kin-openapi's openapi3filter with the gorillamux
// router. The end-to-end tests of cmd/dpfl-server (through a proxy) and
// of package device use it too, through package contracttest.

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/audit"
	dpfldevice "github.com/dpfl/dpfl/device"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/contracttest/check"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// loadContract is the parsed embedded document (the bytes the server
// serves) and its router, loaded once.
func loadContract(tb testing.TB) *check.Contract {
	tb.Helper()
	contractOnce.Do(func() { theContract, contractErr = check.Load(openAPIDocument) })
	if contractErr != nil {
		tb.Fatalf("api/openapi.json: %v", contractErr)
	}
	return theContract
}

var (
	contractOnce sync.Once
	theContract  *check.Contract
	contractErr  error
)

// checkers holds each test's latest checker (testing.TB →
// *check.Checker), for the tests that read its counts.
var checkers sync.Map

// contractCheck wraps h, the API's handler, in a check.Checker that
// reports to r when r's test ends: its counts, and each mismatch as a
// failure. (This is contracttest.Handler, which this package's tests
// cannot import: contracttest imports api.)
func contractCheck(r testing.TB, h http.Handler) *check.Checker {
	r.Helper()
	cc := loadContract(r).Wrap(r, h, "in-process")
	checkers.Store(r, cc)
	return cc
}

// The document is a valid OpenAPI 3.0 document, and GET /v1/openapi.json
// serves its exact bytes as JSON to anyone.
func TestOpenAPIDocumentValid(t *testing.T) {
	c := loadContract(t) // loads and validates (doc.Validate)
	if !strings.HasPrefix(c.Doc().OpenAPI, "3.0.") {
		t.Errorf("openapi %q, want 3.0.x", c.Doc().OpenAPI)
	}
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, openAPIDocument) {
		t.Fatal("the embedded document is not api/openapi.json")
	}
	s := newTestServer(t)
	resp, err := http.Get(s.url + "/v1/openapi.json") // no token
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(got, file) {
		t.Fatalf("GET /v1/openapi.json: %d %q, %d bytes (the file has %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), len(file))
	}
}

// contractPath turns a contract path into echo's form: /v1/jobs/{id}
// is /v1/jobs/:id, and both /ui/ and /ui/{file:.*} (a gorilla/mux
// pattern for a path of any depth) are echo's wildcard /ui/*.
func contractPath(p string) string {
	p = regexp.MustCompile(`\{[A-Za-z_]+:\.\*\}$`).ReplaceAllString(p, "*")
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		p += "*"
	}
	return regexp.MustCompile(`\{([A-Za-z_]+)\}`).ReplaceAllString(p, ":$1")
}

// serverRoutes lists "METHOD /path" for every route New registers,
// without echo's catch-all routes for unknown paths (which answer 404
// after a group's middleware).
func serverRoutes(t *testing.T) []string {
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { m.Shutdown(context.Background()); db.Close() })
	tokens := &Tokens{}
	tokens.Add(HashToken("tok"), RoleAdmin)
	e, ok := New(m, Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)}).(*echo.Echo)
	if !ok {
		t.Fatal("New no longer returns an *echo.Echo: update serverRoutes")
	}
	var out []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		out = append(out, r.Method+" "+r.Path)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// contractRoutes lists "METHOD /path" for every operation of the
// document, in echo's form (contractPath).
func contractRoutes(c *check.Contract) []string {
	var out []string
	for path, item := range c.Doc().Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+contractPath(path))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Every route the server registers is in the contract, and every
// operation of the contract is a route of the server.
func TestOpenAPIRoutes(t *testing.T) {
	c := loadContract(t)
	server, doc := serverRoutes(t), contractRoutes(c)
	for _, r := range server {
		if !slices.Contains(doc, r) {
			t.Errorf("the server serves %s, which api/openapi.json does not describe", r)
		}
	}
	for _, r := range doc {
		if !slices.Contains(server, r) {
			t.Errorf("api/openapi.json describes %s, which the server does not serve", r)
		}
	}
	t.Logf("%d routes, each in the contract", len(server))
	// The previous release's participate routes are marked deprecated,
	// and only they.
	for path, item := range c.Doc().Paths.Map() {
		for method, op := range item.Operations() {
			old := slices.Contains([]string{"advertise", "keys", "shares", "masked-input"}, path[strings.LastIndex(path, "/")+1:])
			if op.Deprecated != old {
				t.Errorf("%s %s: deprecated %v", method, path, op.Deprecated)
			}
		}
	}
}

// wireSchemas maps each component schema to the Go type whose JSON it
// describes. The "Input" schemas are the job spec as submitted: the same
// fields, none required, and the deprecated keys of types.DeprecatedKeys.
var wireSchemas = map[string]reflect.Type{
	"ErrorBody":            reflect.TypeFor[types.ErrorBody](),
	"FieldError":           reflect.TypeFor[types.FieldError](),
	"JobStatus":            reflect.TypeFor[types.Status](),
	"JobLeader":            reflect.TypeFor[types.JobLeader](),
	"JobSpec":              reflect.TypeFor[types.Spec](),
	"SyntheticSpec":        reflect.TypeFor[types.SyntheticSpec](),
	"LEAFSpec":             reflect.TypeFor[types.LEAFSpec](),
	"PopulationSpec":       reflect.TypeFor[types.PopulationSpec](),
	"SamplingSpec":         reflect.TypeFor[types.SamplingSpec](),
	"ClientSpec":           reflect.TypeFor[types.ClientSpec](),
	"Schedule":             reflect.TypeFor[types.Schedule](),
	"ServerSpec":           reflect.TypeFor[types.ServerSpec](),
	"DPSpec":               reflect.TypeFor[types.DPSpec](),
	"AdaptiveClippingSpec": reflect.TypeFor[types.AdaptiveClippingSpec](),
	"DistributedDPSpec":    reflect.TypeFor[types.DistributedDPSpec](),
	"SecAggSpec":           reflect.TypeFor[types.SecAggSpec](),
	"RoundTimeSpec":        reflect.TypeFor[types.RoundTimeSpec](),
	"ParticipationSpec":    reflect.TypeFor[types.ParticipationSpec](),
	"AuditSpec":            reflect.TypeFor[types.AuditSpec](),
	"RoundMetrics":         reflect.TypeFor[types.RoundMetrics](),
	"Metrics":              reflect.TypeFor[types.Metrics](),
	"ClientMetrics":        reflect.TypeFor[types.ClientMetrics](),
	"SecAggStats":          reflect.TypeFor[types.SecAggStats](),
	"RoundRecord":          reflect.TypeFor[types.RoundRecord](),
	"PrivacyReport":        reflect.TypeFor[types.PrivacyReport](),
	"LedgerEntry":          reflect.TypeFor[types.LedgerEntry](),
	"AccountingReport":     reflect.TypeFor[types.AccountingReport](),
	"Estimate":             reflect.TypeFor[types.Estimate](),
	"EmpiricalEpsilon":     reflect.TypeFor[types.EmpiricalEpsilon](),
	"CanaryFit":            reflect.TypeFor[types.CanaryFit](),
	"ModelExport":          reflect.TypeFor[types.ModelExport](),
	"BudgetRequest":        reflect.TypeFor[types.BudgetRequest](),
	"BudgetReport":         reflect.TypeFor[types.BudgetReport](),
	"BudgetList":           reflect.TypeFor[types.BudgetList](),
	"Enrollment":           reflect.TypeFor[types.Enrollment](),
	"DeviceInfo":           reflect.TypeFor[types.DeviceInfo](),
	"RoundStatus":          reflect.TypeFor[types.RoundStatus](),
	"JoinInfo":             reflect.TypeFor[types.JoinInfo](),
	"DistributedRound":     reflect.TypeFor[types.DistributedRound](),
	"LogKeyResponse":       reflect.TypeFor[types.LogKeyResponse](),
	"CheckpointResponse":   reflect.TypeFor[types.CheckpointResponse](),
	"LeavesResponse":       reflect.TypeFor[types.LeavesResponse](),
	"AuditBundle":          reflect.TypeFor[audit.Bundle](),
	"AuditEntry":           reflect.TypeFor[audit.Entry](),
	"AuditConsistency":     reflect.TypeFor[audit.Consistency](),
	"AuditClaim":           reflect.TypeFor[audit.Claim](),
	"ModelCertificate":     reflect.TypeFor[audit.ModelCertificate](),
	"SecAggEncoding":       reflect.TypeFor[secagg.Encoding](),
	"SecAggParams":         reflect.TypeFor[secagg.Params](),
	"AdvertiseKeysMsg":     reflect.TypeFor[secagg.AdvertiseKeysMsg](),
	"PeerKeys":             reflect.TypeFor[secagg.PeerKeys](),
	"ShareKeysRequest":     reflect.TypeFor[secagg.ShareKeysRequest](),
	"EncryptedShare":       reflect.TypeFor[secagg.EncryptedShare](),
	"ShareKeysMsg":         reflect.TypeFor[secagg.ShareKeysMsg](),
	"MaskedInputRequest":   reflect.TypeFor[secagg.MaskedInputRequest](),
	"MaskedInputMsg":       reflect.TypeFor[secagg.MaskedInputMsg](),
	"UnmaskRequest":        reflect.TypeFor[secagg.UnmaskRequest](),
	"Share":                reflect.TypeFor[secagg.Share](),
	"UnmaskMsg":            reflect.TypeFor[secagg.UnmaskMsg](),
}

// namedSchemas are the component schemas of Go types that are not
// structs, and of JSON that no single Go type declares: the handlers'
// envelopes ({"jobs": …} and the like, map literals in api.go), a 500's
// body (an ErrorBody with error and error_id only), the DpEvent union and
// this document. TestContractTour validates each through real responses.
var namedSchemas = map[string]reflect.Type{
	"JobState": reflect.TypeFor[types.JobState](),
	"ClientID": reflect.TypeFor[secagg.ClientID](),
	"Stage":    reflect.TypeFor[string](),
	"DpEvent":  nil, "Health": nil, "JobList": nil, "JobMetrics": nil, "JobRounds": nil, "DeviceList": nil,
	"InternalErrorBody": nil, "OpenAPIDocument": nil,
}

// rawSchemas names the schemas of the json.RawMessage fields.
var rawSchemas = map[string]string{
	"LedgerEntry.Event":       "DpEvent",
	"ModelExport.Certificate": "ModelCertificate",
}

// jsonField is one JSON key of a Go struct.
type jsonField struct {
	name     string
	goName   string
	typ      reflect.Type
	optional bool // omitempty or omitzero
}

// jsonFields lists t's JSON keys as encoding/json writes them, embedded
// structs flattened.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		opt := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, jsonField{name: name, goName: f.Name, typ: f.Type, optional: opt})
	}
	return out
}

// schemaName is the component a $ref names.
func schemaName(ref string) string { return strings.TrimPrefix(ref, "#/components/schemas/") }

// checkType reports how s, the schema of Go field owner.field of type t,
// disagrees with t ("" when it does not). input: s is in an Input schema.
func checkType(s *openapi3.SchemaRef, t reflect.Type, owner, field string, input bool) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		if want := rawSchemas[owner+"."+field]; schemaName(s.Ref) != want {
			return fmt.Sprintf("raw JSON: want $ref %s, got %q", want, s.Ref)
		}
		return ""
	}
	if s.Ref != "" {
		name := schemaName(s.Ref)
		want, ok := wireSchemas[strings.TrimSuffix(name, "Input")]
		if !ok {
			want, ok = namedSchemas[name]
		}
		switch {
		case !ok:
			return fmt.Sprintf("$ref %s is not a schema of a Go type", name)
		case want != nil && want != t && !(name == "Stage" && t.Kind() == reflect.String):
			return fmt.Sprintf("$ref %s describes %v, the field is %v", name, want, t)
		case strings.HasSuffix(name, "Input") != (input && t.Kind() == reflect.Struct):
			return fmt.Sprintf("$ref %s in a schema that is%s an Input", name, map[bool]string{true: "", false: " not"}[input])
		}
		if t.Kind() != reflect.Struct {
			return checkType(&openapi3.SchemaRef{Value: s.Value}, t, owner, field, input)
		}
		return ""
	}
	v := s.Value
	is := func(typ, format string) string {
		if !v.Type.Is(typ) || v.Format != format {
			return fmt.Sprintf("want type %s format %q, got %v %q", typ, format, v.Type.Slice(), v.Format)
		}
		return ""
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return is("string", "date-time")
	case t == reflect.TypeFor[tlog.Hash](), t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return is("string", "byte")
	}
	switch t.Kind() {
	case reflect.Bool:
		return is("boolean", "")
	case reflect.Int, reflect.Int64:
		return is("integer", "int64")
	case reflect.Uint32, reflect.Uint64:
		if !v.Type.Is("integer") || v.Min == nil || *v.Min < 0 {
			return fmt.Sprintf("want a non-negative integer, got %v min %v", v.Type.Slice(), v.Min)
		}
		if t.Kind() == reflect.Uint32 && (v.Max == nil || *v.Max > 1<<32-1) {
			return "want a maximum ≤ 2³²−1"
		}
		return ""
	case reflect.Float64:
		return is("number", "double")
	case reflect.Float32:
		return is("number", "float")
	case reflect.String:
		return is("string", "")
	case reflect.Slice, reflect.Array:
		if !v.Type.Is("array") || v.Items == nil {
			return fmt.Sprintf("want an array, got %v", v.Type.Slice())
		}
		if t.Kind() == reflect.Array && (v.MinItems != uint64(t.Len()) || v.MaxItems == nil || *v.MaxItems != uint64(t.Len())) {
			return fmt.Sprintf("want exactly %d items", t.Len())
		}
		if v.Nullable {
			return "nullable: the server never writes null here"
		}
		return checkType(v.Items, t.Elem(), owner, field, input)
	case reflect.Struct:
		return fmt.Sprintf("a %v must be a $ref to its component", t)
	}
	return fmt.Sprintf("no rule for Go type %v", t)
}

// Each component schema has exactly the JSON keys of its Go type, with
// additionalProperties false; a key is required exactly when the type
// always writes it (no omitempty or omitzero), except in the Input
// schemas of a submission, where every key is optional and the deprecated
// keys are read too; each key's type matches the field's.
func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	c := loadContract(t)
	for name, ref := range c.Doc().Components.Schemas {
		base, input := strings.CutSuffix(name, "Input")
		typ, ok := wireSchemas[base]
		if !ok {
			if _, named := namedSchemas[name]; !named {
				t.Errorf("schema %s: add it to wireSchemas (or namedSchemas) so that it is checked against its Go type", name)
			}
			continue
		}
		s := ref.Value
		if !s.Type.Is("object") || s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has || s.AdditionalProperties.Schema != nil {
			t.Errorf("schema %s: want type object with additionalProperties false", name)
		}
		seen := map[string]bool{}
		for _, f := range jsonFields(typ) {
			seen[f.name] = true
			p, ok := s.Properties[f.name]
			if !ok {
				t.Errorf("schema %s lacks %q (%v.%s)", name, f.name, typ, f.goName)
				continue
			}
			if msg := checkType(p, f.typ, typ.Name(), f.goName, input); msg != "" {
				t.Errorf("schema %s, property %s (%v.%s %v): %s", name, f.name, typ, f.goName, f.typ, msg)
			}
			if req := slices.Contains(s.Required, f.name); req != (!f.optional && !input) {
				t.Errorf("schema %s: %q required %v, but %v.%s is written %s", name, f.name, req, typ, f.goName,
					map[bool]string{true: "only when set (omitempty, omitzero) or is an optional key of a submission", false: "always"}[f.optional || input])
			}
		}
		for key, p := range s.Properties {
			if seen[key] {
				continue
			}
			deprecated := false
			for old := range types.DeprecatedKeys {
				section, k, _ := strings.Cut(old, ".")
				if input && k == key && jsonKeyOf(reflect.TypeFor[types.Spec](), section) == typ {
					deprecated = true
				}
			}
			if !deprecated || !p.Value.Deprecated {
				t.Errorf("schema %s has %q, which %v does not write (a deprecated input key must be in types.DeprecatedKeys and marked deprecated)", name, key, typ)
			}
		}
	}
}

// jsonKeyOf is the type of struct t's field with JSON key key.
func jsonKeyOf(t reflect.Type, key string) reflect.Type {
	for _, f := range jsonFields(t) {
		if f.name == key {
			return f.typ
		}
	}
	return nil
}

// fakeReporter takes what a checker reports when its test ends (its
// Cleanup, which the fake runs when told), so that the mismatches
// TestContractCheckerRejects provokes are seen and do not fail it.
type fakeReporter struct {
	*testing.T
	cleanups []func()
	errs     []string
}

// Cleanup keeps f for end.
func (f *fakeReporter) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// end runs the kept cleanups, as the end of a test would.
func (f *fakeReporter) end() {
	for _, fn := range slices.Backward(f.cleanups) {
		fn()
	}
}

// Logf drops the checker's counts, which would only be the fake's.
func (f *fakeReporter) Logf(string, ...any) {}

// Errorf records a mismatch instead of failing the test.
func (f *fakeReporter) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// The checker fails an exchange that breaks the contract: a field of the
// wrong type, a missing required field, an unknown field, an undocumented
// status, a non-ErrorBody error, a success on a route the contract does
// not have, a request the contract refuses but the server accepts, a
// wrong content type, a 500 without its error ID and a 429 without
// Retry-After; and it passes the same exchanges when they are right.
func TestContractCheckerRejects(t *testing.T) {
	st := types.Status{ID: "job-1", State: types.StateRunning, Round: 2, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(), Spec: job.DefaultSpec()}
	good, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cred := strings.Repeat("ab", 32)
	for _, c := range []struct {
		what, method, path, bearer, reqBody string
		status                              int
		ct, body                            string
		header                              map[string]string
		roundToken, bad                     bool
	}{
		{what: "a job's status", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, body: string(good)},
		{what: "round of the wrong type", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["round"] = "two" })},
		{what: "a float where the contract has an integer", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["round"] = 2.5 })},
		{what: "a nested field of the wrong type", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["spec"].(map[string]any)["dp"].(map[string]any)["enabled"] = "yes" })},
		{what: "a missing required field", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { delete(m, "spec") })},
		{what: "an unknown field", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["secret"] = "x" })},
		{what: "a state outside the enum", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["state"] = "paused" })},
		{what: "null for an object", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true,
			body: edit(func(m map[string]any) { m["spec"] = nil })},
		{what: "an undocumented status", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: http.StatusTeapot, bad: true, body: `{"error": "tea"}`},
		{what: "a 404", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 404, body: `{"error": "not found"}`},
		{what: "a 404 that is not an ErrorBody", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 404, bad: true, body: `{"message": "not found"}`},
		{what: "a 500", method: "GET", path: "/v1/jobs", bearer: "tok", status: 500, body: `{"error": "internal error (id 0123456789abcdef); see the server log", "error_id": "0123456789abcdef"}`},
		{what: "a 500 without its error ID", method: "GET", path: "/v1/jobs", bearer: "tok", status: 500, bad: true, body: `{"error": "boom"}`},
		{what: "a wrong content type", method: "GET", path: "/v1/jobs/job-1", bearer: "tok", status: 200, ct: "text/plain", bad: true, body: string(good)},
		{what: "an unknown route refused", method: "GET", path: "/v1/nope", bearer: "tok", status: 404, body: `{"error": "Not Found"}`},
		{what: "an unknown route answered", method: "GET", path: "/v1/nope", bearer: "tok", status: 200, bad: true, body: `{}`},
		{what: "an unknown method answered", method: "DELETE", path: "/v1/jobs/job-1", bearer: "tok", status: 200, bad: true, body: string(good)},
		{what: "a refused submission", method: "POST", path: "/v1/jobs", bearer: "tok", reqBody: `{"rouds": 3}`, status: 400,
			body: `{"error": "rouds: not a field", "field": "rouds", "errors": [{"field": "rouds", "rule": "unknown", "message": "not a field"}]}`},
		{what: "an accepted submission the contract refuses", method: "POST", path: "/v1/jobs", bearer: "tok", reqBody: `{"rouds": 3}`, status: 201, bad: true, body: string(good)},
		{what: "a submission without a token, accepted", method: "POST", path: "/v1/jobs", reqBody: `{}`, status: 201, bad: true, body: string(good)},
		{what: "a device's rate limit", method: "GET", path: "/v1/jobs/job-1/participate", bearer: cred, status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"error": "rate limit"}`},
		{what: "a device's rate limit without Retry-After", method: "GET", path: "/v1/jobs/job-1/participate", bearer: cred, status: 429, bad: true, body: `{"error": "rate limit"}`},
		{what: "an accepted message without a round token", method: "POST", path: "/v1/jobs/job-1/participate/masked_input", bearer: cred, reqBody: `{"from": 1, "masked": [1]}`, status: 204, bad: true},
		{what: "a masked input", method: "POST", path: "/v1/jobs/job-1/participate/masked_input", bearer: cred, reqBody: `{"from": 1, "masked": [4294967295]}`, status: 204, roundToken: true},
		{what: "a masked input of negative ring elements", method: "POST", path: "/v1/jobs/job-1/participate/masked_input", bearer: cred, reqBody: `{"from": 1, "masked": [-1]}`, status: 204, roundToken: true, bad: true},
		{what: "the API token on a participate route, accepted", method: "GET", path: "/v1/jobs/job-1/participate", bearer: "tok", status: 200, bad: true,
			body: `{"job_id": "job-1", "state": "running", "round": 0, "attempt": 0, "stage": "waiting", "joined": 0, "cohort_size": 3}`},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "_"), func(t *testing.T) {
			fr := &fakeReporter{T: t}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ct := c.ct
				if ct == "" && c.body != "" {
					ct = "application/json"
				}
				if ct != "" {
					w.Header().Set("Content-Type", ct)
				}
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			cc := contractCheck(fr, h)
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.reqBody))
			if c.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			if c.roundToken {
				req.Header.Set(types.ClientTokenHeader, strings.Repeat("0", 32))
			}
			rec := httptest.NewRecorder()
			cc.ServeHTTP(rec, req)
			if rec.Code != c.status || rec.Body.String() != c.body {
				t.Errorf("the checker changed the response: %d %q", rec.Code, rec.Body.String())
			}
			// The mismatch is recorded at once, and fails the test when
			// it ends.
			if errs := cc.Violations(); (len(errs) > 0) != c.bad {
				t.Errorf("checker recorded %q, want a mismatch: %v", errs, c.bad)
			}
			fr.end()
			if (len(fr.errs) > 0) != c.bad {
				t.Errorf("checker reported %q at the end of the test, want a failure: %v", fr.errs, c.bad)
			}
		})
	}
}

// syntheticDevice is n examples in Fashion-MNIST's shape for a device.
func syntheticDevice(n int, seed uint64) *data.Dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	ds := &data.Dataset{Dim: 784, Classes: 10, X: make([]float32, n*784), Y: make([]uint8, n)}
	for i := range n {
		ds.Y[i] = uint8(i % 10)
		for j := range 784 {
			ds.X[i*784+j] = rng.Float32()
		}
	}
	return ds
}

// Every operation of the contract but the deprecated aliases answers a
// success at least once here, through the contract checker: a signed log,
// a shared budget, a DP job with canaries charged to it, a job with secure
// aggregation, a devices job whose three devices run a whole round over
// HTTP, and a cancelled job. With the other API tests, which hit the
// error responses, this checks every schema against real responses.
func TestContractTour(t *testing.T) {
	s := newTestServerWith(t, Config{DeviceRate: 1000, DeviceBurst: 1000})
	skey, _, err := note.GenerateKey(crand.Reader, "dpfl/contract-tour")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.SetLogSigner(skey); err != nil {
		t.Fatal(err)
	}
	must := func(method, path, bearer, body string, want int, out any) {
		t.Helper()
		if code, e := s.call(method, path, bearer, "", body, out); code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, code, e.Error, want)
		}
	}
	must("GET", "/healthz", "", "", 200, nil)
	must("GET", "/v1/openapi.json", "", "", 200, nil)
	must("PUT", "/v1/budgets/tour", "tok", `{"epsilon_budget": 50, "delta": 1e-5}`, 201, nil)
	var dpJob, secJob, devJob, cancelled types.Status
	must("POST", "/v1/jobs", "tok", `{"rounds": 2, "population": {"size": 300}, "sampling": {"rate": 0.1}, "dp": {"budget": "tour"}, "audit": {"canaries": 8}}`, 201, &dpJob)
	must("POST", "/v1/jobs", "tok", `{"rounds": 1, "population": {"size": 300}, "sampling": {"scheme": "fixed", "cohort_size": 5}, "dp": {"enabled": false}, "secure_aggregation": true}`, 201, &secJob)
	must("POST", "/v1/jobs", "tok", `{"population":{"source":"devices","size":10},"sampling":{"scheme":"fixed","cohort_size":3},"secure_aggregation":true,"rounds":1,"dp":{"enabled":false},"secagg":{"min_clients":3,"stage_timeout_seconds":30}}`, 201, &devJob)
	must("POST", "/v1/jobs", "tok", `{"rounds": 100000, "population": {"size": 300}, "sampling": {"rate": 0.1}, "dp": {"enabled": false}}`, 201, &cancelled)
	must("POST", "/v1/jobs/"+cancelled.ID+"/cancel", "tok", "", 200, nil)

	// Three devices take part in the devices job's round over HTTP, each
	// request and response checked.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		var en types.Enrollment
		must("POST", "/v1/jobs/"+devJob.ID+"/devices", "tok", "", 201, &en)
		d := &dpfldevice.Device{Server: dpfldevice.HTTP(client.New(s.url, en.Credential), 10*time.Millisecond), JobID: devJob.ID,
			Data: syntheticDevice(20, uint64(10+i)), Poll: 10 * time.Millisecond, Workers: 1}
		wg.Go(func() { errs[i] = d.Run(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("device %d: %v", i, err)
		}
	}
	for _, id := range []string{dpJob.ID, secJob.ID, devJob.ID} {
		s.m.Wait(id)
		var st types.Status
		must("GET", "/v1/jobs/"+id, "audit", "", 200, &st)
		if st.State != types.StateCompleted {
			t.Fatalf("job %s: %s %s", id, st.State, st.Message)
		}
		must("GET", "/v1/jobs/"+id+"/metrics", "audit", "", 200, nil)
		must("GET", "/v1/jobs/"+id+"/rounds", "audit", "", 200, nil)
		must("GET", "/v1/jobs/"+id+"/privacy", "audit", "", 200, nil)
		must("GET", "/v1/jobs/"+id+"/model", "audit", "", 200, nil)
		must("GET", "/v1/log/jobs/"+id+"/bundle?since=1", "audit", "", 200, nil)
	}
	var rep types.PrivacyReport
	must("GET", "/v1/jobs/"+dpJob.ID+"/privacy", "audit", "", 200, &rep)
	if rep.Epsilon == nil || rep.EmpiricalEpsilon == nil || rep.Accounting == nil {
		t.Fatalf("the DP job's report lacks ε, the canary audit or the accounting: %+v", rep)
	}
	must("GET", "/v1/jobs/"+devJob.ID+"/devices", "audit", "", 200, nil)
	must("GET", "/v1/jobs", "audit", "", 200, nil)
	var one types.BudgetReport
	must("GET", "/v1/budgets/tour", "audit", "", 200, &one)
	var all types.BudgetList
	must("GET", "/v1/budgets", "audit", "", 200, &all)
	if len(all.Budgets) != 1 || !reflect.DeepEqual(all.Budgets[0], one) {
		t.Fatalf("GET /v1/budgets: %+v, want the one budget as GET /v1/budgets/tour reports it: %+v", all, one)
	}
	must("GET", "/v1/log/key", "audit", "", 200, nil)
	must("GET", "/v1/log/checkpoint", "audit", "", 200, nil)
	must("GET", "/v1/log/consistency?old=1", "audit", "", 200, nil)
	must("GET", "/v1/log/leaves?start=0&end=3", "audit", "", 200, nil)
	must("GET", "/v1/log/leaves", "audit", "", 200, nil)
	must("GET", "/metrics", "audit", "", 200, nil)
	openMetrics, _ := http.NewRequest("GET", s.url+"/metrics", nil)
	openMetrics.Header.Set("Authorization", "Bearer tok")
	openMetrics.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	if resp, err := http.DefaultClient.Do(openMetrics); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("GET /metrics as OpenMetrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The dashboard: /ui redirects to /ui/ (which the client follows),
	// files by any depth, HEAD as GET.
	must("GET", "/ui", "", "", 200, nil)
	must("HEAD", "/ui", "", "", 200, nil)
	must("HEAD", "/ui/", "", "", 200, nil)
	must("GET", "/ui/app.js", "", "", 200, nil)
	must("HEAD", "/ui/app.css", "", "", 200, nil)
	must("GET", "/ui/vendor/nope.js", "", "", 404, nil)

	cc, _ := checkers.Load(t)
	ops := cc.(*check.Checker).Statuses()
	t.Logf("statuses by operation: %v", ops)
	for _, op := range operations(loadContract(t)) {
		if op.Deprecated {
			continue
		}
		succeeded := false
		for code := range ops[op.OperationID] {
			succeeded = succeeded || code < 400 // /ui's redirect included
		}
		if !succeeded {
			t.Errorf("%s never answered a success in the tour: %v", op.OperationID, ops[op.OperationID])
		}
	}
}

// operations lists the contract's operations.
func operations(c *check.Contract) []*openapi3.Operation {
	var out []*openapi3.Operation
	for _, item := range c.Doc().Paths.Map() {
		for _, op := range item.Operations() {
			out = append(out, op)
		}
	}
	return out
}
