package secagg

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cloudflare/circl/group"
	"github.com/cloudflare/circl/math/polynomial"
	"github.com/cloudflare/circl/secretsharing"
)

// TestShamirAgainstCircl cross-checks our sharing with circl's reference
// implementation both ways: circl recovers the secret from our shares, and
// we recover it from circl's, for random thresholds and holder IDs.
func TestShamirAgainstCircl(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	g := group.Ristretto255
	for trial := range 40 {
		th := 1 + rng.IntN(40)
		n := th + rng.IntN(10)
		seen := map[ClientID]bool{}
		holders := make([]ClientID, 0, n)
		for len(holders) < n {
			id := ClientID(1 + rng.Uint32N(uint32(1)<<(4+trial%28)+uint32(n)))
			if trial%5 == 0 {
				id = ClientID(math.MaxUint32 - rng.Uint32N(uint32(3*n))) // near the top of uint32
			}
			if !seen[id] {
				seen[id] = true
				holders = append(holders, id)
			}
		}
		secret := g.RandomScalar(nil)

		ours := splitSecret(secret, th, holders)
		ref := make([]secretsharing.Share, 0, th)
		for _, i := range rng.Perm(n)[:th] {
			v, err := parseScalar(ours[i])
			if err != nil {
				t.Fatal(err)
			}
			ref = append(ref, secretsharing.Share{ID: g.NewScalar().SetUint64(uint64(holders[i])), Value: v})
		}
		got, err := secretsharing.Recover(uint(th-1), ref)
		if err != nil || !got.IsEqual(secret) {
			t.Fatalf("trial %d (t=%d): circl does not recover our sharing: %v", trial, th, err)
		}

		ss := secretsharing.New(nil, uint(th-1), secret)
		theirs := map[ClientID][]byte{}
		for _, i := range rng.Perm(n)[:th+rng.IntN(n-th+1)] {
			theirs[holders[i]] = scalarBytes(ss.ShareWithID(g.NewScalar().SetUint64(uint64(holders[i]))).Value)
		}
		got, err = newInterpolator(th).recover(theirs)
		if err != nil || !got.IsEqual(secret) {
			t.Fatalf("trial %d (t=%d): we do not recover circl's sharing: %v", trial, th, err)
		}
		if th > 1 {
			short := map[ClientID][]byte{}
			for x, v := range theirs {
				if len(short) < th-1 {
					short[x] = v
				}
			}
			if _, err := newInterpolator(th).recover(short); err == nil {
				t.Fatalf("trial %d: recovered from t−1 shares", trial)
			}
		}
	}
}

// BenchmarkRecover is one secret's reconstruction from t shares at the
// thresholds ChooseParams gives for n = 100 (complete), 1000 at 10%
// dropout and 1000 at 30% (without the coefficient cache).
func BenchmarkRecover(b *testing.B) {
	for _, th := range []int{34, 82, 184} {
		holders := make([]ClientID, th)
		for i := range holders {
			holders[i] = ClientID(7*i + 1)
		}
		sh := splitSecret(group.Ristretto255.RandomScalar(nil), th, holders)
		m := map[ClientID][]byte{}
		for i, h := range holders {
			m[h] = sh[i]
		}
		b.Run(fmt.Sprintf("t=%d", th), func(b *testing.B) {
			for b.Loop() {
				if _, err := newInterpolator(th).recover(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// shamirOrder is ℓ, the order of the Ristretto255 group (RFC 9496, §4.4),
// for the math/big references.
var shamirOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// limbsToBig is the value of little-endian 64-bit limbs.
func limbsToBig(v []uint64) *big.Int {
	r := new(big.Int)
	for i := len(v) - 1; i >= 0; i-- {
		r.Lsh(r, 64).Or(r, new(big.Int).SetUint64(v[i]))
	}
	return r
}

// bigToScalar is the scalar with the limbs of v (< 2^256).
func bigToScalar(v *big.Int) scalar {
	var s scalar
	w := new(big.Int).Set(v)
	mask := new(big.Int).SetUint64(math.MaxUint64)
	for i := range s {
		s[i] = new(big.Int).And(w, mask).Uint64()
		w.Rsh(w, 64)
	}
	return s
}

// randBelow is a random integer in [0, 2^nbits) from rng: uniform, or
// with up to 128 top bits cleared, or one of the extremes 0 and 2^nbits −
// 1 one time in eight each.
func randBelow(rng *rand.Rand, nbits uint) *big.Int {
	switch rng.IntN(8) {
	case 0:
		return new(big.Int)
	case 1:
		return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), nbits), big.NewInt(1))
	}
	v := new(big.Int)
	for range nbits/64 + 1 {
		v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(rng.Uint64()))
	}
	v.Rsh(v, uint(rng.IntN(3)*rng.IntN(64))) // sometimes shorter
	return v.And(v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), nbits), big.NewInt(1)))
}

