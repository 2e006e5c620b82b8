package secagg

import (
	"crypto/rand"
	"errors"
	"math/bits"
	"slices"

	"github.com/cloudflare/circl/group"
)

// Shamir secret sharing (Shamir 1979) over the Ristretto255 scalar field,
// with the shares' encodings those of circl's secretsharing package (which
// the tests use as the reference). The arithmetic is our own because
// circl's polynomial evaluation and Lagrange interpolation cost 3–5× more
// than the bare scalar operations, which dominate the client's round 1 and
// the server's Finish once k is in the hundreds (Recover takes 18 ms per
// secret at t = 184, times n secrets per instance).

// splitSecret Shamir-shares secret t-out-of-len(holders): it draws a
// uniformly random polynomial of degree t−1 with constant term secret (the
// coefficients from crypto/rand, randomCoefficients) and returns its values
// at each holder's ClientID, as canonical scalar encodings in the order of
// holders. The evaluation is Horner's rule in our own limb arithmetic
// (evalShares): every step multiplies by a public ID below 2^32, which
// costs four word multiplications instead of a full scalar product (the
// split was a tenth of a simulated round's CPU with circl's scalars), and
// several steps share one reduction. It is constant time in the
// coefficients. t ≥ 1 and holders distinct and non-zero (programmer errors
// otherwise: panics).
func splitSecret(secret group.Scalar, t int, holders []ClientID) [][]byte {
	if t < 1 {
		panic("secagg: threshold below 1")
	}
	coef := make([]scalar, t)
	coef[0] = scalarFromBytes(scalarBytes(secret))
	randomCoefficients(coef[1:])
	return evalShares(coef, holders)
}

// maxBlock caps the Horner steps evalShares takes between reductions (for
// x = 1, where every power fits); beyond 16 the reduction is already a
// small part of a block.
const maxBlock = 16

// evalShares returns the canonical encodings of the polynomial with the
// coefficients coef (constant term first, canonical, len(coef) ≥ 1) at
// each holder's ID, in the order of holders; it panics on an ID of zero.
//
// It is Horner's rule taken m steps at a time: with x^m ≤ 2^62 (m ≤
// maxBlock, from the ID alone), acc ← acc·x^m + Σ_{j<m} c_j·x^j is m
// products of a scalar by one word (c_0 is added as it is), accumulated in
// five limbs without any reduction, then one foldLazy. The products are
// independent of each other, so they overlap in the pipeline, and only
// acc·x^m waits for the previous block; step by step, each multiplication
// waited for the previous reduction. With acc lazy (foldLazy's < 2^252 +
// ℓ < 2^253.01) and the coefficients canonical, the block's sum stays
// below 2^253.01·x^m + 2^252.01·(x^m − 1)/(x − 1) < 2^253.6·x^m ≤ 2^315.6
// (for x = 1, below 2^254 + 16·ℓ), within what foldLazy takes (2^316).
// That is at least 7 steps per reduction for IDs below 256, 3 below 2^16,
// 2 below 2^31. Only the final value is made canonical (reduceWide), so
// the encodings are exactly those of exact evaluation mod ℓ. Constant
// time in the coefficients: the block lengths and loop bounds depend on
// the public x and t alone.
func evalShares(coef []scalar, holders []ClientID) [][]byte {
	t := len(coef)
	out := make([][]byte, len(holders))
	buf := make([]byte, 32*len(holders))
	var pow [maxBlock + 1]uint64 // pow[j] = x^j
	for k, h := range holders {
		if h == 0 {
			panic("secagg: share at x = 0")
		}
		x := uint64(h)
		pow[0] = 1
		m := 0
		for m < maxBlock && pow[m] <= (1<<62)/x {
			pow[m+1] = pow[m] * x
			m++
		}
		a0, a1, a2, a3 := coef[t-1][0], coef[t-1][1], coef[t-1][2], coef[t-1][3] // acc
		for hi := t - 2; hi >= 0; {
			n := min(m, hi+1) // coefficients lo..hi in this block
			lo := hi - n + 1
			// v = acc·x^n + coef[lo]: the step that waits for acc.
			p := pow[n]
			h0, v0 := bits.Mul64(a0, p)
			h1, v1 := bits.Mul64(a1, p)
			h2, v2 := bits.Mul64(a2, p)
			v4, v3 := bits.Mul64(a3, p)
			var c uint64
			v1, c = bits.Add64(v1, h0, 0)
			v2, c = bits.Add64(v2, h1, c)
			v3, c = bits.Add64(v3, h2, c)
			v4 += c
			cl := &coef[lo]
			v0, c = bits.Add64(v0, cl[0], 0)
			v1, c = bits.Add64(v1, cl[1], c)
			v2, c = bits.Add64(v2, cl[2], c)
			v3, c = bits.Add64(v3, cl[3], c)
			v4 += c
			// v += coef[lo+j]·x^j for 0 < j < n, each product of a scalar
			// by one word added into the five limbs as it comes.
			for j := 1; j < n; j++ {
				cj, p := &coef[lo+j], pow[j]
				h0, l0 := bits.Mul64(cj[0], p)
				h1, l1 := bits.Mul64(cj[1], p)
				h2, l2 := bits.Mul64(cj[2], p)
				h3, l3 := bits.Mul64(cj[3], p)
				l1, c = bits.Add64(l1, h0, 0)
				l2, c = bits.Add64(l2, h1, c)
				l3, c = bits.Add64(l3, h2, c)
				h3 += c
				v0, c = bits.Add64(v0, l0, 0)
				v1, c = bits.Add64(v1, l1, c)
				v2, c = bits.Add64(v2, l2, c)
				v3, c = bits.Add64(v3, l3, c)
				v4 += h3 + c
			}
			a0, a1, a2, a3 = foldLazy(v0, v1, v2, v3, v4)
			hi = lo - 1
		}
		acc := canonical(&scalar{a0, a1, a2, a3})
		out[k] = acc.bytes(buf[32*k : 32*k : 32*(k+1)])
	}
	return out
}

