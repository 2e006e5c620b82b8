package secagg

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
)

var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

func mustHex(t *testing.T, s string) x25519.Key {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex %q", s)
	}
	return x25519.Key(b)
}

// forEachLadder runs f as a subtest on each batched ladder sharedBatch
// can take on this machine: the eight-lane IFMA one (where the CPU has
// it, whatever DPFL_SIMD says) and, with hasLadder8 turned off, the
// four-lane AVX2 one (or circl's scalar ladder where there is none).
func forEachLadder(t *testing.T, f func(t *testing.T)) {
	saved := hasLadder8
	defer func() { hasLadder8 = saved }()
	for _, on := range []bool{true, false} {
		if on && !cpuLadder8 {
			continue
		}
		hasLadder8 = on
		name := "ladder4"
		if on {
			name = "ladder8"
		}
		t.Run(name, f)
	}
}

// TestSharedBatchRFC7748 checks the batch against the test vectors of
// RFC 7748 (§5.2, the first scalar-multiplication vector; §6.1, both
// sides of the Diffie-Hellman example), each in a batch with other points,
// on each ladder (forEachLadder).
func TestSharedBatchRFC7748(t *testing.T) {
	forEachLadder(t, testSharedBatchRFC7748)
}

func testSharedBatchRFC7748(t *testing.T) {
	cases := []struct{ sk, pk, want string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
			"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
			"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
			"de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
			"4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"},
		{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
			"8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
			"4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"},
	}
	for _, c := range cases {
		sk, pk, want := mustHex(t, c.sk), mustHex(t, c.pk), mustHex(t, c.want)
		for _, size := range []int{1, 2, 5} {
			pks := make([]*x25519.Key, size)
			for i := range pks {
				pks[i] = &pk
			}
			out, ok := make([]x25519.Key, size), make([]bool, size)
			sharedBatch(out, ok, &sk, pks)
			for i := range out {
				if !ok[i] || out[i] != want {
					t.Fatalf("batch of %d, entry %d: %x (ok %v), want %x", size, i, out[i], ok[i], want)
				}
			}
		}
	}
}

// TestSharedBatchMatchesCircl checks the batch against x25519.Shared, the
// scalar reference, value and ok, for batch sizes 1 to 13 (full and
// partial groups of four and eight), random keys, the five low-order
// points circl refuses, non-canonical encodings (u + p) and set top bits,
// on each ladder (forEachLadder).
func TestSharedBatchMatchesCircl(t *testing.T) {
	forEachLadder(t, testSharedBatchMatchesCircl)
}

func testSharedBatchMatchesCircl(t *testing.T) {
	special := []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
		"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p ≡ 0
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p+1 ≡ 1
		"f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p+3
		"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // top bit set
		"0900000000000000000000000000000000000000000000000000000000000080", // 9, top bit set
	}
	var pool []x25519.Key
	for _, s := range special {
		pool = append(pool, mustHex(t, s))
	}
	for range 40 {
		var sk, pk x25519.Key
		rand.Read(sk[:])
		x25519.KeyGen(&pk, &sk)
		pool = append(pool, pk)
		var raw x25519.Key // arbitrary bytes: points on the curve or the twist
		rand.Read(raw[:])
		pool = append(pool, raw)
	}
	rng := mrand.New(mrand.NewPCG(5, 6))
	for size := 1; size <= 13; size++ {
		for trial := range 6 {
			var sk x25519.Key
			rand.Read(sk[:])
			pks := make([]*x25519.Key, size)
			for i := range pks {
				pks[i] = &pool[rng.IntN(len(pool))]
			}
			if trial == 0 {
				for i := range pks { // every special point appears
					pks[i] = &pool[(size+i)%len(special)]
				}
			}
			checkAgainstCircl(t, sharedBatch, &sk, pks)
		}
	}
}

// checkAgainstCircl fails t unless batch(out, ok, sk, pks) gives, entry
// by entry, circl's x25519.Shared(sk, pks[i]) and its ok (the independent
// truth both batched ladders are held to).
func checkAgainstCircl(t *testing.T, batch func(out []x25519.Key, ok []bool, sk *x25519.Key, pks []*x25519.Key), sk *x25519.Key, pks []*x25519.Key) {
	t.Helper()
	out, ok := make([]x25519.Key, len(pks)), make([]bool, len(pks))
	batch(out, ok, sk, pks)
	for i, pk := range pks {
		var want x25519.Key
		wantOK := x25519.Shared(&want, sk, pk)
		if out[i] != want || ok[i] != wantOK {
			t.Fatalf("size %d, entry %d, pk %x: %x (ok %v), circl %x (ok %v)", len(pks), i, pk[:], out[i], ok[i], want, wantOK)
		}
	}
}

