package dp

import (
	crand "crypto/rand"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Statistical tests below draw from a ChaCha8 generator keyed from
// crypto/rand (the production generator), so every run tests fresh
// samples; the seed is logged when a test fails, to replay it. Each check
// states its false-failure probability for a correct sampler; summed over
// this file it is below 2e-6 per run (the χ² tests, at p < 1e-7 each,
// contribute 1.6e-6).

// freshRand returns a ChaCha8 generator with a random seed that is logged
// if t fails.
func freshRand(t testing.TB) *rand.Rand {
	t.Helper()
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ChaCha8 seed %x", seed)
		}
	})
	return rand.New(rand.NewChaCha8(seed))
}

func mustDG(t testing.TB, sigma2 *big.Rat) *DiscreteGaussian {
	t.Helper()
	g, err := NewDiscreteGaussian(sigma2)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// exactPMF returns P[X = x] for |x| ≤ m, index x+m, of N_Z(0, σ²), the
// normalising constant summed over |x| ≤ m where m = ⌈40σ⌉ + 2, beyond
// which the terms (< e^(−800)) vanish in float64.
func exactPMF(sigma2 float64) (p []float64, m int) {
	m = int(math.Ceil(40*math.Sqrt(sigma2))) + 2
	p = make([]float64, 2*m+1)
	var z float64
	for x := -m; x <= m; x++ {
		w := math.Exp(-float64(x) * float64(x) / (2 * sigma2))
		p[x+m] = w
		z += w
	}
	for i := range p {
		p[i] /= z
	}
	return p, m
}

// chiSquare returns the Pearson statistic and its p-value (χ² with
// len(obs)−1 degrees of freedom) for counts obs against probabilities prob
// (summing to 1) over n samples.
func chiSquare(obs []int, prob []float64, n int) (stat, pval float64, df int) {
	for i, o := range obs {
		e := prob[i] * float64(n)
		d := float64(o) - e
		stat += d * d / e
	}
	df = len(obs) - 1
	return stat, distuv.ChiSquared{K: float64(df)}.Survival(stat), df
}

// bernsteinEps is the deviation ε with P[|p̂ − p| ≥ ε] ≤ delta for the mean
// p̂ of n independent Bernoulli(p) draws, by Bernstein's inequality
// P ≤ 2·exp(−nε²/(2p(1−p) + 2ε/3)).
func bernsteinEps(p float64, n int, delta float64) float64 {
	l := math.Log(2 / delta)
	v := p * (1 - p)
	return (l/3 + math.Sqrt(l*l/9+2*float64(n)*l*v)) / float64(n)
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

func ratFloat(r *big.Rat) float64 { f, _ := r.Float64(); return f }

// Pearson's χ² against the exact pmf, one bin per integer with expected
// count ≥ 20 and the two tails folded into the outermost bins, so that the
// χ² approximation of the statistic is good. Threshold p < 1e-7: the false
// failure probability is ≈1e-7 per case, 7e-7 for the test. The cases
// cover σ = 0.5, 1, 3, 20, a rational σ² = 12345/100, the 128-bit fast
// path (Q ≥ 2⁶⁴) and the math/big path.
func TestDiscreteGaussianChiSquare(t *testing.T) {
	const n = 200000
	cases := []struct {
		sigma2 string
		path   string // "64", "128" or "big"
	}{
		{"1/4", "64"}, {"1", "64"}, {"9", "64"}, {"400", "64"},
		{"12345/100", "64"},
		{"1099511627777/1099511627776", "128"}, // (2⁴⁰+1)/2⁴⁰
		{"1267650600228229401496703205377/1267650600228229401496703205376", "big"}, // 1 + 2⁻¹⁰⁰
	}
	for _, c := range cases {
		t.Run(c.sigma2, func(t *testing.T) {
			g := mustDG(t, rat(c.sigma2))
			path := "big"
			if g.fast {
				path = "64"
				if g.qh != 0 {
					path = "128"
				}
			}
			if path != c.path {
				t.Fatalf("σ² = %s takes the %s path, want %s", c.sigma2, path, c.path)
			}
			pmf, m := exactPMF(ratFloat(g.Sigma2()))
			lo := 0
			for pmf[lo]*n < 20 {
				lo++
			}
			lo -= m // bins lo..−lo, the outermost ones with the tails
			rng := freshRand(t)
			obs := make([]int, 2*(-lo)+1)
			for range n {
				x := g.Sample(rng)
				x = max(x, int64(lo))
				x = min(x, int64(-lo))
				obs[x-int64(lo)]++
			}
			prob := make([]float64, len(obs))
			for x := -m; x <= m; x++ {
				b := min(max(x, lo), -lo) - lo
				prob[b] += pmf[x+m]
			}
			stat, p, df := chiSquare(obs, prob, n)
			t.Logf("σ² = %s: χ² = %.1f, df = %d, p = %.3g", c.sigma2, stat, df, p)
			if p < 1e-7 {
				t.Fatalf("χ² = %.1f with %d df, p = %.3g < 1e-7; counts %v", stat, df, p, obs)
			}
		})
	}
}

// For wide σ (1000, and 2²⁰, which takes the 128-bit path) the χ² uses 40
// bins of equal normal probability, whose discrete-Gaussian probabilities
// are Φ((b − ½)/σ) − Φ((a − ½)/σ) for the integers a ≤ x < b. By the
// midpoint rule the sum of exp(−x²/(2σ²)) over a bin differs from the
// integral by at most ∫|f”|/24 ≤ √(2π)/(12σ), so every bin probability is
// within 1/(12σ²) + (that of the normaliser) < 2e-7 of the truth: 0.06 of
// a count at n = 200,000, far below the χ²'s resolution. Threshold
// p < 1e-7 per case (2e-7 for the test).
func TestDiscreteGaussianChiSquareWide(t *testing.T) {
	const n, bins = 200000, 40
	for _, s2 := range []string{"1000000", "1099511627776"} {
		t.Run(s2, func(t *testing.T) {
			g := mustDG(t, rat(s2))
			sigma := math.Sqrt(ratFloat(g.Sigma2()))
			edges := make([]int64, bins+1) // bin j is [edges[j], edges[j+1])
			edges[0], edges[bins] = math.MinInt64, math.MaxInt64
			for j := 1; j < bins; j++ {
				edges[j] = int64(math.Round(sigma * distuv.UnitNormal.Quantile(float64(j)/bins)))
			}
			cdf := func(e int64) float64 {
				switch e {
				case math.MinInt64:
					return 0
				case math.MaxInt64:
					return 1
				}
				return distuv.UnitNormal.CDF((float64(e) - 0.5) / sigma)
			}
			prob := make([]float64, bins)
			for j := range prob {
				prob[j] = cdf(edges[j+1]) - cdf(edges[j])
			}
			rng := freshRand(t)
			obs := make([]int, bins)
			for range n {
				x := g.Sample(rng)
				j := 0
				for x >= edges[j+1] {
					j++
				}
				obs[j]++
			}
			stat, p, df := chiSquare(obs, prob, n)
			t.Logf("σ² = %s: χ² = %.1f, df = %d, p = %.3g", s2, stat, df, p)
			if p < 1e-7 {
				t.Fatalf("χ² = %.1f with %d df, p = %.3g < 1e-7; counts %v", stat, df, p, obs)
			}
		})
	}
}

// Empirical P[|X| ≥ k] against the exact tail, for k up to 6σ (where the
// exact tail is ≈2e-9 and the check bounds the count of outliers), each
// within Bernstein's deviation at δ = 1e-9: false-failure probability
// < 1e-8 for the test.
func TestDiscreteGaussianTails(t *testing.T) {
	const n = 1000000
	for _, c := range []struct {
		sigma2 string
		ks     []int
	}{
		{"9", []int{1, 3, 6, 9, 12, 18}},
		{"1/4", []int{1, 2, 3}},
	} {
		g := mustDG(t, rat(c.sigma2))
		pmf, m := exactPMF(ratFloat(g.Sigma2()))
		rng := freshRand(t)
		counts := make([]int, len(c.ks))
		for range n {
			x := g.Sample(rng)
			if x < 0 {
				x = -x
			}
			for i, k := range c.ks {
				if x >= int64(k) {
					counts[i]++
				}
			}
		}
		for i, k := range c.ks {
			var tail float64
			for x := k; x <= m; x++ {
				tail += 2 * pmf[x+m]
			}
			got := float64(counts[i]) / n
			eps := bernsteinEps(tail, n, 1e-9)
			t.Logf("σ² = %s: P[|X| ≥ %d] = %.3g, empirical %.3g (±%.2g)", c.sigma2, k, tail, got, eps)
			if math.Abs(got-tail) > eps {
				t.Errorf("σ² = %s: P[|X| ≥ %d] empirical %.4g, exact %.4g, allowed ±%.2g", c.sigma2, k, got, tail, eps)
			}
		}
	}
}

// Mean 0 and variance Var = Σ x²·p(x) ≤ σ² (CKS20 Proposition 5; strictly
// below for σ ≤ 1, where the gap is visible in float64), within 6
// standard errors of the sample mean and of the mean of X² (the CLT; the
// false-failure probability is ≈2e-9 per check, 1.2e-8 for the test).
func TestDiscreteGaussianMoments(t *testing.T) {
	const n = 300000
	for _, s2 := range []string{"1/4", "1", "400"} {
		g := mustDG(t, rat(s2))
		sigma2 := ratFloat(g.Sigma2())
		pmf, m := exactPMF(sigma2)
		var v, m4 float64
		for x := -m; x <= m; x++ {
			fx := float64(x)
			v += fx * fx * pmf[x+m]
			m4 += fx * fx * fx * fx * pmf[x+m]
		}
		if v > sigma2*(1+1e-12) || (sigma2 <= 1 && v >= sigma2) {
			t.Errorf("σ² = %s: exact variance %v not below σ²", s2, v)
		}
		rng := freshRand(t)
		var s, s2sum float64
		for range n {
			x := float64(g.Sample(rng))
			s += x
			s2sum += x * x
		}
		mean, sq := s/n, s2sum/n
		seMean, seSq := math.Sqrt(v/n), math.Sqrt((m4-v*v)/n)
		t.Logf("σ² = %s: mean %.4f (±%.4f), E[X²] %.5f vs exact %.5f (±%.5f)", s2, mean, 6*seMean, sq, v, 6*seSq)
		if math.Abs(mean) > 6*seMean {
			t.Errorf("σ² = %s: mean %v, more than 6 standard errors (%v) from 0", s2, mean, seMean)
		}
		if math.Abs(sq-v) > 6*seSq {
			t.Errorf("σ² = %s: E[X²] %v, exact variance %v, standard error %v", s2, sq, v, seSq)
		}
	}
}

// Symmetry: given the count of non-zero draws, the number of positive ones
// is Binomial(·, 1/2), and so is #{X = k} given #{|X| = k}; each checked
// with Hoeffding's bound at δ = 1e-9 (false failure < 1e-8 for the test).
func TestDiscreteGaussianSymmetry(t *testing.T) {
	const n = 400000
	const kmax = 6
	g := mustDG(t, rat("9"))
	rng := freshRand(t)
	var pos, neg int
	var at [2][kmax + 1]int
	for range n {
		x := g.Sample(rng)
		switch {
		case x > 0:
			pos++
			if x <= kmax {
				at[0][x]++
			}
		case x < 0:
			neg++
			if -x <= kmax {
				at[1][-x]++
			}
		}
	}
	check := func(what string, a, b int) {
		tot := float64(a + b)
		eps := math.Sqrt(tot * math.Log(2/1e-9) / 2)
		if math.Abs(float64(a)-tot/2) > eps {
			t.Errorf("%s: %d vs %d, allowed deviation %.0f from the half", what, a, b, eps)
		}
	}
	check("X > 0 vs X < 0", pos, neg)
	for k := 1; k <= kmax; k++ {
		check(fmt.Sprintf("X = %d vs X = −%d", k, k), at[0][k], at[1][k])
	}
}

// Bernoulli(exp(−γ)) for rational γ in [0, 1), = 1 and > 1, on the
// 64-bit, 128-bit and math/big routes: frequency within Bernstein's
// deviation at δ = 1e-9 of exp(−γ) (false failure < 2e-8 for the test).
func TestBernoulliExp(t *testing.T) {
	const n = 200000
	rng := freshRand(t)
	bs := &bitSource{rng: rng}
	check := func(what string, gamma float64, draw func() bool) {
		t.Helper()
		hits := 0
		for range n {
			if draw() {
				hits++
			}
		}
		want := math.Exp(-gamma)
		got := float64(hits) / n
		if eps := bernsteinEps(want, n, 1e-9); math.Abs(got-want) > eps {
			t.Errorf("%s: frequency %.5f, exp(−γ) = %.5f, allowed ±%.4f", what, got, want, eps)
		}
	}
	for _, c := range [][2]uint64{{0, 1}, {1, 7}, {1, 2}, {999, 1000}, {1, 1}, {4, 3}, {5, 2}, {10, 3}} {
		a, b := c[0], c[1]
		check(fmt.Sprintf("γ = %d/%d", a, b), float64(a)/float64(b), func() bool { return bernoulliExp(a, b, bs) })
	}
	check("exp(−1)", 1, func() bool { return bernoulliExp1(bs) })
	// A denominator b·K beyond 64 bits on the 64-bit route (two draws).
	const big64 = 1<<63 + 1
	check("γ = (2⁶²)/(2⁶³+1)", float64(1<<62)/float64(big64), func() bool { return bernoulliExpFrac(1<<62, big64, bs) })
	// 128-bit: b = 3·2⁶⁴ + 5, r = 2⁶⁴ + 7, γ ≈ 1/3.
	check("γ = (2⁶⁴+7)/(3·2⁶⁴+5)", 1.0/3, func() bool { return bernoulliExpFrac128(1, 7, 3, 5, bs) })
	// math/big: γ = 2 + r/b with b = 2¹⁰⁰ + 1, r = 2⁹⁹ (γ ≈ 2.5).
	b := new(big.Int).Lsh(big.NewInt(1), 100)
	b.Add(b, big.NewInt(1))
	r := new(big.Int).Lsh(big.NewInt(1), 99)
	check("γ = 2 + 2⁹⁹/(2¹⁰⁰+1)", 2.5, func() bool { return bernoulliExpBig(big.NewInt(2), r, b, bs) })
	check("γ = 0 (big)", 0, func() bool { return bernoulliExpBig(big.NewInt(0), big.NewInt(0), b, bs) })
}

// uniform128 on b = 3·2⁶³: the high word is 0 with probability 2/3, and
// the value is below b (false failure < 1e-9).
func TestUniform128(t *testing.T) {
	const n = 200000
	rng := freshRand(t)
	zero := 0
	for range n {
		h, l := uniform128(1, 1<<63, rng)
		if h > 1 || (h == 1 && l >= 1<<63) {
			t.Fatalf("uniform128 returned (%d, %d) ≥ b", h, l)
		}
		if h == 0 {
			zero++
		}
	}
	if got, eps := float64(zero)/n, bernsteinEps(2.0/3, n, 1e-9); math.Abs(got-2.0/3) > eps {
		t.Fatalf("P[high word 0] = %.4f, want 2/3 ± %.4f", got, eps)
	}
}

func u128(x *big.Int) (hi, lo uint64) {
	m := new(big.Int).SetUint64(math.MaxUint64)
	return new(big.Int).Rsh(x, 64).Uint64(), new(big.Int).And(x, m).Uint64()
}

// divmod128 against math/big on edge cases and random operands of every
// size.
func TestDivmod128(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	max128 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	vals := []*big.Int{big.NewInt(1), big.NewInt(2), big.NewInt(3), new(big.Int).Sub(two64, big.NewInt(1)), two64,
		new(big.Int).Add(two64, big.NewInt(1)), new(big.Int).Lsh(big.NewInt(1), 127), max128}
	for len(vals) < 400 {
		// A random value of random bit length 1..128.
		x := new(big.Int).Lsh(new(big.Int).SetUint64(rng.Uint64()), 64)
		x.Or(x, new(big.Int).SetUint64(rng.Uint64()))
		x.Rsh(x, uint(rng.IntN(128)))
		vals = append(vals, x)
	}
	for _, a := range vals {
		for _, b := range vals {
			if b.Sign() == 0 {
				continue
			}
			ah, al := u128(a)
			bh, bl := u128(b)
			q, rh, rl, ok := divmod128(ah, al, bh, bl)
			wq, wr := new(big.Int).QuoRem(a, b, new(big.Int))
			if !wq.IsUint64() {
				if ok {
					t.Fatalf("%v / %v: quotient ≥ 2⁶⁴ reported ok", a, b)
				}
				continue
			}
			gr := new(big.Int).Lsh(new(big.Int).SetUint64(rh), 64)
			gr.Or(gr, new(big.Int).SetUint64(rl))
			if !ok || q != wq.Uint64() || gr.Cmp(wr) != 0 {
				t.Fatalf("%v / %v: got q=%d r=%v ok=%v, want q=%v r=%v", a, b, q, gr, ok, wq, wr)
			}
		}
	}
}

// The integer acceptance exponent equals the rational
// γ(y) = (|y| − σ²/t)²/(2σ²) computed in big.Rat, on both paths, for small,
// typical and overflowing |y|.
func TestDiscreteGaussianGammaExact(t *testing.T) {
	for _, s2 := range []string{"1/4", "1", "9", "12345/100", "10000", "1099511627776", "1099511627777/1099511627776",
		"1267650600228229401496703205377/1267650600228229401496703205376", "18446744073709551616"} {
		g := mustDG(t, rat(s2))
		sigma2 := g.Sigma2()
		tt := new(big.Rat).SetUint64(g.t)
		shift := new(big.Rat).Quo(sigma2, tt)
		twoS2 := new(big.Rat).Mul(sigma2, big.NewRat(2, 1))
		ys := []uint64{0, 1, 2, 3, g.t - 1, g.t, g.t + 1, 2 * g.t, 1000, 123456789, 1 << 40, 1 << 62, math.MaxInt64}
		for _, y := range ys {
			d := new(big.Rat).Sub(new(big.Rat).SetUint64(y), shift)
			want := new(big.Rat).Quo(new(big.Rat).Mul(d, d), twoS2)
			quo, rem := g.gammaBig(y)
			got := new(big.Rat).SetFrac(rem, g.qBig)
			got.Add(got, new(big.Rat).SetInt(quo))
			if got.Cmp(want) != 0 {
				t.Fatalf("σ² = %s, y = %d: big γ = %s, want %s", s2, y, got.RatString(), want.RatString())
			}
			if !g.fast {
				continue
			}
			q, rh, rl, ok := g.gammaFast(y)
			if !ok {
				continue // falls back to gammaBig
			}
			r := new(big.Int).Lsh(new(big.Int).SetUint64(rh), 64)
			r.Or(r, new(big.Int).SetUint64(rl))
			if quo.Cmp(new(big.Int).SetUint64(q)) != 0 || r.Cmp(rem) != 0 {
				t.Fatalf("σ² = %s, y = %d: fast γ = %d + %v/Q, big %v + %v/Q", s2, y, q, r, quo, rem)
			}
		}
	}
}

// The same ChaCha8 seed gives the same samples (AddNoiseRing included),
// another seed other samples.
func TestDiscreteGaussianDeterministic(t *testing.T) {
	g := mustDG(t, rat("10000"))
	seed := [32]byte{1, 2, 3}
	draw := func(seed [32]byte) []int64 {
		r := rand.New(rand.NewChaCha8(seed))
		out := make([]int64, 1000)
		for i := range out {
			out[i] = g.Sample(r)
		}
		return out
	}
	a, b := draw(seed), draw(seed)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("sample %d: %d then %d from the same seed", i, a[i], b[i])
		}
	}
	seed[31] = 1
	c := draw(seed)
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same > 50 { // P[equal] ≈ 1/(2√π·100) per pair
		t.Fatalf("%d of 1000 samples equal under different seeds", same)
	}
}

