package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"
)

// CRC-32C reference values: the catalogue check value for "123456789"
// (Williams' CRC catalogue, CRC-32/ISCSI) and the test vectors of
// RFC 3720 §B.4.
func TestFrameCRC32CVectors(t *testing.T) {
	inc, dec := make([]byte, 32), make([]byte, 32)
	for i := range 32 {
		inc[i], dec[i] = byte(i), byte(31-i)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want uint32
	}{
		{"check", []byte("123456789"), 0xE3069283},
		{"32 zeros", make([]byte, 32), 0x8A9136AA},
		{"32 ones", bytes.Repeat([]byte{0xFF}, 32), 0x62A8AB43},
		{"incrementing", inc, 0x46DD794E},
		{"decrementing", dec, 0x113FDB5C},
	} {
		v := frame(tc.in)
		if got := binary.LittleEndian.Uint32(v); got != tc.want {
			t.Errorf("%s: CRC %#08x, want %#08x", tc.name, got, tc.want)
		}
		p, err := unframe(v)
		if err != nil || !bytes.Equal(p, tc.in) {
			t.Errorf("%s: unframe = %q, %v", tc.name, p, err)
		}
	}
}

// CRC-32C detects every error burst of at most 32 bits, hence every change
// confined to one byte and every truncation that keeps the header: check that
// exhaustively for a real ledger value.
func TestLedgerDecodeDetectsEveryByteFlipAndTruncation(t *testing.T) {
	e := LedgerEntry{Seq: 7, Round: 3, Event: json.RawMessage(`{"mechanism":"gaussian","z":1.1,"q":0.01}`),
		Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	p, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	v := frame(p)
	k := u64(7)
	if got, err := decodeLedger(k, v, 7); err != nil || got.Round != 3 || !bytes.Equal(got.Event, e.Event) || !got.Time.Equal(e.Time) {
		t.Fatalf("clean decode = %+v, %v", got, err)
	}
	for i := range v {
		for _, mask := range []byte{0x01, 0x80, 0xFF} {
			w := slices.Clone(v)
			w[i] ^= mask
			if _, err := decodeLedger(k, w, 7); err == nil {
				t.Fatalf("flip %#x at byte %d not detected", mask, i)
			}
		}
	}
	for n := range len(v) {
		if _, err := decodeLedger(k, v[:n], 7); err == nil {
			t.Fatalf("truncation to %d bytes not detected", n)
		}
	}
	if _, err := decodeLedger(k, v, 6); err == nil {
		t.Fatal("seq gap not detected")
	}
}

// The checkpoint layout written out by hand from the package doc.
func TestCheckpointLayout(t *testing.T) {
	v := encodeCheckpoint(3, &Checkpoint{Params: []float32{1, -2}, OptState: []byte{0xAB}})
	want := []byte{
		'D', 'P', 'C', 'K',
		1, 0, 0, 0, // version
		3, 0, 0, 0, 0, 0, 0, 0, // round
		2, 0, 0, 0, 0, 0, 0, 0, // len(Params)
		1, 0, 0, 0, 0, 0, 0, 0, // len(OptState)
		0x00, 0x00, 0x80, 0x3F, // 1.0 = 0x3F800000
		0x00, 0x00, 0x00, 0xC0, // -2.0 = 0xC0000000
		0xAB,
	}
	if !bytes.Equal(v[frameHeader:], want) {
		t.Fatalf("payload\n got % x\nwant % x", v[frameHeader:], want)
	}
	if _, err := unframe(v); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointRoundTripBitExact(t *testing.T) {
	specials := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1,
		float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7FC00001), // quiet NaN with payload
		math.Float32frombits(0x7F800001), // signalling NaN
		math.Float32frombits(1),          // smallest subnormal
		math.MaxFloat32, math.SmallestNonzeroFloat32,
	}
	for _, opt := range [][]byte{nil, {}, {0, 1, 2, 255}} {
		v := encodeCheckpoint(9, &Checkpoint{Params: specials, OptState: opt})
		got, err := decodeCheckpoint(v)
		if err != nil {
			t.Fatal(err)
		}
		if got.Round != 9 || len(got.Params) != len(specials) || !bytes.Equal(got.OptState, opt) {
			t.Fatalf("decoded %+v", got)
		}
		for i := range specials {
			if math.Float32bits(got.Params[i]) != math.Float32bits(specials[i]) {
				t.Errorf("param %d: bits %#x, want %#x", i, math.Float32bits(got.Params[i]), math.Float32bits(specials[i]))
			}
		}
	}
}

func TestCheckpointDecodeDetectsEveryByteFlip(t *testing.T) {
	v := encodeCheckpoint(2, &Checkpoint{Params: []float32{0.5, -0.25, 3, 1e-3, 7}, OptState: []byte("momentum")})
	for i := range v {
		for _, mask := range []byte{0x01, 0x80, 0xFF} {
			w := slices.Clone(v)
			w[i] ^= mask
			if _, err := decodeCheckpoint(w); err == nil {
				t.Fatalf("flip %#x at byte %d not detected", mask, i)
			}
		}
	}
	for n := range len(v) {
		if _, err := decodeCheckpoint(v[:n]); err == nil {
			t.Fatalf("truncation to %d bytes not detected", n)
		}
	}
}

// A header with a valid checksum but impossible lengths (e.g. written by a
// buggy encoder) must be refused rather than over-read or over-allocated.
func TestCheckpointDecodeRejectsInconsistentHeader(t *testing.T) {
	base := encodeCheckpoint(2, &Checkpoint{Params: []float32{1, 2}, OptState: []byte{9}})
	for _, tc := range []struct {
		name string
		off  int
		val  uint64
	}{
		{"round 0", 8, 0},
		{"huge n", 16, math.MaxUint64},
		{"n+1", 16, 3},
		{"huge m", 24, math.MaxUint64 - 3},
		{"m+1", 24, 2},
	} {
		w := slices.Clone(base)
		binary.LittleEndian.PutUint64(w[frameHeader+tc.off:], tc.val)
		seal(w)
		if _, err := decodeCheckpoint(w); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// Keys must sort numerically under bytewise comparison (bbolt's order).
func TestU64KeyOrder(t *testing.T) {
	ns := []uint64{0, 1, 2, 255, 256, 65535, 65536, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}
	for i := 1; i < len(ns); i++ {
		if bytes.Compare(u64(ns[i-1]), u64(ns[i])) >= 0 {
			t.Errorf("u64(%d) !< u64(%d)", ns[i-1], ns[i])
		}
		if n, ok := keyU64(u64(ns[i])); !ok || n != ns[i] {
			t.Errorf("keyU64(u64(%d)) = %d, %v", ns[i], n, ok)
		}
	}
	if _, ok := keyU64([]byte{1, 2, 3}); ok {
		t.Error("keyU64 accepted a 3-byte key")
	}
}
