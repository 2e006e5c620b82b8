package contracttest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// fakeTB keeps the cleanups registered on it, to run them when told, and
// records what they report instead of failing the test.
type fakeTB struct {
	*testing.T
	cleanups   []func()
	errs, logs []string
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// end runs the cleanups, as the end of the test would.
func (f *fakeTB) end() {
	for _, fn := range slices.Backward(f.cleanups) {
		fn()
	}
}

// get sends one request and returns the status and body.
func get(t *testing.T, method, url, bearer string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Through Proxy, exchanges that keep the contract pass unchanged (a
// chunked body arrives chunked), and one that breaks it fails the test at
// its end, with the request, the status and the reason; so does a server
// that cannot be reached.
func TestProxy(t *testing.T) {
	var chunked []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/healthz":
			io.WriteString(w, `{"status": "ok"}`)
		case r.URL.Path == "/v1/jobs" && r.Header.Get("Authorization") == "":
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error": "missing token"}`)
		case r.URL.Path == "/v1/jobs" && r.Method == "POST":
			b, _ := io.ReadAll(r.Body)
			chunked = append(chunked, fmt.Sprintf("%v %d %s", r.TransferEncoding, r.ContentLength, b))
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error": "rouds: not a field", "field": "rouds"}`)
		case r.URL.Path == "/v1/jobs/job-1":
			io.WriteString(w, `{"id": "job-1", "round": "two"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error": "Not Found"}`)
		}
	}))
	defer backend.Close()

	ft := &fakeTB{T: t}
	proxy := Proxy(ft, backend.URL)
	for _, c := range []struct {
		method, path, bearer, body string
		want                       int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/v1/jobs", "", "", 401},
		{"POST", "/v1/jobs", "tok", `{"rouds": 3}`, 400},
		{"GET", "/v1/nope", "tok", "", 404},
	} {
		var body io.Reader
		if c.body != "" {
			body = io.MultiReader(strings.NewReader(c.body)) // no length: chunked
		}
		if code, b := get(t, c.method, proxy+c.path, c.bearer, body); code != c.want {
			t.Fatalf("%s %s: %d %s, want %d", c.method, c.path, code, b, c.want)
		}
	}
	if want := []string{`[chunked] -1 {"rouds": 3}`}; !slices.Equal(chunked, want) {
		t.Errorf("the server got %q, want %q", chunked, want)
	}
	if code, b := get(t, "GET", proxy+"/v1/jobs/job-1", "tok", nil); code != 200 || !strings.Contains(b, `"two"`) {
		t.Errorf("the proxy changed the response: %d %s", code, b)
	}
	if len(ft.errs) != 0 {
		t.Fatalf("reported before the test ended: %q", ft.errs)
	}
	ft.end()
	if len(ft.errs) != 1 || !strings.Contains(ft.errs[0], "GET /v1/jobs/job-1 → 200") || !strings.Contains(ft.errs[0], "response of getJob") {
		t.Errorf("reported %q, want one violation by GET /v1/jobs/job-1", ft.errs)
	}
	if len(ft.logs) != 1 || !strings.Contains(ft.logs[0], "4 requests and their responses") || !strings.Contains(ft.logs[0], "(2 requests refused") {
		t.Errorf("logged %q", ft.logs)
	}

	// A server that is gone.
	ft = &fakeTB{T: t}
	backend.Close()
	proxy = Proxy(ft, backend.URL)
	if code, _ := get(t, "GET", proxy+"/healthz", "", nil); code != http.StatusBadGateway {
		t.Errorf("a proxy to nothing answered %d", code)
	}
	ft.end()
	if len(ft.errs) != 1 || !strings.Contains(ft.errs[0], "GET /healthz: the server could not be reached") {
		t.Errorf("reported %q, want the unreachable server", ft.errs)
	}
}
