// Package check validates HTTP exchanges against an OpenAPI 3 document
// with github.com/getkin/kin-openapi's openapi3filter and its gorillamux
// router. It is the engine of package contracttest; it imports nothing of
// dpfl, so that package api's own tests, which cannot import contracttest
// (contracttest imports api), use it with the embedded document directly.
//
// It is for tests only: nothing but _test.go files may import it, so that
// kin-openapi stays out of the binaries.
package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Contract is a parsed, validated OpenAPI document and its router.
type Contract struct {
	doc    *openapi3.T
	router routers.Router
}

var registerDecoders sync.Once

// Load parses doc, validates it as an OpenAPI 3 document and builds its
// router.
func Load(doc []byte) (*Contract, error) {
	registerDecoders.Do(func() {
		// Text bodies of the dashboard and of /metrics are strings to
		// the contract (kin-openapi decodes only text/plain as one).
		for _, mt := range []string{"text/html", "application/openmetrics-text"} {
			openapi3filter.RegisterBodyDecoder(mt, openapi3filter.PlainBodyDecoder)
		}
	})
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("loading the OpenAPI document: %w", err)
	}
	if err := d.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("not a valid OpenAPI 3 document: %w", err)
	}
	r, err := gorillamux.NewRouter(d)
	if err != nil {
		return nil, fmt.Errorf("routing the OpenAPI document: %w", err)
	}
	return &Contract{doc: d, router: r}, nil
}

// Doc is the parsed document (not to be changed).
func (c *Contract) Doc() *openapi3.T { return c.doc }

// Checker is an http.Handler that serves through next and validates each
// exchange against the contract:
//
//   - a request the contract routes is validated (security, parameters,
//     body); if the contract refuses it, the server must refuse it too,
//     with a 4xx. (A server stricter than the contract is fine: the
//     contract cannot state every rule, e.g. ranges that depend on other
//     fields.)
//   - the response is validated against the operation: its status must be
//     documented (IncludeResponseStatus), and its headers and body must
//     match, error bodies included.
//   - a request the contract does not route (unknown path or method) must
//     be refused with a 4xx and an ErrorBody: a route the server answers
//     with success must be in the contract.
//
// Each mismatch is recorded with the request, the status and the reason,
// and reported with tb.Errorf when tb's test ends (its Cleanup), so that a
// request served after the test function returned, or on another
// goroutine, still fails the test. The response is passed on unchanged:
// the test still sees what the server said.
type Checker struct {
	next  http.Handler
	c     *Contract
	tb    testing.TB
	label string // what next is, for the report

	mu sync.Mutex
	// exchanges counts the validated request/response pairs, refused
	// those whose request the contract refuses (and the server refused
	// too), abandoned the requests whose client went away before a
	// proxied server answered; seen maps each operation ID to the
	// statuses it answered.
	exchanges, refused, abandoned int
	seen                          map[string]map[int]int
	violations                    []string
}

// Wrap wraps next, the API's handler, in a Checker that reports to tb
// when tb's test ends, with a line giving its counts (label says what
// next is).
func (c *Contract) Wrap(tb testing.TB, next http.Handler, label string) *Checker {
	tb.Helper()
	cc := &Checker{next: next, c: c, tb: tb, label: label, seen: map[string]map[int]int{}}
	tb.Cleanup(cc.report)
	return cc
}

// report logs the counts and fails the test with each mismatch.
func (cc *Checker) report() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	extra := ""
	if cc.abandoned > 0 {
		extra = fmt.Sprintf("; %d requests abandoned by their client before the server answered, not validated", cc.abandoned)
	}
	cc.tb.Logf("contract: %d requests and their responses (%s) validated against api/openapi.json (%d requests refused by the contract and the server alike)%s",
		cc.exchanges, cc.label, cc.refused, extra)
	for _, v := range cc.violations {
		cc.tb.Errorf("contract violation: %s", v)
	}
}

// ProxyErrorHeader marks a response that a reverse proxy in front of the
// server made itself because the server could not be reached; its value
// is the error. Checker takes it off the response and does not validate
// the exchange against the contract: it is no answer of the server.
const ProxyErrorHeader = "X-Contracttest-Proxy-Error"

