package api

import (
	"bytes"
	"encoding/json"
	"github.com/dpfl/dpfl/internal/datatest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// devicesJob is a one-round devices job of cohort size 3.
const devicesJob = `{"population":{"source":"devices"},"sampling":{"scheme":"fixed","cohort_size":3},"secure_aggregation":true,"rounds":1}`

// testServer is the API over a fresh store, with admin token "tok" and
// auditor token "audit".
type testServer struct {
	t   *testing.T
	m   *job.Manager
	db  *storage.DB
	url string
	log *syncBuffer // the API's log
}

// syncBuffer is a log sink that the server's goroutines and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestServer(t *testing.T) *testServer { return newTestServerWith(t, Config{}) }

// newTestServerWith is newTestServer with cfg's device rate limit.
func newTestServerWith(t *testing.T, cfg Config) *testServer {
	t.Helper()
	datatest.FashionMNIST(t)
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Logger: slog.New(slog.DiscardHandler)})
	cfg.Tokens = &Tokens{}
	cfg.Tokens.Add(HashToken("tok"), RoleAdmin)
	cfg.Tokens.Add(HashToken("audit"), RoleAuditor)
	log := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	// Every request and response of the tests is checked against the
	// OpenAPI contract (openapi_test.go).
	srv := httptest.NewServer(contractCheck(t, New(m, cfg)))
	t.Cleanup(func() { srv.Close(); m.Shutdown(t.Context()); db.Close() })
	return &testServer{t: t, m: m, db: db, url: srv.URL, log: log}
}

// call sends one request with bearer (none if empty) and, if non-empty,
// the round token; it decodes a JSON body into out (if non-nil) and
// returns the status and the error body.
func (s *testServer) call(method, path, bearer, roundToken, body string, out any) (int, types.ErrorBody) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if roundToken != "" {
		req.Header.Set(types.ClientTokenHeader, roundToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e types.ErrorBody
	if resp.StatusCode/100 != 2 {
		json.Unmarshal(b, &e)
	} else if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, e
}

// openJob submits spec with the API token and waits for its first round
// to accept joins.
func (s *testServer) openJob(spec string) string {
	s.t.Helper()
	var st types.Status
	if code, e := s.call("POST", "/v1/jobs", "tok", "", spec, &st); code != http.StatusCreated {
		s.t.Fatalf("submit: %d %s", code, e.Error)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if rs, _ := s.m.DeviceRound(st.ID); rs.Stage == types.StageJoin {
			return st.ID
		}
		if time.Now().After(deadline) {
			s.t.Fatal("no round opened")
		}
	}
}

// enroll enrolls a device for job id with the API token.
func (s *testServer) enroll(id string) types.Enrollment {
	s.t.Helper()
	var en types.Enrollment
	if code, e := s.call("POST", "/v1/jobs/"+id+"/devices", "tok", "", "", &en); code != http.StatusCreated {
		s.t.Fatalf("enroll: %d %s", code, e.Error)
	}
	return en
}

// Over HTTP, a device's malformed, forged, replayed or out-of-stage
// message gets a 4xx whose error names the client (or the reason it
// cannot), and the round goes on: the honest advertisement still counts.
func TestParticipateRefusesBadMessages(t *testing.T) {
	s := newTestServer(t)
	id := s.openJob(devicesJob)
	base := "/v1/jobs/" + id + "/participate"
	cred := s.enroll(id).Credential
	var info types.JoinInfo
	if code, e := s.call("POST", base+"/join", cred, "", "", &info); code != http.StatusOK {
		t.Fatalf("join: %d %s", code, e.Error)
	}
	if info.ClientID != 1 || info.Token == "" {
		t.Fatalf("join: %+v", info)
	}

	for _, c := range []struct {
		what, method, path, token, body string
		code                            int
		says                            string
	}{
		{"malformed JSON", "POST", "/advertise_keys", info.Token, `{"from": 1, "enc_key": `, 400, "client 1"},
		{"unknown field", "POST", "/advertise_keys", info.Token, `{"from": 1, "sneaky": true}`, 400, "client 1"},
		{"wrong key length", "POST", "/advertise_keys", info.Token, `{"from": 1, "enc_key": "AAAA", "mask_key": "AAAA"}`, 400, "client 1"},
		{"forged sender", "POST", "/advertise_keys", info.Token, `{"from": 2, "enc_key": "AAAA", "mask_key": "AAAA"}`, 400, "client 1"},
		{"no round token", "POST", "/advertise_keys", "", `{"from": 1}`, 409, "token"},
		{"out of stage", "GET", "/share_keys", info.Token, "", 409, "stage"},
		{"out of stage post", "POST", "/masked_input", info.Token, `{"from": 1, "masked": [1, 2]}`, 409, "stage"},
		{"out of stage request", "GET", "/masked_input", info.Token, "", 409, "stage"},
		{"out of stage unmask", "POST", "/unmask", info.Token, `{"from": 1}`, 409, "stage"},
		// The previous release's routes still reach the same handlers.
		{"old route, forged sender", "POST", "/advertise", info.Token, `{"from": 2, "enc_key": "AAAA", "mask_key": "AAAA"}`, 400, "client 1"},
		{"old route, out of stage", "GET", "/keys", info.Token, "", 409, "share_keys"},
		{"old route, shares out of stage", "POST", "/shares", info.Token, `{"from": 1}`, 409, "share_keys"},
		{"old route, masked-input request out of stage", "GET", "/shares", info.Token, "", 409, "masked_input"},
		{"old route, masked input out of stage", "POST", "/masked-input", info.Token, `{"from": 1, "masked": [1, 2]}`, 409, "masked_input"},
	} {
		code, e := s.call(c.method, base+c.path, cred, c.token, c.body, nil)
		if code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q, want %d mentioning %q", c.what, code, e.Error, c.code, c.says)
		}
	}
	if st, _ := s.m.DeviceRound(id); st.Joined != 0 || st.Stage != types.StageJoin {
		t.Fatalf("refused messages changed the round: %+v", st)
	}
}

