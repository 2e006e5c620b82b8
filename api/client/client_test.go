package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
)

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{409, types.ErrorBody{Error: "job j is already completed"}}, "server said 409 Conflict: job j is already completed"},
		// An older server's doubled prefix is said once.
		{Error{409, types.ErrorBody{Error: "conflict: job j is already completed"}}, "server said 409 Conflict: job j is already completed"},
		{Error{401, types.ErrorBody{Error: "unauthorized: no device"}}, "server said 401 Unauthorized: no device"},
		{Error{502, types.ErrorBody{}}, "server said 502 Bad Gateway"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

// jobServer answers GET /v1/jobs/j with the status that next returns.
func jobServer(t *testing.T, next func() (int, any)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := next()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func running(round int) map[string]any {
	return map[string]any{"id": "j", "state": "running", "round": round, "spec": map[string]any{"rounds": 10}}
}

// A job that stays running at one round ends the watch with a
// *StalledError instead of a wait without end.
func TestWatchGivesUpOnAStalledJob(t *testing.T) {
	var polls atomic.Int32
	url := jobServer(t, func() (int, any) { polls.Add(1); return 200, running(3) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard only: the watch must end on its own
	defer cancel()
	_, err := New(url, "tok").Watch(ctx, "j", WatchOptions{Interval: 5 * time.Millisecond, Stall: 50 * time.Millisecond})
	var se *StalledError
	if !errors.As(err, &se) || se.Job.Round != 3 || !strings.Contains(err.Error(), "no progress") || polls.Load() < 2 {
		t.Fatalf("got %v after %d polls, want a *StalledError", err, polls.Load())
	}
}

// Progress keeps the watch going; a terminal state ends it.
func TestWatchFollowsProgress(t *testing.T) {
	var round atomic.Int32
	url := jobServer(t, func() (int, any) {
		r := int(round.Add(1))
		if r == 10 {
			return 200, map[string]any{"id": "j", "state": "completed", "round": 10}
		}
		return 200, running(r)
	})
	// Every poll shows a new round, so even a stall bound of one poll
	// interval is never reached.
	st, err := New(url, "tok").Watch(context.Background(), "j", WatchOptions{Interval: time.Millisecond, Stall: time.Hour})
	if err != nil || st.State != "completed" {
		t.Fatalf("got %+v, %v", st, err)
	}
}

// A server error ends the watch at once.
func TestWatchStopsOnServerError(t *testing.T) {
	url := jobServer(t, func() (int, any) {
		return 500, types.ErrorBody{Error: "internal error (id 3f9c); see the server log", ErrorID: "3f9c"}
	})
	_, err := New(url, "tok").Watch(context.Background(), "j", WatchOptions{Interval: time.Millisecond})
	if !IsStatus(err, 500) || !strings.Contains(err.Error(), "id 3f9c") {
		t.Fatalf("got %v, want the 500", err)
	}
}

// A rate limit's 429 with Retry-After is waited out and the request sent
// again; a 429 without it (the server at capacity) is the answer.
func TestRateLimitRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.Method == "GET" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			json.NewEncoder(w).Encode(types.ErrorBody{Error: "rate limit"})
		case r.Method == "GET":
			json.NewEncoder(w).Encode(map[string]any{"jobs": []any{}})
		default:
			w.WriteHeader(429)
			json.NewEncoder(w).Encode(types.ErrorBody{Error: "server at capacity"})
		}
	}))
	defer srv.Close()
	cl := New(srv.URL, "tok")
	if _, err := cl.List(context.Background()); err != nil || calls.Load() != 2 {
		t.Fatalf("after a rate limit: %v (%d calls), want success on the second", err, calls.Load())
	}
	if _, err := cl.Submit(context.Background(), []byte(`{}`)); !IsStatus(err, 429) || calls.Load() != 3 {
		t.Fatalf("at capacity: %v (%d calls), want the 429 at once", err, calls.Load())
	}
}
