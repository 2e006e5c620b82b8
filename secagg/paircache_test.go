package secagg

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"strings"
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
				ids := make([]ClientID, len(nb[u]))
				for j, v := range nb[u] {
					pks[j], ids[j] = &pk[v], ClientID(v+1)
				}
				wg.Go(func() {
					got, _, bad := pc.agreeBatch(pairBatch{sk: &sk[u], own: &pk[u], id: ClientID(u + 1), pks: pks, peers: ids, session: session, info: info, workers: 1 + u%2})
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
		if _, _, i := pc.agreeBatch(pairBatch{sk: &sk, own: &pk, id: 1, pks: []*x25519.Key{&peerPK, &bad}, peers: []ClientID{2, 3}, session: []byte("s"), info: infoPairMask, workers: 1}); i != 1 {
			t.Errorf("low-order key %x: bad index %d, want 1", low, i)
		}
		if pc.ran.Load() != 0 || len(pc.tables) != 0 {
			t.Errorf("low-order key %x: the refused batch claimed or ran agreements", low)
		}
	}
}

// newKeyPair draws an X25519 key pair from crypto/rand.
func newKeyPair(t *testing.T) (sk, pk x25519.Key) {
	t.Helper()
	if _, err := rand.Read(sk[:]); err != nil {
		t.Fatal(err)
	}
	x25519.KeyGen(&pk, &sk)
	return sk, pk
}

// TestPairCacheRefusesOtherKeys checks that a cached pair is served only
// to a client naming the very keys its claimer agreed with: a client with
// the same ID and another key pair, or naming another key for the same
// peer, or in another session, gets the key of its own inputs, checked
// against agree (one uncached ladder, independent of the batch code), and
// the true ends are still served the cached key, computed once.
func TestPairCacheRefusesOtherKeys(t *testing.T) {
	session := []byte("pair cache keys")
	skA, pkA := newKeyPair(t) // client 1
	skB, pkB := newKeyPair(t) // client 2
	skC, pkC := newKeyPair(t) // another key pair claiming ID 2
	_, pkD := newKeyPair(t)   // another key named for client 1
	pc := new(PairCache)
	batch := func(sk, own *x25519.Key, id ClientID, peer *x25519.Key, peerID ClientID, session []byte) [32]byte {
		t.Helper()
		keys, _, bad := pc.agreeBatch(pairBatch{sk: sk, own: own, id: id, pks: []*x25519.Key{peer}, peers: []ClientID{peerID}, session: session, info: infoPairMask, workers: 1})
		if bad != -1 {
			t.Fatalf("bad index %d", bad)
		}
		return keys[0]
	}
	want := func(sk, peer *x25519.Key, session []byte) [32]byte {
		k, ok := agree(sk, peer, session, infoPairMask)
		if !ok {
			t.Fatal("agreement refused")
		}
		return k
	}
	ab := want(&skA, &pkB, session)
	if got := batch(&skA, &pkA, 1, &pkB, 2, session); got != ab {
		t.Fatal("the claimer's key differs from agree's")
	}
	for _, c := range []struct {
		name       string
		sk, own    *x25519.Key
		id, peerID ClientID
		peer       *x25519.Key
		session    []byte
	}{
		{"same ID, other key pair", &skC, &pkC, 2, 1, &pkA, session},
		{"other key for the peer", &skB, &pkB, 2, 1, &pkD, session},
		{"claimer naming another peer key", &skA, &pkA, 1, 2, &pkC, session},
		{"other session", &skB, &pkB, 2, 1, &pkA, []byte("another session")},
	} {
		ran, bypassed := pc.ran.Load(), pc.bypassed.Load()
		got := batch(c.sk, c.own, c.id, c.peer, c.peerID, c.session)
		if got != want(c.sk, c.peer, c.session) {
			t.Errorf("%s: served a key other than its own agreement's", c.name)
		}
		if got == ab {
			t.Errorf("%s: served the cached key of clients 1 and 2", c.name)
		}
		if pc.ran.Load() != ran+1 || pc.bypassed.Load() != bypassed+1 {
			t.Errorf("%s: %d agreements run (%d outside the cache), want 1 (1)", c.name, pc.ran.Load()-ran, pc.bypassed.Load()-bypassed)
		}
	}
	ran := pc.ran.Load()
	if got := batch(&skB, &pkB, 2, &pkA, 1, session); got != ab {
		t.Error("the true other end was not served the pair's key")
	}
	if pc.ran.Load() != ran {
		t.Error("the true other end ran the agreement again")
	}
}

