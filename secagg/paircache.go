package secagg

import (
	"sync"
	"sync/atomic"

	"github.com/cloudflare/circl/dh/x25519"
)

// PairCache lets the simulated clients of one instance, all in one
// process, run each pair's key agreement once. X25519 is symmetric:
// X25519(c_u^SK, c_v^PK) = X25519(c_v^SK, c_u^PK), and likewise for the
// s keys (Bonawitz et al. 2017, §4, each pair's key agreement), so the two
// ends of a pair derive the same key; with the cache the first of them to
// need it runs the ladder and the second reads the result. Every message
// stays bit for bit what it would be without the cache; only the CPU time
// of a simulated round changes (the ladders were two thirds of it,
// docs/performance.md). Its guarantee is exactly once: a client claims
// the pairs no other has claimed, computes them in one batch, publishes
// them, and only then waits for the pairs others claimed, so no client
// waits on one that waits on it.
//
// Use one PairCache per instance (one session), shared by its simulated
// clients through ClientDriver.Pairs, and never between real devices: a
// device computes its own keys, and the entries are pairwise secrets
// (drop the cache with the instance). Each client still checks its peers'
// public keys itself (validPublicKey) before it reads or claims a pair.
// The zero value is ready; it is safe for concurrent use.
type PairCache struct {
	mu  sync.Mutex
	m   map[pairID]*pairEntry
	ran atomic.Int64 // agreements computed, for tests
}

// pairID names one pair's key for one purpose: the two public keys in
// byte order (so both ends name it alike) and the HKDF info string.
type pairID struct {
	lo, hi x25519.Key
	info   string
}

// pairEntry is one pair's derived key; done is closed once key and ok are
// set by the client that claimed it.
type pairEntry struct {
	done chan struct{}
	key  [32]byte
	ok   bool
}

func newPairID(own, peer *x25519.Key, info string) pairID {
	lo, hi := *own, *peer
	if string(hi[:]) < string(lo[:]) {
		lo, hi = hi, lo
	}
	return pairID{lo: lo, hi: hi, info: info}
}

// agreeBatch is agreeBatch(sk, pks, session, info, workers) for the
// client whose public key for sk is own: it returns the keys in pks order,
// or the index of the first peer whose public key is of low order (−1 if
// none), running only the agreements no other client has claimed.
func (pc *PairCache) agreeBatch(sk, own *x25519.Key, pks []*x25519.Key, session []byte, info string, workers int) ([][32]byte, int) {
	for i, pk := range pks {
		if !validPublicKey(pk[:]) {
			return nil, i
		}
	}
	entries, mine := pc.claim(own, pks, info)
	pc.compute(entries, mine, sk, pks, session, info, workers)
	keys := make([][32]byte, len(pks))
	for i, e := range entries {
		<-e.done
		if !e.ok {
			return nil, i
		}
		keys[i] = e.key
	}
	return keys, -1
}

// claim returns the entry of each pair, in pks order, and the indices of
// those this client claimed (created) and must compute.
func (pc *PairCache) claim(own *x25519.Key, pks []*x25519.Key, info string) ([]*pairEntry, []int) {
	entries := make([]*pairEntry, len(pks))
	var mine []int
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		pc.m = make(map[pairID]*pairEntry)
	}
	for i, pk := range pks {
		id := newPairID(own, pk, info)
		e, ok := pc.m[id]
		if !ok {
			e = &pairEntry{done: make(chan struct{})}
			pc.m[id] = e
			mine = append(mine, i)
		}
		entries[i] = e
	}
	return entries, mine
}

// compute runs the agreements of the claimed pairs in one batch and
// publishes them; a claimed entry is published even if the batch panics
// (as not ok), so that no other client waits for it for ever.
func (pc *PairCache) compute(entries []*pairEntry, mine []int, sk *x25519.Key, pks []*x25519.Key, session []byte, info string, workers int) {
	defer func() {
		for _, i := range mine {
			close(entries[i].done)
		}
	}()
	if len(mine) == 0 {
		return
	}
	sub := make([]*x25519.Key, len(mine))
	for j, i := range mine {
		sub[j] = pks[i]
	}
	keys, ok := agreeEach(sk, sub, session, info, workers)
	pc.ran.Add(int64(len(sub)))
	for j, i := range mine {
		entries[i].key, entries[i].ok = keys[j], ok[j]
	}
}
