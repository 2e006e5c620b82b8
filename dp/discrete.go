package dp

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
)

// The exact discrete Gaussian sampler of Canonne, Kamath and Steinke 2020
// ("The Discrete Gaussian for Differential Privacy", NeurIPS;
// arXiv:2004.00010, Algorithms 1–3; CKS20 below), the noise that clients
// add to their shares under secure aggregation in the distributed discrete
// Gaussian mechanism (Kairouz, Liu, Steinke 2021, ICML).
//
// Exactness. Every decision is a comparison of integers. The randomness
// is fair bits and exactly uniform integers in [0, k): for k ≤ 2³², the
// low ⌈log₂ k⌉ bits of a 64-bit word from the generator, redrawn while
// ≥ k (see bitSource); for larger k, rand.Rand.Uint64N, which math/rand/v2
// implements without bias (Lemire's multiply-and-reject). Given uniform
// 64-bit words from the generator, both are exactly uniform.
// Bernoulli(a/b) is "U < a" for U uniform in [0, b) (CKS20, after
// Algorithm 1); Bernoulli(exp(−γ)) for a rational γ = a/b is ⌊γ⌋ draws of
// Bernoulli(exp(−1)) and one of Bernoulli(exp(−(a mod b)/b)), the latter
// by von Neumann's method (CKS20 Algorithm 1), which needs
// Bernoulli(γ/K) = Bernoulli(a/(b·K)) for K = 1, 2, …: one uniform draw in
// [0, b·K) where b·K fits in 64 bits, and otherwise "V = 0 and U < a" for
// independent V uniform in [0, K) and U uniform in [0, b), the same event
// since U + b·V is uniform in [0, b·K) and a < b. With σ² = n/d in lowest
// terms and t = ⌊σ⌋ + 1, the acceptance exponent of CKS20 Algorithm 3 is
//
//	γ(y) = (|y| − σ²/t)² / (2σ²) = (|y|·d·t − n)² / (2·n·d·t²),
//
// a ratio of integers. The fast path holds n < 2⁶⁴, d·t < 2⁶⁴ and
// Q = 2·n·d·t² < 2¹²⁸, computes (|y|·d·t − n)² in 128 bits with
// math/bits and divides it by Q exactly (quotient and remainder); any
// overflow (|y|·d·t ≥ 2⁶⁴, or a quotient ≥ 2⁶⁴) hands that one decision to
// the same computation in math/big. The two paths compute the same
// integers, so they differ only in speed, never in distribution. No
// floating-point value enters any decision.

// MaxDiscreteGaussianSigma2 is the largest σ² (2⁶⁴, σ = 2³²) that
// NewDiscreteGaussian accepts: noise wider than the 2³² ring of secure
// aggregation is meaningless, and the bound makes the int64 truncation of
// Sample negligible (see Sample).
const MaxDiscreteGaussianSigma2 = 1 << 64

// maxSigma2Bits bounds the bit length of σ²'s numerator and denominator
// (in lowest terms), so that the exact fallback arithmetic stays small.
const maxSigma2Bits = 256

// DiscreteGaussian samples the centred discrete Gaussian N_Z(0, σ²) over
// the integers, P[X = x] = exp(−x²/(2σ²)) / Σ_{y∈Z} exp(−y²/(2σ²)), exactly
// (CKS20, Algorithm 3 with Algorithms 1 and 2; see the comment at the top
// of discrete.go for the argument). Its variance is below σ² (CKS20,
// Proposition 5).
//
// It is immutable after construction and safe for concurrent use with one
// *rand.Rand per goroutine. The generator must be NewSecureRand's (ChaCha8
// keyed from crypto/rand) wherever the noise protects privacy.
//
// Speed (BenchmarkDiscreteGaussian, one core of a shared x86 server):
// about 140–190 ns per sample for σ = 1 and σ = 100, 230 ns for σ = 2²⁰
// (the 128-bit path), so 30–40 ms for a client's 200,000 coordinates;
// about 1.3 µs on the math/big path (see NewDiscreteGaussian). The cost is mostly
// the unpredictable branches of the ≈15 Bernoulli decisions per sample;
// random words are not the bottleneck (Fill uses 0.4 of a ChaCha8 word
// per sample at σ = 1, 2.1 at σ = 100).
type DiscreteGaussian struct {
	sigma2 big.Rat
	t      uint64 // ⌊σ⌋ + 1 ≤ 2³² + 1, the discrete Laplace scale of CKS20 Algorithm 3

	// Fast path (fast): σ² = n/d, dt = d·t < 2⁶⁴, q = 2·n·d·t² = (qh, ql) < 2¹²⁸.
	fast   bool
	n, dt  uint64
	qh, ql uint64

	// Exact fallback: the same integers in math/big.
	num, dtBig, qBig *big.Int
}