// TestFieldConstants checks ℓ and the constants derived from it against
// math/big.
func TestFieldConstants(t *testing.T) {
	if limbsToBig(groupOrder[:]).Cmp(shamirOrder) != 0 {
		t.Fatal("groupOrder is not ℓ")
	}
	if c := new(big.Int).Sub(shamirOrder, new(big.Int).Lsh(big.NewInt(1), 252)); limbsToBig(orderLow[:]).Cmp(c) != 0 {
		t.Fatal("orderLow is not ℓ − 2^252")
	}
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	inv := new(big.Int).ModInverse(new(big.Int).Mod(shamirOrder, two64), two64)
	if want := new(big.Int).Sub(two64, inv).Uint64(); orderNegInv != want {
		t.Fatalf("orderNegInv = %#x, want %#x", uint64(orderNegInv), want)
	}
	if want := new(big.Int).Exp(big.NewInt(2), big.NewInt(832), shamirOrder); limbsToBig(pow832[:]).Cmp(want) != 0 {
		t.Fatal("pow832 is not 2^832 mod ℓ")
	}
}

// TestFieldArithmetic checks the limb operations against math/big at
// their input bounds and at random: foldLazy (v < 2^316 → lazy, ≡ v),
// mulWordLazy (lazy a < 2^254, w < 2^62), canonical and reduceWide (<
// 2^254, < 2^286 → canonical), montMul and sumProducts + montReduce over five
// rounds (up to 200 products of canonical values), negate and
// invertPublic.
func TestFieldArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lazyBound := new(big.Int).Lsh(big.NewInt(1), 254)
	check := func(what string, got scalar, want *big.Int, lazy bool) {
		t.Helper()
		g := limbsToBig(got[:])
		if lazy {
			if g.Cmp(lazyBound) >= 0 || new(big.Int).Mod(g, shamirOrder).Cmp(new(big.Int).Mod(want, shamirOrder)) != 0 {
				t.Fatalf("%s: got %v, want ≡ %v below 2^254", what, g, want)
			}
			return
		}
		if w := new(big.Int).Mod(want, shamirOrder); g.Cmp(w) != 0 {
			t.Fatalf("%s: got %v, want %v", what, g, w)
		}
	}
	top := new(big.Int).Sub(shamirOrder, big.NewInt(1))
	randCanonical := func() *big.Int {
		switch rng.IntN(8) {
		case 0:
			return new(big.Int)
		case 1:
			return new(big.Int).Set(top)
		}
		return new(big.Int).Mod(randBelow(rng, 256), shamirOrder)
	}
	for range 20000 {
		v := randBelow(rng, 316)
		var v5 [5]uint64
		for i := range v5 {
			v5[i] = new(big.Int).Rsh(v, uint(64*i)).Uint64()
		}
		r0, r1, r2, r3 := foldLazy(v5[0], v5[1], v5[2], v5[3], v5[4])
		check("foldLazy", scalar{r0, r1, r2, r3}, v, true)

		a, w := randBelow(rng, 254), randBelow(rng, 62).Uint64()
		sa := bigToScalar(a)
		check("mulWordLazy", mulWordLazy(&sa, w), new(big.Int).Mul(a, new(big.Int).SetUint64(w)), true)
		check("canonical", canonical(&sa), a, false)

		u := randBelow(rng, 286)
		var u5 [5]uint64
		for i := range u5 {
			u5[i] = new(big.Int).Rsh(u, uint(64*i)).Uint64()
		}
		check("reduceWide", reduceWide(&u5), u, false)

		x, y := randCanonical(), randCanonical()
		sx, sy := bigToScalar(x), bigToScalar(y)
		rInv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 256), shamirOrder)
		check("montMul", montMul(&sx, &sy), new(big.Int).Mul(new(big.Int).Mul(x, y), rInv), false)
		if x.Sign() != 0 {
			check("negate", negate(&sx), new(big.Int).Neg(x), false)
			check("invertPublic", invertPublic(&sx), new(big.Int).ModInverse(x, shamirOrder), false)
		}
	}
	// Sums of products: canonical extremes and random, up to 200 terms.
	r5Inv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 320), shamirOrder)
	for trial := range 300 {
		n := 1 + rng.IntN(200)
		xs, ys := make([]scalar, n), make([]scalar, n)
		want := new(big.Int)
		for s := range n {
			x, y := randCanonical(), randCanonical()
			if trial == 0 {
				x, y = top, top
			}
			xs[s], ys[s] = bigToScalar(x), bigToScalar(y)
			want.Add(want, new(big.Int).Mul(x, y))
		}
		acc := sumProducts(xs, ys)
		if limbsToBig(acc[:]).Cmp(want) != 0 {
			t.Fatalf("sumProducts of %d terms: got %v, want %v", n, limbsToBig(acc[:]), want)
		}
		check("montReduce(5)", montReduce(&acc), new(big.Int).Mul(want, r5Inv), false)
	}
}

