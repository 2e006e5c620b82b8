package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/etcdtest"
	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/storage"
)

// The participate-poll load test (issue 18, "Check-ins"): a replica that
// does not lead a devices job answers GET /v1/jobs/{id}/participate to
// 64 concurrent clients, each cycling through enrolled devices'
// credentials, for a few seconds, and makes no etcd request while it does:
// the status comes from the record the leader published and the watch
// delivered, the credentials from memory. The test asserts that property
// (counted on etcd's own metrics, GET <client URL>/metrics) and logs the
// figures, polls per second and latency percentiles, which depend on the
// machine and are not asserted. For the figures:
//
//	DPFL_REQUIRE_ETCD=1 go test -run PollLoad -v ./cmd/dpfl-server
//
// DPFL_POLL_LOAD_SECONDS (default 5), DPFL_POLL_LOAD_CLIENTS (64) and
// DPFL_POLL_LOAD_DEVICES (256) change the run. The follower's per-device
// rate limit is raised to 10,000 polls a second (api.Config.DeviceRate;
// the limiter still runs on every poll): a real device polls 5 times a
// second, and the run measures the server, not the limiter's refusals.

// loadReplica is one in-process replica over the shared etcd store.
type loadReplica struct {
	m   *job.Manager
	url string
}

func newLoadReplica(t *testing.T, endpoints []string, blobs, id string, cfg api.Config) *loadReplica {
	t.Helper()
	const prefix = "/poll-load/"
	db, err := storage.OpenEtcd(context.Background(), storage.EtcdOptions{Endpoints: endpoints, Prefix: prefix, BlobDir: blobs})
	if err != nil {
		t.Fatal(err)
	}
	el, err := leader.New(db.EtcdClient(), prefix+"leader/", id, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String()
	train, test := loadData(600, 1), loadData(100, 2)
	m := job.NewManager(db, job.Options{Workers: 2, Logger: slog.New(slog.DiscardHandler),
		FashionMNIST: func() (*data.Dataset, *data.Dataset, error) { return train, test, nil },
		// Scan once at start only: no background listing of the jobs
		// during the measurement.
		Leadership: &job.Leadership{Elector: el, URL: url, Scan: time.Hour}})
	tokens := &api.Tokens{}
	tokens.Add(api.HashToken("tok"), api.RoleAdmin)
	cfg.Tokens, cfg.Logger = tokens, slog.New(slog.DiscardHandler)
	srv.Config.Handler = api.New(m, cfg)
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		m.Shutdown(context.Background())
		el.Close()
		db.Close()
	})
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	return &loadReplica{m: m, url: url}
}

// loadData is n random examples in Fashion-MNIST's shape.
func loadData(n int, seed uint64) *data.Dataset {
	rng := rand.New(rand.NewPCG(seed, 3))
	ds := &data.Dataset{Dim: 784, Classes: 10, X: make([]float32, n*784), Y: make([]uint8, n)}
	for i := range ds.X {
		ds.X[i] = rng.Float32()
	}
	for i := range n {
		ds.Y[i] = uint8(i % 10)
	}
	return ds
}

