package job

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dpfl/dpfl/storage"
)

// The credential cache looks each credential up once: an authenticated
// device is remembered, a refused credential for refusedTTL, a store
// error not at all; concurrent lookups of one credential share one.
func TestDeviceCacheLooksUpOnce(t *testing.T) {
	c := newDeviceCache()
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	var lookups atomic.Int32
	good, bad := sha256.Sum256([]byte("good")), sha256.Sum256([]byte("bad"))
	lookup := func(h [sha256.Size]byte) func() (string, error) {
		return func() (string, error) {
			lookups.Add(1)
			if h == good {
				return "dev-1", nil
			}
			return "", errUnknownCredential("job-a")
		}
	}
	for range 3 {
		if id, err := c.authenticate("job-a", good, lookup(good)); err != nil || id != "dev-1" {
			t.Fatalf("good credential: %q, %v", id, err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d lookups for one device authenticated three times, want 1", n)
	}
	// The same hash for another job is another credential.
	if _, err := c.authenticate("job-b", good, lookup(bad)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("another job's device: %v, want ErrUnauthorized", err)
	}
	lookups.Store(0)
	for range 3 {
		if _, err := c.authenticate("job-a", bad, lookup(bad)); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("bad credential: %v, want ErrUnauthorized", err)
		}
	}
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d lookups for one refused credential within its TTL, want 1", n)
	}
	now = now.Add(refusedTTL)
	if _, err := c.authenticate("job-a", bad, lookup(bad)); !errors.Is(err, ErrUnauthorized) || lookups.Load() != 2 {
		t.Fatalf("after the TTL: %v with %d lookups, want ErrUnauthorized from a second lookup", err, lookups.Load())
	}
	// Enrolled since: the refusal is forgotten.
	c.forget("job-a", bad)
	if id, err := c.authenticate("job-a", bad, func() (string, error) { return "dev-2", nil }); err != nil || id != "dev-2" {
		t.Fatalf("after forget: %q, %v", id, err)
	}

	// A store error is returned, and the next request asks again.
	down := sha256.Sum256([]byte("down"))
	fail := func() (string, error) { return "", fmt.Errorf("etcd: %w", storage.ErrUnavailable) }
	for range 2 {
		if _, err := c.authenticate("job-a", down, fail); !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("store down: %v, want ErrUnavailable", err)
		}
	}
	if id, err := c.authenticate("job-a", down, func() (string, error) { return "dev-3", nil }); err != nil || id != "dev-3" {
		t.Fatalf("store back: %q, %v", id, err)
	}

	// Concurrent first requests share one lookup.
	lookups.Store(0)
	release := make(chan struct{})
	slow := sha256.Sum256([]byte("slow"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			id, err := c.authenticate("job-a", slow, func() (string, error) {
				lookups.Add(1)
				<-release
				return "dev-4", nil
			})
			if err != nil || id != "dev-4" {
				t.Errorf("concurrent: %q, %v", id, err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // all 16 wait on the first lookup
	close(release)
	wg.Wait()
	if n := lookups.Load(); n != 1 {
		t.Fatalf("%d lookups for 16 concurrent first requests, want 1", n)
	}
	if _, err := c.authenticate("job-a", slow, func() (string, error) { return "", errors.New("asked again") }); err != nil {
		t.Fatalf("after the concurrent lookups: %v", err)
	}
}

// Two credentials whose hashes share the indexed half are told apart by
// the whole hash (compared in constant time): the second is looked up,
// never answered with the first's device.
func TestDeviceCachePrefixCollision(t *testing.T) {
	c := newDeviceCache()
	var h1, h2 [sha256.Size]byte
	h1[31], h2[31] = 1, 2 // same first half
	if id, err := c.authenticate("j", h1, func() (string, error) { return "dev-1", nil }); err != nil || id != "dev-1" {
		t.Fatal(id, err)
	}
	looked := false
	if _, err := c.authenticate("j", h2, func() (string, error) { looked = true; return "", errUnknownCredential("j") }); !errors.Is(err, ErrUnauthorized) || !looked {
		t.Fatalf("colliding credential: %v (looked up %v), want a lookup refusing it", err, looked)
	}
	if id, err := c.authenticate("j", h1, func() (string, error) { return "", errors.New("asked again") }); err != nil || id != "dev-1" {
		t.Fatalf("first device after the collision: %q, %v", id, err)
	}
}

// The refusals kept are bounded: a flood of distinct bad credentials
// cannot grow the cache past maxRefused.
func TestDeviceCacheRefusalsBounded(t *testing.T) {
	c := newDeviceCache()
	refuse := func() (string, error) { return "", errUnknownCredential("j") }
	for i := range maxRefused + 10 {
		h := sha256.Sum256(fmt.Appendf(nil, "%d", i))
		if _, err := c.authenticate("j", h, refuse); !errors.Is(err, ErrUnauthorized) {
			t.Fatal(err)
		}
	}
	c.mu.RLock()
	n := len(c.refused)
	c.mu.RUnlock()
	if n > maxRefused {
		t.Fatalf("%d refusals kept, bound %d", n, maxRefused)
	}
}
