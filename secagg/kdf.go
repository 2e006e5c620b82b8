package secagg

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/bits"
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

// hkdf32 derives a 32-byte key from secret for one purpose: HKDF-SHA256
// (RFC 5869) with the session as salt and one block of output, bit for bit
// crypto/hkdf.Key(sha256.New, secret, session, info, 32). It is written
// on sha256.Sum256 over stack buffers because crypto/hkdf allocates a
// dozen hash states per key, and this runs for each client's mask key and
// self-mask key and for every secret the server rebuilds.
func hkdf32(secret, session []byte, info string) [32]byte {
	prk := hmacSHA256(session, secret, "", false) // HKDF-Extract
	return hmacSHA256(prk[:], nil, info, true)    // HKDF-Expand, T(1)
}

// hmacSHA256 is HMAC-SHA256(key, msg ‖ info ‖ 0x01), the 0x01 only with
// counter (RFC 2104: a key longer than a block is hashed first).
func hmacSHA256(key, msg []byte, info string, counter bool) [32]byte {
	var k [sha256.BlockSize]byte
	if len(key) > sha256.BlockSize {
		h := sha256.Sum256(key)
		copy(k[:], h[:])
	} else {
		copy(k[:], key)
	}
	// Room for a block and a 32-byte secret or an info string of up to
	// 95 bytes: longer inputs still work, through a heap buffer.
	var buf [sha256.BlockSize + 96]byte
	in := buf[:sha256.BlockSize]
	for i, b := range k {
		in[i] = b ^ 0x36
	}
	in = append(append(in, msg...), info...)
	if counter {
		in = append(in, 1)
	}
	inner := sha256.Sum256(in)
	in = buf[:sha256.BlockSize]
	for i, b := range k {
		in[i] = b ^ 0x5c
	}
	in = append(in, inner[:]...)
	out := sha256.Sum256(in)
	clear(buf[:])
	clear(k[:])
	return out
}

// sessionKDF computes hkdf32(secret, session, info) for many secrets of
// one session, bit for bit, with six SHA-256 compressions instead of
// eight and no allocation: HKDF-Extract (RFC 5869, §2.2) is HMAC keyed
// with the session, whose padded-key states crypto/hmac computes once and
// restores on Reset; HKDF-Expand's one block, T(1) = HMAC(PRK, info ‖
// 0x01), is hkdf32's own hmacSHA256. A sessionKDF is not safe for
// concurrent use.
type sessionKDF struct {
	extract hash.Hash
	prk     [sha256.Size]byte
}

func newSessionKDF(session []byte) *sessionKDF {
	return &sessionKDF{extract: hmac.New(sha256.New, session)}
}

// key is hkdf32(secret, session, info).
func (k *sessionKDF) key(secret []byte, info string) [32]byte {
	k.extract.Reset()
	k.extract.Write(secret)
	k.extract.Sum(k.prk[:0])
	return hmacSHA256(k.prk[:], nil, info, true)
}

// wipe zeroes the last PRK. It does not reach inside the HMAC state:
// crypto/hmac keeps its last partial block (the raw shared secret) until
// it is written again, and offers no way to clear it. So a sessionKDF is
// recycled only among one instance's simulated clients (PairCache.kdfs),
// which run in one process that holds the pairs' keys in the cache
// anyway, never across instances or to a device.
func (k *sessionKDF) wipe() { clear(k.prk[:]) }

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

// scalarOrder is ℓ = 2^252 + 27742317777372353535851937790883648493, the
// order of the Ristretto255 group, in little-endian 64-bit limbs.
var scalarOrder = [4]uint64{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6, 0, 0x1000000000000000}

// canonicalScalar reports whether b is a canonical 32-byte scalar
// encoding, exactly when parseScalar accepts it: 32 bytes whose
// little-endian value is below ℓ (circl's UnmarshalBinary, RFC 9496,
// §4.4). It only checks, so it allocates nothing where parseScalar
// allocates a scalar that a validity check would throw away (one per
// received share in rounds 2 and 4), and it runs in constant time, the
// borrow of b − ℓ, since the shares it checks are secret.
func canonicalScalar(b []byte) bool {
	if len(b) != keySize {
		return false
	}
	var borrow uint64
	for i, l := range scalarOrder {
		_, borrow = bits.Sub64(binary.LittleEndian.Uint64(b[8*i:]), l, borrow)
	}
	return borrow == 1
}

// maskKeyFromScalar derives the X25519 mask key pair (s_u^SK, s_u^PK) from
// the shared scalar: the scalar, not the X25519 key, is what Shamir shares,
// since a 32-byte X25519 key does not fit in the ≈2^252 scalar field.
func maskKeyFromScalar(s group.Scalar, session []byte) (sk, pk x25519.Key) {
	sk = maskSecretFromScalar(s, session)
	x25519.KeyGen(&pk, &sk)
	return sk, pk
}

