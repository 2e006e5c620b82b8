package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"testing"
)

// TestAddMaskMatchesStdlibCTR checks addMask against a plain
// one-shot AES-256-CTR keystream read word by word, across chunk
// boundaries and for a length that is not a multiple of the chunk.
func TestAddMaskMatchesStdlibCTR(t *testing.T) {
	var key [32]byte
	for i := range key {
		key[i] = byte(3*i + 1)
	}
	for _, d := range []int{0, 1, 7, prgChunk/4 - 1, prgChunk / 4, prgChunk/4 + 1, 3*prgChunk/4 + 5} {
		stream := make([]byte, 4*d)
		block, _ := aes.NewCipher(key[:])
		cipher.NewCTR(block, make([]byte, 16)).XORKeyStream(stream, stream)
		x := make([]uint32, d)
		for i := range x {
			x[i] = uint32(i) * 2654435761
		}
		got := append([]uint32(nil), x...)
		var buf prgBuf
		addMask(got, &key, false, &buf)
		for i := range x {
			if want := x[i] + binary.LittleEndian.Uint32(stream[4*i:]); got[i] != want {
				t.Fatalf("d=%d: add word %d = %#x, want %#x", d, i, got[i], want)
			}
		}
		addMask(got, &key, true, &buf)
		for i := range x {
			if got[i] != x[i] {
				t.Fatalf("d=%d: add then subtract changed word %d", d, i)
			}
		}
	}
}

// BenchmarkMaskExpansion measures addMask's throughput in bytes of mask
// per second.
func BenchmarkMaskExpansion(b *testing.B) {
	var key [32]byte
	for _, d := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			dst := make([]uint32, d)
			var buf prgBuf
			b.SetBytes(int64(4 * d))
			for b.Loop() {
				addMask(dst, &key, false, &buf)
			}
		})
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
