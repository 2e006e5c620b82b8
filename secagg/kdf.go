package secagg

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/cloudflare/circl/group"
	fp "github.com/cloudflare/circl/math/fp25519"

	"github.com/dpfl/dpfl/internal/parallel"
)

// HKDF info strings: one per purpose, so that no derived key is ever used
// for two things (and the PRG's all-zero IV stays safe). The salt is always
// the session, binding every key to one instance.
const (
	infoMaskKey  = "dpfl/secagg/v1 mask key"
	infoSelfMask = "dpfl/secagg/v1 self mask"
	infoShareEnc = "dpfl/secagg/v1 share encryption"
	infoPairMask = "dpfl/secagg/v1 pairwise mask"
	secretDST    = "dpfl/secagg/v1 secret scalar"
)

// keySize is the length of every X25519 key, scalar encoding and derived
// symmetric key in the protocol.
const keySize = 32

// hkdf32 derives a 32-byte key from secret for one purpose.
func hkdf32(secret, session []byte, info string) [32]byte {
	k, err := hkdf.Key(sha256.New, secret, session, info, keySize)
	if err != nil {
		panic(err) // 32 bytes of SHA-256 output is always within HKDF's limit
	}
	return [32]byte(k)
}

// sessionKDF computes hkdf32(secret, session, info) for many secrets of
// one session, bit for bit, with six SHA-256 compressions instead of
// eight and no allocation: HKDF-Extract (RFC 5869, §2.2) is HMAC keyed
// with the session, whose padded-key states crypto/hmac computes once and
// restores on Reset; HKDF-Expand's one block, T(1) = HMAC(PRK, info ‖
// 0x01), is HMAC written out on two reused SHA-256 states. A sessionKDF is
// not safe for concurrent use.
type sessionKDF struct {
	extract      hash.Hash
	inner, outer hash.Hash
	pad          [sha256.BlockSize]byte
	prk, t       [sha256.Size]byte
	msg          []byte // info ‖ 0x01
}

func newSessionKDF(session []byte) *sessionKDF {
	return &sessionKDF{extract: hmac.New(sha256.New, session), inner: sha256.New(), outer: sha256.New()}
}

// key is hkdf32(secret, session, info).
func (k *sessionKDF) key(secret []byte, info string) [32]byte {
	k.extract.Reset()
	k.extract.Write(secret)
	k.extract.Sum(k.prk[:0])
	// HMAC(PRK, info ‖ 0x01): PRK is 32 bytes, shorter than a block, so
	// the padded key is PRK then zeros.
	for i := range k.pad {
		k.pad[i] = 0x36
	}
	for i, b := range k.prk {
		k.pad[i] ^= b
	}
	k.inner.Reset()
	k.inner.Write(k.pad[:])
	k.msg = append(append(k.msg[:0], info...), 1)
	k.inner.Write(k.msg)
	k.inner.Sum(k.t[:0])
	for i := range k.pad {
		k.pad[i] ^= 0x36 ^ 0x5c
	}
	k.outer.Reset()
	k.outer.Write(k.pad[:])
	k.outer.Write(k.t[:])
	var out [32]byte
	k.outer.Sum(out[:0])
	return out
}

// randomScalar draws a uniformly random Ristretto255 scalar from 64 bytes of
// rnd (hash-to-field of RFC 9380 with a 64-byte input has statistical
// distance < 2^-128 from uniform).
func randomScalar(rnd io.Reader) (group.Scalar, error) {
	var buf [64]byte
	if _, err := io.ReadFull(rnd, buf[:]); err != nil {
		return nil, fmt.Errorf("secagg: reading randomness: %w", err)
	}
	return group.Ristretto255.HashToScalar(buf[:], []byte(secretDST)), nil
}

// scalarBytes is the canonical 32-byte encoding of s.
func scalarBytes(s group.Scalar) []byte {
	b, err := s.MarshalBinary()
	if err != nil {
		panic(err) // Ristretto255 scalars always marshal
	}
	return b
}

// parseScalar decodes a canonical 32-byte scalar encoding.
func parseScalar(b []byte) (group.Scalar, error) {
	s := group.Ristretto255.NewScalar()
	if err := s.UnmarshalBinary(b); err != nil {
		return nil, errors.New("malformed scalar")
	}
	return s, nil
}

// maskKeyFromScalar derives the X25519 mask key pair (s_u^SK, s_u^PK) from
// the shared scalar: the scalar, not the X25519 key, is what Shamir shares,
// since a 32-byte X25519 key does not fit in the ≈2^252 scalar field.
func maskKeyFromScalar(s group.Scalar, session []byte) (sk, pk x25519.Key) {
	sk = x25519.Key(hkdf32(scalarBytes(s), session, infoMaskKey))
	x25519.KeyGen(&pk, &sk)
	return sk, pk
}

// selfMaskKey derives the self-mask PRG key from the scalar b_u.
func selfMaskKey(b group.Scalar, session []byte) [32]byte {
	return hkdf32(scalarBytes(b), session, infoSelfMask)
}

// agree is X25519(sk, pk) followed by HKDF for one purpose. It fails if pk
// is a low-order point (the shared secret would be all-zero, known to
// anyone).
func agree(sk, pk *x25519.Key, session []byte, info string) ([32]byte, bool) {
	var shared x25519.Key
	if !x25519.Shared(&shared, sk, pk) {
		return [32]byte{}, false
	}
	return hkdf32(shared[:], session, info), true
}