// NewDiscreteGaussian returns a sampler of N_Z(0, σ²) for a rational
// σ² = sigma2 (copied; given in any terms, reduced internally).
//
// σ² must be > 0 and at most MaxDiscreteGaussianSigma2, and its numerator
// and denominator in lowest terms at most 256 bits each; otherwise it
// returns an error. Samples are fastest when, in lowest terms, the
// numerator n is below about 2⁶³ and the denominator d times ⌊σ⌋+1 is
// below 2⁶⁴ (e.g. σ² = 1, 10⁴, 12345/100, 2⁴⁰): then all arithmetic is in
// 64- and 128-bit integers. A σ² converted exactly from a float64 usually
// has a 2⁵⁰-ish denominator and takes the slower math/big path; round it
// to a simple rational first (the privacy accountant must then use the
// rounded value).
func NewDiscreteGaussian(sigma2 *big.Rat) (*DiscreteGaussian, error) {
	if sigma2 == nil {
		return nil, errors.New("dp: discrete Gaussian σ² is nil")
	}
	if sigma2.Sign() <= 0 {
		return nil, fmt.Errorf("dp: discrete Gaussian σ² must be > 0, got %s", sigma2.RatString())
	}
	if sigma2.Cmp(new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 64))) > 0 {
		return nil, fmt.Errorf("dp: discrete Gaussian σ² must be at most 2^64, got %s", sigma2.FloatString(0))
	}
	g := &DiscreteGaussian{}
	g.sigma2.Set(sigma2) // big.Rat keeps lowest terms
	n, d := g.sigma2.Num(), g.sigma2.Denom()
	if n.BitLen() > maxSigma2Bits || d.BitLen() > maxSigma2Bits {
		return nil, fmt.Errorf("dp: discrete Gaussian σ² = n/d needs n and d of at most %d bits, got %d and %d",
			maxSigma2Bits, n.BitLen(), d.BitLen())
	}
	// t = ⌊σ⌋ + 1 = ⌊√⌊n/d⌋⌋ + 1 (⌊√⌊x⌋⌋ = ⌊√x⌋ for x ≥ 0).
	tb := new(big.Int).Quo(n, d)
	tb.Sqrt(tb).Add(tb, big.NewInt(1))
	g.t = tb.Uint64() // ≤ 2³² + 1 since σ² ≤ 2⁶⁴

	g.num = new(big.Int).Set(n)
	g.dtBig = new(big.Int).Mul(d, tb)
	g.qBig = new(big.Int).Mul(g.num, g.dtBig)
	g.qBig.Mul(g.qBig, tb).Lsh(g.qBig, 1) // 2·n·d·t²

	if n.IsUint64() && g.dtBig.IsUint64() && g.qBig.BitLen() <= 128 {
		g.fast = true
		g.n, g.dt = n.Uint64(), g.dtBig.Uint64()
		lo := new(big.Int).And(g.qBig, new(big.Int).SetUint64(math.MaxUint64))
		g.ql = lo.Uint64()
		g.qh = new(big.Int).Rsh(g.qBig, 64).Uint64()
	}
	return g, nil
}

// Sigma2 returns σ² (a copy, in lowest terms).
func (g *DiscreteGaussian) Sigma2() *big.Rat { return new(big.Rat).Set(&g.sigma2) }

