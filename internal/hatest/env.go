package hatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/internal/etcdtest"
)

// Config sets up an Env.
type Config struct {
	// ServerBin and ClientBin are dpfl-server and dpfl-client.
	ServerBin, ClientBin string
	// Dir holds the etcd data, the blob directory, the token file and
	// the replicas' logs.
	Dir string
	// Members is the etcd cluster's size (3), with raft heartbeats and
	// elections of HeartbeatMS and ElectionMS, and raft's pre-vote phase
	// if PreVote (etcdtest.Options).
	Members, HeartbeatMS, ElectionMS int
	PreVote                          bool
	// Replicas is the number of dpfl-server replicas.
	Replicas int
	// Leader passes the leader flags (--replica-id, --lease-ttl LeaseTTL,
	// --advertise-url); false runs a server that has none (one replica).
	Leader   bool
	LeaseTTL time.Duration
	// Proxied connects each replica to etcd through its own Proxy per
	// member, so that its link can be blackholed, the way Blackhole says.
	Proxied   bool
	Blackhole BlackholeMode
	// Args are more flags for every replica (e.g. --workers 1).
	Args []string
}

// Env is a running etcd cluster and its dpfl-server replicas, sharing one
// store prefix and one blob directory.
type Env struct {
	Cfg      Config
	Etcd     *etcdtest.Cluster
	Replicas []*Replica
	// Proxies are each replica's proxies, one per etcd member, by
	// replica ID (Cfg.Proxied).
	Proxies   map[string][]*Proxy
	Token     string
	TokenFile string
	BlobDir   string
	Prefix    string
	// T0 is when the environment was up; the summaries count from it.
	T0 time.Time
}

// SupportsLeaderFlags reports whether dpfl-server bin has --replica-id
// (the per-job leader wiring of issue 18).
func SupportsLeaderFlags(bin string) bool {
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	return strings.Contains(string(out), "-replica-id") && strings.Contains(string(out), "-lease-ttl")
}

// Setup starts the etcd cluster, the proxies and the replicas (the first
// alone, until it answers, so that one replica creates the log's signing
// key and the admin token's hash; then the others together). Everything
// stops at the end of t.
func Setup(t testing.TB, cfg Config) *Env {
	t.Helper()
	bin := etcdtest.Binary(t)
	e := &Env{Cfg: cfg, Proxies: map[string][]*Proxy{}, Prefix: "/dpfl-ha/", Token: "hatest-admin-token-0123456789abcdef"}
	start := time.Now()
	c, err := etcdtest.StartWith(bin, filepath.Join(cfg.Dir, "etcd"), etcdtest.Options{
		Members: cfg.Members, HeartbeatMS: cfg.HeartbeatMS, ElectionMS: cfg.ElectionMS, PreVote: cfg.PreVote,
	})
	if err != nil {
		t.Fatalf("start %d-member etcd: %v", cfg.Members, err)
	}
	e.Etcd = c
	t.Cleanup(e.Close)
	t.Logf("etcd: %d members up in %v (heartbeat %d ms, election %d ms, pre-vote %v): %s", cfg.Members, time.Since(start).Round(time.Millisecond),
		cfg.HeartbeatMS, cfg.ElectionMS, cfg.PreVote, strings.Join(c.Endpoints(), " "))

	e.BlobDir = filepath.Join(cfg.Dir, "blobs")
	e.TokenFile = filepath.Join(cfg.Dir, "admin-token")
	if err := os.WriteFile(e.TokenFile, []byte(e.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := etcdtest.FreePorts(cfg.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cfg.Replicas; i++ {
		id := fmt.Sprintf("r%d", i)
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		var hosts []string
		for _, ep := range c.Endpoints() {
			hp := strings.TrimPrefix(ep, "http://")
			if cfg.Proxied {
				p, err := NewProxy(hp)
				if err != nil {
					t.Fatal(err)
				}
				p.Mode = cfg.Blackhole
				e.Proxies[id] = append(e.Proxies[id], p)
				hp = p.Addr()
			}
			hosts = append(hosts, hp)
		}
		args := []string{
			"--addr", addr,
			"--store", "etcd://" + strings.Join(hosts, ","),
			"--store-prefix", e.Prefix,
			"--blob-dir", e.BlobDir,
			"--token-file", e.TokenFile,
		}
		if cfg.Leader {
			args = append(args, "--replica-id", id, "--lease-ttl", cfg.LeaseTTL.String(), "--advertise-url", "http://"+addr)
		}
		args = append(args, cfg.Args...)
		r, err := NewReplica(id, addr, cfg.ServerBin, args, []string{"DPFL_TOKEN="}, filepath.Join(cfg.Dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		e.Replicas = append(e.Replicas, r)
	}
	start = time.Now()
	if err := e.Replicas[0].Start(); err != nil {
		t.Fatal(err)
	}
	if err := e.Replicas[0].WaitHealthy(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, e.Replicas[0].Tail(40))
	}
	for _, r := range e.Replicas[1:] {
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range e.Replicas[1:] {
		if err := r.WaitHealthy(30 * time.Second); err != nil {
			t.Fatalf("%v\n%s", err, r.Tail(40))
		}
	}
	t.Logf("dpfl-server: %d replicas up in %v", cfg.Replicas, time.Since(start).Round(time.Millisecond))
	e.T0 = time.Now()
	return e
}

// Close stops the replicas, the proxies and etcd.
func (e *Env) Close() {
	var wg sync.WaitGroup
	for _, r := range e.Replicas {
		wg.Add(1)
		go func() { defer wg.Done(); r.Stop() }()
	}
	wg.Wait()
	for _, ps := range e.Proxies {
		for _, p := range ps {
			p.Close()
		}
	}
	if e.Etcd != nil {
		e.Etcd.Stop()
	}
}

// Client is an API client of replica r with the admin token.
func (e *Env) Client(r *Replica) *client.Client { return client.New(r.URL, e.Token) }

// Replica returns the replica named id (nil if none).
func (e *Env) Replica(id string) *Replica {
	for _, r := range e.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Live lists the replicas that run and are not paused.
func (e *Env) Live() []*Replica {
	var out []*Replica
	for _, r := range e.Replicas {
		if r.Live() {
			out = append(out, r)
		}
	}
	return out
}

// Since is t as seconds since T0, for the summaries.
func (e *Env) Since(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%6.2fs", t.Sub(e.T0).Seconds())
}

// Job reads job id from the first live replica that answers.
func (e *Env) Job(ctx context.Context, id string) (JobView, *Replica, error) {
	var lastErr error = fmt.Errorf("no live replica")
	for _, r := range e.Live() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		j, err := GetJob(cctx, r.URL, e.Token, id)
		cancel()
		if err == nil {
			return j, r, nil
		}
		lastErr = fmt.Errorf("%s: %w", r.ID, err)
	}
	return JobView{}, nil, lastErr
}

// Logs returns the tails of every replica's and etcd member's output,
// for a failure report.
func (e *Env) Logs(lines int) string {
	var b strings.Builder
	for _, r := range e.Replicas {
		fmt.Fprintf(&b, "----- replica %s (full log: %s), last %d lines\n%s\n", r.ID, r.LogPath, lines, r.Tail(lines))
	}
	if e.Etcd != nil {
		for _, m := range e.Etcd.Members {
			fmt.Fprintf(&b, "----- etcd member %s (%s), last %d lines\n%s\n", m.Name, m.ClientURL, lines, lastLines(m.Logs(), lines))
		}
	}
	return b.String()
}