// agreeBatch is agree(sk, pks[i], session, info) for every i, the X25519
// ladders batched (sharedBatch) and spread over up to workers goroutines
// in chunks of whole lane groups. It returns the keys in pks order, and
// the index of the first peer whose key is of low order (−1 if none), in
// which case the keys are not to be used.
func agreeBatch(sk *x25519.Key, pks []*x25519.Key, session []byte, info string, workers int) ([][32]byte, int) {
	keys, ok := agreeEach(sk, pks, session, info, workers)
	if i := slices.Index(ok, false); i >= 0 {
		return nil, i
	}
	return keys, -1
}

// agreeEach is agreeBatch reporting each agreement: keys[i] is agree(sk,
// pks[i], session, info) where ok[i], and zero where pks[i] is of low
// order.
func agreeEach(sk *x25519.Key, pks []*x25519.Key, session []byte, info string, workers int) ([][32]byte, []bool) {
	n := len(pks)
	if n == 0 {
		return nil, nil
	}
	shared, ok := make([]x25519.Key, n), make([]bool, n)
	lanes := 4 // sharedBatch's lane group: whole groups per chunk
	if hasLadder8 {
		lanes = 8
	}
	chunks := parallel.Workers(workers, (n+2*lanes-1)/(2*lanes)) // at least two lane groups each
	size := ((n+chunks-1)/chunks + lanes - 1) &^ (lanes - 1)
	_ = parallel.For(context.Background(), workers, (n+size-1)/size, func(_, c int) error {
		lo, hi := c*size, min(n, (c+1)*size)
		sharedBatch(shared[lo:hi], ok[lo:hi], sk, pks[lo:hi])
		return nil
	})
	keys := make([][32]byte, n)
	kdf := newSessionKDF(session)
	for i := range shared {
		if ok[i] {
			keys[i] = kdf.key(shared[i][:], info)
		}
	}
	return keys, ok
}

// lowOrderPoints are the u-coordinates of the points of order dividing 8
// on Curve25519 and its twist (0, 1, −1 and the two of order 8), the keys
// whose X25519 result is all-zero for every clamped scalar (RFC 7748, §6.1;
// the list circl's x25519.Shared refuses).
var lowOrderPoints = func() [5]fp.Elt {
	var pts [5]fp.Elt
	for i, h := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
	} {
		if _, err := hex.Decode(pts[i][:], []byte(h)); err != nil {
			panic(err)
		}
	}
	return pts
}()

// validPublicKey reports whether b is a 32-byte X25519 public key that is
// not a low-order point: its u-coordinate (top bit ignored, reduced mod
// p, as X25519 reads it) is none of lowOrderPoints. This is the check of
// x25519.Shared without its scalar multiplication (a full ladder per key,
// which the server used to run with a throwaway scalar).
func validPublicKey(b []byte) bool {
	if len(b) != keySize {
		return false
	}
	u := fp.Elt(b)
	u[31] &= 127
	fp.Modp(&u)
	for _, p := range lowOrderPoints {
		if u == p {
			return false
		}
	}
	return true
}

// Share plaintext layout: from ‖ to ‖ share of the mask-key scalar ‖ share
// of b_u, IDs big-endian. The ciphertext is nonce ‖ AES-256-GCM(plaintext).
const (
	sharePlainLen  = 4 + 4 + 2*keySize
	shareCipherLen = 12 + sharePlainLen + 16
)

// shareAAD binds a ciphertext to the instance and its direction.
func shareAAD(session []byte, from, to ClientID) []byte {
	aad := make([]byte, 0, len(session)+8)
	aad = append(aad, session...)
	aad = binary.BigEndian.AppendUint32(aad, uint32(from))
	return binary.BigEndian.AppendUint32(aad, uint32(to))
}

func newGCM(key *[32]byte) cipher.AEAD {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// sealShares encrypts the pair of shares from → to with aead, the
// AES-256-GCM of their share-encryption key (newGCM), under the 12-byte
// nonce (random: every key seals one message each way).
func sealShares(aead cipher.AEAD, nonce []byte, session []byte, from, to ClientID, maskShare, selfShare []byte) []byte {
	pt := make([]byte, 0, sharePlainLen)
	pt = binary.BigEndian.AppendUint32(pt, uint32(from))
	pt = binary.BigEndian.AppendUint32(pt, uint32(to))
	pt = append(pt, maskShare...)
	pt = append(pt, selfShare...)
	out := make([]byte, 12, shareCipherLen)
	copy(out, nonce)
	return aead.Seal(out, out[:12], pt, shareAAD(session, from, to))
}

// openShares decrypts (with aead, as for sealShares) and parses a
// ciphertext from → to, returning the two shares' canonical encodings.
func openShares(aead cipher.AEAD, session []byte, from, to ClientID, ct []byte) (maskShare, selfShare []byte, err error) {
	if len(ct) != shareCipherLen {
		return nil, nil, fmt.Errorf("ciphertext is %d bytes, want %d", len(ct), shareCipherLen)
	}
	pt, err := aead.Open(nil, ct[:12], ct[12:], shareAAD(session, from, to))
	if err != nil {
		return nil, nil, errors.New("ciphertext does not decrypt")
	}
	if ClientID(binary.BigEndian.Uint32(pt)) != from || ClientID(binary.BigEndian.Uint32(pt[4:])) != to {
		return nil, nil, errors.New("plaintext names the wrong sender or recipient")
	}
	maskShare, selfShare = pt[8:8+keySize], pt[8+keySize:]
	if _, err := parseScalar(maskShare); err != nil {
		return nil, nil, err
	}
	if _, err := parseScalar(selfShare); err != nil {
		return nil, nil, err
	}
	return maskShare, selfShare, nil
}