// bigHorner is f(x) mod ℓ for the coefficients coef (constant first), by
// math/big.
func bigHorner(coef []*big.Int, x uint64) *big.Int {
	acc := new(big.Int)
	bx := new(big.Int).SetUint64(x)
	for i := len(coef) - 1; i >= 0; i-- {
		acc.Mul(acc, bx).Add(acc, coef[i]).Mod(acc, shamirOrder)
	}
	return acc
}

// TestEvalSharesBitForBit checks evalShares's encodings against math/big
// evaluation mod ℓ, and against circl's polynomial evaluation, for
// polynomials of degree 0..200 (random, all coefficients ℓ−1, or random
// with ℓ−1 mixed in) at holder sets that cover every block length: 1, 2,
// 2^32−1, IDs near every power of two, and sets of up to 400 holders.
func TestEvalSharesBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := group.Ristretto255
	top := new(big.Int).Sub(shamirOrder, big.NewInt(1))
	special := []ClientID{1, 2, 3, 255, 256, 65535, 65536, 1<<31 - 1, 1 << 31, math.MaxUint32 - 1, math.MaxUint32}
	for b := 2; b < 32; b++ {
		special = append(special, ClientID(1)<<b-1, ClientID(1)<<b+1)
	}
	for deg := 0; deg <= 200; deg++ {
		coef := make([]*big.Int, deg+1)
		for i := range coef {
			switch {
			case deg%3 == 1 || rng.IntN(4) == 0:
				coef[i] = top
			default:
				coef[i] = new(big.Int).Mod(randBelow(rng, 256), shamirOrder)
			}
		}
		seen := map[ClientID]bool{}
		var holders []ClientID
		add := func(id ClientID) {
			if id != 0 && !seen[id] {
				seen[id] = true
				holders = append(holders, id)
			}
		}
		for _, id := range special {
			add(id)
		}
		n := 1 + rng.IntN(40)
		if deg%50 == 0 {
			n = 400
		}
		for range n {
			switch rng.IntN(3) {
			case 0:
				add(ClientID(1 + rng.IntN(300)))
			case 1:
				add(ClientID(math.MaxUint32 - rng.Uint32N(1000)))
			default:
				add(ClientID(rng.Uint32()))
			}
		}
		rng.Shuffle(len(holders), func(i, j int) { holders[i], holders[j] = holders[j], holders[i] })
		sc := make([]scalar, len(coef))
		gc := make([]group.Scalar, len(coef))
		for i, c := range coef {
			sc[i] = bigToScalar(c)
			gc[i] = g.NewScalar()
			if err := gc[i].UnmarshalBinary(sc[i].bytes(nil)); err != nil {
				t.Fatal(err)
			}
		}
		poly := polynomial.New(gc)
		got := evalShares(sc, holders)
		for k, h := range holders {
			want := bigHorner(coef, uint64(h)).FillBytes(make([]byte, 32))
			slices.Reverse(want)
			if !bytes.Equal(got[k], want) {
				t.Fatalf("degree %d at x = %d: got %x, want %x", deg, h, got[k], want)
			}
			if k < 8 {
				if ref := scalarBytes(poly.Evaluate(g.NewScalar().SetUint64(uint64(h)))); !bytes.Equal(got[k], ref) {
					t.Fatalf("degree %d at x = %d: got %x, circl %x", deg, h, got[k], ref)
				}
			}
		}
	}
}

