package fl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampler chooses the cohort of a round from a population of n clients,
// identified 0..n−1. Under DP the generator must be secure (see
// dp.NewSecureRand): the privacy amplification by sampling that the
// accountant credits assumes the server cannot predict who is sampled.
type Sampler interface {
	// Sample returns the cohort's client IDs in increasing order.
	Sample(n int, rng *rand.Rand) []int
	// ExpectedSize is the expected cohort size for a population of n,
	// the fixed denominator of DP-FedAvg's estimator (q·n or K).
	ExpectedSize(n int) float64
	// String names the scheme and its parameter, e.g. "poisson(q=0.02)".
	String() string
}

// Poisson includes every client independently with probability Q
// (McMahan et al. 2018 §2; the "Poisson sampling" of the accountant of
// Mironov, Talwar, Zhang 2019). The cohort size is Binomial(n, Q).
type Poisson struct {
	// Q is the sampling rate q ∈ (0, 1].
	Q float64
}

// Sample draws the cohort by skipping geometric gaps (gap ~ Geometric(q)),
// which is exactly Poisson sampling and costs O(q·n) draws instead of n.
func (p Poisson) Sample(n int, rng *rand.Rand) []int {
	if !(p.Q > 0 && p.Q <= 1) {
		panic(fmt.Sprintf("fl: Poisson sampling rate must be in (0,1], got %v", p.Q))
	}
	out := make([]int, 0, int(p.Q*float64(n)*1.2)+8)
	if p.Q == 1 {
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	logq := math.Log1p(-p.Q)
	i := -1
	for {
		// P(gap ≥ k) = (1−q)^(k−1): the index of the next success.
		u := 1 - rng.Float64() // (0, 1]
		gap := math.Floor(math.Log(u)/logq) + 1
		if gap > float64(n) {
			return out
		}
		i += int(gap)
		if i >= n {
			return out
		}
		out = append(out, i)
	}
}

// ExpectedSize is q·n.
func (p Poisson) ExpectedSize(n int) float64 { return p.Q * float64(n) }

func (p Poisson) String() string { return fmt.Sprintf("poisson(q=%g)", p.Q) }

// Fixed samples exactly K distinct clients uniformly without replacement
// (Floyd's algorithm, O(K) time and memory whatever n is).
type Fixed struct {
	// K is the cohort size, 1 ≤ K ≤ n.
	K int
}

// Sample draws K distinct IDs.
func (f Fixed) Sample(n int, rng *rand.Rand) []int {
	if f.K < 1 || f.K > n {
		panic(fmt.Sprintf("fl: fixed cohort size %d not in [1, %d]", f.K, n))
	}
	chosen := make(map[int]struct{}, f.K)
	out := make([]int, 0, f.K)
	for j := n - f.K; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, dup := chosen[t]; dup {
			t = j
		}
		chosen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// ExpectedSize is K.
func (f Fixed) ExpectedSize(int) float64 { return float64(f.K) }

func (f Fixed) String() string { return fmt.Sprintf("fixed(k=%d)", f.K) }