// Sample returns one draw of N_Z(0, σ²), using rng for every random bit
// (CKS20 Algorithm 3: discrete Laplace proposals of scale t = ⌊σ⌋+1,
// accepted with probability exp(−(|y| − σ²/t)²/(2σ²))).
//
// The result is an int64, so it is exactly N_Z(0, σ²) conditioned on
// |X| < 2⁶³: proposals with |y| ≥ 2⁶³ are rejected, which is rejection
// sampling of the truncated law. The conditioning event has probability
// below e^(−2⁶⁰) for σ² ≤ 2⁶⁴, since P[X ≥ m] ≤ e^(−m²/(2σ²)) / (1 − e^(−m/σ²))
// (compare the tail sum with a geometric series and use Z ≥ 1).
//
// Random bits left over in the last 64-bit word are discarded; Fill and
// AddNoiseRing, which carry them from one coordinate to the next, use
// fewer words per sample.
func (g *DiscreteGaussian) Sample(rng *rand.Rand) int64 {
	s := bitSource{rng: rng}
	return g.sample(&s)
}

// Fill sets every element of dst to an independent draw of N_Z(0, σ²)
// (as Sample, with the same int64 truncation), drawing from rng.
func (g *DiscreteGaussian) Fill(dst []int64, rng *rand.Rand) {
	s := bitSource{rng: rng}
	for i := range dst {
		dst[i] = g.sample(&s)
	}
}

// AddNoiseRing adds an independent draw of N_Z(0, σ²) to every element of
// dst modulo 2³² (two's complement: a negative draw x adds 2³² − (−x mod
// 2³²)), the client's noise share in the ring Z_{2³²} of secure
// aggregation (Kairouz, Liu, Steinke 2021). From the same generator state
// it adds exactly the draws that Fill would write.
func (g *DiscreteGaussian) AddNoiseRing(dst []uint32, rng *rand.Rand) {
	s := bitSource{rng: rng}
	for i := range dst {
		dst[i] += uint32(g.sample(&s))
	}
}

func (g *DiscreteGaussian) sample(s *bitSource) int64 {
	for {
		mag, neg, ok := discreteLaplace(g.t, s)
		if !ok || !g.accept(mag, s) {
			continue
		}
		if neg {
			return -int64(mag)
		}
		return int64(mag)
	}
}

// bitSource hands out fair random bits and exactly uniform integers from
// the 64-bit words of rng, using only as many bits as a draw needs: a
// uniform integer in [0, k) for k ≤ 2³² is ⌈log₂ k⌉ bits, redrawn while ≥ k
// (exactly uniform; ≤ 2⌈log₂ k⌉ bits expected), larger k go to
// rand.Rand.Uint64N. When a word has fewer bits left than a draw needs,
// they are discarded, which keeps the bits independent and fair since the
// choice depends only on their count.
type bitSource struct {
	rng *rand.Rand
	buf uint64
	n   uint // unused bits in buf
}

// bits returns w fair random bits, 0 ≤ w ≤ 32.
func (s *bitSource) bits(w uint) uint64 {
	if s.n < w {
		s.refill()
	}
	v := s.buf & (1<<w - 1)
	s.buf >>= w
	s.n -= w
	return v
}

func (s *bitSource) refill() { s.buf, s.n = s.rng.Uint64(), 64 }

// uniform returns a uniform integer in [0, k), k ≥ 1.
func (s *bitSource) uniform(k uint64) uint64 {
	w := uint(bits.Len64(k - 1)) // 0 for k = 1
	if w > 32 {
		return s.rng.Uint64N(k)
	}
	v := s.bits(w)
	for v >= k {
		v = s.bits(w)
	}
	return v
}

// discreteLaplace draws Y from the discrete Laplace law P[Y = y] ∝
// exp(−|y|/t), t ≥ 1 (CKS20 Algorithm 2 with s = 1), as |Y| and its sign.
// ok is false, and the draw must be discarded, when |Y| ≥ 2⁶³.
func discreteLaplace(t uint64, s *bitSource) (mag uint64, neg, ok bool) {
	for {
		u := s.uniform(t)
		if !bernoulliExpFrac(u, t, s) { // Bernoulli(exp(−u/t))
			continue
		}
		var v uint64
		for bernoulliExp1(s) {
			v++
		}
		hi, lo := bits.Mul64(t, v)
		x, carry := bits.Add64(lo, u, 0)
		if hi != 0 || carry != 0 || x > math.MaxInt64 {
			return 0, false, false
		}
		neg = s.bits(1) == 1
		if neg && x == 0 {
			continue // B = 1 and Y = 0: restart (CKS20 Algorithm 2)
		}
		return x, neg, true
	}
}

