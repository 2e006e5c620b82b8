package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/storage"
)

// An error wrapping storage.ErrUnavailable (etcd unreachable, or a
// write's outcome unknown) is answered 503 with Retry-After and a message
// that says so, without the store's internal text; other 5xx stay
// "internal error".
func TestStoreUnavailableIs503(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(slog.New(slog.DiscardHandler))
	e.GET("/down", func(echo.Context) error {
		return fmt.Errorf("storage: job %q: etcd 127.0.0.1:2379 /dpfl/: not reachable: context deadline exceeded: %w", "job-1", storage.ErrUnavailable)
	})
	// Wrapping something else as well does not change it.
	e.GET("/down-conflict", func(echo.Context) error {
		return fmt.Errorf("%w: %w", storage.ErrConflict, storage.ErrUnavailable)
	})
	e.GET("/boom", func(echo.Context) error { return fmt.Errorf("boom") })
	for _, path := range []string{"/down", "/down-conflict"} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var body types.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "2" ||
			!strings.Contains(body.Error, "store is unavailable") || body.ErrorID == "" || strings.Contains(body.Error, "2379") {
			t.Fatalf("%s: %d Retry-After %q body %+v, want 503 with Retry-After 2", path, rec.Code, rec.Header().Get("Retry-After"), body)
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || rec.Header().Get("Retry-After") != "" || !strings.Contains(rec.Body.String(), "internal error") {
		t.Fatalf("/boom: %d %q", rec.Code, rec.Body.String())
	}
	if code, _ := errorResponse(fmt.Errorf("x: %w", storage.ErrUnavailable)); code != 503 {
		t.Fatalf("errorResponse: %d", code)
	}
}