// bigLagrangeAtZero is f(0) from the points (xs[i], ys[i]) by Lagrange's
// formula in math/big: Σ y_i·Π_{j≠i} x_j/(x_j − x_i) mod ℓ.
func bigLagrangeAtZero(xs []ClientID, ys []*big.Int) *big.Int {
	sum := new(big.Int)
	for i, xi := range xs {
		num, den := big.NewInt(1), big.NewInt(1)
		for j, xj := range xs {
			if j != i {
				num.Mul(num, big.NewInt(int64(xj)))
				den.Mul(den, big.NewInt(int64(xj)-int64(xi)))
			}
		}
		den.Mod(den, shamirOrder).ModInverse(den, shamirOrder)
		term := num.Mul(num, den)
		sum.Add(sum, term.Mul(term, ys[i]))
	}
	return sum.Mod(sum, shamirOrder)
}

// TestRecoverAgainstBig reconstructs random polynomials of degree t−1 from
// random subsets of ≥ t holders (small IDs, IDs near 2^32, mixed; sets of
// up to 250) with recoverBatch, several secrets and holder sets in one
// batch, and compares bit for bit with math/big Lagrange interpolation at
// zero over the t smallest holders (and with the polynomial's constant
// term). The basis (1/d_i and num·2^576, newLagrangeBasis) is checked
// against math/big too.
func TestRecoverAgainstBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	r576 := new(big.Int).Lsh(big.NewInt(1), 576)
	for trial := range 60 {
		th := 1 + rng.IntN(60)
		if trial%10 == 9 {
			th = 150 + rng.IntN(100)
		}
		ip := newInterpolator(th)
		var batch []map[ClientID][]byte
		var wants []*big.Int
		for range 1 + rng.IntN(5) {
			n := th + rng.IntN(20)
			seen := map[ClientID]bool{}
			var holders []ClientID
			for len(holders) < n {
				var id ClientID
				switch (trial + len(holders)) % 3 {
				case 0:
					id = ClientID(1 + rng.IntN(3*n))
				case 1:
					id = ClientID(math.MaxUint32 - rng.Uint32N(uint32(3*n)))
				default:
					id = ClientID(1 + rng.Uint32N(math.MaxUint32))
				}
				if !seen[id] {
					seen[id] = true
					holders = append(holders, id)
				}
			}
			coef := make([]scalar, th)
			randomCoefficients(coef)
			if trial%7 == 3 {
				for i := range coef {
					coef[i] = bigToScalar(new(big.Int).Sub(shamirOrder, big.NewInt(1)))
				}
			}
			sh := evalShares(coef, holders)
			m := map[ClientID][]byte{}
			for _, i := range rng.Perm(n)[:th+rng.IntN(n-th+1)] {
				m[holders[i]] = sh[i]
			}
			xs := slices.Sorted(maps.Keys(m))[:th]
			ys := make([]*big.Int, th)
			for i, x := range xs {
				le := slices.Clone(m[x])
				slices.Reverse(le)
				ys[i] = new(big.Int).SetBytes(le)
			}
			want := bigLagrangeAtZero(xs, ys)
			if want.Cmp(limbsToBig(coef[0][:])) != 0 {
				t.Fatalf("trial %d: math/big does not recover the constant term", trial)
			}
			basis := newLagrangeBasis(xs)
			num := big.NewInt(1)
			for _, x := range xs {
				num.Mul(num, big.NewInt(int64(x)))
			}
			if w := num.Mul(num, r576).Mod(num, shamirOrder); limbsToBig(basis.scale[:]).Cmp(w) != 0 {
				t.Fatalf("trial %d: scale = %v, want num·2^576 = %v", trial, limbsToBig(basis.scale[:]), w)
			}
			for i, xi := range xs {
				d := big.NewInt(int64(xi))
				for j, xj := range xs {
					if j != i {
						d.Mul(d, big.NewInt(int64(xj)-int64(xi)))
					}
				}
				if w := d.Mod(d, shamirOrder).ModInverse(d, shamirOrder); limbsToBig(basis.inv[i][:]).Cmp(w) != 0 {
					t.Fatalf("trial %d: 1/d_%d = %v, want %v", trial, i, limbsToBig(basis.inv[i][:]), w)
				}
			}
			batch = append(batch, m)
			wants = append(wants, want)
		}
		if rng.IntN(2) == 0 { // the same holder set twice in one batch
			batch = append(batch, batch[0])
			wants = append(wants, wants[0])
		}
		for pass := range 2 { // the second pass finds the bases cached
			got, errs := ip.recoverBatch(batch)
			for b := range batch {
				if errs[b] != nil {
					t.Fatalf("trial %d pass %d: %v", trial, pass, errs[b])
				}
				w := wants[b].FillBytes(make([]byte, 32))
				slices.Reverse(w)
				if g := scalarBytes(got[b]); !bytes.Equal(g, w) {
					t.Fatalf("trial %d pass %d secret %d: got %x, want %x", trial, pass, b, g, w)
				}
			}
		}
	}
}