// TestPairCacheSharesAEAD checks that with aead set both ends of a pair
// get one AES-256-GCM instance, which seals and opens as newGCM of the
// uncached key does, and that each end's instance opens what the other
// sealed.
func TestPairCacheSharesAEAD(t *testing.T) {
	session := []byte("pair cache aead")
	skA, pkA := newKeyPair(t)
	skB, pkB := newKeyPair(t)
	pc := new(PairCache)
	end := func(sk, own *x25519.Key, id ClientID, peer *x25519.Key, peerID ClientID) cipher.AEAD {
		keys, aeads, bad := pc.agreeBatch(pairBatch{sk: sk, own: own, id: id, pks: []*x25519.Key{peer}, peers: []ClientID{peerID}, session: session, info: infoShareEnc, aead: true, workers: 1})
		if bad != -1 || len(aeads) != 1 || len(keys) != 1 {
			t.Fatalf("bad %d, %d instances, %d keys", bad, len(aeads), len(keys))
		}
		return aeads[0]
	}
	a, b := end(&skA, &pkA, 1, &pkB, 2), end(&skB, &pkB, 2, &pkA, 1)
	if a != b {
		t.Error("the two ends built separate instances")
	}
	key, ok := agree(&skA, &pkB, session, infoShareEnc)
	if !ok {
		t.Fatal("agreement refused")
	}
	ref := newGCM(&key)
	nonce := make([]byte, 12)
	msg := []byte("shares")
	if ct := a.Seal(nil, nonce, msg, session); !bytes.Equal(ct, ref.Seal(nil, nonce, msg, session)) {
		t.Error("the shared instance seals unlike newGCM of the uncached key")
	} else if pt, err := b.Open(nil, nonce, ct, session); err != nil || !bytes.Equal(pt, msg) {
		t.Errorf("the other end opens %q, %v", pt, err)
	}
}

// TestCanonicalScalarMatchesParse checks canonicalScalar against
// parseScalar (circl's strict decoding) around ℓ and on random inputs.
func TestCanonicalScalarMatchesParse(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(7, 8))
	var l [32]byte
	for i, w := range scalarOrder {
		binary.LittleEndian.PutUint64(l[8*i:], w)
	}
	var cases [][]byte
	for _, d := range []int64{-2, -1, 0, 1, 2} {
		// ℓ + d, little-endian.
		be := slices.Clone(l[:])
		slices.Reverse(be)
		x := new(big.Int).SetBytes(be)
		x.Add(x, big.NewInt(d))
		b := make([]byte, 32)
		x.FillBytes(b)
		slices.Reverse(b)
		cases = append(cases, b)
	}
	cases = append(cases, make([]byte, 32), bytes.Repeat([]byte{0xff}, 32), make([]byte, 31), make([]byte, 33), nil)
	for range 2000 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[31] &= byte(0x1f >> rng.IntN(5)) // near and below ℓ's top byte
		if rng.IntN(2) == 0 {
			j := rng.IntN(32)
			copy(b[j:], l[j:]) // ℓ's top bytes, so the lower ones decide
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		_, err := parseScalar(b)
		if got := canonicalScalar(b); got != (err == nil) {
			t.Errorf("%x: canonicalScalar %v, parseScalar error %v", b, got, err)
		}
	}
}

