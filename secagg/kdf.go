package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cloudflare/circl/dh/x25519"
	"github.com/cloudflare/circl/group"
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

// lowOrderProbe is a fixed secret used only to test a public key for low
// order (x25519.Shared reports it); the result is discarded.
var lowOrderProbe = x25519.Key{1}

// validPublicKey reports whether b is a 32-byte X25519 public key that is
// not a low-order point.
func validPublicKey(b []byte) bool {
	if len(b) != keySize {
		return false
	}
	var shared x25519.Key
	return x25519.Shared(&shared, &lowOrderProbe, (*x25519.Key)(b))
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

// sealShares encrypts the pair of shares from → to.
func sealShares(key *[32]byte, rnd io.Reader, session []byte, from, to ClientID, maskShare, selfShare []byte) ([]byte, error) {
	pt := make([]byte, 0, sharePlainLen)
	pt = binary.BigEndian.AppendUint32(pt, uint32(from))
	pt = binary.BigEndian.AppendUint32(pt, uint32(to))
	pt = append(pt, maskShare...)
	pt = append(pt, selfShare...)
	out := make([]byte, 12, shareCipherLen)
	if _, err := io.ReadFull(rnd, out); err != nil {
		return nil, fmt.Errorf("secagg: reading randomness: %w", err)
	}
	return newGCM(key).Seal(out, out[:12], pt, shareAAD(session, from, to)), nil
}

// openShares decrypts and parses a ciphertext from → to, returning the two
// shares' canonical encodings.
func openShares(key *[32]byte, session []byte, from, to ClientID, ct []byte) (maskShare, selfShare []byte, err error) {
	if len(ct) != shareCipherLen {
		return nil, nil, fmt.Errorf("ciphertext is %d bytes, want %d", len(ct), shareCipherLen)
	}
	pt, err := newGCM(key).Open(nil, ct[:12], ct[12:], shareAAD(session, from, to))
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