// BenchmarkSharedBatch is one client's agreements with k = 28 neighbours
// (the demo's graph): batched on the default path ("batch": the eight-lane
// IFMA ladder where hasLadder8), batched with hasLadder8 turned off
// ("batch4": the four-lane AVX2 ladder; only where hasLadder8), and one
// by one with circl ("circl"). It reports ns/agreement besides ns/op.
func BenchmarkSharedBatch(b *testing.B) {
	const k = 28
	var sk x25519.Key
	rand.Read(sk[:])
	pks := make([]*x25519.Key, k)
	for i := range pks {
		var s x25519.Key
		rand.Read(s[:])
		pks[i] = new(x25519.Key)
		x25519.KeyGen(pks[i], &s)
	}
	out, ok := make([]x25519.Key, k), make([]bool, k)
	perAgreement := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/agreement")
	}
	b.Run("batch", func(b *testing.B) {
		for b.Loop() {
			sharedBatch(out, ok, &sk, pks)
		}
		perAgreement(b)
	})
	if hasLadder8 {
		b.Run("batch4", func(b *testing.B) {
			hasLadder8 = false
			defer func() { hasLadder8 = true }()
			for b.Loop() {
				sharedBatch(out, ok, &sk, pks)
			}
			perAgreement(b)
		})
	}
	b.Run("circl", func(b *testing.B) {
		for b.Loop() {
			for i, pk := range pks {
				ok[i] = x25519.Shared(&out[i], &sk, pk)
			}
		}
		perAgreement(b)
	})
}

// TestValidPublicKeyMatchesCircl checks validPublicKey, which compares
// with the low-order list, against what it replaces: whether
// x25519.Shared accepts the key with some scalar (the low-order points,
// their non-canonical encodings u + p and with the top bit set, and
// random keys).
func TestValidPublicKeyMatchesCircl(t *testing.T) {
	var keys []x25519.Key
	p := fieldP
	for _, pt := range lowOrderPoints {
		keys = append(keys, x25519.Key(pt))
		u := new(big.Int).SetBytes(reverse(pt[:]))
		if w := new(big.Int).Add(u, p); w.BitLen() <= 255 {
			keys = append(keys, x25519.Key(reverse(w.FillBytes(make([]byte, 32)))))
		}
		top := x25519.Key(pt)
		top[31] |= 128
		keys = append(keys, top)
	}
	for range 50 {
		var k x25519.Key
		rand.Read(k[:])
		keys = append(keys, k)
	}
	var sk x25519.Key
	rand.Read(sk[:])
	for _, k := range keys {
		var out x25519.Key
		if got, want := validPublicKey(k[:]), x25519.Shared(&out, &sk, &k); got != want {
			t.Fatalf("key %x: valid %v, circl %v", k, got, want)
		}
	}
	if validPublicKey(make([]byte, 31)) {
		t.Fatal("31-byte key accepted")
	}
}

func reverse(b []byte) []byte {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return r
}

// TestAgreeBatchMatchesAgree checks agreeBatch, split over workers, against
// agree for each peer, and that it names the first low-order peer.
func TestAgreeBatchMatchesAgree(t *testing.T) {
	session := []byte("agree batch")
	var sk x25519.Key
	rand.Read(sk[:])
	for _, workers := range []int{1, 2, 3} {
		for n := range 14 {
			pks := make([]*x25519.Key, n)
			for i := range pks {
				var s x25519.Key
				rand.Read(s[:])
				pks[i] = new(x25519.Key)
				x25519.KeyGen(pks[i], &s)
			}
			keys, bad := agreeBatch(&sk, pks, session, infoPairMask, workers)
			if bad != -1 || len(keys) != n {
				t.Fatalf("workers %d, n %d: bad %d, %d keys", workers, n, bad, len(keys))
			}
			for i, pk := range pks {
				if want, ok := agree(&sk, pk, session, infoPairMask); !ok || keys[i] != want {
					t.Fatalf("workers %d, n %d, peer %d: key differs from agree", workers, n, i)
				}
			}
			if n >= 3 {
				low := x25519.Key(lowOrderPoints[3])
				pks[n-1], pks[1] = &low, &low
				if _, bad := agreeBatch(&sk, pks, session, infoPairMask, workers); bad != 1 {
					t.Fatalf("workers %d, n %d: low-order peers at 1 and %d, reported %d", workers, n, n-1, bad)
				}
			}
		}
	}
}