// AddNoiseRing adds Fill's draws modulo 2³², checked with int64
// arithmetic and an explicit reduction; Fill and Sample draw the same law
// from the same bits (Sample discarding the leftover bits of its last
// word), so Fill's first draw is Sample's.
func TestAddNoiseRing(t *testing.T) {
	g := mustDG(t, rat("1000000"))
	seed := [32]byte{7}
	dst := make([]uint32, 5000)
	init := make([]uint32, len(dst))
	pr := rand.New(rand.NewPCG(3, 4))
	for i := range dst {
		dst[i] = pr.Uint32()
		if i%3 == 0 {
			dst[i] = uint32(i % 7) // near 0: negative noise wraps
		}
		init[i] = dst[i]
	}
	g.AddNoiseRing(dst, rand.New(rand.NewChaCha8(seed)))
	noise := make([]int64, len(dst))
	g.Fill(noise, rand.New(rand.NewChaCha8(seed)))
	if first := g.Sample(rand.New(rand.NewChaCha8(seed))); first != noise[0] {
		t.Fatalf("Sample %d, Fill's first draw %d", first, noise[0])
	}
	wrapped := 0
	for i, x := range noise {
		want := (int64(init[i]) + x) % (1 << 32)
		if want < 0 {
			want += 1 << 32
			wrapped++
		}
		if int64(dst[i]) != want {
			t.Fatalf("dst[%d] = %d, want (%d + %d) mod 2³² = %d", i, dst[i], init[i], x, want)
		}
	}
	if wrapped == 0 {
		t.Fatal("no negative wrap-around exercised")
	}
}

