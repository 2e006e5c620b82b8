package storage

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Checkpoint is the server state needed to resume a job after round Round:
// the global model and the server optimizer's state.
type Checkpoint struct {
	Round    int       // round whose aggregate produced Params, ≥ 1
	Params   []float32 // global model parameters, flattened
	OptState []byte    // server optimizer state (e.g. momentum), opaque here
}

// Checkpoint payload layout; see the package doc.
const (
	ckMagic     = "DPCK"
	ckVersion   = 1
	ckHeaderLen = 32
)

// encodeCheckpoint returns the framed encoding of ck as round, built in a
// single allocation of 4 + 32 + 4·len(Params) + len(OptState) bytes.
func encodeCheckpoint(round int, ck *Checkpoint) []byte {
	n, m := len(ck.Params), len(ck.OptState)
	v := make([]byte, frameHeader+ckHeaderLen+4*n+m)
	p := v[frameHeader:]
	copy(p, ckMagic)
	binary.LittleEndian.PutUint32(p[4:], ckVersion)
	binary.LittleEndian.PutUint64(p[8:], uint64(round))
	binary.LittleEndian.PutUint64(p[16:], uint64(n))
	binary.LittleEndian.PutUint64(p[24:], uint64(m))
	w := p[ckHeaderLen:]
	for i, x := range ck.Params {
		binary.LittleEndian.PutUint32(w[4*i:4*i+4], math.Float32bits(x))
	}
	copy(w[4*n:], ck.OptState)
	seal(v)
	return v
}

// decodeCheckpoint verifies and decodes a framed checkpoint into fresh
// memory. Errors describe the defect; the caller wraps ErrCorrupt.
func decodeCheckpoint(v []byte) (Checkpoint, error) {
	var ck Checkpoint
	p, err := unframe(v)
	if err != nil {
		return ck, err
	}
	if len(p) < ckHeaderLen || string(p[:4]) != ckMagic {
		return ck, fmt.Errorf("bad checkpoint header")
	}
	if ver := binary.LittleEndian.Uint32(p[4:]); ver != ckVersion {
		return ck, fmt.Errorf("checkpoint layout version %d, want %d", ver, ckVersion)
	}
	round := binary.LittleEndian.Uint64(p[8:])
	n := binary.LittleEndian.Uint64(p[16:])
	m := binary.LittleEndian.Uint64(p[24:])
	body := uint64(len(p) - ckHeaderLen)
	// Compare without overflow: a damaged n or m may be near 2⁶⁴.
	if round == 0 || round > math.MaxInt32 || n > body/4 || m != body-4*n {
		return ck, fmt.Errorf("checkpoint header (round %d, %d params, %d optimizer bytes) does not match %d-byte body", round, n, m, body)
	}
	ck.Round = int(round)
	ck.Params = make([]float32, n)
	w := p[ckHeaderLen:]
	for i := range ck.Params {
		ck.Params[i] = math.Float32frombits(binary.LittleEndian.Uint32(w[4*i : 4*i+4]))
	}
	ck.OptState = append([]byte{}, w[4*n:]...)
	return ck, nil
}
