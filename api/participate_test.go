package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/job"
	"github.com/dpfl/dpfl/storage"
)

// Over HTTP, a device's malformed, forged, replayed or out-of-stage
// message gets a 4xx whose error names the client (or the reason it
// cannot), and the round goes on: the honest advertisement still counts.
func TestParticipateRefusesBadMessages(t *testing.T) {
	if _, err := os.Stat(filepath.Join(data.DefaultFashionMNISTDir, "train-images-idx3-ubyte.gz")); err != nil {
		t.Skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "dpfl.db"))
	if err != nil {
		t.Fatal(err)
	}
	m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Logger: slog.New(slog.DiscardHandler)})
	defer func() { m.Shutdown(t.Context()); db.Close() }()
	srv := httptest.NewServer(New(m, "tok", nil))
	defer srv.Close()

	call := func(method, path, clientToken, body string) (int, ErrorBody) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		if clientToken != "" {
			req.Header.Set(job.ClientTokenHeader, clientToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	code, _ := call("POST", "/v1/jobs", "", `{"population":{"source":"devices"},"sampling":{"scheme":"fixed","cohort_size":3},"secure_aggregation":true,"rounds":1}`)
	if code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	jobs, _ := m.List()
	id := jobs[0].ID
	base := "/v1/jobs/" + id + "/participate"
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, _ := m.DeviceRound(id); st.Stage == job.StageJoin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no round opened")
		}
	}
	req, _ := http.NewRequest("POST", srv.URL+base+"/join", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var info job.JoinInfo
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.ClientID != 1 || info.Token == "" {
		t.Fatalf("join: %+v", info)
	}

	for _, c := range []struct {
		what, method, path, token, body string
		code                            int
		says                            string
	}{
		{"malformed JSON", "POST", "/advertise", info.Token, `{"from": 1, "enc_key": `, 400, "client 1"},
		{"unknown field", "POST", "/advertise", info.Token, `{"from": 1, "sneaky": true}`, 400, "client 1"},
		{"wrong key length", "POST", "/advertise", info.Token, `{"from": 1, "enc_key": "AAAA", "mask_key": "AAAA"}`, 400, "client 1"},
		{"forged sender", "POST", "/advertise", info.Token, `{"from": 2, "enc_key": "AAAA", "mask_key": "AAAA"}`, 400, "client 1"},
		{"no credential", "POST", "/advertise", "", `{"from": 1}`, 409, "token"},
		{"out of stage", "GET", "/keys", info.Token, "", 409, "stage"},
		{"out of stage post", "POST", "/masked-input", info.Token, `{"from": 1, "masked": [1, 2]}`, 409, "stage"},
	} {
		code, e := call(c.method, base+c.path, c.token, c.body)
		if code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q, want %d mentioning %q", c.what, code, e.Error, c.code, c.says)
		}
	}
	if st, _ := m.DeviceRound(id); st.Joined != 0 || st.Stage != job.StageJoin {
		t.Fatalf("refused messages changed the round: %+v", st)
	}
	unauth, _ := http.Post(srv.URL+base+"/join", "application/json", bytes.NewReader(nil))
	if unauth.StatusCode != 401 {
		t.Fatalf("join without the API token: %d", unauth.StatusCode)
	}
}
