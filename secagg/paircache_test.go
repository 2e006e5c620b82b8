package secagg

import (
	"crypto/rand"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
)

// TestPairCacheAgreesAsEachSide checks PairCache against the symmetry it
// relies on: both clients of a pair get exactly what agree computes for
// each of them, the second from the one entry the first stored, and
// another purpose or session is a different entry.
func TestPairCacheAgreesAsEachSide(t *testing.T) {
	var skU, pkU, skV, pkV x25519.Key
	for _, k := range []*x25519.Key{&skU, &skV} {
		if _, err := rand.Read(k[:]); err != nil {
			t.Fatal(err)
		}
	}
	x25519.KeyGen(&pkU, &skU)
	x25519.KeyGen(&pkV, &skV)
	session := []byte("session")
	wantU, okU := agree(&skU, &pkV, session, infoPairMask)
	wantV, okV := agree(&skV, &pkU, session, infoPairMask)
	if !okU || !okV || wantU != wantV {
		t.Fatal("X25519 agreement is not symmetric")
	}
	var pc PairCache
	if got, ok := pc.agree(&skU, &pkU, &pkV, session, infoPairMask); !ok || got != wantU {
		t.Fatalf("first side: %x, want %x", got, wantU)
	}
	if got, ok := pc.agree(&skV, &pkV, &pkU, session, infoPairMask); !ok || got != wantV {
		t.Fatalf("second side: %x, want %x", got, wantV)
	}
	if len(pc.m) != 1 {
		t.Fatalf("%d entries after both sides of one pair, want 1", len(pc.m))
	}
	enc, _ := agree(&skU, &pkV, session, infoShareEnc)
	if got, _ := pc.agree(&skV, &pkV, &pkU, session, infoShareEnc); got != enc || got == wantU {
		t.Fatal("another purpose must be its own key")
	}
	other, _ := agree(&skU, &pkV, []byte("other"), infoPairMask)
	if got, _ := pc.agree(&skU, &pkU, &pkV, []byte("other"), infoPairMask); got != other {
		t.Fatal("another session must be its own key")
	}
	var low x25519.Key // all zeros: a low-order point
	if _, ok := pc.agree(&skU, &pkU, &low, session, infoPairMask); ok {
		t.Fatal("a low-order key must fail, not be cached")
	}
}
