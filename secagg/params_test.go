package secagg

import (
	"math/big"
	"testing"
)

// The tests below recompute ChooseParams' criteria with exact integer
// arithmetic (math/big), independent of its log-space sums: with the
// dropout rate δ = a/b and γ = 1/3,
//
//	P[Bin(k, 1/3) ≥ t]      = Σ_{i≥t} C(k,i)·2^{k−i} / 3^k
//	P[Bin(m, 1−δ) < t]      = Σ_{i<t} C(m,i)·(b−a)^i·a^{m−i} / b^m
//	p = 1 − (2/3)(1−δ)      = (b+2a) / 3b

func pow(x int64, e int) *big.Int { return new(big.Int).Exp(big.NewInt(x), big.NewInt(int64(e)), nil) }

// privacyOK: n·P[Bin(k,1/3) ≥ t]·2^40 ≤ 1.
func privacyOK(n, k, t int) bool {
	num := new(big.Int)
	for i := t; i <= k; i++ {
		num.Add(num, new(big.Int).Mul(new(big.Int).Binomial(int64(k), int64(i)), pow(2, k-i)))
	}
	num.Mul(num, big.NewInt(int64(n)))
	num.Lsh(num, SecurityBits)
	return num.Cmp(pow(3, k)) <= 0
}

// correctnessOK: n·P[Bin(m, 1−a/b) < t]·2^20 ≤ 1.
func correctnessOK(n, m, t int, a, b int64) bool {
	num := new(big.Int)
	for i := 0; i < t && i <= m; i++ {
		term := new(big.Int).Binomial(int64(m), int64(i))
		term.Mul(term, pow(b-a, i))
		term.Mul(term, pow(a, m-i))
		num.Add(num, term)
	}
	num.Mul(num, big.NewInt(int64(n)))
	num.Lsh(num, CorrectnessBits)
	return num.Cmp(pow(b, m)) <= 0
}

// connectedOK: (n²/2)·p^k·2^40 ≤ 1, i.e. n²·(b+2a)^k·2^40 ≤ 2·(3b)^k.
func connectedOK(n, k int, a, b int64) bool {
	lhs := new(big.Int).Mul(big.NewInt(int64(n)), big.NewInt(int64(n)))
	lhs.Mul(lhs, pow(b+2*a, k))
	lhs.Lsh(lhs, SecurityBits)
	return lhs.Cmp(new(big.Int).Lsh(pow(3*b, k), 1)) <= 0
}

// minPrivacyT is the smallest t ≥ 2 with privacyOK(n, k, t) (k+2 if
// none), accumulating the exact tail from the top.
func minPrivacyT(n, k int) int {
	num := new(big.Int)
	limit := pow(3, k)
	for t := k; t >= 2; t-- {
		num.Add(num, new(big.Int).Mul(new(big.Int).Binomial(int64(k), int64(t)), pow(2, k-t)))
		lhs := new(big.Int).Mul(num, big.NewInt(int64(n)))
		if lhs.Lsh(lhs, SecurityBits).Cmp(limit) > 0 {
			return t + 1
		}
	}
	return 2
}

// sparseFeasible reports whether some t makes the sparse graph with k
// neighbours satisfy all three criteria. Privacy holds exactly for t ≥
// minPrivacyT and correctness fails more as t grows, so only that t needs
// checking.
func sparseFeasible(n, k int, a, b int64) bool {
	t := minPrivacyT(n, k)
	return connectedOK(n, k, a, b) && t <= k+1 && privacyOK(n, k, t) && correctnessOK(n, k+1, t, a, b)
}

func TestChooseParamsBounds(t *testing.T) {
	ns := []int{2, 3, 4, 5, 10, 50, 100, 300, 1000, 10_000, 1_000_000}
	rates := [][2]int64{{0, 1}, {1, 20}, {1, 10}, {3, 10}}
	if testing.Short() {
		ns = []int{2, 3, 10, 100, 1000, 1_000_000}
		rates = [][2]int64{{0, 1}, {1, 10}, {3, 10}}
	}
	for _, r := range rates {
		a, b := r[0], r[1]
		delta := float64(a) / float64(b)
		for _, n := range ns {
			p, err := ChooseParams(n, delta)
			if err != nil {
				t.Fatalf("n=%d δ=%v: %v", n, delta, err)
			}
			k, th := p.Neighbors, p.Threshold
			if th < 2 || th > k+1 || k > n-1 || (k != n-1 && k%2 != 0) {
				t.Fatalf("n=%d δ=%v: invalid %+v", n, delta, p)
			}
			if k == n-1 {
				// Complete graph: t exceeds the ⌊n/3⌋ colluders, the
				// smallest such t, and no sparse k qualified.
				if th <= n/3 || th > max(2, n/3+1) {
					t.Fatalf("n=%d δ=%v: complete graph with t=%d, want %d", n, delta, th, max(2, n/3+1))
				}
				if n <= 1000 {
					for k2 := 2; k2 <= n-2; k2 += 2 {
						if sparseFeasible(n, k2, a, b) {
							t.Fatalf("n=%d δ=%v: complete graph chosen but k=%d qualifies", n, delta, k2)
						}
					}
				}
				continue
			}
			if !privacyOK(n, k, th) || !correctnessOK(n, k+1, th, a, b) || !connectedOK(n, k, a, b) {
				t.Fatalf("n=%d δ=%v: %+v violates a bound (privacy %v, correctness %v, connectivity %v)",
					n, delta, p, privacyOK(n, k, th), correctnessOK(n, k+1, th, a, b), connectedOK(n, k, a, b))
			}
			if th > 2 && privacyOK(n, k, th-1) && correctnessOK(n, k+1, th-1, a, b) {
				t.Fatalf("n=%d δ=%v: %+v but t=%d also qualifies", n, delta, p, th-1)
			}
			if k > 2 && sparseFeasible(n, k-2, a, b) {
				t.Fatalf("n=%d δ=%v: %+v but k=%d also qualifies", n, delta, p, k-2)
			}
		}
	}
}

// TestChooseParamsGrowth checks the point of SecAgg+: k grows
// logarithmically in n, far below the complete graph's n−1.
func TestChooseParamsGrowth(t *testing.T) {
	p3, _ := ChooseParams(1000, 0.1)
	p6, _ := ChooseParams(1_000_000, 0.1)
	if p3.Neighbors > 999/4 || p6.Neighbors >= 200 || p6.Neighbors < p3.Neighbors {
		t.Fatalf("k(1000) = %d, k(10^6) = %d: not logarithmic growth", p3.Neighbors, p6.Neighbors)
	}
	t.Logf("δ=0.1: n=1000 → %+v, n=10^6 → %+v", p3, p6)
}

func TestChooseParamsErrors(t *testing.T) {
	for _, c := range []struct {
		n int
		d float64
	}{{1, 0}, {0, 0}, {10, -0.1}, {10, 1}, {10, 2}} {
		if _, err := ChooseParams(c.n, c.d); err == nil {
			t.Errorf("ChooseParams(%d, %v) did not fail", c.n, c.d)
		}
	}
}
