package secagg

import (
	"math/big"
	"testing"
)

// The tests below recompute ChooseParams' criteria with exact integer
// arithmetic (math/big), independent of its log-space sums. With A = ⌊n/3⌋
// colluders, D = ⌊δn⌋ planned dropouts, δ = a/b and hypergeometric
// probabilities written as ratios of binomial coefficients:
//
//	P[Hyp(N, K, k) = i]   = C(K, i)·C(N−K, k−i) / C(N, k)
//	(B)_k/(n)_k           = k given ring positions all among B bad clients
//	E[δ^(k−J)], J ~ Hyp(n, A, k) = Σ_j C(A, j)·C(n−A, k−j)·a^(k−j)·b^j / (C(n, k)·b^k)
//	P[Bin(k, 1−δ) < t]    = Σ_{i<t} C(k, i)·(b−a)^i·a^(k−i) / b^k

func binom(n, k int) *big.Int { return new(big.Int).Binomial(int64(n), int64(k)) }

func pow(x int64, e int) *big.Int { return new(big.Int).Exp(big.NewInt(x), big.NewInt(int64(e)), nil) }

// falling is (n)_k = n·(n−1)·…·(n−k+1).
func falling(n, k int) *big.Int {
	r := big.NewInt(1)
	for i := range k {
		r.Mul(r, big.NewInt(int64(n-i)))
	}
	return r
}

// mulInts is the product of x and the small factors.
func mulInts(x *big.Int, fs ...int64) *big.Int {
	r := new(big.Int).Set(x)
	for _, f := range fs {
		r.Mul(r, big.NewInt(f))
	}
	return r
}

// hypTerms returns C(K, i)·C(N−K, k−i) for i = 0..k (zero where
// impossible): the numerators of P[Hyp(N, K, k) = i] over C(N, k), by the
// exact recurrences C(K, i+1) = C(K, i)·(K−i)/(i+1) and C(M, j−1) =
// C(M, j)·j/(M−j+1).
func hypTerms(N, K, k int) []*big.Int {
	M := N - K
	a := make([]*big.Int, k+1) // C(K, i)
	c := make([]*big.Int, k+1) // C(M, k−i)
	a[0] = big.NewInt(1)
	for i := 0; i < k; i++ {
		a[i+1] = new(big.Int)
		if i < K {
			a[i+1].Quo(mulInts(a[i], int64(K-i)), big.NewInt(int64(i+1)))
		}
	}
	c[0] = binom(M, k) // C(M, k), zero when k > M
	for i := 0; i < k; i++ {
		j := k - i // c[i] = C(M, j); c[i+1] = C(M, j−1)
		c[i+1] = new(big.Int)
		switch {
		case j-1 > M:
		case j > M: // C(M, M) = 1 when j−1 = M
			c[i+1].SetInt64(1)
		default:
			c[i+1].Quo(mulInts(c[i], int64(j)), big.NewInt(int64(M-j+1)))
		}
	}
	out := make([]*big.Int, k+1)
	for i := range out {
		out[i] = new(big.Int).Mul(a[i], c[i])
	}
	return out
}

// hypTail is Σ_{i∈[lo,hi]} C(K, i)·C(N−K, k−i): the numerator of P[lo ≤
// Hyp(N, K, k) ≤ hi] over C(N, k).
func hypTail(N, K, k, lo, hi int) *big.Int {
	s := new(big.Int)
	terms := hypTerms(N, K, k)
	for i := max(lo, 0); i <= min(hi, k); i++ {
		s.Add(s, terms[i])
	}
	return s
}

// smallestTail is the smallest t ≥ 0 with n·P[Hyp(N, K, k) ≥ t]·2^bits ≤
// 1, summing the exact upper tail from the top (k+1 if none).
func smallestTail(n, N, K, k int, bits uint) int {
	terms, den := hypTerms(N, K, k), binom(N, k)
	tail := new(big.Int)
	for t := k; t >= 0; t-- {
		tail.Add(tail, terms[t])
		if !leq(tail, int64(n), bits, den) {
			return t + 1
		}
	}
	return 0
}

// leq reports whether num·2^bits·scale ≤ den.
func leq(num *big.Int, scale int64, bits uint, den *big.Int) bool {
	l := mulInts(num, scale)
	return l.Lsh(l, bits).Cmp(den) <= 0
}

