package secagg

import (
	"bytes"
	"context"
	"crypto/rand"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
)

// checkClientKeys fails unless k's public keys are circl's x25519.KeyGen
// of its secret keys and its mask secret is the one maskKeyFromScalar
// derives from its scalar for session: what NewClient would compute.
func checkClientKeys(t *testing.T, what string, k *clientKeys, session []byte) {
	t.Helper()
	var encPK x25519.Key
	x25519.KeyGen(&encPK, &k.encSK)
	maskSK, maskPK := maskKeyFromScalar(k.maskScalar, session)
	if k.encPK != encPK {
		t.Fatalf("%s: encryption public key %x, circl's KeyGen gives %x", what, k.encPK, encPK)
	}
	if k.maskSK != maskSK || k.maskPK != maskPK {
		t.Fatalf("%s: mask key pair (%x, %x), maskKeyFromScalar gives (%x, %x)", what, k.maskSK, k.maskPK, maskSK, maskPK)
	}
}

// TestKeyPoolHandsOutOnce takes keys from one pool on several goroutines
// at once, on each ladder keyGenBatch can take: every client's keys are
// what NewClient would compute from their secrets (checkClientKeys), and
// no secret key or scalar is handed out twice.
func TestKeyPoolHandsOutOnce(t *testing.T) {
	forEachLadder(t, func(t *testing.T) {
		const goroutines, each = 4, 3*keyPoolBatch + 1
		session := []byte("key pool")
		var p keyPool
		got := make([][]clientKeys, goroutines)
		var wg sync.WaitGroup
		for g := range got {
			wg.Go(func() {
				for range each {
					var k clientKeys
					ok, err := p.take(&k, session)
					if err != nil || !ok {
						t.Errorf("take: %v, %v", ok, err)
						return
					}
					got[g] = append(got[g], k)
				}
			})
		}
		wg.Wait()
		if n := p.taken.Load(); n != goroutines*each {
			t.Fatalf("taken %d, want %d", n, goroutines*each)
		}
		seen := map[[32]byte]bool{}
		for _, ks := range got {
			for i := range ks {
				checkClientKeys(t, "pooled", &ks[i], session)
				for _, s := range [][32]byte{ks[i].encSK, ks[i].maskSK, [32]byte(scalarBytes(ks[i].maskScalar))} {
					if seen[s] {
						t.Fatalf("secret %x handed out twice", s)
					}
					seen[s] = true
				}
			}
		}
	})
}

// TestKeyPoolOtherSession checks that the pool serves only the session
// of its first request: another session's client is refused (and left
// to draw its own keys), its keys untouched.
func TestKeyPoolOtherSession(t *testing.T) {
	var p keyPool
	var k clientKeys
	if ok, err := p.take(&k, []byte("first")); !ok || err != nil {
		t.Fatalf("first session: %v, %v", ok, err)
	}
	var other clientKeys
	if ok, err := p.take(&other, []byte("second")); ok || err != nil {
		t.Fatalf("second session: %v, %v, want refused", ok, err)
	}
	if other != (clientKeys{}) {
		t.Fatal("refused take wrote keys")
	}
}

// advertRecorder records the advertise_keys messages of a harness's
// clients, before passing them to the harness's own recorder.
type advertRecorder struct {
	ClientTransport
	mu   *sync.Mutex
	msgs map[ClientID]AdvertiseKeysMsg
}

// AdvertiseKeys records a copy of m (the transport may keep or reuse
// its slices) and sends it.
func (r advertRecorder) AdvertiseKeys(ctx context.Context, m AdvertiseKeysMsg) error {
	r.mu.Lock()
	r.msgs[m.From] = AdvertiseKeysMsg{From: m.From, EncKey: slices.Clone(m.EncKey), MaskKey: slices.Clone(m.MaskKey)}
	r.mu.Unlock()
	return r.ClientTransport.AdvertiseKeys(ctx, m)
}

// TestKeyPoolInstance runs instances whose clients share a PairCache, so
// that they take their keys from its pool, with one client dropping
// before its masked input (the server rebuilds its mask key from the
// scalar's shares, which cancels its pairwise masks only if its advertised mask
// key is the one the scalar derives): every advertised key is circl's
// KeyGen of the client's secret (checkClientKeys), every client took its
// keys from the pool (except one with a Rand of its own, which must not),
// and the sum is exact.
func TestKeyPoolInstance(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(21, 22))
	forEachLadder(t, func(t *testing.T) {
		const n, d, dropped = 19, 24, ClientID(3)
		session := []byte("key pool instance")
		h := newHarness(t, ServerConfig{Session: session, Dim: d, Params: Params{Neighbors: 8, Threshold: 5}},
			testInputs(rng, n, d), map[ClientID]dropStage{dropped: dropBeforeMasked})
		pairs := new(PairCache)
		own := ClientID(5) // draws from its own Rand, not from the pool
		for _, c := range h.mem.Clients {
			c.Pairs = pairs
			if c.ID == own {
				c.Rand = rand.Reader
			}
		}
		var mu sync.Mutex
		adverts := map[ClientID]AdvertiseKeysMsg{}
		h.mem.Wrap = func(i int, t ClientTransport) ClientTransport {
			return advertRecorder{h.record(i, t), &mu, adverts}
		}
		if err := h.advertise(); err != nil {
			t.Fatal(err)
		}
		if got := pairs.keys.taken.Load(); got != n-1 {
			t.Fatalf("%d clients took pooled keys, want %d", got, n-1)
		}
		for _, id := range h.ids {
			c := h.clients[id]
			k := clientKeys{encSK: c.encSK, encPK: c.encPK, maskScalar: c.maskScalar, maskSK: c.maskSK, maskPK: c.maskPK}
			checkClientKeys(t, "client", &k, session)
			m := adverts[id]
			if !bytes.Equal(m.EncKey, c.encPK[:]) || !bytes.Equal(m.MaskKey, c.maskPK[:]) {
				t.Fatalf("client %d advertised keys other than its own", id)
			}
		}
		res, err := h.finishRun()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Dropped, []ClientID{dropped}) || slices.Contains(res.Survivors, dropped) || len(res.Survivors) != n-1 {
			t.Fatalf("survivors %v, dropped %v, want all but %d", res.Survivors, res.Dropped, dropped)
		}
		if !slices.Equal(res.Sum, h.plainSum(res.Survivors)) {
			t.Fatal("sum differs from the survivors' plaintext sum")
		}
	})
}

// BenchmarkClientKeys is one client's keys for an instance: drawn and
// computed alone, as NewClient does ("own": two of circl's KeyGen), and
// from a batch of keyPoolBatch clients ("pool": generateClientKeys, the
// public keys of all of them in one keyGenBatch). It reports ns/client.
func BenchmarkClientKeys(b *testing.B) {
	session := []byte("bench session")
	b.Run("own", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := NewClient(1, session, rand.Reader); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/client")
	})
	b.Run("pool", func(b *testing.B) {
		for b.Loop() {
			if _, err := generateClientKeys(keyPoolBatch, session); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keyPoolBatch), "ns/client")
	})
}
