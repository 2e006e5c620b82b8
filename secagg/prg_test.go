package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"github.com/dpfl/dpfl/simd"
	mrand "math/rand/v2"
	"slices"
	"testing"
)

// TestAddMaskMatchesStdlibCTR checks addMask against a plain
// one-shot AES-256-CTR keystream read word by word, across chunk
// boundaries and for a length that is not a multiple of the chunk, on
// every kernel this machine runs (forEachPRGKernel).
func TestAddMaskMatchesStdlibCTR(t *testing.T) { forEachPRGKernel(t, checkAddMask) }

// forEachPRGKernel runs f as a subtest on each kernel of prgKernels,
// selected with usePRGKernel.
func forEachPRGKernel(t *testing.T, f func(t *testing.T)) {
	for _, k := range prgKernels() {
		t.Run(k, func(t *testing.T) {
			defer usePRGKernel(k)()
			f(t)
		})
	}
}

// checkAddMask is TestAddMaskMatchesStdlibCTR's check, run with whichever
// kernel addMask picks.
func checkAddMask(t *testing.T) {
	t.Helper()
	var key [32]byte
	for i := range key {
		key[i] = byte(3*i + 1)
	}
	rng := mrand.New(mrand.NewPCG(21, 22))
	for trial, d := range []int{0, 1, 7, 63, 64, 65, 127, 128, 191, 192, 193, 255, 256, 257, 449, 7850, prgChunk/4 - 1, prgChunk / 4, prgChunk/4 + 1, 3*prgChunk/4 + 5} {
		if trial%2 == 1 { // other keys: the round keys are derived per key
			for i := range key {
				key[i] = byte(rng.Uint32())
			}
		}
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

// maskBenchDims are the vector lengths of the mask benchmarks, in words:
// the logistic-regression model of the demo (7,850) and larger ones.
var maskBenchDims = []int{7850, 100_000, 1_000_000}

// BenchmarkMaskExpansion measures addMask's throughput in bytes of mask
// per second, on the kernel addMask picks on this machine.
func BenchmarkMaskExpansion(b *testing.B) {
	for _, d := range maskBenchDims {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) { benchAddMask(b, d) })
	}
}

// BenchmarkMaskExpansionKernel is BenchmarkMaskExpansion on each kernel of
// prgKernels, so that they can be compared on one machine.
func BenchmarkMaskExpansionKernel(b *testing.B) {
	for _, k := range prgKernels() {
		for _, d := range maskBenchDims {
			b.Run(fmt.Sprintf("%s/d=%d", k, d), func(b *testing.B) {
				defer usePRGKernel(k)()
				benchAddMask(b, d)
			})
		}
	}
}

// benchAddMask adds the mask of a fixed key into a vector of d words, b.N
// times.
func benchAddMask(b *testing.B, d int) {
	var key [32]byte
	dst := make([]uint32, d)
	var buf prgBuf
	b.SetBytes(int64(4 * d))
	for b.Loop() {
		addMask(dst, &key, false, &buf)
	}
}

// TestWordsKernels checks addWords and subWords (assembly on amd64)
// against plain per-element arithmetic for every length up to 40 and a
// long one, with offsets that misalign the slices.
func TestWordsKernels(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(19, 20))
	for _, n := range append(seq(41), 1003) {
		for off := range 3 {
			a := make([]uint32, n+off)
			b := make([]uint32, n+off+2)
			for i := range a {
				a[i] = rng.Uint32()
			}
			for i := range b {
				b[i] = rng.Uint32()
			}
			sum := slices.Clone(a[off:])
			addWords(sum, b[off:])
			diff := slices.Clone(a[off:])
			subWords(diff, b[off:])
			gs, gd := slices.Clone(a[off:]), slices.Clone(a[off:])
			simd.AddUint32(gs, b[off:off+n])
			simd.SubUint32(gd, b[off:off+n])
			for i := range n {
				x, y := a[off+i], b[off+i]
				if sum[i] != x+y || diff[i] != x-y || gs[i] != x+y || gd[i] != x-y {
					t.Fatalf("n=%d off=%d: word %d wrong", n, off, i)
				}
			}
			if n > 0 {
				// The word after dst is untouched: the kernel honours len(dst).
				c := slices.Clone(a[:off+n])
				addWords(c[off:off+n-1], b[off:])
				if c[off+n-1] != a[off+n-1] {
					t.Fatalf("n=%d: addWords wrote past len(dst)", n)
				}
			}
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestSessionKDFMatchesHKDF checks sessionKDF against crypto/hkdf for
// sessions shorter and longer than a SHA-256 block (the HMAC key is then
// hashed first), every purpose, and secrets of several lengths, reusing
// one sessionKDF for all its session's keys.
func TestSessionKDFMatchesHKDF(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(23, 24))
	for _, sl := range []int{1, 16, 63, 64, 65, 200} {
		session := make([]byte, sl)
		for i := range session {
			session[i] = byte(rng.Uint32())
		}
		kdf := newSessionKDF(session)
		for _, info := range []string{infoMaskKey, infoSelfMask, infoShareEnc, infoPairMask, ""} {
			for _, n := range []int{0, 1, 32, 100} {
				secret := make([]byte, n)
				for i := range secret {
					secret[i] = byte(rng.Uint32())
				}
				if got, want := kdf.key(secret, info), hkdf32(secret, session, info); got != want {
					t.Fatalf("session %d bytes, info %q, secret %d bytes: %x, want %x", sl, info, n, got, want)
				}
			}
		}
	}
}
