package secagg

import (
	"fmt"
	"math"
)

// Parameter-choice targets (Bell et al. 2020, CCS, §3–4 and the parameter
// search of its authors' implementation; see ChooseParams).
const (
	// SecurityBits is σ: the probability over the random graph that the
	// server and its colluders learn more than the sum (an honest client's
	// secrets reachable with colluding shares, or the honest survivors'
	// graph falling apart into separately revealed partial sums) is at
	// most 2^−σ. Each of the two events gets half of it, 2^−(σ+1), union-
	// bounded over the n clients or the pairs of ring gaps.
	SecurityBits = 40
	// CorrectnessBits is η: the probability that some client's secret has
	// fewer than t surviving holders (the instance aborts) is at most
	// 2^−η, whether ⌊δn⌋ clients drop or each drops independently at the
	// planned rate δ.
	CorrectnessBits = 20
	// ColludingFraction is γ, the fraction of clients assumed to collude
	// with the (semi-honest) server: ⌊n/3⌋ of n.
	ColludingFraction = 1.0 / 3
	// maxSparseNeighbors bounds the search for a sparse k; beyond it the
	// complete graph is used (only reached at dropout rates near 1−γ, where
	// no sparse graph gives both guarantees).
	maxSparseNeighbors = 4096
)

// ChooseParams picks the number of neighbours k and the threshold t for an
// instance among n clients (n = |U1| ≥ 2) of which a fraction dropoutRate
// ∈ [0, 1) is expected to drop out before unmasking. It follows Bell et
// al. 2020 (CCS), §3–4: over the random Harary graph the protocol is
// secure when the honest survivors stay connected and no honest client
// has t colluding neighbours, and correct when every client keeps t
// surviving neighbours. The concrete bounds are those of the authors'
// parameter finder (Google's fcp/secagg/server/graph_parameter_finder):
// a fixed set of A = ⌊γn⌋ colluders and D = ⌊δn⌋ dropouts, placed on the
// ring by the uniformly random permutation. With B = A + D:
//
//   - Connectivity (security): the honest survivors of H(n, k) only split
//     into components if two disjoint, non-adjacent runs of k/2 ring
//     positions are all colluding or dropped. There are n(n−k−1)/2 such
//     pairs of runs, each all bad with probability (B)_k/(n)_k (falling
//     factorials), so n(n−k−1)/2·(B)_k/(n)_k ≤ 2^−(σ+1). Because the
//     simulation's and the devices' dropouts are random rather than a set
//     of D, the same must hold with honest clients dropping independently
//     at rate δ: n(n−k−1)/2·E[δ^(k−J)] ≤ 2^−(σ+1), J ~ Hyp(n, A, k) the
//     colluders among the k positions (at δ = 0 the two coincide).
//   - Privacy (security): an honest client's k neighbours are a uniform
//     k-subset of the other n−1 clients, A of them colluding, so its
//     colluding neighbours are J ~ Hyp(n−1, A, k) and n·P[J ≥ t] ≤
//     2^−(σ+1). (The authors' finder draws from n rather than n−1, a
//     slightly thinner tail; n−1 is exact and never gives a smaller t.)
//   - Correctness: a dropped client's secret must keep t surviving
//     neighbours (its own share is gone): n·P[S < t] ≤ 2^−η for S ~
//     Hyp(n−1, n−1−D, k), and likewise for S ~ Bin(k, 1−δ) (independent
//     dropouts).
//
// The result is the smallest even k ≤ n−2 for which some t satisfies all
// three, with the smallest such t (the most dropout-tolerant one that
// keeps privacy). When none does (small n, or a dropout rate near 1−γ) it
// uses the complete graph of Bonawitz et al. 2017 (k = n−1) with t =
// max(2, A+1), private with certainty since at most A holders collude; if
// correctness is then weaker than 2^−η (tiny n with high dropout), t is
// kept anyway: privacy is never traded for liveness, the instance only
// aborts with ErrTooFewSurvivors more often.
//
// Tails are summed exactly in log space. The result has k even or k =
// n−1, and 2 ≤ t ≤ k+1. ChooseParams returns an error for n < 2 or a
// dropout rate outside [0, 1).
func ChooseParams(n int, dropoutRate float64) (Params, error) {
	if n < 2 {
		return Params{}, fmt.Errorf("secagg: ChooseParams needs n ≥ 2 clients, got %d", n)
	}
	if !(dropoutRate >= 0 && dropoutRate < 1) {
		return Params{}, fmt.Errorf("secagg: dropout rate %v outside [0, 1)", dropoutRate)
	}
	a, d := colluders(n), plannedDropouts(n, dropoutRate)
	sigma := -(SecurityBits + 1) * math.Ln2
	eta := -CorrectnessBits * math.Ln2
	logN := math.Log(float64(n))
	allBad := 0.0 // ln((a+d)_k/(n)_k), extended by two factors per k
	for k := 2; k <= n-2 && k <= maxSparseNeighbors; k += 2 {
		allBad += logFallingRatio(a+d, n, k-2) + logFallingRatio(a+d, n, k-1)
		pairs := logN + math.Log(float64(n-k-1)) - math.Ln2
		if pairs+allBad > sigma || pairs+logAllBadIndependent(n, a, k, dropoutRate) > sigma {
			continue // the honest survivors' graph may disconnect
		}
		t := privacyThreshold(n, a, k, logN, sigma)
		if t > k {
			continue
		}
		if logN+logHypLower(n-1, n-1-d, k, t) <= eta && logN+logBinomLower(k, 1-dropoutRate, t) <= eta {
			return Params{Neighbors: k, Threshold: t}, nil
		}
	}
	return Params{Neighbors: n - 1, Threshold: completeThreshold(n)}, nil
}