// accept draws Bernoulli(exp(−γ)) with γ = (y·d·t − n)²/(2·n·d·t²), the
// acceptance test of CKS20 Algorithm 3 for a proposal of magnitude y.
func (g *DiscreteGaussian) accept(y uint64, s *bitSource) bool {
	if g.fast {
		if quo, rh, rl, ok := g.gammaFast(y); ok {
			for ; quo > 0; quo-- {
				if !bernoulliExp1(s) {
					return false
				}
			}
			return bernoulliExpFrac128(rh, rl, g.qh, g.ql, s)
		}
	}
	quo, rem := g.gammaBig(y)
	return bernoulliExpBig(quo, rem, g.qBig, s)
}

// gammaFast returns γ(y) = quo + (rh·2⁶⁴ + rl)/Q with Q = (g.qh, g.ql), or
// ok = false where an intermediate would overflow 64 (|y|·d·t) or 128
// bits, or the quotient would not fit in 64 bits.
func (g *DiscreteGaussian) gammaFast(y uint64) (quo, rh, rl uint64, ok bool) {
	hi, m := bits.Mul64(y, g.dt)
	if hi != 0 {
		return 0, 0, 0, false
	}
	a := m - g.n
	if m < g.n {
		a = g.n - m
	}
	ph, pl := bits.Mul64(a, a)
	return divmod128(ph, pl, g.qh, g.ql)
}

// gammaBig returns γ(y) = quo + rem/Q in math/big, Q = g.qBig.
func (g *DiscreteGaussian) gammaBig(y uint64) (quo, rem *big.Int) {
	a := new(big.Int).SetUint64(y)
	a.Mul(a, g.dtBig).Sub(a, g.num)
	a.Mul(a, a)
	return a.QuoRem(a, g.qBig, new(big.Int))
}

// divmod128 divides a = (ah, al) by b = (bh, bl) > 0, both 128-bit, and
// returns the quotient q and remainder r = (rh, rl); ok is false when the
// quotient does not fit in 64 bits. For bh ≠ 0 it is the normalised
// long division of Hacker's Delight (Warren, 2nd ed., §9-5, "unsigned
// doubleword division"), scaled from 64/64 to 128/128 bits.
func divmod128(ah, al, bh, bl uint64) (q, rh, rl uint64, ok bool) {
	if bh == 0 {
		if ah >= bl {
			return 0, 0, 0, false
		}
		q, r := bits.Div64(ah, al, bl)
		return q, 0, r, true
	}
	// b ≥ 2⁶⁴, so q < 2⁶⁴.
	s := uint(bits.LeadingZeros64(bh))
	v1 := bh<<s | bl>>(64-s) // top 64 bits of b·2^s (bl>>64 = 0 in Go)
	q1, _ := bits.Div64(ah>>1, ah<<63|al>>1, v1)
	q = q1 >> (63 - s) // undo the normalisation and the halving of a
	if q != 0 {
		q-- // q is now the quotient or one less
	}
	ph, pl := bits.Mul64(q, bl)
	ph += q * bh // q·b ≤ a < 2¹²⁸: no overflow
	var borrow uint64
	rl, borrow = bits.Sub64(al, pl, 0)
	rh, _ = bits.Sub64(ah, ph, borrow)
	if rh > bh || (rh == bh && rl >= bl) {
		q++
		rl, borrow = bits.Sub64(rl, bl, 0)
		rh, _ = bits.Sub64(rh, bh, borrow)
	}
	return q, rh, rl, true
}

// bernoulliExp1 draws Bernoulli(exp(−1)) (CKS20 Algorithm 1 with γ = 1:
// A ~ Bernoulli(1/K) for K = 1, 2, … until A = 0; 1 iff that K is odd;
// the K = 1 draw is certain and skipped).
func bernoulliExp1(s *bitSource) bool {
	if s.bits(1) != 0 { // K = 2
		return false
	}
	k := uint64(3)
	for s.uniform(k) == 0 {
		k++
	}
	return k&1 == 1
}

// bernoulliExpFrac draws Bernoulli(exp(−a/b)) for 0 ≤ a < b (CKS20
// Algorithm 1 with γ = a/b ∈ [0, 1)).
func bernoulliExpFrac(a, b uint64, s *bitSource) bool {
	if a == 0 {
		return true
	}
	k := uint64(1)
	for {
		// A ~ Bernoulli(a/(b·k)).
		var hit bool
		if hi, bk := bits.Mul64(b, k); hi == 0 {
			hit = s.uniform(bk) < a
		} else {
			hit = s.uniform(k) == 0 && s.uniform(b) < a
		}
		if !hit {
			return k&1 == 1
		}
		k++
	}
}

