package secagg

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/cloudflare/circl/group"
)

// clientKeys are the keys one client draws for one instance (NewClient):
// the key pair c_u (encSK, encPK), the Ristretto255 scalar that is
// Shamir-shared, and the mask key pair s_u derived from it for the
// instance's session (maskSK = maskSecretFromScalar(maskScalar, session),
// maskPK its public key).
type clientKeys struct {
	encSK, encPK   x25519.Key
	maskScalar     group.Scalar
	maskSK, maskPK x25519.Key
}

// keyPoolBatch is how many clients' keys keyPool generates at once: 8
// encryption and 8 mask key pairs, two full groups of the eight-lane
// ladder (keyGenBatch), 3.3–3.8 µs a public key where circl's KeyGen takes
// 16 µs (BenchmarkKeyGen). Fewer would leave lanes idle; more would only
// keep more unused secrets in memory at the end of an instance.
const keyPoolBatch = 8

// keyPool hands the simulated clients of one instance their keys
// (clientKeys), generated keyPoolBatch clients at a time so that the
// public keys of all of them come from one batched fixed-base ladder
// (keyGenBatch) instead of two of circl's ladders per client: key
// generation was about 7.5% of a simulated round's CPU. The keys are
// drawn as NewClient draws them from crypto/rand, and their public keys
// are bit for bit circl's x25519.KeyGen of the same secret keys, so every
// message is exactly what the client would send had it generated these
// keys itself; only where and when the draws happen changes.
//
// Every secret comes from crypto/rand (never from a client's own Rand,
// which is why ClientDriver takes keys from the pool only when its Rand is
// nil). Each clientKeys is handed out once, taken off the pool under its
// lock and the slot cleared. The pool belongs to one instance, inside its
// PairCache (PairCache.keys), and is shared only by that instance's
// simulated clients, never between devices: a device has no PairCache and
// draws its own keys. The mask keys depend on the session, so the pool
// serves only the session of its first request; a client of another
// session is told to draw its own. The zero value is ready; it is safe
// for concurrent use. The few keys left when the instance ends are never
// handed out, and go with the PairCache.
type keyPool struct {
	mu      sync.Mutex
	session []byte       // the session of the first request
	free    []clientKeys // generated, not yet handed out
	taken   atomic.Int64 // handed out, for tests
}

// take sets *dst to keys not handed out before, generating a new batch
// when the pool is empty, and reports whether it did: false (dst left as
// it was) when session is not the pool's. It errors only if crypto/rand
// or the scalar draw fails. A batch is generated outside the lock, so
// clients that find the pool empty at once each generate one; the surplus
// stays in the pool for later clients.
func (p *keyPool) take(dst *clientKeys, session []byte) (bool, error) {
	p.mu.Lock()
	if p.session == nil {
		p.session = slices.Clone(session)
	}
	if !bytes.Equal(p.session, session) {
		p.mu.Unlock()
		return false, nil
	}
	if n := len(p.free); n > 0 {
		*dst = p.free[n-1]
		p.free[n-1] = clientKeys{}
		p.free = p.free[:n-1]
		p.mu.Unlock()
		p.taken.Add(1)
		return true, nil
	}
	p.mu.Unlock()
	batch, err := generateClientKeys(keyPoolBatch, session)
	if err != nil {
		return false, err
	}
	*dst = batch[0]
	p.mu.Lock()
	p.free = append(p.free, batch[1:]...)
	p.mu.Unlock()
	clear(batch)
	p.taken.Add(1)
	return true, nil
}

// generateClientKeys draws n clients' keys for session from crypto/rand,
// as NewClient does for one (32 random bytes for c_u^SK, randomScalar for
// the mask scalar), and computes their 2n public keys in one keyGenBatch:
// bit for bit circl's x25519.KeyGen, on the eight-lane IFMA ladder where
// it runs, with circl's otherwise.
func generateClientKeys(n int, session []byte) ([]clientKeys, error) {
	keys := make([]clientKeys, n)
	sks := make([]x25519.Key, 2*n) // the c_u^SK, then the s_u^SK
	pks := make([]x25519.Key, 2*n)
	defer clear(sks)
	for i := range keys {
		if _, err := io.ReadFull(rand.Reader, sks[i][:]); err != nil {
			return nil, fmt.Errorf("secagg: reading randomness: %w", err)
		}
		s, err := randomScalar(rand.Reader)
		if err != nil {
			return nil, err
		}
		keys[i].maskScalar = s
		sks[n+i] = maskSecretFromScalar(s, session)
	}
	keyGenBatch(pks, sks)
	for i := range keys {
		k := &keys[i]
		k.encSK, k.encPK = sks[i], pks[i]
		k.maskSK, k.maskPK = sks[n+i], pks[n+i]
	}
	return keys, nil
}
