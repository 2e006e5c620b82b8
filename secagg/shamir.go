package secagg

import (
	"crypto/rand"
	"encoding/binary"
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
// (mulAddSmall): every step multiplies by a public ID below 2^32, which
// costs a few word multiplications instead of a full scalar product (the
// split was a tenth of a simulated round's CPU with circl's scalars). It
// is constant time in the coefficients. t ≥ 1 and holders distinct and
// non-zero (programmer errors otherwise: panics).
func splitSecret(secret group.Scalar, t int, holders []ClientID) [][]byte {
	if t < 1 {
		panic("secagg: threshold below 1")
	}
	coef := make([]scalar, t)
	coef[0] = scalarFromBytes(scalarBytes(secret))
	randomCoefficients(coef[1:])
	return evalShares(coef, holders)
}

// evalShares returns the canonical encodings of the polynomial with the
// coefficients coef (constant term first) at each holder's ID.
func evalShares(coef []scalar, holders []ClientID) [][]byte {
	t := len(coef)
	out := make([][]byte, len(holders))
	buf := make([]byte, 32*len(holders))
	for k, h := range holders {
		if h == 0 {
			panic("secagg: share at x = 0")
		}
		x, acc, i := uint64(h), coef[t-1], t-2
		if x < 1<<16 { // two Horner steps per reduction
			for ; i >= 1; i -= 2 {
				acc = mulAdd2Small(&acc, x, &coef[i], &coef[i-1])
			}
		}
		for ; i >= 0; i-- {
			acc = mulAddSmall(&acc, x, &coef[i])
		}
		out[k] = acc.bytes(buf[32*k : 32*k : 32*(k+1)])
	}
	return out
}

// scalar is an element of the Ristretto255 scalar field Z_ℓ, ℓ = 2^252 +
// 27742317777372353535851937790883648493, as four little-endian 64-bit
// limbs, always canonical (< ℓ).
type scalar [4]uint64

// groupOrder is ℓ; orderLow is ℓ − 2^252 (two limbs).
var (
	groupOrder = scalar{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6, 0, 0x1000000000000000}
	orderLow   = [2]uint64{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6}
)

// scalarFromBytes reads a canonical little-endian encoding.
func scalarFromBytes(b []byte) scalar {
	var s scalar
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return s
}

// bytes appends the canonical 32-byte little-endian encoding to dst.
func (s *scalar) bytes(dst []byte) []byte {
	for _, w := range s {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// mulAddSmall returns a·x + c mod ℓ for canonical a, c and x < 2^32, in
// constant time.
func mulAddSmall(a *scalar, x uint64, c *scalar) scalar {
	v := mulSmall(a, x)
	addTo(&v, c)
	return reduceWide(&v)
}

// mulAdd2Small returns a·x² + c1·x + c0 mod ℓ, two steps of Horner's rule
// with one reduction, for canonical a, c1, c0 and x < 2^16 (so that x² <
// 2^32 and the sum stays below 2^286), in constant time.
func mulAdd2Small(a *scalar, x uint64, c1, c0 *scalar) scalar {
	v := mulSmall(a, x*x)
	w := mulSmall(c1, x)
	var carry uint64
	for i := range v {
		v[i], carry = bits.Add64(v[i], w[i], carry)
	}
	addTo(&v, c0)
	return reduceWide(&v)
}

// mulSmall is a·x for x < 2^32, five limbs.
func mulSmall(a *scalar, x uint64) [5]uint64 {
	var v [5]uint64
	var hi, carry uint64
	for i := range 4 {
		h, l := bits.Mul64(a[i], x)
		v[i], carry = bits.Add64(l, hi, 0)
		hi = h + carry // h ≤ x − 1 < 2^32: no overflow
	}
	v[4] = hi
	return v
}

// addTo adds c to the five-limb v (which stays below 2^286 here).
func addTo(v *[5]uint64, c *scalar) {
	var carry uint64
	for i := range 4 {
		v[i], carry = bits.Add64(v[i], c[i], carry)
	}
	v[4] += carry
}

// reduceWide returns v mod ℓ for v < 2^286, in constant time. v splits as
// q·2^252 + r; since 2^252 ≡ −(ℓ − 2^252), v ≡ r − q·(ℓ − 2^252), which
// lies in (−2^159, 2^252): adding ℓ once when it is negative gives the
// canonical result.
func reduceWide(v *[5]uint64) scalar {
	q := v[3]>>60 | v[4]<<4 // < 2^34
	r := scalar{v[0], v[1], v[2], v[3] & (1<<60 - 1)}
	// m = q·(ℓ − 2^252), three limbs.
	h0, m0 := bits.Mul64(q, orderLow[0])
	h1, l1 := bits.Mul64(q, orderLow[1])
	m1, c1 := bits.Add64(l1, h0, 0)
	m2 := h1 + c1
	var borrow uint64
	r[0], borrow = bits.Sub64(r[0], m0, 0)
	r[1], borrow = bits.Sub64(r[1], m1, borrow)
	r[2], borrow = bits.Sub64(r[2], m2, borrow)
	r[3], borrow = bits.Sub64(r[3], 0, borrow)
	mask := -borrow // all ones when negative
	var carry uint64
	for i := range 4 {
		r[i], carry = bits.Add64(r[i], groupOrder[i]&mask, carry)
	}
	return r
}

// randomCoefficients fills coef with uniform scalars from crypto/rand, by
// rejection: 253 random bits are kept when below ℓ (about half the time).
// Which draws were rejected says nothing about the accepted values.
func randomCoefficients(coef []scalar) {
	buf := make([]byte, 64*len(coef)+64)
	used := len(buf)
	for i := range coef {
		for {
			if used == len(buf) {
				if _, err := rand.Read(buf); err != nil {
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

// lessThanOrder reports whether s < ℓ.
func lessThanOrder(s *scalar) bool {
	var borrow uint64
	for i := range 4 {
		_, borrow = bits.Sub64(s[i], groupOrder[i], borrow)
	}
	return borrow == 1
}

// lagrangeDenominators returns, for xs distinct and non-zero, d_i = x_i ·
// Π_{j≠i} (x_j − x_i) and num = Π_j x_j, so that the Lagrange coefficients
// at zero of any polynomial of degree < len(xs) are λ_i = Π_{j≠i} x_j /
// (x_j − x_i) = num/d_i. The IDs are public, so the products are built as
// exact integers packed into uint64 words (about six differences per
// scalar multiplication when IDs are below 1024).
func lagrangeDenominators(xs []ClientID) (den []group.Scalar, num group.Scalar) {
	g := group.Ristretto255
	den = make([]group.Scalar, len(xs))
	tmp := g.NewScalar()
	for i, xi := range xs {
		acc := g.NewScalar().SetUint64(1)
		word, wbits, neg := uint64(xi), bits.Len32(uint32(xi)), false
		for j, xj := range xs {
			if j == i {
				continue
			}
			d := int64(xj) - int64(xi)
			if d < 0 {
				d, neg = -d, !neg
			}
			db := bits.Len64(uint64(d))
			if wbits+db > 64 {
				acc.Mul(acc, tmp.SetUint64(word))
				word, wbits = 1, 1
			}
			word *= uint64(d)
			wbits += db
		}
		acc.Mul(acc, tmp.SetUint64(word))
		if neg {
			acc.Neg(acc)
		}
		den[i] = acc
	}
	num = g.NewScalar().SetUint64(1)
	for _, x := range xs {
		num.Mul(num, tmp.SetUint64(uint64(x)))
	}
	return den, num
}

// invertBatch replaces every (non-zero) scalar of v by its inverse with one
// field inversion (Montgomery's trick: three multiplications each).
func invertBatch(v []group.Scalar) {
	if len(v) == 0 {
		return
	}
	g := group.Ristretto255
	prefix := make([]group.Scalar, len(v)+1)
	prefix[0] = g.NewScalar().SetUint64(1)
	for i := range v {
		prefix[i+1] = g.NewScalar().Mul(prefix[i], v[i])
	}
	inv := g.NewScalar().Inv(prefix[len(v)])
	for i := len(v) - 1; i >= 0; i-- {
		vi := v[i].Copy()
		v[i].Mul(inv, prefix[i]) // 1/v[i]
		inv.Mul(inv, vi)
	}
}

// lagrangeAtZero returns the coefficients λ_i with f(0) = Σ λ_i·f(x_i) for
// any polynomial f of degree < len(xs): λ_i = Π_{j≠i} x_j / (x_j − x_i).
// xs are distinct and non-zero.
func lagrangeAtZero(xs []ClientID) []group.Scalar {
	den, num := lagrangeDenominators(xs)
	invertBatch(den)
	for _, d := range den {
		d.Mul(d, num)
	}
	return den
}

// interpolator reconstructs secrets, caching the Lagrange coefficients of
// each holder set (in the complete graph every secret usually has the same
// one). Not safe for concurrent use.
type interpolator struct {
	t     int
	cache map[string][]group.Scalar
}

func newInterpolator(t int) *interpolator {
	return &interpolator{t: t, cache: map[string][]group.Scalar{}}
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
// shares fails with ErrTooFewSurvivors, one with a malformed share with
// its parse error; the others are still returned.
func (ip *interpolator) recoverBatch(batch []map[ClientID][]byte) ([]group.Scalar, []error) {
	out := make([]group.Scalar, len(batch))
	errs := make([]error, len(batch))
	xsOf := make([][]ClientID, len(batch))
	keyOf := make([]string, len(batch))
	type pending struct {
		xs       []ClientID
		den      []group.Scalar
		num      group.Scalar
		from, to int // its denominators in all
	}
	var todo []*pending
	byKey := map[string]*pending{}
	var all []group.Scalar
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
		if _, ok := ip.cache[keyOf[b]]; ok || byKey[keyOf[b]] != nil {
			continue
		}
		pd := &pending{xs: xs, from: len(all)}
		pd.den, pd.num = lagrangeDenominators(xs)
		all = append(all, pd.den...)
		pd.to = len(all)
		byKey[keyOf[b]] = pd
		todo = append(todo, pd)
	}
	invertBatch(all)
	for _, pd := range todo {
		lambda := all[pd.from:pd.to]
		for _, l := range lambda {
			l.Mul(l, pd.num)
		}
		ip.cache[keyString(pd.xs)] = lambda
	}
	g := group.Ristretto255
	term := g.NewScalar()
	for b, shares := range batch {
		if errs[b] != nil {
			continue
		}
		lambda := ip.cache[keyOf[b]]
		sum := g.NewScalar()
		for i, x := range xsOf[b] {
			y, err := parseScalar(shares[x])
			if err != nil {
				errs[b] = err
				break
			}
			sum.Add(sum, term.Mul(lambda[i], y))
		}
		if errs[b] == nil {
			out[b] = sum
		}
	}
	return out, errs
}

// keyString is the cache key of a holder set: the IDs, big-endian.
func keyString(xs []ClientID) string {
	key := make([]byte, 0, 4*len(xs))
	for _, x := range xs {
		key = append(key, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return string(key)
}