// BenchmarkLadderStep4 is one step of four ladders (ladderStep4); a
// batch of k agreements costs about 255·k/4 of them.
func BenchmarkLadderStep4(b *testing.B) {
	if !hasLadder4 {
		b.Skip("no AVX2 ladder on this machine")
	}
	var st ladder4
	st.x2[0][0] = 1
	for b.Loop() {
		ladderStep4(&st, 0)
	}
}

// BenchmarkKeyGen is the public keys of k secret keys: batched
// (keyGenBatch, the eight-lane IFMA ladder where hasLadder8) and one by
// one with circl's x25519.KeyGen ("circl"), for k = 1, 2, 4, 8 and 64. It
// reports ns/key besides ns/op.
func BenchmarkKeyGen(b *testing.B) {
	for _, k := range []int{1, 2, 4, 8, 64} {
		sks, pks := make([]x25519.Key, k), make([]x25519.Key, k)
		for i := range sks {
			rand.Read(sks[i][:])
		}
		perKey := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/key")
		}
		b.Run(fmt.Sprintf("batch/k=%d", k), func(b *testing.B) {
			for b.Loop() {
				keyGenBatch(pks, sks)
			}
			perKey(b)
		})
		b.Run(fmt.Sprintf("circl/k=%d", k), func(b *testing.B) {
			for b.Loop() {
				for i := range sks {
					x25519.KeyGen(&pks[i], &sks[i])
				}
			}
			perKey(b)
		})
	}
}

// keyGenEdgeSecrets are secret keys at the edges of clamping and of the
// ladder's swaps: all zero and all ones (the clamped extremes 2^254 and
// 2^255 − 8), each single bit of the scalar's range, alternating bits
// (a swap at every step) and runs of equal bits (no swap for long), and
// values that differ from others only in the bits clamping clears.
func keyGenEdgeSecrets() []x25519.Key {
	var out []x25519.Key
	fill := func(b byte) (k x25519.Key) {
		for i := range k {
			k[i] = b
		}
		return k
	}
	out = append(out, fill(0), fill(0xff), fill(0x55), fill(0xaa), fill(0x0f), fill(0xf0))
	for _, bit := range []int{0, 1, 2, 3, 4, 63, 64, 128, 200, 253, 254, 255} {
		var k x25519.Key
		k[bit/8] = 1 << (bit % 8)
		out = append(out, k)
	}
	k := fill(0xff)
	k[0], k[31] = 7, 0x80 // clamps to the same scalar as fill(0)
	out = append(out, k)
	return out
}

// TestKeyGenBatchMatchesCircl checks keyGenBatch against circl's
// x25519.KeyGen, bit for bit, on both ladders where they run (and on
// circl's with hasLadder8 off): random secret keys in batches of 1 to 17
// (a partial last group of every size, two groups and more), and the edge
// secrets, alone and mixed with random ones in one batch, so that lanes
// of one group swap differently.
func TestKeyGenBatchMatchesCircl(t *testing.T) {
	forEachLadder(t, func(t *testing.T) {
		check := func(what string, sks []x25519.Key) {
			t.Helper()
			pks := make([]x25519.Key, len(sks))
			keyGenBatch(pks, sks)
			for i := range sks {
				var want x25519.Key
				x25519.KeyGen(&want, &sks[i])
				if pks[i] != want {
					t.Fatalf("%s: key %d of %d (sk %x): got %x, want %x", what, i, len(sks), sks[i], pks[i], want)
				}
			}
		}
		for n := 1; n <= 17; n++ {
			for range 3 {
				sks := make([]x25519.Key, n)
				for i := range sks {
					rand.Read(sks[i][:])
				}
				check(fmt.Sprintf("random, n=%d", n), sks)
			}
		}
		edge := keyGenEdgeSecrets()
		check("edge", edge)
		for _, e := range edge {
			check("edge alone", []x25519.Key{e})
		}
		rng := mrand.New(mrand.NewPCG(5, 6))
		for n := 1; n <= 17; n++ {
			sks := make([]x25519.Key, n)
			for i := range sks {
				if rng.IntN(2) == 0 {
					sks[i] = edge[rng.IntN(len(edge))]
				} else {
					rand.Read(sks[i][:])
				}
			}
			check(fmt.Sprintf("mixed, n=%d", n), sks)
		}
	})
}
