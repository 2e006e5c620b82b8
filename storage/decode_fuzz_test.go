package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"reflect"
	"runtime/metrics"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// allocated runs fn and returns the bytes the process allocated meanwhile
// (an over-estimate: other goroutines count too). It reads
// runtime/metrics, which, unlike runtime.ReadMemStats, does not stop the
// world, so the fuzzer keeps its speed.
func allocated(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	fn()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// checkAlloc fails t if decoding input allocated more than a constant
// factor of its size: a decoder must never size an allocation by a length
// field it has not checked against the input. The 1 MiB allowance covers
// fixed costs and other goroutines; a trusted length field of a small
// input would ask for far more.
func checkAlloc(t *testing.T, input []byte, n uint64) {
	t.Helper()
	if limit := 32*uint64(len(input)) + 1<<20; n > limit {
		t.Fatalf("decoding %d bytes allocated %d bytes", len(input), n)
	}
}

// framed is the stored value a fuzz target decodes: payload framed with
// its correct checksum, so that the fuzzer explores the decoder behind
// the checksum (random bytes almost never pass it), or, if raw, payload
// as it is (whose checksum FuzzUnframe covers).
func framed(payload []byte, raw bool) []byte {
	if raw {
		return payload
	}
	return frame(payload)
}

// FuzzUnframe: any bytes either fail the checksum or are exactly the
// frame of the payload returned.
func FuzzUnframe(f *testing.F) {
	for _, p := range [][]byte{nil, []byte("1"), []byte(`{"seq":1}`), encodeCheckpoint(1, &Checkpoint{Params: []float32{1}})} {
		f.Add(frame(p))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := unframe(v)
		if err != nil {
			return
		}
		if !bytes.Equal(frame(p), v) {
			t.Fatalf("accepted % x, whose payload frames as % x", v, frame(p))
		}
	})
}

// FuzzFrameDetectsByteFlip: CRC-32C detects every error burst of at most
// 32 bits (RFC 3720 §B.4), so changing any one byte of any frame, checksum
// included, must be detected.
func FuzzFrameDetectsByteFlip(f *testing.F) {
	f.Add([]byte(`{"seq":1,"round":1}`), uint32(0), byte(1))
	f.Add(encodeCheckpoint(3, &Checkpoint{Params: []float32{1, -2}, OptState: []byte{0xAB}})[frameHeader:], uint32(40), byte(0x80))
	f.Add([]byte{}, uint32(3), byte(0xFF))
	f.Fuzz(func(t *testing.T, payload []byte, pos uint32, mask byte) {
		if mask == 0 {
			return
		}
		v := frame(payload)
		i := int(pos % uint32(len(v)))
		v[i] ^= mask
		if _, err := unframe(v); err == nil {
			t.Fatalf("flip %#x at byte %d of the frame of % x not detected", mask, i, payload)
		}
	})
}

// FuzzDecodeCheckpoint: arbitrary bytes never panic or allocate by an
// unchecked length; an accepted checkpoint has a round in 1 … 2³¹−1 and
// re-encodes to exactly the input (the layout has one encoding per value).
func FuzzDecodeCheckpoint(f *testing.F) {
	for _, ck := range []Checkpoint{
		{Round: 1},
		{Round: 3, Params: []float32{1, -2}, OptState: []byte{0xAB}},
		{Round: math.MaxInt32, Params: []float32{float32(math.Inf(1)), math.Float32frombits(0x7FC00001)}, OptState: []byte("momentum")},
	} {
		f.Add(encodeCheckpoint(ck.Round, &ck)[frameHeader:], false)
	}
	f.Fuzz(func(t *testing.T, payload []byte, raw bool) {
		v := framed(payload, raw)
		var ck Checkpoint
		var err error
		checkAlloc(t, v, allocated(func() { ck, err = decodeCheckpoint(v) }))
		if err != nil {
			return
		}
		if ck.Round < 1 || ck.Round > math.MaxInt32 {
			t.Fatalf("accepted round %d", ck.Round)
		}
		if w := encodeCheckpoint(ck.Round, &ck); !bytes.Equal(w, v) {
			t.Fatalf("accepted % x, re-encoded as % x", v, w)
		}
	})
}

// FuzzDecodeLedger: an accepted ledger value holds the seq its key and
// position say and a non-empty event, and the entry re-encodes to a value
// that decodes to the same entry.
func FuzzDecodeLedger(f *testing.F) {
	e := LedgerEntry{Seq: 7, Round: 3, Event: json.RawMessage(`{"type":"PoissonSampledDpEvent","sampling_probability":0.02,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}`),
		Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	p, err := json.Marshal(&e)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(u64(7), p, uint64(7), false)
	f.Add(u64(1), []byte(`{"seq":1,"round":1,"event":{},"time":"2024-05-01T12:00:00+02:00"}`), uint64(1), false)
	f.Fuzz(func(t *testing.T, k, payload []byte, want uint64, raw bool) {
		v := framed(payload, raw)
		var got LedgerEntry
		var err error
		checkAlloc(t, v, allocated(func() { got, err = decodeLedger(k, v, want) }))
		if err != nil {
			return
		}
		if seq, ok := keyU64(k); !ok || seq != want || got.Seq != want || len(got.Event) == 0 {
			t.Fatalf("accepted key %x, want %d: %+v", k, want, got)
		}
		p, err := json.Marshal(&got)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", got, err)
		}
		back, err := decodeLedger(k, frame(p), want)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", p, err)
		}
		if back.Seq != got.Seq || back.Round != got.Round || !back.Time.Equal(got.Time) || !jsonEqual(back.Event, got.Event) {
			t.Fatalf("%+v re-decodes as %+v", got, back)
		}
	})
}

