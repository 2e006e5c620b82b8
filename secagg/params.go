package secagg

import (
	"fmt"
	"math"
)

// Parameter-choice targets (Bell et al. 2020, §3–4, in spirit; see the
// package documentation for the argument).
const (
	// SecurityBits is σ: every privacy failure event (an honest client's
	// secret reachable by colluders, or the honest survivors' graph falling
	// apart into separately revealed partial sums) has probability at most
	// 2^−σ over the random graph, union-bounded over all clients.
	SecurityBits = 40
	// CorrectnessBits is η: the probability that some client's secret has
	// fewer than t surviving holders (the instance aborts) is at most
	// 2^−η when clients drop independently at the configured rate.
	CorrectnessBits = 20
	// ColludingFraction is γ, the fraction of clients assumed to collude
	// with the (semi-honest) server.
	ColludingFraction = 1.0 / 3
	// maxSparseNeighbors bounds the search for a sparse k; beyond it the
	// complete graph is used (only reached at dropout rates near 1−γ, where
	// no sparse graph gives both guarantees).
	maxSparseNeighbors = 4096
)

// ChooseParams picks the number of neighbours k and the threshold t for an
// instance among n clients (n = |U1| ≥ 2) of which a fraction dropoutRate
// ∈ [0, 1) is expected to drop out before unmasking. The criteria, after
// Bell et al. 2020 (CCS), §3–4:
//
//   - Sparse graph (random Harary graph H(n, k), k even, k ≤ n−2). The
//     colluders are a fixed set of γ = 1/3 of the clients, and the random
//     placement on the ring makes each client's k neighbours a sample of
//     them, so the number of colluding neighbours is (at most as spread as)
//     Binomial(k, γ). Privacy: n·P[Bin(k, γ) ≥ t] ≤ 2^−40, so no honest
//     client's secrets are reachable with t colluding shares; and
//     (n²/2)·p^k ≤ 2^−40 with p = 1−(1−γ)(1−δ) the probability that a ring
//     position is colluding or dropped: the honest survivors of H(n, k)
//     only split into components (whose partial sums the server would learn
//     separately) if two disjoint runs of k/2 consecutive positions are all
//     removed. Correctness: n·P[Bin(k+1, 1−δ) < t] ≤ 2^−20, the k+1 holders
//     of each secret (neighbours and the client itself) surviving
//     independently with probability 1−δ. The result is the smallest even
//     k for which some t satisfies all three, with the smallest such t
//     (the most dropout-tolerant one that keeps privacy).
//   - Complete graph (k = n−1, Bonawitz et al. 2017), used when no sparse k
//     ≤ n−2 qualifies (in particular for small n). Every client is every
//     other's neighbour, so colluders among the holders number at most
//     ⌊γn⌋ deterministically, and t = max(2, ⌊γn⌋+1) gives privacy with
//     probability 1. If n·P[Bin(n, 1−δ) < t] > 2^−20 (tiny n with high
//     dropout), t is kept anyway: privacy is never traded for liveness, and
//     the weaker guarantee is only that the instance aborts with
//     ErrTooFewSurvivors more often than 2^−20.
//
// Binomial tails are summed exactly in log space. The result has k even or
// k = n−1, and 2 ≤ t ≤ k+1. ChooseParams returns an error for n < 2 or a
// dropout rate outside [0, 1).
func ChooseParams(n int, dropoutRate float64) (Params, error) {
	if n < 2 {
		return Params{}, fmt.Errorf("secagg: ChooseParams needs n ≥ 2 clients, got %d", n)
	}
	if !(dropoutRate >= 0 && dropoutRate < 1) {
		return Params{}, fmt.Errorf("secagg: dropout rate %v outside [0, 1)", dropoutRate)
	}
	lf := logFactorials(min(n, maxSparseNeighbors+1) + 1)
	sigma := -SecurityBits * math.Ln2
	eta := -CorrectnessBits * math.Ln2
	logN := math.Log(float64(n))
	p := 1 - (1-ColludingFraction)*(1-dropoutRate)
	for k := 2; k <= n-2 && k <= maxSparseNeighbors; k += 2 {
		if math.Log(float64(n)*float64(n)/2)+float64(k)*math.Log(p) > sigma {
			continue // the survivors' graph may disconnect
		}
		t := privacyThreshold(lf, k, logN, sigma)
		if t > k+1 {
			continue
		}
		if logN+logBinomLower(lf, k+1, 1-dropoutRate, t) <= eta {
			return Params{Neighbors: k, Threshold: t}, nil
		}
	}
	return Params{Neighbors: n - 1, Threshold: completeThreshold(n)}, nil
}

// completeThreshold is the complete graph's t: larger than the most
// colluders, ⌊γn⌋, and at least 2.
func completeThreshold(n int) int {
	return max(2, int(math.Floor(float64(n)*ColludingFraction))+1)
}

// privacyThreshold is the smallest t ≥ 2 with logN + ln P[Bin(k, γ) ≥ t] ≤
// sigma, or k+1 if only t = k+1 (probability 0) qualifies.
func privacyThreshold(lf []float64, k int, logN, sigma float64) int {
	// Walk the upper tail down from i = k, accumulating in log space.
	tail := math.Inf(-1)
	lp, lq := math.Log(ColludingFraction), math.Log(1-ColludingFraction)
	for i := k; i >= 2; i-- {
		next := logAddExp(tail, lf[k]-lf[i]-lf[k-i]+float64(i)*lp+float64(k-i)*lq)
		if logN+next > sigma {
			return i + 1
		}
		tail = next
	}
	return 2
}

// logBinomLower is ln P[Bin(m, q) < t] (−Inf when it is 0).
func logBinomLower(lf []float64, m int, q float64, t int) float64 {
	lp, lq := math.Log(q), math.Log1p(-q)
	s := math.Inf(-1)
	for i := 0; i < t && i <= m; i++ {
		term := lf[m] - lf[i] - lf[m-i]
		if i > 0 {
			term += float64(i) * lp
		}
		if m-i > 0 {
			term += float64(m-i) * lq
		}
		s = logAddExp(s, term)
	}
	return s
}

// logFactorials returns ln(i!) for i = 0..m.
func logFactorials(m int) []float64 {
	lf := make([]float64, m+1)
	for i := 2; i <= m; i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	return lf
}

// logAddExp is ln(e^a + e^b), exact for −Inf operands.
func logAddExp(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if math.IsInf(b, -1) {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// checkParams validates forced or chosen parameters for n clients.
func checkParams(p Params, n int) error {
	k, t := p.Neighbors, p.Threshold
	switch {
	case k < 1 || k > n-1:
		return fmt.Errorf("secagg: %d neighbours for %d clients", k, n)
	case k != n-1 && k%2 != 0:
		return fmt.Errorf("secagg: sparse graph needs an even number of neighbours, got %d", k)
	case t < 2 || t > k+1:
		// t = 1 would hand every secret to each single holder.
		return fmt.Errorf("secagg: threshold %d outside [2, %d]", t, k+1)
	}
	return nil
}
