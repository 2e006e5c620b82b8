package secagg

import (
	"bytes"
	"crypto/cipher"
	"slices"
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
// A pair is found by its two client IDs and purpose, and served only to a
// client whose own public key and peer's public key are exactly the two
// the claimer agreed with (and only within the session of the first
// batch): a client that names the pair with any other key computes its
// agreement itself, uncached, so a wrong key never returns a cached
// secret. For share encryption the claimer also builds the pair's
// AES-256-GCM once, which both ends then use (it holds no state between
// calls, so the two may seal and open concurrently).
//
// Use one PairCache per instance (one session), shared by its simulated
// clients through ClientDriver.Pairs, and never between real devices: a
// device computes its own keys, and the entries are pairwise secrets
// (drop the cache with the instance). Each client still checks its peers'
// public keys itself (validPublicKey) before it reads or claims a pair.
// The zero value is ready; it is safe for concurrent use.
//
// The same boundary makes it the source of the simulated clients' own key
// pairs (keys): drawn from crypto/rand and computed eight clients at a
// time, each handed to one client once (keyPool).
type PairCache struct {
	mu sync.Mutex
	// session is the session of the first batch; a batch of another
	// session bypasses the cache (its keys would differ).
	session []byte
	// tables holds the pairs of each purpose (HKDF info string), by
	// pairKey: one map lookup per batch finds the purpose, and the pairs
	// are then found by 8 bytes, not by the 64 bytes of their public keys
	// and the info string.
	tables map[string]map[uint64]*pairEntry
	// kdfs recycles the sessionKDFs of the session's batches: a new one
	// costs several allocations (crypto/hmac's states), and one batch
	// needs it for a few dozen keys. A recycled one may still hold, in its
	// HMAC state, the last pair's shared secret (sessionKDF.wipe clears
	// only its PRK): it is passed only between this instance's simulated
	// clients, all in one process with the cache.
	kdfs     sync.Pool
	ran      atomic.Int64 // agreements computed, for tests
	bypassed atomic.Int64 // of which outside the cache (keys that differ from the claimer's), for tests
	// keys hands the simulated clients their key pairs for the instance,
	// generated many at a time (ClientDriver, when its Rand is nil): the
	// same boundary as the pairs, one instance's simulated clients and
	// never a device.
	keys keyPool
}

// pairKey names the pair of clients a and b alike from both ends: the
// lower ID in the high half.
func pairKey(a, b ClientID) uint64 {
	if a > b {
		a, b = b, a
	}
	return uint64(a)<<32 | uint64(b)
}

// pairEntry is one pair's derived key for one purpose; done, shared by
// the claiming batch, is closed once key, ok and aead are set by the
// client that claimed it.
type pairEntry struct {
	done chan struct{}
	// pks are the public keys the claimer agreed with, of the lower ID
	// then the higher: a client is served the entry only if they are its
	// own and its peer's.
	pks  [2]x25519.Key
	key  [32]byte
	aead cipher.AEAD // the AES-256-GCM of key, where the batch asked for it
	ok   bool
}

// matches reports whether e was agreed for the client of public key own
// and its peer of public key peer, where ownLow says the client has the
// lower ID of the two.
func (e *pairEntry) matches(own, peer *x25519.Key, ownLow bool) bool {
	if ownLow {
		return e.pks[0] == *own && e.pks[1] == *peer
	}
	return e.pks[0] == *peer && e.pks[1] == *own
}

// pairBatch is one client's request of agreeBatch.
type pairBatch struct {
	sk, own *x25519.Key   // the client's secret key and its public key
	id      ClientID      // the client's ID
	pks     []*x25519.Key // the peers' public keys
	peers   []ClientID    // the peers' IDs, in pks order
	session []byte
	info    string
	aead    bool // also return each key's AES-256-GCM (newGCM)
	workers int
}

// agreeBatch is agreeBatch(b.sk, b.pks, b.session, b.info, b.workers) for
// the client b.id, whose public key for b.sk is b.own: it returns the keys
// in pks order (with their AES-256-GCM instances when b.aead), or the
// index of the first peer whose public key is of low order (−1 if none),
// running only the agreements no other client has claimed. The peers'
// IDs must be distinct and differ from b.id.
func (pc *PairCache) agreeBatch(b pairBatch) ([][32]byte, []cipher.AEAD, int) {
	for i, pk := range b.pks {
		if !validPublicKey(pk[:]) {
			return nil, nil, i
		}
	}
	entries, todo, mine, done := pc.claim(b)
	pc.compute(entries, todo, mine, done, b)
	keys := make([][32]byte, len(b.pks))
	var aeads []cipher.AEAD
	if b.aead {
		aeads = make([]cipher.AEAD, len(b.pks))
	}
	for i, e := range entries {
		<-e.done
		if !e.ok {
			return nil, nil, i
		}
		keys[i] = e.key
		if b.aead {
			if aeads[i] = e.aead; aeads[i] == nil { // claimed by a batch that did not ask for it
				aeads[i] = newGCM(&keys[i])
			}
		}
	}
	return keys, aeads, -1
}

// claim returns the entry of each pair, in pks order, the indices of those
// this client must compute (the pairs it claimed, the first mine of todo,
// then those whose cached entry was agreed with other keys, which it
// computes for itself without publishing them), and the channel that
// compute closes when they are done (nil when todo is empty).
func (pc *PairCache) claim(b pairBatch) (entries []*pairEntry, todo []int, mine int, done chan struct{}) {
	n := len(b.pks)
	entries = make([]*pairEntry, n)
	todo = make([]int, 0, n)
	var solo []int
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.session == nil {
		pc.session = slices.Clone(b.session)
	}
	var t map[uint64]*pairEntry
	if bytes.Equal(pc.session, b.session) {
		if t = pc.tables[b.info]; t == nil {
			if pc.tables == nil {
				pc.tables = make(map[string]map[uint64]*pairEntry)
			}
			t = make(map[uint64]*pairEntry)
			pc.tables[b.info] = t
		}
	}
	for i, v := range b.peers {
		if t == nil || v == b.id {
			solo = append(solo, i)
			continue
		}
		e, ok := t[pairKey(b.id, v)]
		switch {
		case !ok:
			todo = append(todo, i)
		case e.matches(b.own, b.pks[i], b.id < v):
			entries[i] = e
		default:
			solo = append(solo, i)
		}
	}
	mine = len(todo)
	todo = append(todo, solo...)
	if len(todo) == 0 {
		return entries, todo, mine, nil
	}
	// One allocation for the batch's entries and one channel for all of
	// them, where each entry used to be allocated with its own channel.
	done = make(chan struct{})
	batch := make([]pairEntry, len(todo))
	for j, i := range todo {
		e := &batch[j]
		e.done = done
		entries[i] = e
		if j >= mine {
			continue // computed for this client only
		}
		v := b.peers[i]
		if b.id < v {
			e.pks = [2]x25519.Key{*b.own, *b.pks[i]}
		} else {
			e.pks = [2]x25519.Key{*b.pks[i], *b.own}
		}
		t[pairKey(b.id, v)] = e
	}
	return entries, todo, mine, done
}

// compute runs the agreements of the entries todo (of which the first
// mine are published) in one batch, and closes done; the entries are
// closed even if the batch panics (as not ok), so that no other client
// waits for them for ever.
func (pc *PairCache) compute(entries []*pairEntry, todo []int, mine int, done chan struct{}, b pairBatch) {
	if done == nil {
		return
	}
	defer close(done)
	sub := make([]*x25519.Key, len(todo))
	for j, i := range todo {
		sub[j] = b.pks[i]
	}
	var kdf *sessionKDF
	if mine > 0 { // the batch is of the cache's session
		if kdf, _ = pc.kdfs.Get().(*sessionKDF); kdf == nil {
			kdf = newSessionKDF(pc.session)
		}
		defer func() {
			kdf.wipe()
			pc.kdfs.Put(kdf)
		}()
	}
	keys, ok := agreeEach(b.sk, sub, b.session, b.info, b.workers, kdf)
	pc.ran.Add(int64(len(sub)))
	pc.bypassed.Add(int64(len(sub) - mine))
	for j, i := range todo {
		e := entries[i]
		e.key, e.ok = keys[j], ok[j]
		if b.aead && e.ok {
			e.aead = newGCM(&e.key)
		}
	}
	clear(keys)
}
