package secagg

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"sync"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
)

// TestPairCacheMatchesAgreeBatch runs clients of a random graph at once,
// sharing a PairCache, for two purposes (share encryption and pairwise
// masks), and checks each client's keys against its own uncached
// agreeBatch, bit for bit, and that the cache ran exactly one agreement
// per pair and purpose.
func TestPairCacheMatchesAgreeBatch(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(3, 4))
	session := []byte("pair cache session")
	for trial := range 5 {
		n := 4 + rng.IntN(20)
		sk, pk := make([]x25519.Key, n), make([]x25519.Key, n)
		for i := range n {
			rand.Read(sk[i][:])
			x25519.KeyGen(&pk[i], &sk[i])
		}
		nb := make([][]int, n)
		edges := 0
		for u := range n {
			for v := u + 1; v < n; v++ {
				if rng.IntN(2) == 0 {
					nb[u], nb[v] = append(nb[u], v), append(nb[v], u)
					edges++
				}
			}
		}
		pc := new(PairCache)
		var wg sync.WaitGroup
		for u := range n {
			for _, info := range []string{infoShareEnc, infoPairMask} {
				pks := make([]*x25519.Key, len(nb[u]))
				for j, v := range nb[u] {
					pks[j] = &pk[v]
				}
				wg.Go(func() {
					got, bad := pc.agreeBatch(&sk[u], &pk[u], pks, session, info, 1+u%2)
					want, wbad := agreeBatch(&sk[u], pks, session, info, 1)
					if bad != -1 || wbad != -1 {
						t.Errorf("trial %d client %d: bad %d, uncached %d, want −1", trial, u, bad, wbad)
						return
					}
					for j := range want {
						if got[j] != want[j] {
							t.Errorf("trial %d client %d (%s): key with %d differs from the uncached one", trial, u, info, nb[u][j])
						}
					}
				})
			}
		}
		wg.Wait()
		if got := pc.ran.Load(); got != int64(2*edges) {
			t.Errorf("trial %d: %d agreements run for %d pairs × 2 purposes, want one each", trial, got, edges)
		}
	}
}

// TestPairCacheRefusesLowOrderKeys checks that a client reading through
// the cache still refuses a low-order peer key itself, naming its index,
// before claiming anything.
func TestPairCacheRefusesLowOrderKeys(t *testing.T) {
	var sk, pk, peer, peerPK x25519.Key
	rand.Read(sk[:])
	rand.Read(peer[:])
	x25519.KeyGen(&pk, &sk)
	x25519.KeyGen(&peerPK, &peer)
	for _, low := range lowOrderPoints {
		bad := x25519.Key(low)
		pc := new(PairCache)
		if _, i := pc.agreeBatch(&sk, &pk, []*x25519.Key{&peerPK, &bad}, []byte("s"), infoPairMask, 1); i != 1 {
			t.Errorf("low-order key %x: bad index %d, want 1", low, i)
		}
		if pc.ran.Load() != 0 || len(pc.m) != 0 {
			t.Errorf("low-order key %x: the refused batch claimed or ran agreements", low)
		}
	}
}