// colluders is A = ⌊γn⌋ for γ = ColludingFraction = 1/3, in exact integer
// arithmetic.
func colluders(n int) int { return n / 3 }

// plannedDropouts is D = ⌊δn⌋, rounded up when δn is within 1e-9 of the
// next integer (so that floating-point error never plans for fewer).
func plannedDropouts(n int, rate float64) int {
	return min(n, int(math.Floor(rate*float64(n)+1e-9)))
}

// completeThreshold is the complete graph's t: larger than the most
// colluders, ⌊γn⌋, and at least 2.
func completeThreshold(n int) int {
	return max(2, colluders(n)+1)
}

// logFallingRatio is ln((b−i)/(n−i)), the factor by which (b)_k/(n)_k
// grows from k = i to i+1 (−Inf once i ≥ b: k given ring positions cannot
// all hold one of b bad clients when k > b).
func logFallingRatio(b, n, i int) float64 {
	if i >= b {
		return math.Inf(-1)
	}
	return math.Log(float64(b-i) / float64(n-i))
}

// logAllBadIndependent is ln E[δ^(k−J)], J ~ Hyp(n, a, k): the probability
// that k given ring positions are all colluding (a colluders placed
// uniformly) or dropped (every other client independently with
// probability δ).
func logAllBadIndependent(n, a, k int, rate float64) float64 {
	ld := math.Log(rate) // −Inf at δ = 0: only j = k counts
	s := math.Inf(-1)
	lo, pmf := logHypPMFs(n, a, k)
	for i, lp := range pmf {
		if j := lo + i; j < k {
			lp += float64(k-j) * ld
		}
		s = logAddExp(s, lp)
	}
	return s
}

// privacyThreshold is the smallest t ≥ 2 with logN + ln P[J ≥ t] ≤ sigma,
// J ~ Hyp(n−1, a, k) an honest client's colluding neighbours (min(k, a)+1,
// where the probability is 0, if no smaller t qualifies).
func privacyThreshold(n, a, k int, logN, sigma float64) int {
	lo, pmf := logHypPMFs(n-1, a, k)
	tail := math.Inf(-1)
	for i := len(pmf) - 1; i >= 0 && lo+i >= 2; i-- {
		next := logAddExp(tail, pmf[i])
		if logN+next > sigma {
			return lo + i + 1
		}
		tail = next
	}
	return 2
}

// logHypLower is ln P[S < t] for S ~ Hyp(N, good, k) (−Inf when it is 0).
func logHypLower(N, good, k, t int) float64 {
	lo, pmf := logHypPMFs(N, good, k)
	s := math.Inf(-1)
	for i, lp := range pmf {
		if lo+i >= t {
			break
		}
		s = logAddExp(s, lp)
	}
	return s
}

// logHypPMFs returns ln P[X = j] for X ~ Hyp(N, K, k) (k draws without
// replacement from N items of which K are marked, k ≤ N), for j = lo,
// lo+1, …, min(k, K) with lo = max(0, k−(N−K)): the first from log-gamma,
// the others by the ratio P[X = j+1]/P[X = j] = (K−j)(k−j) / ((j+1)(N−K−
// k+j+1)).
func logHypPMFs(N, K, k int) (lo int, pmf []float64) {
	lo, hi := max(0, k-(N-K)), min(k, K)
	pmf = make([]float64, hi-lo+1)
	pmf[0] = logChoose(K, lo) + logChoose(N-K, k-lo) - logChoose(N, k)
	for j := lo; j < hi; j++ {
		pmf[j-lo+1] = pmf[j-lo] + math.Log(float64(K-j)*float64(k-j)/(float64(j+1)*float64(N-K-k+j+1)))
	}
	return lo, pmf
}

// logChoose is ln C(m, r) for 0 ≤ r ≤ m.
func logChoose(m, r int) float64 {
	return lgamma(m+1) - lgamma(r+1) - lgamma(m-r+1)
}

func lgamma(x int) float64 {
	v, _ := math.Lgamma(float64(x))
	return v
}

// logBinomLower is ln P[Bin(m, q) < t] (−Inf when it is 0), the terms by
// the ratio P[i+1]/P[i] = (m−i)/(i+1)·q/(1−q).
func logBinomLower(m int, q float64, t int) float64 {
	if q == 1 {
		if t > m {
			return 0
		}
		return math.Inf(-1)
	}
	lp, lq := math.Log(q), math.Log1p(-q)
	s := math.Inf(-1)
	term := float64(m) * lq // i = 0
	for i := 0; i < t && i <= m; i++ {
		s = logAddExp(s, term)
		term += math.Log(float64(m-i)/float64(i+1)) + lp - lq
	}
	return s
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