// bitSource.uniform is uniform on [0, k) for small, power-of-two, 32-bit
// and 64-bit k: Pearson's χ² over k cells (or 16 near-equal ranges),
// threshold p < 1e-7 per k (false failure 7e-7 for the test).
func TestBitSourceUniform(t *testing.T) {
	const n = 100000
	bs := &bitSource{rng: freshRand(t)}
	for _, k := range []uint64{2, 3, 5, 8, 13, 1<<32 - 5, 1<<32 + 3} {
		cells := min(k, 16)
		obs := make([]int, cells)
		for range n {
			v := bs.uniform(k)
			if v >= k {
				t.Fatalf("uniform(%d) = %d", k, v)
			}
			obs[v*cells/k]++ // v·cells < 2⁶⁴ for these k
		}
		prob := make([]float64, cells)
		for c := range prob { // cell c holds v with ⌊v·cells/k⌋ = c
			lo := (uint64(c)*k + cells - 1) / cells
			hi := (uint64(c+1)*k + cells - 1) / cells
			prob[c] = float64(hi-lo) / float64(k)
		}
		if stat, p, df := chiSquare(obs, prob, n); p < 1e-7 {
			t.Errorf("uniform(%d): χ² = %.1f, df = %d, p = %.3g", k, stat, df, p)
		}
	}
}

