package api

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	devicepkg "github.com/dpfl/dpfl/device"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/datatest"
	"github.com/dpfl/dpfl/internal/etcdtest"
	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

const haPrefix = "/api-ha/"

// haReplica is one replica of a test's cluster: its store, elector,
// manager and API server (at url, which it advertises).
type haReplica struct {
	db  *storage.DB
	el  *leader.Elector
	m   *job.Manager
	url string
}

// newHAReplica starts replica id over the etcd at endpoints, serving its
// API unless advertise is given (then it advertises that address and
// serves nothing).
func newHAReplica(t *testing.T, endpoints []string, blobs, id, advertise string) *haReplica {
	t.Helper()
	datatest.FashionMNIST(t)
	db, err := storage.OpenEtcd(context.Background(), storage.EtcdOptions{Endpoints: endpoints, Prefix: haPrefix, BlobDir: blobs, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el, err := leader.New(db.EtcdClient(), haPrefix+"leader/", id, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	url := advertise
	if url == "" {
		srv = httptest.NewUnstartedServer(nil)
		url = "http://" + srv.Listener.Addr().String()
	}
	m := job.NewManager(db, job.Options{DataDir: data.DefaultFashionMNISTDir, Workers: 2, Logger: slog.New(slog.DiscardHandler),
		Leadership: &job.Leadership{Elector: el, URL: url, Scan: 100 * time.Millisecond}})
	if srv != nil {
		tokens := &Tokens{}
		tokens.Add(HashToken("tok"), RoleAdmin)
		srv.Config.Handler = contractCheck(t, New(m, Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)}))
		srv.Start()
	}
	t.Cleanup(func() {
		if srv != nil {
			srv.Close()
		}
		m.Shutdown(context.Background())
		el.Close()
		db.Close()
	})
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	return &haReplica{db: db, el: el, m: m, url: url}
}

// waitUntil polls cond every 20 ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// haPair starts replica a (advertising advertiseA if given), submits
// spec to it, waits for it to lead the job, then starts replica b and
// waits for it to show the job's first round open for joining.
func haPair(t *testing.T, c *etcdtest.Cluster, advertiseA, spec string) (a, b *haReplica, id string) {
	t.Helper()
	blobs := t.TempDir()
	a = newHAReplica(t, c.Endpoints(), blobs, "a", advertiseA)
	st, err := a.m.Submit(mustSpec(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a to lead the job", func() bool {
		l, _, err := a.el.Leader(context.Background(), st.ID)
		return err == nil && l == "a"
	})
	b = newHAReplica(t, c.Endpoints(), blobs, "b", "")
	waitUntil(t, 30*time.Second, "the follower to show the round", func() bool {
		rs, err := b.m.DeviceRound(st.ID)
		return err == nil && rs.Stage == types.StageJoin
	})
	return a, b, st.ID
}

func mustSpec(t *testing.T, s string) types.Spec {
	t.Helper()
	spec, _, err := job.DecodeSpec([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// send makes one request to base+path with a device credential and,
// optionally, a round token and extra headers.
func send(t *testing.T, method, url, cred, token string, body io.Reader, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	if token != "" {
		req.Header.Set(types.ClientTokenHeader, token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A device that reaches a replica that does not lead its job joins and
// sends its messages through it: the replica forwards them to the leader
// (status, body, the round token and credential headers unchanged). The
// forwarding replica still refuses a bad credential and a body over the
// job's limit itself, and a request that was forwarded once is never
// forwarded again.
func TestFollowerForwardsToTheLeader(t *testing.T) {
	a, b, id := haPair(t, etcdtest.Private(t), "", devicesJob)
	en, err := a.m.Enroll(id)
	if err != nil {
		t.Fatal(err)
	}
	base := b.url + "/v1/jobs/" + id + "/participate"

	resp, body := send(t, "POST", base+"/join", en.Credential, "", nil)
	var info types.JoinInfo
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info.DeviceID != en.DeviceID || info.Token == "" || info.Round != 1 {
		t.Fatalf("join through the follower: %d %s", resp.StatusCode, body)
	}
	// The join reached the leader: its live round has the token.
	if cid, ok := a.m.DeviceClient(id, en.DeviceID, info.Token); !ok || cid != info.ClientID {
		t.Fatalf("the leader does not know the token: %d %v", cid, ok)
	}
	// The leader's refusals come back as they are: a second join (409),
	// a request out of stage (409).
	if resp, body := send(t, "POST", base+"/join", en.Credential, "", nil); resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "already joined") {
		t.Fatalf("second join through the follower: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(t, "GET", base+"/share_keys", en.Credential, info.Token, nil); resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "stage") {
		t.Fatalf("share_keys in the join stage: %d %s", resp.StatusCode, body)
	}
	// A message that is no JSON: the leader's 400, naming the client.
	if resp, body := send(t, "POST", base+"/advertise_keys", en.Credential, info.Token, strings.NewReader("{")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "client 1") {
		t.Fatalf("malformed message through the follower: %d %s", resp.StatusCode, body)
	}
	// The follower's own refusals: no credential of the job (401), a body
	// over the job's limit, sent chunked (413).
	if resp, body := send(t, "POST", base+"/join", strings.Repeat("ab", 32), "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown credential: %d %s", resp.StatusCode, body)
	}
	big := io.MultiReader(strings.NewReader(`{"x":"`), strings.NewReader(strings.Repeat("a", int(ParticipateBodyLimit("logreg")))), strings.NewReader(`"}`))
	if resp, body := send(t, "POST", base+"/advertise_keys", en.Credential, info.Token, io.NopCloser(big)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("body over the limit through the follower: %d %s", resp.StatusCode, body)
	}
	// Forwarded already: the follower does not lead, so it answers 503.
	resp, body = send(t, "POST", base+"/join", en.Credential, "", nil, ForwardedHeader, "x")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a forwarded request reaching a follower: %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	// The leader itself handles a forwarded request.
	en2, err := a.m.Enroll(id)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := send(t, "POST", a.url+"/v1/jobs/"+id+"/participate/join", en2.Credential, "", nil, ForwardedHeader, "b"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a forwarded join on the leader: %d %s", resp.StatusCode, body)
	}
}

// A follower whose job's leader cannot be reached answers the device's
// join 503 with Retry-After, and still answers its polls.
func TestFollowerWithAnUnreachableLeader(t *testing.T) {
	a, b, id := haPair(t, etcdtest.Private(t), "http://127.0.0.1:1", devicesJob)
	en, err := a.m.Enroll(id)
	if err != nil {
		t.Fatal(err)
	}
	base := b.url + "/v1/jobs/" + id + "/participate"
	resp, body := send(t, "POST", base+"/join", en.Credential, "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "could not be reached") {
		t.Fatalf("join with the leader unreachable: %d %s (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	resp, body = send(t, "GET", base, en.Credential, "", nil)
	var rs types.RoundStatus
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &rs) != nil || rs.Stage != types.StageJoin {
		t.Fatalf("poll: %d %s", resp.StatusCode, body)
	}
}

// Three real devices (package device, as 'dpfl-client participate' runs
// them) that talk only to a follower take part in a round of a job led by
// another replica. The leader loses its term mid-round, after the devices
// joined: the follower takes the job over and runs the round again as
// attempt 2. The devices give the lost attempt up (the new leader does
// not know their round tokens), go back to polling, join attempt 2 and
// complete it: the job completes, and each device saved its input of
// round 1 attempt 2.
func TestDevicesRejoinAfterFailover(t *testing.T) {
	c := etcdtest.Private(t)
	// A cohort of 4 with 3 devices: the join stage stays open for its
	// 3 seconds, while the test takes a's term away.
	a, b, id := haPair(t, c, "", `{"population":{"source":"devices","size":10},"sampling":{"scheme":"fixed","cohort_size":4},
		"secure_aggregation":true,"rounds":1,"dp":{"enabled":false},"secagg":{"min_clients":3,"join_timeout_seconds":3,"stage_timeout_seconds":30}}`)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const n = 3
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]strings.Builder, n)
	dirs := make([]string, n)
	for i := range n {
		en, err := a.m.Enroll(id)
		if err != nil {
			t.Fatal(err)
		}
		dirs[i] = t.TempDir()
		d := &devicepkg.Device{Server: devicepkg.HTTP(client.New(b.url, en.Credential), 10*time.Millisecond), JobID: id, Data: syntheticDevice(20, uint64(10+i)),
			Poll: 10 * time.Millisecond, SaveDir: dirs[i], Workers: 1, Out: &outs[i]}
		wg.Go(func() { errs[i] = d.Run(ctx) })
	}
	waitUntil(t, 30*time.Second, "the devices to join attempt 1", func() bool {
		rs, err := a.m.DeviceRound(id)
		return err == nil && rs.Attempt == 1 && rs.Joined == n
	})
	// a's term ends behind its back, as a lapsed lease ends it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, haPrefix+"leader/"+id+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != "a" {
		t.Fatalf("a's election key: %v %v", resp, err)
	}
	if _, err := cli.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	logs := func() string {
		var s strings.Builder
		for i := range outs {
			fmt.Fprintf(&s, "--- device %d (err %v)\n%s", i, errs[i], outs[i].String())
		}
		return s.String()
	}
	st, err := b.m.Get(id)
	if err != nil || st.State != types.StateCompleted || st.Round != 1 {
		t.Fatalf("job %s at round %d (%s), %v\n%s", st.State, st.Round, st.Message, err, logs())
	}
	if l, _, _ := b.el.Leader(ctx, id); l == "a" {
		t.Fatalf("a still leads the job\n%s", logs())
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("device %d ended with %v\n%s", i, errs[i], logs())
		}
		if !strings.Contains(outs[i].String(), "gave up") {
			t.Errorf("device %d did not give attempt 1 up\n%s", i, logs())
		}
		if _, err := os.Stat(filepath.Join(dirs[i], devicepkg.SavedInputName(1, 2))); err != nil {
			t.Errorf("device %d took no part in attempt 2: %v\n%s", i, err, logs())
		}
	}
	met, err := b.m.Metrics(id)
	if err != nil || len(met) != 1 || met[0].SecAgg == nil || met[0].SecAgg.Survivors != n {
		t.Fatalf("metrics %+v, %v", met, err)
	}
}

// The forwarding transport trusts the --peer-ca authorities for an https
// leader, and only those (or the system's roots).
func TestForwardTransportTrustsPeerCAs(t *testing.T) {
	leader := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer leader.Close()
	get := func(rt http.RoundTripper) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, leader.URL, nil)
		return rt.RoundTrip(req)
	}
	if _, err := get(newForwardTransport(nil)); err == nil {
		t.Fatal("a leader whose certificate no trusted authority signed was reached")
	}
	cas := x509.NewCertPool()
	cas.AddCert(leader.Certificate())
	resp, err := get(newForwardTransport(cas))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
