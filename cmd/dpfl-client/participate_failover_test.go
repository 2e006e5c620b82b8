package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
)

// failoverServer fakes a devices job whose leader fails while the device
// is in round 1 attempt 1: the next leader does not know the device's
// round token (409, as a dpfl-server says for an unknown token) and runs
// the round again as attempt 2. Its first poll answers 503, as a replica
// between leaders may.
type failoverServer struct {
	t       *testing.T
	mu      sync.Mutex
	polls   int
	joins   []int // the attempt of each join
	refused bool  // the attempt-1 token was refused
	log     []string
}

func (f *failoverServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+strings.Repeat("c", 64) {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	f.log = append(f.log, r.Method+" "+r.URL.Path+" "+r.Header.Get(types.ClientTokenHeader))
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	const base = "/v1/jobs/job-f/participate"
	switch {
	case r.Method == "GET" && r.URL.Path == base:
		f.polls++
		st := types.RoundStatus{JobID: "job-f", State: types.StateRunning, Round: 1, Attempt: 1, Stage: types.StageJoin, CohortSize: 3}
		switch {
		case f.polls == 1:
			w.Header().Set("Retry-After", "1")
			reply(http.StatusServiceUnavailable, types.ErrorBody{Error: "no replica leads job job-f right now; retry shortly"})
			return
		case len(f.joins) == 2:
			st = types.RoundStatus{JobID: "job-f", State: types.StateCompleted, Stage: types.StageWaiting, CohortSize: 3}
		case f.refused:
			st.Attempt = 2
		}
		reply(http.StatusOK, st)
	case r.Method == "POST" && r.URL.Path == base+"/join":
		attempt := 1
		if f.refused {
			attempt = 2
		}
		f.joins = append(f.joins, attempt)
		reply(http.StatusOK, types.JoinInfo{JobID: "job-f", DeviceID: "dev-1", Round: 1, Attempt: attempt, ClientID: 1,
			Token: map[int]string{1: "old-token", 2: "new-token"}[attempt], Session: []byte("session|job-f|1|" + string(rune('0'+attempt)))})
	case r.URL.Path == base+"/advertise_keys" && r.Header.Get(types.ClientTokenHeader) == "old-token":
		// The new leader: the old attempt's token is unknown.
		f.refused = true
		reply(http.StatusConflict, types.ErrorBody{Error: "unknown client token for round 1 attempt 2 of job job-f (join this round first)"})
	default:
		f.t.Errorf("unexpected request %s %s (token %q)", r.Method, r.URL.Path, r.Header.Get(types.ClientTokenHeader))
		reply(http.StatusNotFound, types.ErrorBody{Error: "not found"})
	}
}

// writeIDX writes n blank 28×28 images and their labels in dir.
func writeIDX(t *testing.T, dir string, n int) {
	t.Helper()
	var img, lab bytes.Buffer
	binary.Write(&img, binary.BigEndian, []uint32{0x803, uint32(n), 28, 28})
	img.Write(make([]byte, n*28*28))
	binary.Write(&lab, binary.BigEndian, []uint32{0x801, uint32(n)})
	for i := range n {
		lab.WriteByte(byte(i % 10))
	}
	for name, b := range map[string][]byte{"train-images-idx3-ubyte": img.Bytes(), "train-labels-idx1-ubyte": lab.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// After a failover the new leader does not know the device's round token:
// 'dpfl-client participate' takes the 409 as the round gone, goes back
// to polling (through a 503 while the job is between leaders), joins the
// round's new attempt, and ends when the job ends, without an error.
func TestParticipateRejoinsAfterFailover(t *testing.T) {
	f := &failoverServer{t: t}
	srv := httptest.NewServer(f)
	defer srv.Close()
	dir := t.TempDir()
	writeIDX(t, dir, 20)
	t.Setenv("DPFL_TOKEN", "")
	t.Setenv("DPFL_DEVICE_CREDENTIAL", strings.Repeat("c", 64))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"participate", "job-f", "--server", srv.URL, "--data-dir", dir, "--poll", "10ms", "--workers", "1"}, &out)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		t.Fatalf("participate: %v\n%s\nrequests:\n%s", err, out.String(), strings.Join(f.log, "\n"))
	}
	if len(f.joins) != 2 || f.joins[0] != 1 || f.joins[1] != 2 || !f.refused {
		t.Fatalf("joins of attempts %v (old token refused: %v), want 1 then 2\n%s", f.joins, f.refused, out.String())
	}
	if !strings.Contains(out.String(), "round 1: gave up") || !strings.Contains(out.String(), "is completed") {
		t.Fatalf("output:\n%s", out.String())
	}
}
