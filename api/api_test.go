package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// raw sends one request whose body is body, with a Content-Length when
// sized, chunked otherwise, and returns the status and error body.
func (s *testServer) raw(method, path, bearer string, body string, sized bool) (int, types.ErrorBody, http.Header) {
	s.t.Helper()
	var r io.Reader = strings.NewReader(body)
	if !sized {
		r = io.MultiReader(r) // hides the length: the transport sends it chunked
	}
	req, _ := http.NewRequest(method, s.url+path, r)
	if sized && req.ContentLength != int64(len(body)) || !sized && req.ContentLength != 0 {
		s.t.Fatalf("request body length %d", req.ContentLength)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e types.ErrorBody
	json.Unmarshal(b, &e)
	return resp.StatusCode, e, resp.Header
}

func (s *testServer) jobCount() int {
	s.t.Helper()
	var out struct {
		Jobs []types.Status `json:"jobs"`
	}
	if code, e := s.call("GET", "/v1/jobs", "tok", "", "", &out); code != 200 {
		s.t.Fatalf("list: %d %s", code, e.Error)
	}
	return len(out.Jobs)
}

// A job body is exactly one JSON object with each key once; names are
// printable and bounded. Each refusal is a 400 naming the field, and
// stores nothing.
func TestStrictJobBodies(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct{ body, field, says string }{
		{`null`, "body", "got null"},
		{``, "body", "empty body"},
		{`[]`, "body", "got an array"},
		{`{"rounds": 3} {"rounds": 300}`, "body", "after the JSON object"},
		{`{"rounds": 3}garbage`, "body", "after the JSON object"},
		{`{"rounds": 3, "rounds": 300}`, "rounds", "repeated key"},
		{`{"dp": {"delta": 1e-5, "noise_multiplier": 1, "delta": 0.5}}`, "dp.delta", "repeated key"},
		{`{"rounds": 3, "Rounds": 300}`, "Rounds", "repeated key"},
		{`{"name": "a\u0000b"}`, "name", "printable"},
		{`{"name": "` + strings.Repeat("x", 129) + `"}`, "name", "printable"},
		{`{"dp": {"budget": "a/b"}}`, "dp.budget", "letters, digits"},
		{`{"dp": {"budget": "` + strings.Repeat("u", 65) + `"}}`, "dp.budget", "1 to 64"},
		{`{"dp": {"privacy_unit": "a/b"}}`, "dp.budget", "letters, digits"},
		{`{"rouds": 3}`, "rouds", "not a field"},
		{`{"population": {"sise": 3}}`, "population.sise", "not a field"},
		{`{"population": {"size": 300, "clients": 300}}`, "population.clients", "give population.size only"},
	} {
		code, e := s.call("POST", "/v1/jobs", "tok", "", c.body, nil)
		if code != 400 || e.Field != c.field || !strings.Contains(e.Error, c.says) {
			t.Errorf("%.50q: %d %q (field %q), want 400 on %q saying %q", c.body, code, e.Error, e.Field, c.field, c.says)
		}
	}
	if n := s.jobCount(); n != 0 {
		t.Fatalf("refused submissions created %d jobs", n)
	}
}

// Any body over the limit is 413, with a Content-Length or chunked, on
// the API token's routes and on a device's.
func TestOversizedBodies(t *testing.T) {
	s := newTestServer(t)
	big := `{"name": "` + strings.Repeat("x", MaxBodyBytes) + `"}`
	for _, sized := range []bool{true, false} {
		for _, r := range []struct{ method, path string }{{"POST", "/v1/jobs"}, {"PUT", "/v1/budgets/b"}} {
			code, e, _ := s.raw(r.method, r.path, "tok", big, sized)
			if code != http.StatusRequestEntityTooLarge || !strings.Contains(e.Error, "too large") {
				t.Errorf("%s %s with a %d-byte body (sized %v): %d %q, want 413", r.method, r.path, len(big), sized, code, e.Error)
			}
		}
	}
	if n := s.jobCount(); n != 0 {
		t.Fatalf("oversized submissions created %d jobs", n)
	}

	// A logreg job's device messages are bounded by its model, well
	// below the CNN's bound.
	limit := ParticipateBodyLimit("logreg")
	if cnn := ParticipateBodyLimit("cnn"); !(limit < 2<<20 && cnn > 10<<20 && cnn < 16<<20) {
		t.Fatalf("participate limits: logreg %d, cnn %d", limit, cnn)
	}
	id := s.openJob(devicesJob)
	cred := s.enroll(id).Credential
	masked := `{"from": 1, "masked": [` + strings.Repeat("4294967295,", int(limit)/11) + `1]}`
	for _, sized := range []bool{true, false} {
		code, e, _ := s.raw("POST", "/v1/jobs/"+id+"/participate/masked-input", cred, masked, sized)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("a %d-byte masked input for a logreg job (sized %v): %d %q, want 413", len(masked), sized, code, e.Error)
		}
	}
}

