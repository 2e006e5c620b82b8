package secagg

import (
	"fmt"
	"math"
	"math/big"
	oldrand "math/rand"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cloudflare/circl/group"
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

// TestMulAddSmall checks the Horner step a·x + c mod ℓ, and the double
// step a·x² + c1·x + c0, against math/big,
// at the extremes (a, c = ℓ−1, 0; x = 2^32−1, 1) and at random.
func TestMulAddSmall(t *testing.T) {
	ell, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	toBig := func(s scalar) *big.Int {
		b := s.bytes(nil)
		slices.Reverse(b)
		return new(big.Int).SetBytes(b)
	}
	fromBig := func(v *big.Int) scalar {
		b := v.FillBytes(make([]byte, 32))
		slices.Reverse(b)
		return scalarFromBytes(b)
	}
	if toBig(groupOrder).Cmp(ell) != 0 {
		t.Fatal("groupOrder is not ℓ")
	}
	top := new(big.Int).Sub(ell, big.NewInt(1))
	rng := rand.New(rand.NewPCG(3, 4))
	brng := oldrand.New(oldrand.NewSource(5)) // big.Int.Rand's source type
	for trial := range 20000 {
		a, c := new(big.Int).Rand(brng, ell), new(big.Int).Rand(brng, ell)
		x := uint64(rng.Uint32())
		switch trial {
		case 0:
			a, c, x = top, top, math.MaxUint32
		case 1:
			a, c, x = top, big.NewInt(0), 1
		case 2:
			a, c, x = big.NewInt(0), top, math.MaxUint32
		}
		sa, sc := fromBig(a), fromBig(c)
		got := mulAddSmall(&sa, x, &sc)
		want := new(big.Int).Mul(a, new(big.Int).SetUint64(x))
		want.Add(want, c).Mod(want, ell)
		if toBig(got).Cmp(want) != 0 {
			t.Fatalf("%v·%d + %v: got %v, want %v", a, x, c, toBig(got), want)
		}
		// Two steps: a·x² + c·x + a with x < 2^16.
		x16 := x & 0xffff
		if trial == 0 {
			x16 = 0xffff
		}
		got = mulAdd2Small(&sa, x16, &sc, &sa)
		want = new(big.Int).Mul(a, new(big.Int).SetUint64(x16*x16))
		want.Add(want, new(big.Int).Mul(c, new(big.Int).SetUint64(x16)))
		want.Add(want, a).Mod(want, ell)
		if toBig(got).Cmp(want) != 0 {
			t.Fatalf("%v·%d² + %v·%d + %v: got %v, want %v", a, x16, c, x16, a, toBig(got), want)
		}
	}
	coef := make([]scalar, 2000)
	randomCoefficients(coef)
	high := 0
	for _, s := range coef {
		if !lessThanOrder(&s) {
			t.Fatalf("coefficient %v not below ℓ", toBig(s))
		}
		if s[3]>>59 == 1 { // in [2^251, 2^252): half of Z_ℓ
			high++
		}
	}
	if high < 900 || high > 1100 { // ±4.5σ of Bin(2000, ≈0.5)
		t.Fatalf("%d of 2000 coefficients in [2^251, 2^252), expected about half", high)
	}
}