// ServeHTTP serves req through next, recording the response so that it
// can be validated before it is sent on unchanged.
func (cc *Checker) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// The body is read once, here, and replayed to both the server and the
	// validator; ContentLength stays as sent, so the server's size checks
	// see the same request (a chunked request stays chunked through a
	// proxy).
	body, err := io.ReadAll(req.Body)
	if err != nil {
		if req.Context().Err() == nil {
			cc.violation("%s %s: reading the request body: %v", req.Method, req.URL, err)
		}
		http.Error(w, "contract checker: unreadable body", http.StatusBadRequest)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	cc.next.ServeHTTP(rec, req)
	if perr := rec.Header().Get(ProxyErrorHeader); perr != "" {
		rec.Header().Del(ProxyErrorHeader)
		if req.Context().Err() != nil {
			cc.mu.Lock()
			cc.abandoned++
			cc.mu.Unlock()
		} else {
			cc.violation("%s %s: the server could not be reached: %s", req.Method, req.URL, perr)
		}
	} else if err := cc.check(req, body, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		cc.violation("%s %s → %d: %v\nrequest body: %.300s\nresponse body: %.600s", req.Method, req.URL, rec.Code, err, body, rec.Body.Bytes())
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (cc *Checker) violation(format string, args ...any) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.violations = append(cc.violations, fmt.Sprintf(format, args...))
}

// hex64 is the bearerFormat of the deviceCredential scheme.
var hex64 = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// authenticate checks what the contract's security schemes state: a
// bearer credential (any, for an API token; 64 hex digits, for a device).
// Whether the server accepts it is the server's business (401).
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, cred, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return errors.New("no bearer credential")
	}
	if in.SecurityScheme.BearerFormat != "" && in.SecuritySchemeName == "deviceCredential" && !hex64.MatchString(cred) {
		return fmt.Errorf("not a device credential (%s)", in.SecurityScheme.BearerFormat)
	}
	return nil
}

// checkOptions make kin-openapi as strict as the contract: every status
// must be documented, a body on a route that takes none is refused, and
// all mismatches of an exchange are reported at once.
var checkOptions = &openapi3filter.Options{
	IncludeResponseStatus:             true, // an undocumented status is a mismatch
	MultiError:                        true,
	RejectWhenRequestBodyNotSpecified: true,
	AuthenticationFunc:                authenticate,
}

// check validates one exchange (see Checker).
func (cc *Checker) check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	ctx := context.Background()
	vreq := req.Clone(ctx)
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	if len(reqBody) > 0 && vreq.Header.Get("Content-Type") == "" {
		// The server reads every body as JSON whatever its Content-Type
		// (the document says so); the tests send none.
		vreq.Header.Set("Content-Type", "application/json")
	}
	route, params, err := cc.c.router.FindRoute(vreq)
	if err != nil {
		if status < 400 || status >= 500 {
			return fmt.Errorf("the contract has no such route (%v), but the server answered %d", err, status)
		}
		if err := cc.errorBody(header, respBody); err != nil {
			return err
		}
		cc.count("", status, false)
		return nil
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: checkOptions}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr != nil && (status < 400 || status >= 500) {
		return fmt.Errorf("the contract refuses the request, but the server answered %d: %v", status, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: checkOptions}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("response of %s: %v", route.Operation.OperationID, err)
	}
	cc.count(route.Operation.OperationID, status, reqErr != nil)
	return nil
}

// count records one validated exchange of operation id ("" outside every
// route), here and in the process's totals.
func (cc *Checker) count(id string, status int, refused bool) {
	cc.mu.Lock()
	cc.exchanges++
	if refused {
		cc.refused++
	}
	if id != "" {
		if cc.seen[id] == nil {
			cc.seen[id] = map[int]int{}
		}
		cc.seen[id][status]++
	}
	cc.mu.Unlock()
	totals.mu.Lock()
	defer totals.mu.Unlock()
	totals.Exchanges++
	if refused {
		totals.Refused++
	}
	if id != "" {
		if totals.Seen == nil {
			totals.Seen = map[string]map[int]int{}
		}
		if totals.Seen[id] == nil {
			totals.Seen[id] = map[int]int{}
		}
		totals.Seen[id][status]++
	}
}

// errorBody checks a response outside every route: a JSON ErrorBody.
func (cc *Checker) errorBody(header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("error response of Content-Type %q, not application/json", ct)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("error response is not JSON: %v", err)
	}
	s := cc.c.doc.Components.Schemas["ErrorBody"]
	if s == nil {
		return errors.New("the contract has no ErrorBody schema")
	}
	if err := s.Value.VisitJSON(v, openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("error response is not an ErrorBody: %v", err)
	}
	return nil
}

// Violations are the mismatches recorded so far, each with its request,
// status and reason.
func (cc *Checker) Violations() []string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return slices.Clone(cc.violations)
}

// Counts are the exchanges validated so far, and how many of them were
// requests that the contract and the server both refused.
func (cc *Checker) Counts() (exchanges, refused int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.exchanges, cc.refused
}

// Statuses is which statuses each operation answered, for a report.
func (cc *Checker) Statuses() map[string]map[int]int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cloneSeen(cc.seen)
}

func cloneSeen(seen map[string]map[int]int) map[string]map[int]int {
	out := map[string]map[int]int{}
	for id, m := range seen {
		out[id] = maps.Clone(m)
	}
	return out
}

// Totals are the counts of every Checker of this process.
type Totals struct {
	Exchanges, Refused int
	// Seen maps each operation ID to the statuses it answered.
	Seen map[string]map[int]int
}

var totals struct {
	mu sync.Mutex
	Totals
}

// ProcessTotals is what every Checker of this test binary validated so
// far.
func ProcessTotals() Totals {
	totals.mu.Lock()
	defer totals.mu.Unlock()
	return Totals{Exchanges: totals.Exchanges, Refused: totals.Refused, Seen: cloneSeen(totals.Seen)}
}