// Budget names are checked before anything is stored, and budget bodies
// are strict.
func TestBudgetRequests(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct{ name, body, field string }{
		{"a%00b", `{"epsilon_budget": 8, "delta": 1e-6}`, "name"},
		{"a%0Ab", `{"epsilon_budget": 8, "delta": 1e-6}`, "name"},
		{"a%20b", `{"epsilon_budget": 8, "delta": 1e-6}`, "name"},
		{"..", `{"epsilon_budget": 8, "delta": 1e-6}`, "name"},
		{strings.Repeat("n", 65), `{"epsilon_budget": 8, "delta": 1e-6}`, "name"},
		{"ok", `null`, "body"},
		{"ok", `{"epsilon_budget": 8, "delta": 1e-6, "delta": 0.9}`, "body"},
		{"ok", `{"epsilon_budget": 8, "delta": 1e-6} {}`, "body"},
	} {
		code, e := s.call("PUT", "/v1/budgets/"+c.name, "tok", "", c.body, nil)
		if code != 400 || e.Field != c.field {
			t.Errorf("PUT %q %s: %d %q (field %q), want 400 on %q", c.name, c.body, code, e.Error, e.Field, c.field)
		}
	}
	if code, e := s.call("GET", "/v1/budgets/ok", "tok", "", "", nil); code != 404 {
		t.Fatalf("a refused budget was created: %d %s", code, e.Error)
	}
	if code, e := s.call("PUT", "/v1/budgets/pop-1.v2_a", "tok", "", `{"epsilon_budget": 8, "delta": 1e-6}`, nil); code != 201 {
		t.Fatalf("a good budget: %d %s", code, e.Error)
	}
	if code, e := s.call("GET", "/v1/budgets/a%01b", "tok", "", "", nil); code != 400 {
		t.Fatalf("looking up a name with a control character: %d %s", code, e.Error)
	}
}

