package secagg

import (
	"sync"

	"github.com/cloudflare/circl/dh/x25519"
)

// PairCache lets the clients of one instance that run in one process (the
// simulation of fl.SecureAggregator) agree each pairwise key once.
// X25519 is symmetric, X25519(c_u^SK, c_v^PK) = X25519(c_v^SK, c_u^PK)
// (Bonawitz et al. 2017, §4, the key agreement of each pair), so the
// second client of a pair reads the key the first derived instead of
// running the same ladder again; every message stays bit for bit what it
// would be without the cache. The ladders were most of a simulated
// round's CPU (docs/performance.md).
//
// Use one PairCache per instance, shared by its simulated clients through
// ClientDriver.Pairs, and never between real devices: a device computes
// its own keys. A hit skips the agreement's low-order check for the
// second client of the pair; the server has refused low-order public keys
// at advertise_keys already (Server.AdvertiseKeys), so no such key reaches
// a client. The zero value is ready; it is safe for concurrent use. Its
// entries are secrets (pairwise keys): drop it with the instance.
type PairCache struct {
	mu sync.Mutex
	m  map[string][32]byte
}

// agree returns agree(sk, peer, session, info), where own is sk's public
// key, from the cache when the pair's other client has derived it.
func (pc *PairCache) agree(sk, own, peer *x25519.Key, session []byte, info string) ([32]byte, bool) {
	lo, hi := own, peer
	if string(hi[:]) < string(lo[:]) {
		lo, hi = hi, lo
	}
	k := string(lo[:]) + string(hi[:]) + info + string(session)
	pc.mu.Lock()
	key, ok := pc.m[k]
	pc.mu.Unlock()
	if ok {
		return key, true
	}
	if key, ok = agree(sk, peer, session, info); !ok {
		return key, false
	}
	pc.mu.Lock()
	if pc.m == nil {
		pc.m = make(map[string][32]byte)
	}
	pc.m[k] = key
	pc.mu.Unlock()
	return key, true
}