// TestRecoverFailures checks the failure cases: fewer than t shares fail
// with ErrTooFewSurvivors; a non-canonical share (ℓ, 2^256−1, a top byte
// with bit 253 set, wrong lengths) among the t smallest holders fails with
// parseScalar's error and leaves the batch's other secrets intact; one
// beyond the t smallest is not read, as before.
func TestRecoverFailures(t *testing.T) {
	const th = 5
	holders := []ClientID{3, 9, 27, 81, 243, 729, 2187}
	coef := make([]scalar, th)
	randomCoefficients(coef)
	sh := evalShares(coef, holders)
	full := func() map[ClientID][]byte {
		m := map[ClientID][]byte{}
		for i, h := range holders {
			m[h] = sh[i]
		}
		return m
	}
	want := coef[0].bytes(nil)
	ell := groupOrder.bytes(nil)
	allOnes := bytes.Repeat([]byte{0xff}, 32)
	bit253 := make([]byte, 32)
	bit253[31] = 0x20
	bads := [][]byte{ell, allOnes, bit253, sh[0][:31], append(slices.Clone(sh[0]), 0), nil}
	for _, bad := range bads {
		if _, err := parseScalar(bad); err == nil {
			t.Fatalf("parseScalar accepts %x", bad)
		}
		short := full()
		delete(short, holders[1])
		delete(short, holders[2])
		delete(short, holders[3]) // 4 of 5
		m := full()
		m[holders[2]] = bad
		late := full()
		late[holders[6]] = bad // beyond the 5 smallest: not read
		got, errs := newInterpolator(th).recoverBatch([]map[ClientID][]byte{full(), short, m, late})
		if errs[0] != nil || !bytes.Equal(scalarBytes(got[0]), want) {
			t.Fatalf("intact secret: %v", errs[0])
		}
		if !errors.Is(errs[1], ErrTooFewSurvivors) || got[1] != nil {
			t.Fatalf("4 shares of 5: got %v, want ErrTooFewSurvivors", errs[1])
		}
		_, perr := parseScalar(bad)
		if errs[2] == nil || errs[2].Error() != perr.Error() || got[2] != nil {
			t.Fatalf("share %x: got %v, want %v", bad, errs[2], perr)
		}
		if errs[3] != nil || !bytes.Equal(scalarBytes(got[3]), want) {
			t.Fatalf("bad share beyond the t smallest: %v", errs[3])
		}
	}
	// lessThanOrder accepts exactly what parseScalar accepts, around ℓ.
	for d := -3; d <= 3; d++ {
		v := new(big.Int).Add(shamirOrder, big.NewInt(int64(d)))
		s := bigToScalar(v)
		_, err := parseScalar(s.bytes(nil))
		if lessThanOrder(&s) != (err == nil) {
			t.Fatalf("ℓ%+d: lessThanOrder %v, parseScalar error %v", d, lessThanOrder(&s), err)
		}
	}
}