// randomCoefficients fills coef with uniform scalars from crypto/rand, by
// rejection: 253 random bits are kept when below ℓ (about half the time).
// Which draws were rejected says nothing about the accepted values. The
// first read is sized for the expected two draws a coefficient plus two;
// when that runs short (almost half the time), a refill reads only what
// the remaining coefficients need by the same rule, not the whole buffer
// again (crypto/rand costs about 2.7 ns a byte on the EPYC test machine:
// the 1.7 KB of a demo split take as long as its whole evaluation).
func randomCoefficients(coef []scalar) {
	buf := make([]byte, 64*len(coef)+64)
	used, end := 0, 0
	for i := range coef {
		for {
			if used == end {
				end = min(len(buf), 64*(len(coef)-i)+64)
				if _, err := rand.Read(buf[:end]); err != nil {
					panic(err) // crypto/rand.Read does not fail (Go ≥ 1.24)
				}
				used = 0
			}
			s := scalarFromBytes(buf[used : used+32])
			used += 32
			s[3] &= 1<<61 - 1
			if lessThanOrder(&s) {
				coef[i] = s
				break
			}
		}
	}
}

// lagrangeDenominators writes to den (len(xs) scalars) d_i = x_i ·
// Π_{j≠i} (x_j − x_i) mod ℓ and returns num = Π_j x_j mod ℓ, canonical,
// for xs distinct and non-zero: the Lagrange coefficients at zero of any
// polynomial of degree < len(xs) are λ_i = Π_{j≠i} x_j / (x_j − x_i) =
// num/d_i. The IDs are public, so the products are built as exact
// integers packed into words below 2^62 (about eight differences a word
// when IDs are below 128, four below 2^15), each folded into a lazy
// scalar with four word multiplications (mulWordLazy) instead of a full
// scalar product; the signs are counted apart. The folds of one
// denominator form a chain, but the packing of the next words does not
// wait for it, so the two overlap. Variable time in the IDs, which are
// public.
func lagrangeDenominators(xs []ClientID, den []scalar) (num scalar) {
	for i, xi := range xs {
		var acc scalar // lazy; the product so far is acc·word
		word, neg := uint64(xi), false
		have := false // acc holds a product (else it is 1)
		for _, xj := range xs {
			var d uint64
			switch {
			case xj > xi:
				d = uint64(xj - xi)
			case xj < xi:
				d, neg = uint64(xi-xj), !neg
			default:
				continue // j = i
			}
			if bits.Len64(word)+bits.Len64(d) > 62 {
				acc, have = mulWordInto(&acc, have, word), true
				word = 1
			}
			word *= d
		}
		acc = mulWordInto(&acc, have, word)
		acc = canonical(&acc)
		if neg {
			acc = negate(&acc)
		}
		den[i] = acc
	}
	var acc scalar
	word, have := uint64(1), false
	for _, x := range xs {
		if bits.Len64(word)+bits.Len32(uint32(x)) > 62 {
			acc, have = mulWordInto(&acc, have, word), true
			word = 1
		}
		word *= uint64(x)
	}
	acc = mulWordInto(&acc, have, word)
	return canonical(&acc)
}