// connectedOK: n(n−k−1)/2 · (B)_k/(n)_k ≤ 2^−41 with B = A+D, and the same
// with honest clients dropping independently at rate a/b.
func connectedOK(n, k int, a, b int64) bool {
	A, D := n/3, int(int64(n)*a/b)
	pairs := int64(n) * int64(n-k-1)
	if k <= A+D && !leq(falling(A+D, k), pairs, SecurityBits+1, mulInts(falling(n, k), 2)) {
		return false
	}
	num := new(big.Int)
	for j := max(0, k-(n-A)); j <= min(k, A); j++ {
		term := new(big.Int).Mul(binom(A, j), binom(n-A, k-j))
		term.Mul(term, pow(a, k-j))
		num.Add(num, term.Mul(term, pow(b, j)))
	}
	den := new(big.Int).Mul(binom(n, k), pow(b, k))
	return leq(num, pairs, SecurityBits+1, den.Lsh(den, 1))
}

// privacyOK: n·P[Hyp(n−1, A, k) ≥ t] ≤ 2^−41.
func privacyOK(n, k, t int) bool {
	return leq(hypTail(n-1, n/3, k, t, k), int64(n), SecurityBits+1, binom(n-1, k))
}

// correctnessOK: n·P[Hyp(n−1, n−1−D, k) < t] ≤ 2^−20 and n·P[Bin(k, 1−a/b)
// < t] ≤ 2^−20.
func correctnessOK(n, k, t int, a, b int64) bool {
	D := int(int64(n) * a / b)
	if !leq(hypTail(n-1, n-1-D, k, 0, t-1), int64(n), CorrectnessBits, binom(n-1, k)) {
		return false
	}
	num := new(big.Int)
	for i := 0; i < t && i <= k; i++ {
		term := mulInts(binom(k, i))
		term.Mul(term, pow(b-a, i))
		num.Add(num, term.Mul(term, pow(a, k-i)))
	}
	return leq(num, int64(n), CorrectnessBits, pow(b, k))
}

// minPrivacyT is the smallest t ≥ 2 with privacyOK(n, k, t) (min(k, A)+1
// if none smaller).
func minPrivacyT(n, k int) int {
	return min(max(2, smallestTail(n, n-1, n/3, k, SecurityBits+1)), min(k, n/3)+1)
}

// sparseFeasible reports whether some t makes the sparse graph with k
// neighbours satisfy every criterion. Privacy holds exactly for t ≥
// minPrivacyT and correctness fails more as t grows, so only that t needs
// checking.
func sparseFeasible(n, k int, a, b int64) bool {
	t := minPrivacyT(n, k)
	return connectedOK(n, k, a, b) && t <= k && correctnessOK(n, k, t, a, b)
}

func TestChooseParamsBounds(t *testing.T) {
	ns := []int{2, 3, 4, 5, 10, 50, 100, 120, 300, 1000, 10_000, 1_000_000}
	rates := [][2]int64{{0, 1}, {1, 20}, {1, 10}, {3, 10}}
	if testing.Short() {
		ns = []int{2, 3, 10, 100, 120, 1000, 1_000_000}
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
			if !privacyOK(n, k, th) || !correctnessOK(n, k, th, a, b) || !connectedOK(n, k, a, b) {
				t.Fatalf("n=%d δ=%v: %+v violates a bound (privacy %v, correctness %v, connectivity %v)",
					n, delta, p, privacyOK(n, k, th), correctnessOK(n, k, th, a, b), connectedOK(n, k, a, b))
			}
			if th > 2 && privacyOK(n, k, th-1) {
				t.Fatalf("n=%d δ=%v: %+v but t=%d is private too", n, delta, p, th-1)
			}
			if k > 2 && sparseFeasible(n, k-2, a, b) {
				t.Fatalf("n=%d δ=%v: %+v but k=%d also qualifies", n, delta, p, k-2)
			}
		}
	}
}

// paperParams transcribes the parameter choice of Bell et al. 2020 as its
// authors implemented it (Google's fcp/secagg/server/
// graph_parameter_finder, semi-honest server, σ = 40 split into 2^−41 per
// event, η = 20), exactly: A = ⌊γn⌋ colluders and D = ⌊δn⌋ dropouts for
// γ = gn/gd, δ = dn/dd; the smallest even k < n−1 such that the honest
// survivors disconnect with n(n−k−1)/2·(A+D)_k/(n)_k < 2^−41 and some t
// has n·P[Hyp(n, A, k) ≥ t] ≤ 2^−41 (privacy) and n·P[Hyp(n, n−D, k) < t]
// < 2^−20 (correctness); t is the smallest private one, at least 2. ok is
// false when no k qualifies.
func paperParams(n int, gn, gd, dn, dd int64) (k, t int, ok bool) {
	A, D := int(int64(n)*gn/gd), int(int64(n)*dn/dd)
	for k := 2; k < n-1; k += 2 {
		if k <= A+D {
			l := mulInts(falling(A+D, k), int64(n), int64(n-k-1))
			if l.Lsh(l, SecurityBits+1).Cmp(mulInts(falling(n, k), 2)) >= 0 {
				continue
			}
		}
		// The authors' code checks correctness at the smallest private t
		// and only then raises t to 2.
		t := smallestTail(n, n, A, k, SecurityBits+1)
		low := mulInts(hypTail(n, n-D, k, 0, t-1), int64(n))
		if t <= k && low.Lsh(low, CorrectnessBits).Cmp(binom(n, k)) < 0 {
			return k, max(t, 2), true
		}
	}
	return 0, 0, false
}

