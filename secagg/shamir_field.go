package secagg

import (
	"encoding/binary"
	"math/big"
	"math/bits"
)

// Limb arithmetic in the Ristretto255 scalar field Z_ℓ (RFC 9496, §4.4:
// ℓ = 2^252 + 27742317777372353535851937790883648493) for Shamir sharing
// (shamir.go). ℓ is sparse in 64-bit limbs, ℓ = 2^252 + c with c < 2^125
// two limbs and a zero third limb, which the code below uses twice:
// 2^252 ≡ −c folds everything above bit 252 back with two word
// multiplications (foldLazy, reduceWide), and a Montgomery reduction round
// multiplies by ℓ with two word products instead of four (montReduce,
// redcRound).
//
// Everything that touches secret values (coefficients, shares, the
// reconstructed secret) runs in constant time: no branch or index depends
// on them (beyond whether a received share is a canonical encoding, which
// an error reports anyway), and the final corrections use masks. Only public values (holder
// IDs, Lagrange coefficients, the number of terms) steer loops.

// scalar is an element of Z_ℓ as four little-endian 64-bit limbs. Unless a
// function says otherwise ("lazy": any representative below 2^254), it is
// canonical (< ℓ).
type scalar [4]uint64

// groupOrder is ℓ; orderLow is c = ℓ − 2^252 (two limbs, < 2^125).
var (
	groupOrder = scalar{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6, 0, 0x1000000000000000}
	orderLow   = [2]uint64{0x5812631a5cf5d3ed, 0x14def9dea2f79cd6}
)

// orderNegInv is −ℓ^{-1} mod 2^64, the Montgomery reduction constant
// (TestFieldConstants checks it).
const orderNegInv = 0xd2b51da312547e1b

// pow832 is 2^832 mod ℓ: montMul(a, pow832) = a·2^576, which turns a
// Lagrange numerator into the form lagrangeBasis stores (TestFieldConstants
// checks it).
var pow832 = scalar{0xfb46830043fa2ce8, 0xce1ae30ddc6cc391, 0x14d3b69ee15b30aa, 0x65dc6c04ec5b65}

// scalarFromBytes reads a 32-byte little-endian encoding (not checked:
// see lessThanOrder).
func scalarFromBytes(b []byte) scalar {
	var s scalar
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return s
}

// bytes appends the 32-byte little-endian encoding to dst (the canonical
// one, the encoding circl and RFC 9496 use, when s is canonical).
func (s *scalar) bytes(dst []byte) []byte {
	for _, w := range s {
		dst = binary.LittleEndian.AppendUint64(dst, w)
	}
	return dst
}

// lessThanOrder reports whether s < ℓ, from the borrow of s − ℓ (constant
// time up to the returned bool).
func lessThanOrder(s *scalar) bool {
	var borrow uint64
	for i := range 4 {
		_, borrow = bits.Sub64(s[i], groupOrder[i], borrow)
	}
	return borrow == 1
}