func TestNewDiscreteGaussianErrors(t *testing.T) {
	huge := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 64))
	if _, err := NewDiscreteGaussian(huge); err != nil {
		t.Fatalf("σ² = 2⁶⁴ refused: %v", err)
	}
	bad := []*big.Rat{nil, rat("0"), rat("-1"), rat("-1/3"), new(big.Rat).Add(huge, rat("1/2")),
		new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 300))}
	for _, s := range bad {
		if _, err := NewDiscreteGaussian(s); err == nil {
			t.Errorf("σ² = %v accepted", s)
		}
	}
	g := mustDG(t, rat("6/8"))
	if g.Sigma2().Cmp(rat("3/4")) != 0 {
		t.Fatalf("Sigma2 = %v", g.Sigma2())
	}
}

// ns per sample for σ = 1, 100, 123.45, 2²⁰ (128-bit path) and a σ² that
// takes the math/big path, with the production generator (ChaCha8 from
// NewSecureRand): Sample (one call per draw) and Fill (the vector path of
// AddNoiseRing, which shares random words between draws), reported as
// ns/sample.
func BenchmarkDiscreteGaussian(b *testing.B) {
	for _, c := range []struct{ name, sigma2 string }{
		{"sigma=1", "1"},
		{"sigma=100", "10000"},
		{"sigma=123.45", "1524020/100"},
		{"sigma=2^20", "1099511627776"},
		{"sigma2=1+2^-100(big)", "1267650600228229401496703205377/1267650600228229401496703205376"},
	} {
		g := mustDG(b, rat(c.sigma2))
		rng, err := NewSecureRand()
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Sample/"+c.name, func(b *testing.B) {
			var sink int64
			for b.Loop() {
				sink += g.Sample(rng)
			}
			_ = sink
		})
		b.Run("Fill/"+c.name, func(b *testing.B) {
			dst := make([]int64, 1024)
			for b.Loop() {
				g.Fill(dst, rng)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/sample")
		})
	}
}

// A client's noise share for d = 2¹⁸ coordinates at σ = 100.
func BenchmarkAddNoiseRing(b *testing.B) {
	g := mustDG(b, rat("10000"))
	rng, err := NewSecureRand()
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]uint32, 1<<18)
	for b.Loop() {
		g.AddNoiseRing(dst, rng)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(dst)), "ns/sample")
}