// maskSecretFromScalar is the secret half of maskKeyFromScalar, s_u^SK =
// HKDF-SHA256(scalar, salt = session, info = infoMaskKey): keyPool derives
// the secrets of a batch with it and their public keys in one keyGenBatch.
func maskSecretFromScalar(s group.Scalar, session []byte) x25519.Key {
	return x25519.Key(hkdf32(scalarBytes(s), session, infoMaskKey))
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
	keys, ok := agreeEach(sk, pks, session, info, workers, nil)
	if i := slices.Index(ok, false); i >= 0 {
		return nil, i
	}
	return keys, -1
}

// agreeEach is agreeBatch reporting each agreement: keys[i] is agree(sk,
// pks[i], session, info) where ok[i], and zero where pks[i] is of low
// order. kdf, if not nil, is a sessionKDF of session to derive the keys
// with (nil: a new one).
func agreeEach(sk *x25519.Key, pks []*x25519.Key, session []byte, info string, workers int, kdf *sessionKDF) ([][32]byte, []bool) {
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
	if kdf == nil {
		kdf = newSessionKDF(session)
	}
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

// appendShareAAD appends to dst the AAD that binds a ciphertext to the
// instance and its direction: session ‖ from ‖ to.
func appendShareAAD(dst, session []byte, from, to ClientID) []byte {
	dst = append(dst, session...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(from))
	return binary.BigEndian.AppendUint32(dst, uint32(to))
}

// newGCM is the AES-256-GCM of a share-encryption key.
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

// shareScratch is the working memory of sealShares and openShares, so
// that a client's k ciphertexts reuse one plaintext and one AAD buffer
// instead of allocating both per ciphertext. Not safe for concurrent use.
type shareScratch struct {
	pt, aad []byte
}

// newShareScratch allocates the scratch for one session, in one block.
func newShareScratch(session []byte) *shareScratch {
	buf := make([]byte, sharePlainLen+len(session)+8)
	return &shareScratch{pt: buf[:0:sharePlainLen], aad: buf[sharePlainLen:sharePlainLen]}
}

// wipe zeroes the plaintext buffer, which held shares.
func (s *shareScratch) wipe() { clear(s.pt[:cap(s.pt)]) }

// sealShares encrypts the pair of shares from → to with aead, the
// AES-256-GCM of their share-encryption key (newGCM), under the 12-byte
// nonce (random: every key seals one message each way), appending the
// ciphertext to dst[:0] (which needs capacity shareCipherLen to be used
// in place).
func sealShares(aead cipher.AEAD, sc *shareScratch, dst, nonce []byte, session []byte, from, to ClientID, maskShare, selfShare []byte) []byte {
	pt := binary.BigEndian.AppendUint32(sc.pt[:0], uint32(from))
	pt = binary.BigEndian.AppendUint32(pt, uint32(to))
	pt = append(pt, maskShare...)
	pt = append(pt, selfShare...)
	sc.aad = appendShareAAD(sc.aad[:0], session, from, to)
	out := append(dst[:0], nonce...)
	return aead.Seal(out, out[:12], pt, sc.aad)
}

// openShares decrypts (with aead, as for sealShares) and parses a
// ciphertext from → to into dst[:0] (capacity sharePlainLen to be used in
// place), returning the two shares' canonical encodings, which alias it.
func openShares(aead cipher.AEAD, sc *shareScratch, dst []byte, session []byte, from, to ClientID, ct []byte) (maskShare, selfShare []byte, err error) {
	if len(ct) != shareCipherLen {
		return nil, nil, fmt.Errorf("ciphertext is %d bytes, want %d", len(ct), shareCipherLen)
	}
	sc.aad = appendShareAAD(sc.aad[:0], session, from, to)
	pt, err := aead.Open(dst[:0], ct[:12], ct[12:], sc.aad)
	if err != nil {
		return nil, nil, errors.New("ciphertext does not decrypt")
	}
	if ClientID(binary.BigEndian.Uint32(pt)) != from || ClientID(binary.BigEndian.Uint32(pt[4:])) != to {
		return nil, nil, errors.New("plaintext names the wrong sender or recipient")
	}
	maskShare, selfShare = pt[8:8+keySize:8+keySize], pt[8+keySize:]
	if !canonicalScalar(maskShare) || !canonicalScalar(selfShare) {
		return nil, nil, errors.New("malformed scalar")
	}
	return maskShare, selfShare, nil
}