// TestRandomCoefficients checks that the coefficients are canonical and
// spread over Z_ℓ (half of them in [2^251, 2^252)), for counts that do and
// do not need a refill of the random buffer.
func TestRandomCoefficients(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 2000} {
		high := 0
		for range 2000 / n {
			coef := make([]scalar, n)
			randomCoefficients(coef)
			for _, s := range coef {
				if !lessThanOrder(&s) {
					t.Fatalf("coefficient %v not below ℓ", limbsToBig(s[:]))
				}
				if s[3]>>59 == 1 { // in [2^251, 2^252): half of Z_ℓ
					high++
				}
			}
		}
		if total := 2000 / n * n; high < total/2-100 || high > total/2+100 { // ±4.5σ of Bin(2000, ≈0.5)
			t.Fatalf("n = %d: %d of %d coefficients in [2^251, 2^252), expected about half", n, high, total)
		}
	}
}

// TestInvertBatch checks invertBatch against math/big for lengths 0 to 40
// (both chains, odd and even counts) and values at the extremes.
func TestInvertBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for n := range 41 {
		v := make([]scalar, n)
		want := make([]*big.Int, n)
		for i := range v {
			x := new(big.Int).Mod(randBelow(rng, 256), shamirOrder)
			switch {
			case x.Sign() == 0 || i%7 == 1:
				x.SetInt64(1)
			case i%7 == 2:
				x.Sub(shamirOrder, big.NewInt(1))
			}
			v[i] = bigToScalar(x)
			want[i] = new(big.Int).ModInverse(x, shamirOrder)
		}
		invertBatch(v)
		for i := range v {
			if limbsToBig(v[i][:]).Cmp(want[i]) != 0 {
				t.Fatalf("n = %d, element %d: got %v, want %v", n, i, limbsToBig(v[i][:]), want[i])
			}
		}
	}
}

// newLagrangeBasis returns the basis of xs (distinct, non-zero), computed
// alone, as recoverBatch computes it for a batch of one set (tests and
// benchmarks).
func newLagrangeBasis(xs []ClientID) *lagrangeBasis {
	lb := &lagrangeBasis{inv: make([]scalar, len(xs))}
	num := lagrangeDenominators(xs, lb.inv)
	invertBatch(lb.inv)
	lb.scale = montMul(&num, &pow832)
	return lb
}
