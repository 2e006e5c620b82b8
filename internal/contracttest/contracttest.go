// Package contracttest makes tests check every request and response they
// exchange with the dpfl API against its OpenAPI contract,
// api/openapi.json (api.OpenAPIDocument): Handler wraps an in-process
// handler (api.New), Proxy stands in front of a running dpfl-server. A
// mismatch fails the test when it ends, naming the request, the status
// and the reason; see check.Checker for what is checked.
//
// It is for tests only: only _test.go files import it, so that
// kin-openapi, which it uses, stays out of the binaries
// (go list -deps ./cmd/dpfl-server names no kin-openapi package).
// Package api's own tests cannot import it (it imports api) and use
// package check directly.
package contracttest

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/internal/contracttest/check"
)

var (
	loadOnce sync.Once
	contract *check.Contract
	loadErr  error
)

// Contract is the parsed api/openapi.json (the bytes the server embeds
// and serves), loaded once.
func Contract(tb testing.TB) *check.Contract {
	tb.Helper()
	loadOnce.Do(func() { contract, loadErr = check.Load(api.OpenAPIDocument()) })
	if loadErr != nil {
		tb.Fatalf("api/openapi.json: %v", loadErr)
	}
	return contract
}

// Handler wraps h, the API (api.New), so that every exchange it serves is
// validated against the contract; a mismatch fails tb's test when it ends.
func Handler(tb testing.TB, h http.Handler) http.Handler {
	tb.Helper()
	return Contract(tb).Wrap(tb, h, "in-process")
}

// Proxy starts a reverse proxy to target, the base URL of a running
// server ("http://127.0.0.1:8080"), that validates every request it
// forwards and every response it returns; it returns the proxy's base URL,
// for the test to use instead of target. A mismatch, or a request the
// server could not be reached for while its client waited, fails tb's
// test when it ends (after the proxy has closed).
//
// The proxy adds no X-Forwarded headers and keeps the request as sent, a
// chunked body chunked; it cannot stand in for TLS or for tests of the
// server's own connection handling.
func Proxy(tb testing.TB, target string) string {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		tb.Fatalf("contracttest.Proxy: target %q is not an http:// base URL (%v)", target, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set(check.ProxyErrorHeader, err.Error())
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(Contract(tb).Wrap(tb, rp, "through a proxy to "+target))
	tb.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })
	return srv.URL
}

// Summary is one line on what every check of this test binary validated:
// the exchanges, and the operations that answered with their statuses.
func Summary() string {
	t := check.ProcessTotals()
	ids := make([]string, 0, len(t.Seen))
	for id := range t.Seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var ops []string
	for _, id := range ids {
		codes := make([]int, 0, len(t.Seen[id]))
		for c := range t.Seen[id] {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		var cs []string
		for _, c := range codes {
			cs = append(cs, fmt.Sprintf("%d×%d", c, t.Seen[id][c]))
		}
		ops = append(ops, id+" "+strings.Join(cs, ","))
	}
	return fmt.Sprintf("contract: %d exchanges validated against api/openapi.json (%d requests refused by the contract and the server alike), %d operations: %s",
		t.Exchanges, t.Refused, len(ids), strings.Join(ops, "; "))
}
