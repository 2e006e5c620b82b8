package secagg

import (
	"fmt"
	"math"
	"math/rand/v2"
)

const (
	// maxFracBits caps f: beyond 30 fractional bits even a single value
	// of magnitude 1 would not fit in int32.
	maxFracBits = 30
	// minFracBits is the coarsest encoding NewEncoding accepts: at f < 8
	// the rounding error (up to 2^−f per coordinate) is no longer small
	// next to typical clipped updates.
	minFracBits = 8
)

// Encoding maps clipped float32 updates into Z_{2^32} (two's complement
// int32) and back, as fixed-point numbers with f fractional bits. The sum
// of n encoded vectors whose entries are all within ±Clip never wraps
// around 2^32 (see NewEncoding), so decoding the unmasked sum gives the sum
// of the encoded values exactly.
type Encoding struct {
	// FracBits is f: a value v encodes as the stochastic rounding of v·2^f.
	FracBits int `json:"frac_bits"`
	// Clip is C, the largest magnitude an entry may have; Encode clamps to
	// ±C. Zero (an Encoding built by hand) clamps to the int32 range,
	// ±(2^31−1)·2^−f, which keeps one value from wrapping but not a sum.
	Clip float64 `json:"clip,omitempty"`
}

// NewEncoding picks f for sums of up to n ≥ 1 vectors whose entries lie
// within ±clip (clip > 0; an L2 clip norm C bounds every entry by C). It is
// the largest f ≤ 30 with
//
//	n·(clip·2^f + 1) ≤ 2^31 − 1,
//
// because one stochastically rounded entry has magnitude at most
// clip·2^f + 1, so the int32 sum of n of them cannot overflow. In bits:
// log2 n + log2(clip·2^f) + 1 sign bit + headroom for the rounding ≤ 32.
// NewEncoding errors if n < 1, clip is not positive and finite, or the
// resulting f would be below 8 (n·clip too large for 32-bit fixed point:
// use a smaller clip or fewer clients per instance).
func NewEncoding(n int, clip float64) (Encoding, error) {
	if n < 1 {
		return Encoding{}, fmt.Errorf("secagg: encoding for %d clients", n)
	}
	if !(clip > 0) || math.IsInf(clip, 1) {
		return Encoding{}, fmt.Errorf("secagg: encoding clip %v is not positive and finite", clip)
	}
	const limit = math.MaxInt32
	for f := maxFracBits; f >= minFracBits; f-- {
		if float64(n)*(math.Ldexp(clip, f)+1) <= limit {
			return Encoding{FracBits: f, Clip: clip}, nil
		}
	}
	return Encoding{}, fmt.Errorf("secagg: %d clients with clip %v leave fewer than %d fractional bits in 32-bit fixed point (n·(clip·2^8+1) must be ≤ 2^31−1)", n, clip, minFracBits)
}

// Encode writes into dst the stochastic rounding of x·2^f as a two's
// complement int32: floor(x·2^f + u) with u uniform in [0, 1) from rng, so
// that E[Decode(Encode(x))] = x exactly and the error is below 2^−f. Entries
// outside ±Clip (a caller's bug: clip first) are clamped to ±Clip and NaN
// encodes as 0, so that no input can make the sum wrap. rng drives only the
// rounding; it need not be secret, as the masks hide the encoded values.
// len(dst) must equal len(x) and rng be non-nil (panics otherwise).
func (e Encoding) Encode(dst []uint32, x []float32, rng *rand.Rand) {
	if len(dst) != len(x) {
		panic("secagg: Encode length mismatch")
	}
	scale := math.Ldexp(1, e.FracBits)
	c := e.Clip
	if c == 0 {
		c = math.MaxInt32 / scale
	}
	for i, v := range x {
		w := float64(v)
		switch {
		case w != w:
			w = 0
		case w > c:
			w = c
		case w < -c:
			w = -c
		}
		r := math.Floor(w*scale + rng.Float64())
		r = max(min(r, math.MaxInt32), math.MinInt32)
		dst[i] = uint32(int32(r))
	}
}

// Decode writes into dst the signed value of each element of sum (read as
// two's complement int32) divided by 2^f. len(dst) must equal len(sum)
// (panics otherwise).
func (e Encoding) Decode(dst []float64, sum []uint32) {
	if len(dst) != len(sum) {
		panic("secagg: Decode length mismatch")
	}
	inv := math.Ldexp(1, -e.FracBits)
	for i, s := range sum {
		dst[i] = float64(int32(s)) * inv
	}
}

// RoundingSlack is the largest L2 norm that stochastic rounding can add to
// a vector of length d: √d·2^−f (each entry moves by less than 2^−f).
// Callers budget it on top of the clip norm when bounding sensitivity.
func (e Encoding) RoundingSlack(d int) float64 {
	return math.Sqrt(float64(d)) * math.Ldexp(1, -e.FracBits)
}