// mulWordInto is acc·w (lazy) when have, else w itself (a word below 2^62
// is a lazy scalar): the first word of a product costs no multiplication.
func mulWordInto(acc *scalar, have bool, w uint64) scalar {
	if !have {
		return scalar{w}
	}
	return mulWordLazy(acc, w)
}

// invertBatch replaces every scalar of v (canonical, non-zero, public) by
// its inverse with one inversion (Montgomery's trick: three
// multiplications each). The running products are Montgomery products of
// plain values, and inverting them back down cancels the powers of two
// exactly, so no value enters or leaves Montgomery form: with prefix_k =
// v_k·prefix_{k'}·2^(−256) (k' the previous index of k's chain),
// montMul(prefix_k^{-1}, prefix_{k'}) = v_k^{-1} and montMul(
// prefix_k^{-1}, v_k) = prefix_{k'}^{-1}. Even and odd indices form two
// independent chains (k' = k − 2), so that consecutive multiplications
// overlap instead of each waiting for the last; their two totals are
// inverted together. The one inversion is invertPublic (variable time: the
// values are products of Lagrange denominators, public).
func invertBatch(v []scalar) {
	n := len(v)
	switch n {
	case 0:
		return
	case 1:
		v[0] = invertPublic(&v[0])
		return
	}
	prefix := make([]scalar, n)
	prefix[0], prefix[1] = v[0], v[1]
	for k := 2; k < n; k++ {
		prefix[k] = montMul(&prefix[k-2], &v[k])
	}
	// inv[k&1] = prefix_k^{-1} for the top k of each chain: from
	// q = (prefix_{n−1}·prefix_{n−2}·2^(−256))^{-1}, one chain's inverse is
	// montMul(q, the other's total).
	pa, pb := &prefix[n-1], &prefix[n-2]
	q := montMul(pa, pb)
	q = invertPublic(&q)
	var inv [2]scalar
	inv[(n-1)&1] = montMul(&q, pb)
	inv[(n-2)&1] = montMul(&q, pa)
	for k := n - 1; k >= 2; k-- {
		vk, l := v[k], k&1
		v[k] = montMul(&inv[l], &prefix[k-2])
		inv[l] = montMul(&inv[l], &vk)
	}
	v[0], v[1] = inv[0], inv[1]
}

// lagrangeBasis is the Lagrange basis at zero of one holder set xs
// (distinct, non-zero), λ_i = Π_{j≠i} x_j / (x_j − x_i) = num/d_i
// (lagrangeDenominators), in the form interpolate uses: inv[i] = 1/d_i
// mod ℓ and scale = num·2^576 mod ℓ, canonical. Keeping num apart costs
// one multiplication per secret instead of one per coefficient.
type lagrangeBasis struct {
	inv   []scalar
	scale scalar
}

// interpolate returns f(0) = Σ λ_i·ys[i] mod ℓ, canonical, for ys[i] =
// f(x_i) canonical (len(ys) = len(inv)), in constant time in ys: the sum
// Σ inv[i]·ys[i] is taken exactly in nine limbs (sumProducts; t < 2^62
// products below 2^505 each), then one Montgomery reduction over five
// limbs (montReduce) gives it times 2^(−320), and montMul by scale =
// num·2^576 gives num·Σ inv[i]·ys[i]·2^(−320+576−256) = Σ λ_i·ys[i].
func (lb *lagrangeBasis) interpolate(ys []scalar) scalar {
	acc := sumProducts(lb.inv, ys)
	s := montReduce(&acc)
	return montMul(&s, &lb.scale)
}

// interpolator reconstructs secrets, caching the Lagrange basis of each
// holder set (in the complete graph every secret usually has the same
// one). Not safe for concurrent use.
type interpolator struct {
	t     int
	cache map[string]*lagrangeBasis
}

// newInterpolator returns an interpolator for threshold t with an empty
// cache.
func newInterpolator(t int) *interpolator {
	return &interpolator{t: t, cache: map[string]*lagrangeBasis{}}
}

