package secagg

import (
	"fmt"
	"math"
	"math/bits"
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
	// ±(2^31−1)·2^−f, which keeps one value from wrapping but not a sum;
	// so does a C that is negative, NaN or beyond that range.
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

// Encode writes into dst the stochastic rounding of x·2^f, as two's
// complement int32. Precisely, with x̂ = x[i] clamped to ±c and NaN taken
// as 0, where c = Clip (or the int32 bound (2^31−1)·2^−f when Clip is not
// positive or exceeds it), and r_i 32 random bits,
//
//	dst[i] = ⌊(trunc(x̂·2^(f+32)) + r_i) / 2^32⌋,
//
// that is ⌊x̂·2^f + u⌋ with u = r_i·2^−32 uniform on a 2^−32 grid in [0, 1),
// after first truncating x̂·2^f toward zero to 32 fractional bits (so the
// sum is exact in int64 arithmetic; float64 addition of u would round).
// For 0 ≤ f ≤ 30 (every Encoding that NewEncoding returns) this guarantees:
//
//   - dst[i] is ⌊x̂·2^f⌋ or ⌈x̂·2^f⌉ (x̂·2^f itself when it is an
//     integer), so |Decode(Encode(x))[i] − x̂| < 2^−f; for |x[i]| ≤ Clip,
//     x̂ = x[i].
//   - |dst[i]| ≤ ⌈c·2^f⌉ ≤ 2^31 − 1: every entry is in the int32 range,
//     and (for Clip > 0) at most Clip·2^f + 1, the bound NewEncoding's
//     no-wrap condition relies on. Entries outside ±Clip (a caller's bug:
//     clip first), ±Inf included, clamp to ±Clip, and NaN encodes as 0.
//   - If the r_i are uniform, E[dst[i]] = trunc(x̂·2^(f+32))·2^−32, which
//     differs from x̂·2^f by less than 2^−32 (toward zero; not at all
//     when x̂·2^(f+32) is an integer), so E[Decode(Encode(x))[i]] is
//     within 2^−(f+32) of x̂: unbiased up to the granularity of u, not
//     exactly.
//
// The r_i come from two xoroshiro128++ generators (Blackman and Vigna,
// "Scrambled linear pseudorandom number generators", 2021), seeded with
// four rng.Uint64() draws per call: entries 4j and 4j+1 take the low and
// high halves of the first generator's j-th output, 4j+2 and 4j+3 those
// of the second's. Drawing the bits from rng itself (a ChaCha8 source)
// would cost more per value than all of the rest of Encode. The
// expectation above holds exactly over a uniform seed, because the
// generator's state after j steps is a bijection of its seed and the ++
// output of a uniform state is uniform; it does not need cryptographic
// randomness, as the masks hide the encoded values. For f outside [0, 30]
// (an Encoding built by hand) entries are still in the int32 range but
// the other bounds are not promised.
//
// len(dst) must equal len(x) and rng be non-nil (panics otherwise).
func (e Encoding) Encode(dst []uint32, x []float32, rng *rand.Rand) {
	if len(dst) != len(x) {
		panic("secagg: Encode length mismatch")
	}
	p := newEncodeParams(e)
	a0, a1, b0, b1 := rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()
	n := len(x)
	dst = dst[:n]
	s, cb := p.scale32, p.clipBits
	// i is the last index of the current block of four entries; blocks
	// rather than single entries so that one loop test and two generator
	// steps are shared by four values, and two generators so that their
	// serial state updates overlap.
	i := 3
	for i < n {
		if p.fast {
			for ; i < n; i += 4 {
				v0, v1, v2, v3 := x[i-3], x[i-2], x[i-1], x[i]
				// Separate tests rather than ||: the compiler
				// turns || into SETcc and TEST here. None fails
				// for clipped input, so the branches predict well.
				if math.Float32bits(v0)&^signBit > cb {
					break
				}
				if math.Float32bits(v1)&^signBit > cb {
					break
				}
				if math.Float32bits(v2)&^signBit > cb {
					break
				}
				if math.Float32bits(v3)&^signBit > cb {
					break
				}
				var r, q uint64
				r, a0, a1 = xoroshiro128pp(a0, a1)
				q, b0, b1 = xoroshiro128pp(b0, b1)
				// v·s is exact in float32 and below 2^63 in
				// magnitude (see encodeParams), so the conversion
				// truncates it exactly; the int64 sum cannot
				// overflow.
				dst[i-3] = uint32((int64(v0*s) + int64(uint32(r))) >> 32)
				dst[i-2] = uint32((int64(v1*s) + int64(r>>32)) >> 32)
				dst[i-1] = uint32((int64(v2*s) + int64(uint32(q))) >> 32)
				dst[i] = uint32((int64(v3*s) + int64(q>>32)) >> 32)
			}
			if i >= n {
				break
			}
		}
		// The block holds an entry beyond ±c (or NaN), or f is outside
		// the fast path's range: encode it the careful way, with the
		// same random bits the fast path would have used.
		var r, q uint64
		r, a0, a1 = xoroshiro128pp(a0, a1)
		q, b0, b1 = xoroshiro128pp(b0, b1)
		dst[i-3] = p.encodeOne(x[i-3], uint32(r))
		dst[i-2] = p.encodeOne(x[i-2], uint32(r>>32))
		dst[i-1] = p.encodeOne(x[i-1], uint32(q))
		dst[i] = p.encodeOne(x[i], uint32(q>>32))
		i += 4
	}
	// The last len(x) mod 4 entries, as the head of one more block.
	if j := i - 3; j < n {
		r, _, _ := xoroshiro128pp(a0, a1)
		q, _, _ := xoroshiro128pp(b0, b1)
		u := [4]uint32{uint32(r), uint32(r >> 32), uint32(q), uint32(q >> 32)}
		for k := j; k < n; k++ {
			dst[k] = p.encodeOne(x[k], u[k-j])
		}
	}
}

// signBit is the sign bit of a float32: clearing it gives |v|'s bits,
// which order like |v| itself (for non-NaN v), so comparing them with
// clipBits tests |v| ≤ c in integer arithmetic, with NaN failing the test.
const signBit = 1 << 31

// encodeParams holds what Encode derives from an Encoding once per call.
type encodeParams struct {
	// clip is c: Clip, or the int32 bound (2^31−1)·2^−f when Clip is not
	// positive (NaN included) or exceeds that bound, which keeps
	// c·2^(f+32) < 2^63 so the int64 arithmetic cannot overflow.
	clip float64
	// fracBits is f.
	fracBits int
	// fast reports whether 0 ≤ f ≤ 95: then 2^(f+32) is a float32, and
	// v·2^(f+32) for a float32 v with |v| ≤ c is exact in float32 (a
	// power-of-two scaling that neither underflows, as f+32 > 0, nor
	// overflows, as the result is below 2^63), which the fast path of
	// Encode relies on.
	fast bool
	// scale32 is 2^(f+32) as a float32 (valid when fast).
	scale32 float32
	// clipBits is the bit pattern of the largest float32 ≤ c: a float32
	// v satisfies |v| ≤ c exactly when math.Float32bits(v)&^signBit ≤
	// clipBits (valid when fast).
	clipBits uint32
}

// newEncodeParams computes e's encodeParams.
func newEncodeParams(e Encoding) encodeParams {
	f := e.FracBits
	p := encodeParams{fracBits: f, clip: math.Ldexp(math.MaxInt32, -f)}
	if e.Clip > 0 && e.Clip < p.clip {
		p.clip = e.Clip
	}
	p.fast = f >= 0 && f <= 127-32
	if p.fast {
		p.scale32 = float32(math.Ldexp(1, f+32))
		c32 := float32(p.clip)
		if float64(c32) > p.clip {
			c32 = math.Nextafter32(c32, 0)
		}
		p.clipBits = math.Float32bits(c32)
	}
	return p
}

// maxScaled is the largest magnitude of trunc(x̂·2^(f+32)) (for any f, as
// a guard: for 0 ≤ f ≤ 30, |x̂| ≤ c already ensures it), so that adding
// r < 2^32 and shifting right by 32 stays in the int32 range.
const maxScaled = math.MaxInt32 << 32

// encodeOne encodes one entry v with random bits r the careful way:
// NaN, clamping and any f. It computes the same value as Encode's fast
// path where that applies.
func (p *encodeParams) encodeOne(v float32, r uint32) uint32 {
	w := float64(v)
	switch {
	case w != w:
		w = 0
	case w > p.clip:
		w = p.clip
	case w < -p.clip:
		w = -p.clip
	}
	// Ldexp rather than a multiplication by 2^(f+32) so that no f
	// overflows the scale factor. For 0 ≤ f ≤ 30 the product is exact
	// and within ±maxScaled; the clamp guards other f (where c may have
	// rounded up) before the conversion, which then truncates exactly.
	t := math.Ldexp(w, p.fracBits+32)
	if t > maxScaled {
		t = maxScaled
	} else if t < -maxScaled {
		t = -maxScaled
	}
	return uint32((int64(t) + int64(r)) >> 32)
}

// xoroshiro128pp steps the xoroshiro128++ generator: it returns the
// output for state (s0, s1) and the next state. Its output for a uniformly
// random state is uniform (for each s0, s1 ↦ rotl(s0+s1, 17)+s0 is a
// bijection), and the state update is an invertible linear map, which is
// what makes Encode's rounding bits exactly uniform over the seed.
func xoroshiro128pp(s0, s1 uint64) (out, t0, t1 uint64) {
	out = bits.RotateLeft64(s0+s1, 17) + s0
	s1 ^= s0
	return out, bits.RotateLeft64(s0, 49) ^ s1 ^ s1<<21, bits.RotateLeft64(s1, 28)
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
