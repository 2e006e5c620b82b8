package leader

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dpfl/dpfl/internal/etcdtest"
)

// The tests run real etcd servers (internal/etcdtest): a shared
// single-member one for most, a private 3-member cluster where a member
// is paused.

// shared is the single-member etcd of most tests (each uses its own
// prefix), with 50 ms heartbeats and 500 ms elections so that 1 s leases
// are honoured.
var shared = etcdtest.Shared{HeartbeatMS: 50, ElectionMS: 500}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// sharedEtcd returns the client endpoints of the shared etcd, started on
// first use.
func sharedEtcd(t *testing.T) []string {
	t.Helper()
	return shared.Endpoints(t)
}

// newClient returns an etcd client on endpoints, closed at test end.
func newClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// testPrefix is a per-test election key prefix on the shared etcd.
func testPrefix(t *testing.T) string {
	return "/dpfl-test/" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "/"
}

// newElector returns an Elector with its own client, closed at test end.
func newElector(t *testing.T, endpoints []string, prefix, id string, ttl time.Duration) *Elector {
	t.Helper()
	e, err := New(newClient(t, endpoints...), prefix, id, ttl)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type campaignResult struct {
	term *Term
	err  error
	at   time.Time
}

func campaignAsync(ctx context.Context, e *Elector, job string) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		t, err := e.Campaign(ctx, job)
		ch <- campaignResult{t, err, time.Now()}
	}()
	return ch
}

func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-ch:
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
		return 0
	}
}

func isNotLeader(err error) bool { return errors.Is(err, ErrNotLeader) }