// bernoulliExpFrac128 draws Bernoulli(exp(−r/b)) for 128-bit integers
// 0 ≤ r < b, r = (rh, rl), b = (bh, bl) (CKS20 Algorithm 1).
func bernoulliExpFrac128(rh, rl, bh, bl uint64, s *bitSource) bool {
	if bh == 0 {
		return bernoulliExpFrac(rl, bl, s)
	}
	if rh == 0 && rl == 0 {
		return true
	}
	k := uint64(1)
	for {
		// A ~ Bernoulli(r/(b·k)): V = 0 and U < r, V ~ U[0, k), U ~ U[0, b).
		hit := k == 1 || s.uniform(k) == 0
		if hit {
			uh, ul := uniform128(bh, bl, s.rng)
			hit = uh < rh || (uh == rh && ul < rl)
		}
		if !hit {
			return k&1 == 1
		}
		k++
	}
}

// uniform128 returns a uniform integer in [0, b), b = (bh, bl) > 0, by
// rejection from [0, (bh+1)·2⁶⁴) (acceptance probability ≥ 1/2).
func uniform128(bh, bl uint64, rng *rand.Rand) (uh, ul uint64) {
	if bh == 0 {
		return 0, rng.Uint64N(bl)
	}
	for {
		if bh == math.MaxUint64 {
			uh = rng.Uint64()
		} else {
			uh = rng.Uint64N(bh + 1)
		}
		ul = rng.Uint64()
		if uh < bh || (uh == bh && ul < bl) {
			return uh, ul
		}
	}
}

// bernoulliExp draws Bernoulli(exp(−a/b)) for any a ≥ 0, b > 0: ⌊a/b⌋
// draws of Bernoulli(exp(−1)) and one of Bernoulli(exp(−(a mod b)/b))
// (CKS20, the remark after Algorithm 1 for γ > 1).
func bernoulliExp(a, b uint64, s *bitSource) bool {
	for quo := a / b; quo > 0; quo-- {
		if !bernoulliExp1(s) {
			return false
		}
	}
	return bernoulliExpFrac(a%b, b, s)
}

// bernoulliExpBig draws Bernoulli(exp(−(quo + rem/b))) for big integers
// quo ≥ 0 and 0 ≤ rem < b, the math/big version of bernoulliExp.
func bernoulliExpBig(quo, rem, b *big.Int, s *bitSource) bool {
	if quo.IsUint64() {
		for n := quo.Uint64(); n > 0; n-- {
			if !bernoulliExp1(s) {
				return false
			}
		}
	} else {
		// γ ≥ 2⁶⁴: the loop ends at the first failure (after 1.6 draws on
		// average), but is written out in math/big for exactness.
		left := new(big.Int).Set(quo)
		for left.Sign() > 0 {
			if !bernoulliExp1(s) {
				return false
			}
			left.Sub(left, big.NewInt(1))
		}
	}
	if rem.Sign() == 0 {
		return true
	}
	buf := make([]byte, (b.BitLen()+7)/8)
	u := new(big.Int)
	k := uint64(1)
	for {
		hit := k == 1 || s.uniform(k) == 0
		if hit {
			uniformBig(u, b, buf, s.rng)
			hit = u.Cmp(rem) < 0
		}
		if !hit {
			return k&1 == 1
		}
		k++
	}
}

// uniformBig sets u to a uniform integer in [0, b), b > 0, by rejection
// from [0, 2^bitlen(b)) (acceptance probability > 1/2); buf holds
// ⌈bitlen(b)/8⌉ bytes.
func uniformBig(u, b *big.Int, buf []byte, rng *rand.Rand) {
	top := uint(b.BitLen() % 8)
	for {
		for i := 0; i < len(buf); i += 8 {
			w := rng.Uint64()
			for j := i; j < i+8 && j < len(buf); j++ {
				buf[j] = byte(w)
				w >>= 8
			}
		}
		if top != 0 {
			buf[0] &= byte(1)<<top - 1
		}
		u.SetBytes(buf)
		if u.Cmp(b) < 0 {
			return
		}
	}
}