// An auditor's token reads everything an admin reads and changes nothing.
func TestAuditorRole(t *testing.T) {
	s := newTestServer(t)
	id := s.openJob(devicesJob)
	s.enroll(id)
	if code, e := s.call("PUT", "/v1/budgets/u", "tok", "", `{"epsilon_budget": 8, "delta": 1e-6}`, nil); code != 201 {
		t.Fatalf("budget: %d %s", code, e.Error)
	}
	for path, want := range map[string]int{"/v1/jobs": 200, "/v1/jobs/" + id: 200, "/v1/jobs/" + id + "/metrics": 200,
		"/v1/jobs/" + id + "/rounds": 200, "/v1/jobs/" + id + "/privacy": 200, "/v1/jobs/" + id + "/devices": 200,
		"/v1/budgets/u": 200, "/v1/jobs/" + id + "/model": 409 /* no round yet, as for the admin */} {
		if code, e := s.call("GET", path, "audit", "", "", nil); code != want {
			t.Errorf("auditor GET %s: %d %s, want %d", path, code, e.Error, want)
		}
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"rounds": 1}`},
		{"POST", "/v1/jobs/" + id + "/cancel", ""},
		{"POST", "/v1/jobs/" + id + "/devices", ""},
		{"PUT", "/v1/budgets/v", `{"epsilon_budget": 8, "delta": 1e-6}`},
	} {
		if code, e := s.call(r.method, r.path, "audit", "", r.body, nil); code != 403 || !strings.Contains(e.Error, "admin token") {
			t.Errorf("auditor %s %s: %d %q, want 403", r.method, r.path, code, e.Error)
		}
	}
	if code, _ := s.call("GET", "/v1/jobs/"+id+"/participate", "audit", "", "", nil); code != 401 {
		t.Errorf("auditor on a participate route: %d, want 401", code)
	}
	var devs struct {
		Devices []types.DeviceInfo `json:"devices"`
	}
	if n := s.jobCount(); n != 1 {
		t.Errorf("%d jobs after the auditor's attempts", n)
	}
	if s.call("GET", "/v1/jobs/"+id+"/devices", "tok", "", "", &devs); len(devs.Devices) != 1 {
		t.Errorf("%d devices after the auditor's attempt to enroll", len(devs.Devices))
	}
	if st, _ := s.m.Get(id); st.State != types.StateRunning {
		t.Errorf("job %s after the auditor's cancel", st.State)
	}
}

func TestTokens(t *testing.T) {
	var tk Tokens
	tk.Add(HashToken("admin-secret"), RoleAdmin)
	tk.Add(HashToken("audit-secret"), RoleAuditor)
	for tok, want := range map[string]Role{"admin-secret": RoleAdmin, "audit-secret": RoleAuditor, "": "", "admin-secre": "", "admin-secret ": ""} {
		if r, ok := tk.Role(tok); r != want || ok != (want != "") {
			t.Errorf("Role(%q) = %q, %v; want %q", tok, r, ok, want)
		}
	}
}

// A 500 says only that an internal error happened and under which ID;
// the log holds the ID next to the internal text.
func TestInternalErrorsHidden(t *testing.T) {
	s := newTestServer(t)
	// A finished job whose stored metrics row no longer decodes makes
	// GET fail inside the manager.
	if err := s.db.CreateJob(storage.Job{ID: "job-bad", Config: json.RawMessage(`{"dp": {"enabled": false}}`), State: storage.StateRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.CommitRound("job-bad", 1, json.RawMessage(`{"round": "one"}`), storage.Checkpoint{Params: []float32{1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.SetJobState("job-bad", storage.StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	code, e := s.call("GET", "/v1/jobs/job-bad", "tok", "", "", nil)
	if code != 500 || e.ErrorID == "" || e.Error != fmt.Sprintf("internal error (id %s); see the server log", e.ErrorID) {
		t.Fatalf("500 body %d %+v", code, e)
	}
	if log := s.log.String(); !strings.Contains(log, "error_id="+e.ErrorID) || !strings.Contains(log, "unreadable") {
		t.Fatalf("the log lacks the error ID or the internal error:\n%s", log)
	}
	_, e2 := s.call("GET", "/v1/jobs/job-bad", "tok", "", "", nil)
	if e2.ErrorID == e.ErrorID {
		t.Fatal("two errors share an ID")
	}
}

// Messages say what went wrong once, without the sentinel or package
// prefixes of the wrapped errors.
func TestErrorMessages(t *testing.T) {
	s := newTestServer(t)
	var st types.Status
	if code, e := s.call("POST", "/v1/jobs", "tok", "", `{"rounds": 1}`, &st); code != 201 {
		t.Fatalf("submit: %d %s", code, e.Error)
	}
	s.m.Wait(st.ID)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/v1/jobs/" + st.ID + "/cancel", 409},
		{"POST", "/v1/jobs/" + st.ID + "/devices", 409},
		{"GET", "/v1/jobs/job-nope", 404},
		{"GET", "/v1/budgets/nope", 404},
	} {
		code, e := s.call(c.method, c.path, "tok", "", "", nil)
		if code != c.code || e.Error == "" || strings.Contains(e.Error, "storage:") || strings.HasPrefix(strings.ToLower(e.Error), "conflict") {
			t.Errorf("%s %s: %d %q, want %d without prefixes", c.method, c.path, code, e.Error, c.code)
		}
	}
	for err, want := range map[error]string{
		fmt.Errorf("%w: job j is already completed", job.ErrConflict):                      "job j is already completed",
		fmt.Errorf("storage: job %q: %w", "j", storage.ErrNotFound):                        `job "j": not found`,
		fmt.Errorf("%w: storage: job j is done: %w", job.ErrConflict, storage.ErrConflict): "job j is done: conflict with stored state",
		errors.New("conflict: "): "conflict: ",
	} {
		if got := userMessage(err); got != want {
			t.Errorf("userMessage(%q) = %q, want %q", err, got, want)
		}
	}
}

// Each device has its own rate limit on the participate routes: past it,
// 429 with Retry-After, while another device goes on.
func TestDeviceRateLimit(t *testing.T) {
	// One request per 1000 s beyond a burst of 2: the third request is
	// over the limit however fast or slow the machine.
	s := newTestServerWith(t, Config{DeviceRate: 0.001, DeviceBurst: 2})
	id := s.openJob(devicesJob)
	a, b := s.enroll(id).Credential, s.enroll(id).Credential
	path := "/v1/jobs/" + id + "/participate"
	for i := range 2 {
		if code, e := s.call("GET", path, a, "", "", nil); code != 200 {
			t.Fatalf("request %d: %d %s", i+1, code, e.Error)
		}
	}
	code, e, h := s.raw("GET", path, a, "", true)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(e.Error, "rate limit") {
		t.Fatalf("third request: %d %q (Retry-After %q), want 429", code, e.Error, h.Get("Retry-After"))
	}
	if code, e := s.call("GET", path, b, "", "", nil); code != 200 {
		t.Fatalf("another device: %d %s", code, e.Error)
	}
}

// A job that breaks several rules is refused with all of them, in the
// validators' fixed order, the same list every time; the first is also the
// error and field of the body, as for one broken rule.
func TestEveryBrokenRuleInOrder(t *testing.T) {
	s := newTestServer(t)
	body := `{"dp": {"delta": 2, "clip_norm": 0}, "rounds": 0, "client": {"epochs": 0}, "population": {"size": 0}, "model": "nope"}`
	want := []types.FieldError{
		{Field: "model", Rule: types.RuleOneOf},
		{Field: "population.size", Rule: types.RuleRange},
		{Field: "sampling.rate", Rule: types.RuleRange},
		{Field: "rounds", Rule: types.RuleRange},
		{Field: "client.epochs", Rule: types.RuleRange},
		{Field: "dp.clip_norm", Rule: types.RuleRange},
		{Field: "dp.delta", Rule: types.RuleRange},
	}
	for range 5 {
		code, e := s.call("POST", "/v1/jobs", "tok", "", body, nil)
		if code != 400 || e.Field != "model" || !strings.HasPrefix(e.Error, "model: ") {
			t.Fatalf("%d %q (field %q), want 400 on model first", code, e.Error, e.Field)
		}
		if len(e.Errors) != len(want) {
			t.Fatalf("errors %+v, want %d", e.Errors, len(want))
		}
		for i, w := range want {
			if g := e.Errors[i]; g.Field != w.Field || g.Rule != w.Rule || g.Message == "" {
				t.Fatalf("error %d: %+v, want %s (%s); all: %+v", i, g, w.Field, w.Rule, e.Errors)
			}
		}
	}
}

// The keys of the previous release are read, for one release, with a
// warning in the answer to the submission and in the log.
func TestDeprecatedKeysWarn(t *testing.T) {
	s := newTestServer(t)
	var st types.Status
	body := `{"rounds": 1, "population": {"clients": 300}, "sampling": {"rate": 0.1}, "dp": {"enabled": false}}`
	if code, e := s.call("POST", "/v1/jobs", "tok", "", body, &st); code != 201 {
		t.Fatalf("submit: %d %s", code, e.Error)
	}
	if st.Spec.Population.Size != 300 || len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "population.clients is deprecated") ||
		!strings.Contains(st.Warnings[0], "population.size") {
		t.Fatalf("size %d, warnings %q", st.Spec.Population.Size, st.Warnings)
	}
	if !strings.Contains(s.log.String(), "population.clients is deprecated") {
		t.Errorf("the warning is not in the log:\n%s", s.log.String())
	}
	s.m.Wait(st.ID)
	var again types.Status
	if code, _ := s.call("GET", "/v1/jobs/"+st.ID, "tok", "", "", &again); code != 200 || again.Warnings != nil || again.Spec.Population.Size != 300 {
		t.Fatalf("%d %+v: the stored job lost its size or repeats the warning", code, again)
	}
}