// TestPaperParamsReference checks the transcription paperParams against
// the values the authors' implementation publishes in its tests
// (graph_parameter_finder_test.cc, semi-honest server: degree equal,
// threshold at most the listed one), so that the next test compares
// ChooseParams with the paper's formula and not with a misreading of it.
func TestPaperParamsReference(t *testing.T) {
	cases := []struct {
		n              int
		gn, gd, dn, dd int64
		k, t           int
	}{
		{10, 33, 100, 33, 100, 8, 4},
		{100, 33, 100, 33, 100, 68, 34},
		{100, 45, 100, 45, 100, 92, 46},
		{10, 5, 100, 33, 100, 4, 2},
		{100, 5, 100, 33, 100, 28, 6},
		{1000, 5, 100, 33, 100, 72, 24},
		{10, 33, 100, 5, 100, 4, 4},
		{100, 33, 100, 5, 100, 34, 29},
		{1000, 33, 100, 5, 100, 78, 60},
	}
	if !testing.Short() {
		cases = append(cases, []struct {
			n              int
			gn, gd, dn, dd int64
			k, t           int
		}{
			{1000, 33, 100, 33, 100, 286, 150},
			{10000, 5, 100, 33, 100, 86, 29},
			{10000, 33, 100, 5, 100, 92, 70},
		}...)
	}
	for _, c := range cases {
		k, th, ok := paperParams(c.n, c.gn, c.gd, c.dn, c.dd)
		if !ok || k != c.k || th > c.t {
			t.Errorf("n=%d γ=%d/%d δ=%d/%d: transcription gives k=%d t=%d (ok %v), the authors' k=%d t≤%d",
				c.n, c.gn, c.gd, c.dn, c.dd, k, th, ok, c.k, c.t)
		}
	}
}

// TestChooseParamsMeetsPaper checks ChooseParams against the paper's
// formula (paperParams at γ = 1/3): its k and t satisfy every one of the
// paper's conditions (its own criteria are at least as strict), and without
// planned dropouts, the demo's setting, it uses exactly the paper's k, so
// the graph is as sparse as the paper allows.
func TestChooseParamsMeetsPaper(t *testing.T) {
	ns := []int{10, 30, 60, 100, 115, 120, 130, 200, 500, 1000}
	for _, r := range [][2]int64{{0, 1}, {1, 20}, {1, 10}, {3, 10}} {
		for _, n := range ns {
			p, err := ChooseParams(n, float64(r[0])/float64(r[1]))
			if err != nil {
				t.Fatal(err)
			}
			pk, pt, ok := paperParams(n, 1, 3, r[0], r[1])
			if p.Neighbors == n-1 {
				if ok && pk < n-2 && r[0] == 0 {
					t.Errorf("n=%d δ=0: complete graph, the paper allows k=%d", n, pk)
				}
				continue
			}
			k, th := p.Neighbors, p.Threshold
			A, D := n/3, int(int64(n)*r[0]/r[1])
			conn := mulInts(falling(A+D, k), int64(n), int64(n-k-1))
			private := leq(hypTail(n, A, k, th, k), int64(n), SecurityBits+1, binom(n, k))
			low := mulInts(hypTail(n, n-D, k, 0, th-1), int64(n))
			switch {
			case !ok || k < pk:
				t.Errorf("n=%d δ=%d/%d: k=%d below the paper's smallest k=%d (ok %v)", n, r[0], r[1], k, pk, ok)
			case k <= A+D && conn.Lsh(conn, SecurityBits+1).Cmp(mulInts(falling(n, k), 2)) >= 0:
				t.Errorf("n=%d δ=%d/%d: %+v fails the paper's connectivity bound", n, r[0], r[1], p)
			case !private || th < pt:
				t.Errorf("n=%d δ=%d/%d: %+v fails the paper's privacy bound (its smallest t is %d)", n, r[0], r[1], p, pt)
			case low.Lsh(low, CorrectnessBits).Cmp(binom(n, k)) >= 0:
				t.Errorf("n=%d δ=%d/%d: %+v fails the paper's correctness bound", n, r[0], r[1], p)
			case r[0] == 0 && k != pk:
				t.Errorf("n=%d δ=0: k=%d, the paper's is %d", n, k, pk)
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
