package fl

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/simd"
)

// Aggregator turns the cohort's client deltas Δ_i into the round's model
// delta Δ_t. It streams: every worker owns one Accumulator, and Release
// merges them once per round.
type Aggregator interface {
	// NewAccumulator returns an empty per-worker accumulator for deltas of
	// length dim.
	NewAccumulator(dim int) Accumulator
	// Release merges accs (into accs[0]) and writes Δ_t into dst. expected
	// is the expected cohort size (Sampler.ExpectedSize).
	Release(dst []float32, accs []Accumulator, expected float64) (AggregateStats, error)
}

// Accumulator is one worker's running aggregate. Add may modify delta.
type Accumulator interface {
	// Add takes one client's delta and its number of training examples; a
	// rejected delta (wrong length, NaN/Inf) returns an error and changes
	// nothing.
	Add(delta []float32, examples int) error
	// Reset empties the accumulator for the next round.
	Reset()
}

// AggregateStats describes one round's aggregation.
type AggregateStats struct {
	// Clients is the number of deltas aggregated.
	Clients int
	// MeanNorm is the mean L2 norm of the deltas before clipping.
	MeanNorm float64
	// ClippedFraction is the fraction of deltas clipped (0 without DP).
	ClippedFraction float64
	// SecAgg describes the secure aggregation instance, when there was one.
	SecAgg *SecAggStats
	// Adaptive is the round's adaptive clipping, when there was one.
	Adaptive *AdaptiveStats
}

// AdaptiveStats is one round of adaptive clipping: released values only.
type AdaptiveStats struct {
	// ClipNorm is C_t, the clip norm the round used.
	ClipNorm float64
	// NoisyUnclippedFraction is b̃_t (AdaptiveClip.NoisyFraction).
	NoisyUnclippedFraction float64
}

// ErrEmptyCohort is returned by the non-private aggregator when no client
// with examples reported: a weighted mean of nothing is undefined. The
// round leaves the model unchanged.
var ErrEmptyCohort = errors.New("fl: no client with examples reported this round")

// GaussianAggregator is DP-FedAvg's aggregation (McMahan et al. 2018,
// Algorithm 1): clip each Δ_i to norm C, sum, add N(0, (z·C)²) per
// coordinate, divide by the fixed expected cohort size. Uniform weighting
// keeps one user's influence at C/expected.
type GaussianAggregator struct {
	// Params holds C and z (with Adaptive, z is the round's total
	// multiplier and C is unused).
	Params dp.Params
	// Rand is the secure noise source (dp.NewSecureRand).
	Rand *rand.Rand
	// Adaptive, when set, is adaptive clipping's state (AdaptiveClip): the
	// round clips to Adaptive.Clip, the sum takes noise z_Δ·C_t
	// (DeltaNoiseMultiplier) and Release moves Adaptive.Clip on.
	Adaptive *AdaptiveClip
}

// clip is the clip norm of the round about to run.
func (g *GaussianAggregator) clip() float64 {
	if g.Adaptive != nil {
		return g.Adaptive.Clip
	}
	return g.Params.ClipNorm
}

// NewAccumulator returns a dp.ClippedSum accumulator.
func (g *GaussianAggregator) NewAccumulator(dim int) Accumulator {
	return &clippedAcc{dp.NewClippedSum(dim, g.clip()), g}
}

// Release adds the Gaussian noise and divides by expected (> 0). With
// Adaptive it also releases the noisy unclipped fraction and sets the
// next round's clip norm; an undefined z_Δ is an error and releases
// nothing.
func (g *GaussianAggregator) Release(dst []float32, accs []Accumulator, expected float64) (AggregateStats, error) {
	if !(expected > 0) {
		return AggregateStats{}, fmt.Errorf("fl: expected cohort size must be > 0, got %v", expected)
	}
	total := accs[0].(*clippedAcc).ClippedSum
	for _, a := range accs[1:] {
		total.Merge(a.(*clippedAcc).ClippedSum)
	}
	st := AggregateStats{Clients: total.Count(), MeanNorm: total.MeanNorm(), ClippedFraction: total.ClippedFraction()}
	a := g.Adaptive
	if a == nil {
		dp.Release(dst, total.Sum(), g.Params, expected, g.Rand)
		return st, nil
	}
	zDelta, err := DeltaNoiseMultiplier(g.Params.NoiseMultiplier, a.CountStd)
	if err != nil {
		return st, err
	}
	c := total.Clip()
	dp.Release(dst, total.Sum(), dp.Params{ClipNorm: c, NoiseMultiplier: zDelta}, expected, g.Rand)
	b := a.NoisyFraction(total.Unclipped(), total.Count(), expected, g.Rand)
	a.Clip = a.Next(c, b)
	st.Adaptive = &AdaptiveStats{ClipNorm: c, NoisyUnclippedFraction: b}
	return st, nil
}

// clippedAcc is one worker's clipped sum; Reset takes up the clip norm
// of the round about to run (adaptive clipping changes it).
type clippedAcc struct {
	*dp.ClippedSum
	g *GaussianAggregator
}

func (c *clippedAcc) Add(delta []float32, _ int) error {
	_, err := c.ClippedSum.Add(delta)
	return err
}

func (c *clippedAcc) Reset() {
	c.ClippedSum.Reset()
	c.SetClip(c.g.clip())
}

// WeightedMean is non-private FedAvg aggregation: Δ_t = Σ n_i Δ_i / Σ n_i,
// weighting each client by its number of examples n_i (McMahan et al. 2017,
// Algorithm 1).
type WeightedMean struct{}

// NewAccumulator returns a weighted-sum accumulator.
func (WeightedMean) NewAccumulator(dim int) Accumulator {
	return &weightedAcc{sum: make([]float32, dim)}
}

// Release writes the weighted mean; ErrEmptyCohort if the total weight is 0.
func (WeightedMean) Release(dst []float32, accs []Accumulator, _ float64) (AggregateStats, error) {
	total := accs[0].(*weightedAcc)
	for _, a := range accs[1:] {
		o := a.(*weightedAcc)
		simd.Add(total.sum, o.sum)
		total.weight += o.weight
		total.count += o.count
		total.normSum += o.normSum
	}
	if total.weight == 0 {
		return AggregateStats{Clients: total.count}, ErrEmptyCohort
	}
	copy(dst, total.sum)
	simd.Scale(dst, float32(1/total.weight))
	return AggregateStats{Clients: total.count, MeanNorm: total.normSum / float64(total.count)}, nil
}

type weightedAcc struct {
	sum     []float32
	weight  float64
	count   int
	normSum float64
}

func (w *weightedAcc) Add(delta []float32, examples int) error {
	if len(delta) != len(w.sum) {
		return fmt.Errorf("fl: update has %d values, model has %d", len(delta), len(w.sum))
	}
	if !simd.AllFinite(delta) {
		return dp.ErrNonFinite
	}
	w.count++
	w.normSum += simd.Norm2(delta)
	if examples == 0 {
		return nil
	}
	simd.Axpy(w.sum, float32(examples), delta)
	w.weight += float64(examples)
	return nil
}

func (w *weightedAcc) Reset() {
	clear(w.sum)
	w.weight, w.count, w.normSum = 0, 0, 0
}