// recover interpolates the secret from shares (holder ID → canonical scalar
// encoding): recoverBatch of one.
func (ip *interpolator) recover(shares map[ClientID][]byte) (group.Scalar, error) {
	v, errs := ip.recoverBatch([]map[ClientID][]byte{shares})
	return v[0], errs[0]
}

// recoverBatch interpolates each secret from its shares (holder ID →
// canonical scalar encoding). It uses the t smallest holder IDs, so that
// secrets with the same available holders share coefficients; in the
// semi-honest model all shares lie on one polynomial, and the server
// checks what it can (the mask key's public key) after reconstruction.
// The Lagrange denominators of every holder set not cached yet are
// inverted together (invertBatch), one inversion for the batch instead of
// one per secret (the inversions were most of the server's unmasking on
// the sparse graph, where holder sets differ). A secret with fewer than t
// shares fails with ErrTooFewSurvivors, one with a malformed share among
// those t with parseScalar's error; the others are still returned.
//
// Our own limb arithmetic replaces circl's scalars throughout (the
// products of IDs in words, Montgomery multiplication for the inversion,
// one reduction per secret in interpolate): with go-ristretto's scalars
// underneath, a basis cost about 1.6 µs per coefficient at t = 27. The
// shares and the secret are handled in constant time (interpolate).
func (ip *interpolator) recoverBatch(batch []map[ClientID][]byte) ([]group.Scalar, []error) {
	out := make([]group.Scalar, len(batch))
	errs := make([]error, len(batch))
	xsOf := make([][]ClientID, len(batch))
	keyOf := make([]string, len(batch))
	type pending struct {
		key      string
		xs       []ClientID
		num      scalar
		from, to int // its denominators in all
	}
	// todo lists the holder sets whose bases this batch computes (queued
	// marks their keys); all holds their denominators, inverted together,
	// allocated once they are all known.
	var todo []*pending
	queued := map[string]bool{}
	total := 0
	for b, shares := range batch {
		if len(shares) < ip.t {
			errs[b] = ErrTooFewSurvivors
			continue
		}
		xs := make([]ClientID, 0, len(shares))
		for x := range shares {
			xs = append(xs, x)
		}
		slices.Sort(xs)
		xs = xs[:ip.t]
		xsOf[b], keyOf[b] = xs, keyString(xs)
		if _, ok := ip.cache[keyOf[b]]; ok || queued[keyOf[b]] {
			continue
		}
		queued[keyOf[b]] = true
		todo = append(todo, &pending{key: keyOf[b], xs: xs, from: total, to: total + len(xs)})
		total += len(xs)
	}
	all := make([]scalar, total)
	for _, pd := range todo {
		pd.num = lagrangeDenominators(pd.xs, all[pd.from:pd.to])
	}
	invertBatch(all)
	for _, pd := range todo {
		ip.cache[pd.key] = &lagrangeBasis{inv: all[pd.from:pd.to:pd.to], scale: montMul(&pd.num, &pow832)}
	}
	g := group.Ristretto255
	var enc [32]byte
	ys := make([]scalar, ip.t)
	for b, shares := range batch {
		if errs[b] != nil {
			continue
		}
		for i, x := range xsOf[b] {
			sb := shares[x]
			if len(sb) != 32 {
				errs[b] = malformedShare(sb)
				break
			}
			ys[i] = scalarFromBytes(sb)
			if !lessThanOrder(&ys[i]) { // reveals only what parseScalar's error did

				errs[b] = malformedShare(sb)
				break
			}
		}
		if errs[b] != nil {
			continue
		}
		s := ip.cache[keyOf[b]].interpolate(ys)
		v := g.NewScalar()
		if err := v.UnmarshalBinary(s.bytes(enc[:0])); err != nil {
			panic(err) // interpolate's result is canonical
		}
		out[b] = v
	}
	return out, errs
}

// malformedShare is the error for a share encoding that is not a
// canonical scalar: parseScalar's, as when shares were parsed with it.
func malformedShare(b []byte) error {
	if _, err := parseScalar(b); err != nil {
		return err
	}
	return errors.New("malformed scalar") // not reached: the checks agree (TestRecoverFailures)
}

// keyString is the cache key of a holder set: the IDs, big-endian.
func keyString(xs []ClientID) string {
	key := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		key = append(key, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return string(key)
}
