package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// castagnoli is the CRC-32C table (polynomial 0x1EDC6F41, reflected
// 0x82F63B78; RFC 3720 §B.4). It is hardware-accelerated on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameHeader is the length of the CRC prefix of every stored value.
const frameHeader = 4

var (
	errShortFrame = errors.New("value shorter than its 4-byte checksum")
	errChecksum   = errors.New("CRC-32C checksum mismatch")
)

// frame returns CRC-32C(payload) ‖ payload in a fresh slice.
func frame(payload []byte) []byte {
	v := make([]byte, frameHeader+len(payload))
	copy(v[frameHeader:], payload)
	seal(v)
	return v
}

// seal writes the checksum of v[frameHeader:] into v[:frameHeader]. It lets
// large encoders (checkpoints) build the payload in place, avoiding a copy.
func seal(v []byte) {
	binary.LittleEndian.PutUint32(v, crc32.Checksum(v[frameHeader:], castagnoli))
}

// unframe verifies v and returns its payload, aliasing v (which, coming from
// bbolt, is only valid inside the transaction).
func unframe(v []byte) ([]byte, error) {
	if len(v) < frameHeader {
		return nil, errShortFrame
	}
	p := v[frameHeader:]
	if binary.LittleEndian.Uint32(v) != crc32.Checksum(p, castagnoli) {
		return nil, errChecksum
	}
	return p, nil
}

// u64 encodes n as an 8-byte big-endian key so cursor order is numeric.
func u64(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

// keyU64 decodes a key written by u64; ok is false for any other length.
func keyU64(k []byte) (n uint64, ok bool) {
	if len(k) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}