// etcdCounts reads etcd's request counters from its metrics endpoint:
// the unary calls (Range, Txn, Put, DeleteRange, lease grants and
// revocations, …) and the messages received on Watch streams (each
// creates or cancels watches), which are the requests a poll could make;
// and, apart, the lease keep-alives that the replicas' sessions send on a
// timer.
func etcdCounts(t *testing.T, endpoint string) (requests, keepAlives float64) {
	t.Helper()
	resp, err := http.Get(endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "grpc_server_started_total" && strings.Contains(labels, `grpc_type="unary"`):
			requests += v
		case name == "grpc_server_msg_received_total" && strings.Contains(labels, `grpc_method="Watch"`):
			requests += v
		case name == "grpc_server_msg_received_total" && strings.Contains(labels, `grpc_method="LeaseKeepAlive"`):
			keepAlives += v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return requests, keepAlives
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func TestPollLoadOnAFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test of several seconds")
	}
	seconds := envInt("DPFL_POLL_LOAD_SECONDS", 5)
	clients := envInt("DPFL_POLL_LOAD_CLIENTS", 64)
	devices := envInt("DPFL_POLL_LOAD_DEVICES", 256)
	c := etcdtest.Private(t)
	endpoint := c.Endpoints()[0]
	blobs := t.TempDir()
	a := newLoadReplica(t, c.Endpoints(), blobs, "a", api.Config{})
	b := newLoadReplica(t, c.Endpoints(), blobs, "b", api.Config{DeviceRate: 10000, DeviceBurst: 10000})

	// A devices job led by a, its first round open for joining for an
	// hour (nobody joins).
	spec, _, err := job.DecodeSpec([]byte(`{"population":{"source":"devices","size":100},"sampling":{"scheme":"fixed","cohort_size":16},
		"secure_aggregation":true,"rounds":1,"dp":{"enabled":false},"secagg":{"min_clients":3,"join_timeout_seconds":3600}}`))
	if err != nil {
		t.Fatal(err)
	}
	j, err := a.m.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	creds := make([]string, devices)
	for i := range creds {
		en, err := a.m.Enroll(j.ID)
		if err != nil {
			t.Fatal(err)
		}
		creds[i] = en.Credential
	}
	t.Logf("enrolled %d devices in %v", devices, time.Since(start).Round(time.Millisecond))

	url := b.url + "/v1/jobs/" + j.ID + "/participate"
	tr := &http.Transport{MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	poll := func(cred string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body), err
	}
	// Warm up: the follower shows the open round, and every device has
	// polled once (its credential read from the store once).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body, err := poll(creds[0])
		if err == nil && code == http.StatusOK && strings.Contains(body, `"stage":"join"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never showed the round: %d %s %v", code, body, err)
		}
	}
	// The polled replica must be a follower: it routes joins to another.
	if u, err := b.m.DeviceLeader(j.ID); err != nil || u == "" {
		t.Fatalf("the polled replica routes joins to %q (%v): it is not a follower of the job's leader", u, err)
	}
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := w; i < devices; i += clients {
				if code, body, err := poll(creds[i]); err != nil || code != http.StatusOK {
					t.Errorf("warm-up poll of device %d: %d %s %v", i, code, body, err)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	time.Sleep(500 * time.Millisecond) // let the rate limiters refill

	reqBefore, kaBefore := etcdCounts(t, endpoint)
	var (
		total, failed atomic.Int64
		lat           = make([][]time.Duration, clients)
		firstErr      atomic.Value
	)
	stop := time.Now().Add(time.Duration(seconds) * time.Second)
	began := time.Now()
	for w := range clients {
		wg.Go(func() {
			own := make([]time.Duration, 0, 1<<16)
			n := 0
			for time.Now().Before(stop) {
				// Each client cycles through its share of the devices.
				i := w + clients*(n%max(1, devices/clients))
				n++
				t0 := time.Now()
				code, body, err := poll(creds[i%devices])
				own = append(own, time.Since(t0))
				total.Add(1)
				if err != nil || code != http.StatusOK || (n%512 == 0 && !strings.Contains(body, `"stage":"join"`)) {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", code, body, err))
				}
			}
			lat[w] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	reqAfter, kaAfter := etcdCounts(t, endpoint)

	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	n := total.Load()
	rate := float64(n) / elapsed.Seconds()
	t.Logf("machine: %s, %d CPUs (GOMAXPROCS %d); follower, leader, etcd and clients share it", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	t.Logf("%d polls by %d concurrent clients over %d devices in %v: %.0f polls/s; latency p50 %v, p90 %v, p99 %v, max %v",
		n, clients, devices, elapsed.Round(time.Millisecond), rate, pct(0.50), pct(0.90), pct(0.99), all[len(all)-1])
	t.Logf("etcd during the run: %.0f requests (%.6f per poll; the watches' progress requests, one a second per replica); %.0f lease keep-alives of the replicas' sessions (on a timer, not per poll)",
		reqAfter-reqBefore, (reqAfter-reqBefore)/float64(n), kaAfter-kaBefore)
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d polls failed; first: %v", f, n, firstErr.Load())
	}
	if n == 0 {
		t.Fatal("no poll made")
	}
	// The only etcd requests during the run are on timers, not per poll:
	// each replica's watch asks for a progress notification once a
	// second (job.watchProbe). Anything past that budget is per poll.
	timers := 2 * (math.Ceil(elapsed.Seconds()) + 1)
	if d := reqAfter - reqBefore; d > timers {
		t.Errorf("etcd received %.0f requests during %d polls of a follower; want none beyond the watches' %.0f progress requests", d, n, timers)
	}
}
