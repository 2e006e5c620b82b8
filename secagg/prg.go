package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"unsafe"
)

// prgChunk is the keystream buffer of one mask expansion, in bytes: large
// enough to amortise the per-call overhead of the CTR stream, small enough
// to stay in L1/L2 cache next to the slice of dst being updated.
const prgChunk = 16 << 10

// littleEndian reports whether a []byte can be read as native []uint32 to
// get the PRG's little-endian words without a byte-order conversion.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// zeroChunk is a read-only source of zeros: XORing the keystream into it
// writes the keystream without first clearing the destination.
var zeroChunk [prgChunk]byte

// prgBuf is the reusable scratch space of addMask.
type prgBuf [prgChunk]byte

// addMask adds (sub = false) or subtracts (sub = true) PRG(key) into dst,
// element-wise mod 2^32. PRG(key) is the AES-256-CTR keystream under key
// with an all-zero IV, read as little-endian uint32 words; the zero IV is
// safe because every key is used for exactly one stream: keys are derived
// per instance (the HKDF salt is the session) and per purpose (the HKDF
// info string). buf is scratch space (unused, and may be nil, where
// addMaskNeedsBuf is false); dst and buf must not overlap.
func addMask(dst []uint32, key *[32]byte, sub bool, buf *prgBuf) {
	if !addMaskNeedsBuf() {
		addMaskVAES(dst, key, sub)
		return
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key never fails
	}
	var iv [aes.BlockSize]byte
	ctr := cipher.NewCTR(block, iv[:])
	for len(dst) > 0 {
		n := min(len(dst), prgChunk/4)
		b := buf[:4*n]
		ctr.XORKeyStream(b, zeroChunk[:4*n]) // the keystream itself

		d := dst[:n]
		if littleEndian {
			w := unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
			if sub {
				subWords(d, w)
			} else {
				addWords(d, w)
			}
		} else {
			for i := range d {
				w := binary.LittleEndian.Uint32(b[4*i:])
				if sub {
					d[i] -= w
				} else {
					d[i] += w
				}
			}
		}
		dst = dst[n:]
	}
}

// addMaskNeedsBuf reports whether addMask uses its scratch buffer: not on
// the VAES kernels, which add the keystream in place, so that callers
// need not allocate (and zero) 16 KiB for nothing.
func addMaskNeedsBuf() bool { return !(hasVAES && littleEndian) }

// addMaskVAES is addMask on the VAES kernels (ctrMask picks the 512- or
// 256-bit one): whole chunks of 64 words (16 AES blocks) in place, then
// the tail from one more chunk of keystream.
func addMaskVAES(dst []uint32, key *[32]byte, sub bool) {
	var rk [15][32]byte
	aes256Expand(&rk, key)
	mode := 0
	if sub {
		mode = 1
	}
	chunks := len(dst) / 64
	if chunks > 0 {
		ctrMask(&dst[0], chunks, &rk, 0, mode)
	}
	if rest := dst[64*chunks:]; len(rest) > 0 {
		var ks [64]uint32
		ctrMask(&ks[0], 1, &rk, uint64(16*chunks), 2)
		if sub {
			subWords(rest, ks[:])
		} else {
			addWords(rest, ks[:])
		}
	}
}