// Devices carry identities: the API token opens no participate route and
// a device credential no administrative one; a credential opens only its
// own job; a device joins an attempt once; a round token serves only the
// device it was issued to; enrolment is for devices jobs only.
func TestDeviceAuthentication(t *testing.T) {
	s := newTestServer(t)
	a := s.openJob(devicesJob)
	b := s.openJob(devicesJob)
	pa, pb := "/v1/jobs/"+a+"/participate", "/v1/jobs/"+b+"/participate"
	d1, d2 := s.enroll(a), s.enroll(a)
	if len(d1.Credential) != 64 || d1.DeviceID == "" || d1.DeviceID == d2.DeviceID || d1.JobID != a {
		t.Fatalf("enrolments %+v, %+v", d1, d2)
	}

	// Listing shows IDs and times, never credentials.
	req, _ := http.NewRequest("GET", s.url+"/v1/jobs/"+a+"/devices", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Devices []types.DeviceInfo `json:"devices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &list) != nil || len(list.Devices) != 2 ||
		list.Devices[0].DeviceID != d1.DeviceID || list.Devices[1].DeviceID != d2.DeviceID || list.Devices[0].EnrolledAt.IsZero() {
		t.Fatalf("device list: %d %s", resp.StatusCode, raw)
	}
	if strings.Contains(string(raw), d1.Credential) || strings.Contains(string(raw), "credential") {
		t.Fatalf("device list shows credentials: %s", raw)
	}

	unknown := strings.Repeat("ab", 32)
	for _, c := range []struct {
		what, method, path, bearer string
		code                       int
		says                       string
	}{
		{"the API token on join", "POST", pa + "/join", "tok", 401, "credential"},
		{"the API token on the round status", "GET", pa, "tok", 401, "credential"},
		{"no credential on join", "POST", pa + "/join", "", 401, "credential"},
		{"an unknown credential", "POST", pa + "/join", unknown, 401, "no device enrolled"},
		{"job A's device on job B", "POST", pb + "/join", d1.Credential, 401, "no device enrolled"},
		{"job A's device on job B's status", "GET", pb, d1.Credential, 401, "no device enrolled"},
		{"a device on an unknown job", "POST", "/v1/jobs/job-nope/participate/join", d1.Credential, 401, ""},
		{"a device credential listing jobs", "GET", "/v1/jobs", d1.Credential, 401, "token"},
		{"a device credential reading a model", "GET", "/v1/jobs/" + a + "/model", d1.Credential, 401, "token"},
		{"a device credential cancelling", "POST", "/v1/jobs/" + a + "/cancel", d1.Credential, 401, "token"},
		{"a device credential submitting", "POST", "/v1/jobs", d1.Credential, 401, "token"},
		{"a device enrolling another", "POST", "/v1/jobs/" + a + "/devices", d1.Credential, 401, "token"},
		{"a device credential listing devices", "GET", "/v1/jobs/" + a + "/devices", d1.Credential, 401, "token"},
		{"enrolling for an unknown job", "POST", "/v1/jobs/job-nope/devices", "tok", 404, "not found"},
	} {
		code, e := s.call(c.method, c.path, c.bearer, "", "", nil)
		if code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q, want %d mentioning %q", c.what, code, e.Error, c.code, c.says)
		}
	}

	var st types.RoundStatus
	if code, e := s.call("GET", pa, d1.Credential, "", "", &st); code != 200 || st.Stage != types.StageJoin {
		t.Fatalf("a device polls its job: %d %s %+v", code, e.Error, st)
	}
	var info types.JoinInfo
	if code, e := s.call("POST", pa+"/join", d1.Credential, "", "", &info); code != 200 || info.DeviceID != d1.DeviceID {
		t.Fatalf("join: %d %s %+v", code, e.Error, info)
	}
	if code, e := s.call("POST", pa+"/join", d1.Credential, "", "", nil); code != 409 || !strings.Contains(e.Error, "already joined") {
		t.Fatalf("second join in the same attempt: %d %q, want 409 saying already joined", code, e.Error)
	}
	if code, e := s.call("POST", pa+"/advertise_keys", d2.Credential, info.Token, `{"from": 1}`, nil); code != 403 || !strings.Contains(e.Error, "another device") {
		t.Fatalf("device 2 with device 1's round token: %d %q, want 403", code, e.Error)
	}
	if code, e := s.call("POST", pa+"/advertise_keys", d2.Credential, info.Token, `{"from": 1, `, nil); code != 400 || strings.Contains(e.Error, "client 1") {
		t.Fatalf("device 2's malformed message with device 1's round token: %d %q, want 400 not naming client 1", code, e.Error)
	}
	var info2 types.JoinInfo
	if code, e := s.call("POST", pa+"/join", d2.Credential, "", "", &info2); code != 200 || info2.ClientID != 2 {
		t.Fatalf("device 2 joins: %d %s %+v", code, e.Error, info2)
	}

	// Enrolment: devices jobs only, while they run.
	var sim types.Status
	if code, e := s.call("POST", "/v1/jobs", "tok", "", `{"rounds": 1}`, &sim); code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, e.Error)
	}
	if code, e := s.call("POST", "/v1/jobs/"+sim.ID+"/devices", "tok", "", "", nil); code != 409 || !strings.Contains(e.Error, "simulates") {
		t.Fatalf("enrolling for a simulated job: %d %q, want 409", code, e.Error)
	}
	if code, _ := s.call("POST", "/v1/jobs/"+b+"/cancel", "tok", "", "", nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if code, e := s.call("POST", "/v1/jobs/"+b+"/devices", "tok", "", "", nil); code != 409 || !strings.Contains(e.Error, "cancelled") {
		t.Fatalf("enrolling for a cancelled job: %d %q, want 409", code, e.Error)
	}
}