// TestHKDF32MatchesHKDF checks hkdf32 against crypto/hkdf, over secrets,
// sessions (empty, short, a block and longer than a block, which HMAC
// hashes first) and info strings (every purpose's, empty and long), and
// that it allocates nothing for the protocol's sizes.
func TestHKDF32MatchesHKDF(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(9, 10))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	infos := []string{infoMaskKey, infoSelfMask, infoShareEnc, infoPairMask, "", strings.Repeat("i", 200)}
	for _, sl := range []int{0, 1, 16, 63, 64, 65, 200} {
		for _, xl := range []int{0, 32, 64, 200} {
			for _, info := range infos {
				secret, session := bytesOf(xl), bytesOf(sl)
				want, err := hkdf.Key(sha256.New, secret, session, info, keySize)
				if err != nil {
					t.Fatal(err)
				}
				if got := hkdf32(secret, session, info); !bytes.Equal(got[:], want) {
					t.Errorf("session %d bytes, secret %d bytes, info %q: hkdf32 differs from crypto/hkdf", sl, xl, info)
				}
			}
		}
	}
	secret, session := bytesOf(32), bytesOf(16)
	if n := testing.AllocsPerRun(10, func() { hkdf32(secret, session, infoSelfMask) }); n != 0 {
		t.Errorf("hkdf32 allocates %v times", n)
	}
}

// TestPairCacheMessagesBitForBit runs an instance whose clients share a
// PairCache and checks their messages against keys agreed without it:
// every share ciphertext opens under the AES-256-GCM of agree's key and
// seals again, under its nonce, to the same bytes, and each client's
// masked input equals that of a copy of the client without the cache.
func TestPairCacheMessagesBitForBit(t *testing.T) {
	const n, d = 12, 40
	rng := mrand.New(mrand.NewPCG(11, 12))
	h := newHarness(t, ServerConfig{Session: []byte("bit for bit"), Dim: d, Params: Params{Neighbors: 6, Threshold: 4}}, testInputs(rng, n, d), nil)
	pairs := new(PairCache)
	for _, c := range h.mem.Clients {
		c.Pairs = pairs
	}
	if err := h.advertise(); err != nil {
		t.Fatal(err)
	}
	if err := h.shareKeys(); err != nil {
		t.Fatal(err)
	}
	edges := 0
	for u, m := range h.shareMsgs {
		cu := h.clients[u]
		edges += len(m.Shares)
		for _, es := range m.Shares {
			key, ok := agree(&cu.encSK, &h.clients[es.To].encPK, cu.session, infoShareEnc)
			if !ok {
				t.Fatal("agreement refused")
			}
			aead := newGCM(&key)
			aad := appendShareAAD(nil, cu.session, u, es.To)
			nonce := es.Ciphertext[:12]
			pt, err := aead.Open(nil, nonce, es.Ciphertext[12:], aad)
			if err != nil {
				t.Fatalf("share %d → %d does not open under the uncached key: %v", u, es.To, err)
			}
			if again := aead.Seal(slices.Clone(nonce), nonce, pt, aad); !bytes.Equal(again, es.Ciphertext) {
				t.Fatalf("share %d → %d differs from its uncached sealing", u, es.To)
			}
		}
	}
	for _, id := range h.ids {
		req, err := h.srv.MaskedInputRequest(id)
		if err != nil {
			t.Fatal(err)
		}
		c := h.clients[id]
		solo := *c
		solo.pairs = nil
		got, err := c.MaskedInput(req, h.inputs[id])
		if err != nil {
			t.Fatal(err)
		}
		want, err := solo.MaskedInput(req, h.inputs[id])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Masked, want.Masked) {
			t.Errorf("client %d: masked input through the cache differs from the uncached one", id)
		}
	}
	// edges counts each pair twice (one share each way); one agreement
	// per pair and purpose.
	if got := pairs.ran.Load(); got != int64(edges) || pairs.bypassed.Load() != 0 {
		t.Errorf("%d agreements run (%d outside the cache) for %d pairs × 2 purposes", got, pairs.bypassed.Load(), edges/2)
	}
}
