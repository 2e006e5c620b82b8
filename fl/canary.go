package fl

import (
	"fmt"
	"math/rand/v2"

	"github.com/dpfl/dpfl/simd"
)

// Canaries are the canary clients of one-shot empirical privacy
// estimation (Andrew, Kairouz, Oh, Oprea, McMahan, Suriyakumar, ICLR 2024,
// "One-shot Empirical Privacy Estimation for Federated Learning", §4):
// K server-side clients whose update is always C·c_j, a fixed secret
// unit direction c_j at the clip norm, each taking part in a round
// independently with probability Rate, like a user under Poisson
// sampling. They are not users: no ledger event, sensitivity or released
// count includes them, and since their updates and their participation
// are independent of the users' data, adding them to a round is
// post-processing of that round's DP release.
//
// A round adds Σ_{j ∈ S_t} C·c_j / expected to the released average, S_t
// the canaries drawn for it, which is exactly the average of the clipped
// sum with the canaries' updates in it: the noise is independent of the
// sum and addition commutes (up to float32 rounding), so it works the
// same for every aggregator, secure aggregation's included.
type Canaries struct {
	// K is the number of canaries, IDs 0..K−1.
	K int
	// Rate is each canary's probability of taking part in a round, in
	// (0, 1].
	Rate float64
	// ClipNorm is C, the norm of every canary's update.
	ClipNorm float64
	// Direction writes canary j's unit direction c_j (length d) into dst.
	// It must give the same vector every time for the same j.
	Direction func(j int, dst []float32)
	// Rand draws the canaries' participation. It must be a stream of its
	// own (dp.NewSecureRand), never the users' sampling stream: reusing
	// it would correlate who of the users and who of the canaries is
	// sampled.
	Rand *rand.Rand

	buf []float32
}

// insert draws this round's canaries (Poisson sampling at Rate, the
// users' sampler) and adds C·c_j/expected for each to avg. It returns the
// number inserted, which is not released.
func (c *Canaries) insert(avg []float32, expected float64) int {
	if c.K <= 0 {
		return 0
	}
	if !(c.Rate > 0 && c.Rate <= 1) || !(expected > 0) {
		panic(fmt.Sprintf("fl: canary rate %v and expected cohort %v must be in (0, 1] and > 0", c.Rate, expected))
	}
	if len(c.buf) != len(avg) {
		c.buf = make([]float32, len(avg))
	}
	ids := Poisson{Q: c.Rate}.Sample(c.K, c.Rand)
	scale := float32(c.ClipNorm / expected)
	for _, j := range ids {
		c.Direction(j, c.buf)
		simd.Axpy(avg, scale, c.buf)
	}
	return len(ids)
}