// jsonEqual reports whether two JSON texts hold the same value: not the
// same bytes, since json.Marshal rewrites a RawMessage (compacts it,
// escapes <, > and & as \u003c…), which is harmless. Numbers are compared
// as their decimal text.
func jsonEqual(a, b []byte) bool {
	decode := func(b []byte) (v any, ok bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		err := d.Decode(&v)
		return v, err == nil
	}
	va, okA := decode(a)
	vb, okB := decode(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

// FuzzDecodeDevice: an accepted device record names the job and device it
// is stored under and has a SHA-256-sized credential hash, and re-encodes
// to a record that decodes to the same device.
func FuzzDecodeDevice(f *testing.F) {
	h := sha256.Sum256([]byte("credential"))
	d := Device{ID: "dev-1", JobID: "j", CredentialHash: h[:], EnrolledAt: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
	p, err := json.Marshal(d)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("dev-1", p, false)
	f.Add("x", []byte(`{"id":"x","job_id":"j","credential_hash":null}`), false)
	f.Fuzz(func(t *testing.T, id string, payload []byte, raw bool) {
		v := framed(payload, raw)
		var got Device
		var err error
		checkAlloc(t, v, allocated(func() { got, err = decodeDevice("j", id, v) }))
		if err != nil {
			return
		}
		if got.ID != id || got.JobID != "j" || len(got.CredentialHash) != sha256.Size {
			t.Fatalf("device %q of job j accepted as %+v", id, got)
		}
		p, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", got, err)
		}
		back, err := decodeDevice("j", id, frame(p))
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", p, err)
		}
		if back.ID != got.ID || back.JobID != got.JobID || !bytes.Equal(back.CredentialHash, got.CredentialHash) || !back.EnrolledAt.Equal(got.EnrolledAt) {
			t.Fatalf("%+v re-decodes as %+v", got, back)
		}
	})
}

// orNull is config as JSON: an absent config is stored as null
// (CreateJob), and json.Marshal writes a nil RawMessage as null too.
func orNull(config json.RawMessage) []byte {
	if len(config) == 0 {
		return []byte("null")
	}
	return config
}

// FuzzDecodeMeta: an accepted job record names the job it is stored
// under, has a defined state and a round ≥ 0, and re-encodes to a record
// that decodes to the same job.
func FuzzDecodeMeta(f *testing.F) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, j := range []Job{
		{ID: "j", Config: json.RawMessage(`{"rounds":10}`), State: StatePending, CreatedAt: at, UpdatedAt: at},
		{ID: "job-2", Config: json.RawMessage(`null`), State: StateFailed, Message: "boom", Round: 7, CreatedAt: at, UpdatedAt: at.Add(time.Hour)},
	} {
		p, err := json.Marshal(&j)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j.ID, p, false)
	}
	f.Fuzz(func(t *testing.T, id string, payload []byte, raw bool) {
		v := framed(payload, raw)
		var got Job
		var err error
		checkAlloc(t, v, allocated(func() { got, err = decodeMeta(id, v) }))
		if err != nil {
			return
		}
		if got.ID != id || !got.State.Valid() || got.Round < 0 {
			t.Fatalf("job %q accepted as %+v", id, got)
		}
		p, err := json.Marshal(&got)
		if err != nil {
			t.Fatalf("accepted %+v does not encode: %v", got, err)
		}
		back, err := decodeMeta(id, frame(p))
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", p, err)
		}
		if back.State != got.State || back.Message != got.Message || back.Round != got.Round ||
			!back.CreatedAt.Equal(got.CreatedAt) || !back.UpdatedAt.Equal(got.UpdatedAt) ||
			!jsonEqual(orNull(back.Config), orNull(got.Config)) {
			t.Fatalf("%+v re-decodes as %+v", got, back)
		}
	})
}

// A job record with a valid checksum but an absurd round (a foreign or
// buggy writer: CRC-32C is no signature) once made Metrics preallocate a
// slice of that many entries, a panic (or an out-of-memory kill) instead
// of an error. It must be reported as corruption.
func TestMetricsHugeRoundIsCorruptNotAllocated(t *testing.T) {
	path := ledgerDB(t)
	rawUpdate(t, path, func(jobs *bolt.Bucket) error {
		b := jobs.Bucket([]byte("j"))
		j, err := decodeMeta("j", b.Get(keyJobMeta))
		if err != nil {
			return err
		}
		j.Round = 1 << 62
		return putMeta(b, &j)
	})
	db := reopen(t, path)
	var err error
	n := allocated(func() { _, err = db.Metrics("j") })
	wantErr(t, err, ErrCorrupt, `job "j"`, "metrics round")
	if n > 1<<20 {
		t.Fatalf("Metrics allocated %d bytes for a job claiming 2⁶² rounds", n)
	}
}