// reduceWide returns v mod ℓ, canonical, for v < 2^286, in constant time.
// v splits as q·2^252 + r; since 2^252 ≡ −c, v ≡ r − q·c, which lies in
// (−2^159, 2^252): adding ℓ once when it is negative gives the canonical
// result (r < 2^252 < ℓ, so it never needs a subtraction).
func reduceWide(v *[5]uint64) scalar {
	q := v[3]>>60 | v[4]<<4 // < 2^34
	r := scalar{v[0], v[1], v[2], v[3] & (1<<60 - 1)}
	// m = q·c, three limbs.
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

// canonical returns the canonical form of a lazy a (< 2^254), in constant
// time.
func canonical(a *scalar) scalar {
	return reduceWide(&[5]uint64{a[0], a[1], a[2], a[3], 0})
}

// foldLazy returns a lazy representative (< 2^254) of v0 + v1·2^64 + … +
// v4·2^256 mod ℓ for a value below 2^316, in constant time. With v = q·2^252
// + r (q < 2^64), v ≡ r + ℓ − q·c, and that lies in (ℓ − 2^189, 2^252 + ℓ):
// never negative, so unlike reduceWide there is no correction to make.
// Keeping ℓ's multiple instead of reducing fully is what lets Horner's rule
// (evalShares) and the Lagrange denominators run several word
// multiplications between reductions: a lazy value times a word of at
// most 2^62, plus such terms, stays below 2^316 (evalShares's x^m reaches
// 2^62 exactly at ID 2^31, m = 2; that is within the bound because its
// accumulator comes from foldLazy, below 2^253.01, not merely 2^254).
//
// The result comes as four words, not a scalar, so that it stays in
// registers: a returned array goes through memory, which the callers'
// dependency chains (acc → product → fold → acc) would wait on.
func foldLazy(v0, v1, v2, v3, v4 uint64) (r0, r1, r2, r3 uint64) {
	q := v3>>60 | v4<<4
	h0, m0 := bits.Mul64(q, orderLow[0])
	h1, l1 := bits.Mul64(q, orderLow[1])
	m1, c := bits.Add64(l1, h0, 0)
	m2 := h1 + c
	r0, c = bits.Add64(v0, groupOrder[0], 0)
	r1, c = bits.Add64(v1, groupOrder[1], c)
	r2, c = bits.Add64(v2, 0, c)
	r3 = v3&(1<<60-1) + groupOrder[3] + c
	r0, b := bits.Sub64(r0, m0, 0)
	r1, b = bits.Sub64(r1, m1, b)
	r2, b = bits.Sub64(r2, m2, b)
	r3 -= b
	return r0, r1, r2, r3
}

// mulWordLazy returns a lazy representative of a·w mod ℓ for a lazy a and
// w ≤ 2^62, in constant time.
func mulWordLazy(a *scalar, w uint64) scalar {
	h0, l0 := bits.Mul64(a[0], w)
	h1, l1 := bits.Mul64(a[1], w)
	h2, l2 := bits.Mul64(a[2], w)
	h3, l3 := bits.Mul64(a[3], w)
	l1, c := bits.Add64(l1, h0, 0)
	l2, c = bits.Add64(l2, h1, c)
	l3, c = bits.Add64(l3, h2, c)
	r0, r1, r2, r3 := foldLazy(l0, l1, l2, l3, h3+c)
	return scalar{r0, r1, r2, r3}
}

// negate returns ℓ − a for a canonical non-zero a (the IDs' products it
// serves are public and never zero, so it need not handle a = 0).
func negate(a *scalar) scalar {
	var r scalar
	var b uint64
	for i := range 4 {
		r[i], b = bits.Sub64(groupOrder[i], a[i], b)
	}
	return r
}

// sumProducts returns Σ_s a[s]·b[s] exactly, as nine limbs, for
// len(a) = len(b) < 2^62 (each product is below 2^512), in constant time.
// It scans columns (Comba's product scanning) across all the pairs at
// once: limb k of the sum collects a[s][i]·b[s][k−i] for every s in a
// three-word accumulator, which cannot overflow (4·len(a) products below
// 2^128, plus the carry in), and passes its upper two words on to limb
// k+1. Every product is thus a multiplication and three additions on one
// carry chain, with no partial row to store or carry to propagate.
func sumProducts(a, b []scalar) (acc [9]uint64) {
	b = b[:len(a)]
	var r0, r1, r2 uint64
	for k := range 7 {
		for i := max(0, k-3); i <= min(3, k); i++ {
			j := k - i
			for s := range a {
				h, l := bits.Mul64(a[s][i], b[s][j])
				var c uint64
				r0, c = bits.Add64(r0, l, 0)
				r1, c = bits.Add64(r1, h, c)
				r2 += c
			}
		}
		acc[k] = r0
		r0, r1, r2 = r1, r2, 0
	}
	acc[7], acc[8] = r0, r1
	return acc
}

// montReduce returns acc·2^(−320) mod ℓ, canonical, for acc < 2^320·ℓ
// (Montgomery's REDC over five limbs, one a round), in constant time. Each
// round adds m·ℓ·2^(64i) with m = acc_i·(−ℓ^{-1}) mod 2^64, which clears
// limb i; ℓ's limbs are c_0, c_1, 0 and 2^60, so m·ℓ is two word products
// and a shift. The result (acc + M·ℓ)/2^320 is below acc/2^320 + ℓ < 2ℓ,
// and one masked subtraction of ℓ makes it canonical. Five rounds, not
// four, because acc is a sum of up to t products of two scalars, which
// 2^256·ℓ would not bound. Overwrites acc.
func montReduce(acc *[9]uint64) scalar {
	for i := range 5 {
		m := acc[i] * orderNegInv
		h0, l0 := bits.Mul64(m, orderLow[0])
		h1, l1 := bits.Mul64(m, orderLow[1])
		// m·ℓ = l0 + (h0 + l1)·2^64 + h1·2^128 + (m<<60)·2^192 + (m>>4)·2^256.
		w1, c2 := bits.Add64(h0, l1, 0)
		w2 := h1 + c2 // h1 < 2^61: no overflow
		var c uint64
		_, c = bits.Add64(acc[i], l0, 0) // limb i becomes zero
		acc[i] = 0
		acc[i+1], c = bits.Add64(acc[i+1], w1, c)
		acc[i+2], c = bits.Add64(acc[i+2], w2, c)
		acc[i+3], c = bits.Add64(acc[i+3], m<<60, c)
		acc[i+4], c = bits.Add64(acc[i+4], m>>4, c)
		for j := i + 5; j < 9; j++ {
			acc[j], c = bits.Add64(acc[j], 0, c)
		}
	}
	return subOrderIfAbove(acc[5], acc[6], acc[7], acc[8])
}

// subOrderIfAbove returns r − ℓ if r ≥ ℓ, else r, for r < 2ℓ, in constant
// time (the subtraction is always done; a mask picks the result).
func subOrderIfAbove(r0, r1, r2, r3 uint64) scalar {
	s0, b := bits.Sub64(r0, groupOrder[0], 0)
	s1, b := bits.Sub64(r1, groupOrder[1], b)
	s2, b := bits.Sub64(r2, 0, b)
	s3, b := bits.Sub64(r3, groupOrder[3], b)
	mask := -b // all ones when r < ℓ
	return scalar{s0&^mask | r0&mask, s1&^mask | r1&mask, s2&^mask | r2&mask, s3&^mask | r3&mask}
}

// montMul returns a·b·2^(−256) mod ℓ for canonical a and b (Montgomery
// multiplication with R = 2^256), canonical, in constant time. It is
// written out limb by limb, schoolbook rows (mulRowAdd) and then four
// reduction rounds (redcRound), so that the limbs stay in registers: the
// batched inversion is chains of these, each waiting for the last. (A
// product-scanning version with the reduction interleaved was as fast in
// throughput and 20% slower in latency here.)
func montMul(a, b *scalar) scalar {
	b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
	var c uint64
	h0, t0 := bits.Mul64(a[0], b0)
	h1, t1 := bits.Mul64(a[0], b1)
	h2, t2 := bits.Mul64(a[0], b2)
	t4, t3 := bits.Mul64(a[0], b3)
	t1, c = bits.Add64(t1, h0, 0)
	t2, c = bits.Add64(t2, h1, c)
	t3, c = bits.Add64(t3, h2, c)
	t4 += c
	t1, t2, t3, t4, t5 := mulRowAdd(a[1], b0, b1, b2, b3, t1, t2, t3, t4)
	t2, t3, t4, t5, t6 := mulRowAdd(a[2], b0, b1, b2, b3, t2, t3, t4, t5)
	t3, t4, t5, t6, t7 := mulRowAdd(a[3], b0, b1, b2, b3, t3, t4, t5, t6)
	var t8 uint64
	t1, t2, t3, t4, c = redcRound(t0, t1, t2, t3, t4)
	t5, c = bits.Add64(t5, 0, c)
	t6, c = bits.Add64(t6, 0, c)
	t7, c = bits.Add64(t7, 0, c)
	t8 += c
	t2, t3, t4, t5, c = redcRound(t1, t2, t3, t4, t5)
	t6, c = bits.Add64(t6, 0, c)
	t7, c = bits.Add64(t7, 0, c)
	t8 += c
	t3, t4, t5, t6, c = redcRound(t2, t3, t4, t5, t6)
	t7, c = bits.Add64(t7, 0, c)
	t8 += c
	t4, t5, t6, t7, c = redcRound(t3, t4, t5, t6, t7)
	t8 += c
	return subOrderIfAbove(t4, t5, t6, t7)
}

// invertPublic returns a^{-1} mod ℓ for a canonical non-zero a. It uses
// math/big's extended Euclid, which is not constant time: only for public
// values (products of Lagrange denominators, which depend on holder IDs
// alone).
func invertPublic(a *scalar) scalar {
	var be [32]byte
	for i, w := range a {
		binary.BigEndian.PutUint64(be[24-8*i:], w)
	}
	ell := new(big.Int).SetBytes([]byte{
		0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		0x14, 0xde, 0xf9, 0xde, 0xa2, 0xf7, 0x9c, 0xd6, 0x58, 0x12, 0x63, 0x1a, 0x5c, 0xf5, 0xd3, 0xed})
	inv := new(big.Int).ModInverse(new(big.Int).SetBytes(be[:]), ell)
	inv.FillBytes(be[:])
	var r scalar
	for i := range r {
		r[i] = binary.BigEndian.Uint64(be[24-8*i:])
	}
	return r
}

// mulRowAdd returns t + a·b (b = b0..b3, t = t0..t3, the sum five limbs),
// one schoolbook row of montMul.
func mulRowAdd(a, b0, b1, b2, b3, t0, t1, t2, t3 uint64) (r0, r1, r2, r3, r4 uint64) {
	h0, l0 := bits.Mul64(a, b0)
	h1, l1 := bits.Mul64(a, b1)
	h2, l2 := bits.Mul64(a, b2)
	h3, l3 := bits.Mul64(a, b3)
	var c uint64
	l1, c = bits.Add64(l1, h0, 0)
	l2, c = bits.Add64(l2, h1, c)
	l3, c = bits.Add64(l3, h2, c)
	h3 += c
	r0, c = bits.Add64(t0, l0, 0)
	r1, c = bits.Add64(t1, l1, c)
	r2, c = bits.Add64(t2, l2, c)
	r3, c = bits.Add64(t3, l3, c)
	r4 = h3 + c
	return
}

// redcRound is one Montgomery reduction round on the limbs t0..t4: it adds
// m·ℓ with m = t0·(−ℓ^{-1}) mod 2^64, which zeroes t0, and returns the
// limbs t1..t4 and the carry out of t4 (to add into the limbs above).
func redcRound(t0, t1, t2, t3, t4 uint64) (r1, r2, r3, r4, carry uint64) {
	m := t0 * orderNegInv
	h0, l0 := bits.Mul64(m, orderLow[0])
	h1, l1 := bits.Mul64(m, orderLow[1])
	w1, c := bits.Add64(h0, l1, 0)
	w2 := h1 + c // h1 < 2^61: no overflow
	_, c = bits.Add64(t0, l0, 0)
	r1, c = bits.Add64(t1, w1, c)
	r2, c = bits.Add64(t2, w2, c)
	r3, c = bits.Add64(t3, m<<60, c)
	r4, carry = bits.Add64(t4, m>>4, c)
	return
}
