package dp

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dpfl/dpfl/simd"
)

// NewSecureRand returns a math/rand/v2 generator backed by ChaCha8 and keyed
// with 32 bytes read from crypto/rand. Use it for every privacy-critical draw
// (noise, cohort sampling). The returned *rand.Rand is not safe for
// concurrent use. It fails only if the operating system's entropy source
// fails.
func NewSecureRand() (*rand.Rand, error) {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("dp: reading crypto/rand seed: %w", err)
	}
	return rand.New(rand.NewChaCha8(seed)), nil
}

// Params are the user-level DP parameters of one DP-FedAvg round
// (McMahan et al. 2018, Algorithm 1).
type Params struct {
	// ClipNorm is C, the L2 bound on each client's model delta, in model
	// parameter units. Must be finite and > 0.
	ClipNorm float64
	// NoiseMultiplier is z: the noise on the clipped sum has standard
	// deviation σ = z·C per coordinate. Must be finite and ≥ 0; z = 0 means
	// clipping without noise, which gives no privacy (ε = ∞).
	NoiseMultiplier float64
}

// Validate reports the first parameter that breaks its rule.
func (p Params) Validate() error {
	if !(p.ClipNorm > 0) || math.IsInf(p.ClipNorm, 0) {
		return fmt.Errorf("clip_norm must be a finite number > 0, got %v", p.ClipNorm)
	}
	if !(p.NoiseMultiplier >= 0) || math.IsInf(p.NoiseMultiplier, 0) {
		return fmt.Errorf("noise_multiplier must be a finite number ≥ 0, got %v", p.NoiseMultiplier)
	}
	return nil
}

// Sigma is the per-coordinate standard deviation z·C of the noise added to
// the clipped sum.
func (p Params) Sigma() float64 { return p.NoiseMultiplier * p.ClipNorm }

// ErrNonFinite is returned for a client update that contains NaN or ±Inf.
// Such an update is rejected whole: clipping cannot bound it.
var ErrNonFinite = errors.New("dp: update contains NaN or Inf")

// ClippedSum accumulates Σ_i π(Δ_i, C), the sum of client deltas each
// clipped to L2 norm C (McMahan et al. 2018, Algorithm 1). It streams: one
// delta at a time, never holding the cohort's updates. Several ClippedSums
// (one per worker) combine with Merge. Not safe for concurrent use.
type ClippedSum struct {
	clip    float64
	sum     []float32
	count   int
	clipped int
	normSum float64
}

// NewClippedSum returns an empty accumulator for deltas of length dim,
// clipped to norm clip (> 0; panics otherwise, a programmer error, since
// Params.Validate guards user input).
func NewClippedSum(dim int, clip float64) *ClippedSum {
	if !(clip > 0) {
		panic(fmt.Sprintf("dp: clip norm must be > 0, got %v", clip))
	}
	return &ClippedSum{clip: clip, sum: make([]float32, dim)}
}

// Add clips delta to L2 norm at most C and adds it to the sum (delta
// itself may be left clipped or not). It
// returns the delta's norm before clipping. A delta of the wrong length or
// with a non-finite entry is rejected with an error and leaves the sum
// unchanged.
func (s *ClippedSum) Add(delta []float32) (norm float64, err error) {
	if len(delta) != len(s.sum) {
		return 0, fmt.Errorf("dp: update has %d values, model has %d", len(delta), len(s.sum))
	}
	// Fused: one pass fewer than ClipToNorm then Add, bit for bit the
	// same sum (simd.ClipAdd), and no separate finiteness pass: a NaN or
	// ±Inf entry gives a NaN or +Inf norm and leaves the sum unchanged.
	norm = simd.ClipAdd(s.sum, delta, s.clip)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return 0, ErrNonFinite
	}
	s.count++
	s.normSum += norm
	if norm > s.clip {
		s.clipped++
	}
	return norm, nil
}

// Merge adds o's sum and counters into s. Both must have the same length
// and clip norm (panics otherwise).
func (s *ClippedSum) Merge(o *ClippedSum) {
	if len(o.sum) != len(s.sum) || o.clip != s.clip {
		panic("dp: merging ClippedSums of different shape or clip norm")
	}
	simd.Add(s.sum, o.sum)
	s.count += o.count
	s.clipped += o.clipped
	s.normSum += o.normSum
}

// Reset empties the accumulator for reuse in the next round.
func (s *ClippedSum) Reset() {
	clear(s.sum)
	s.count, s.clipped, s.normSum = 0, 0, 0
}

// SetClip sets the clip norm C (> 0; panics otherwise) for the deltas
// added from now on: adaptive clipping changes C between rounds, after
// Reset.
func (s *ClippedSum) SetClip(clip float64) {
	if !(clip > 0) {
		panic(fmt.Sprintf("dp: clip norm must be > 0, got %v", clip))
	}
	s.clip = clip
}

// Clip is the clip norm C.
func (s *ClippedSum) Clip() float64 { return s.clip }

// Unclipped is the number of added deltas with norm at most C: Σ b_i of
// adaptive clipping (Andrew et al. 2021).
func (s *ClippedSum) Unclipped() int { return s.count - s.clipped }

// Sum is the running clipped sum, aliased (length dim).
func (s *ClippedSum) Sum() []float32 { return s.sum }

// Count is the number of deltas added.
func (s *ClippedSum) Count() int { return s.count }

// ClippedFraction is the fraction of added deltas whose norm exceeded C, the
// quantity adaptive clipping (Andrew et al. 2021) steers; 0 when empty.
func (s *ClippedSum) ClippedFraction() float64 {
	if s.count == 0 {
		return 0
	}
	return float64(s.clipped) / float64(s.count)
}

// MeanNorm is the mean pre-clip L2 norm of the added deltas; 0 when empty.
func (s *ClippedSum) MeanNorm() float64 {
	if s.count == 0 {
		return 0
	}
	return s.normSum / float64(s.count)
}

// AddGaussianNoise adds independent N(0, σ²) noise to every coordinate of
// dst, drawing from rng (which must be a secure generator such as
// NewSecureRand's). σ must be finite and ≥ 0.
func AddGaussianNoise(dst []float32, sigma float64, rng *rand.Rand) {
	if !(sigma >= 0) || math.IsInf(sigma, 0) {
		panic(fmt.Sprintf("dp: noise standard deviation must be finite and ≥ 0, got %v", sigma))
	}
	if sigma == 0 {
		return
	}
	for i := range dst {
		dst[i] += float32(rng.NormFloat64() * sigma)
	}
}

// Release turns a clipped sum into the released DP-FedAvg average: it writes
// dst = (sum + N(0, (z·C)² I)) / denominator, where denominator is the fixed
// expected cohort size (q·N for Poisson sampling, K for a fixed cohort) so
// that the sensitivity of the average is C/denominator (McMahan et al. 2018,
// §2, estimator f̃_f). dst and sum must have equal length; denominator must
// be > 0.
func Release(dst, sum []float32, p Params, denominator float64, rng *rand.Rand) {
	if len(dst) != len(sum) {
		panic("dp: Release length mismatch")
	}
	if !(denominator > 0) {
		panic(fmt.Sprintf("dp: denominator must be > 0, got %v", denominator))
	}
	copy(dst, sum)
	AddGaussianNoise(dst, p.Sigma(), rng)
	simd.Scale(dst, float32(1/denominator))
}
