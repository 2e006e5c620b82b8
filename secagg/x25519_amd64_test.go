package secagg

import (
	"math/big"
	mrand "math/rand/v2"
	"testing"
)

// laneValue is lane l of x as an integer (not reduced mod p).
func laneValue(x *fe4, l int) *big.Int {
	v := new(big.Int)
	for i, o := range limbOffsets {
		v.Add(v, new(big.Int).Lsh(new(big.Int).SetUint64(x[i][l]), o))
	}
	return v
}

// randomFE4 draws limbs uniformly up to the given bounds (inclusive), with
// one lane at the bounds themselves (the worst case for overflow).
func randomFE4(rng *mrand.Rand, even, odd uint64) *fe4 {
	var x fe4
	for i := range 10 {
		b := even
		if i%2 == 1 {
			b = odd
		}
		for l := range 4 {
			x[i][l] = rng.Uint64N(b + 1)
		}
		x[i][3] = b
	}
	return &x
}

// checkReduced fails unless every limb of x is within the reduced bounds.
func checkReduced(t *testing.T, what string, x *fe4) {
	t.Helper()
	for i := range 10 {
		b := uint64(1 << 26)
		if i%2 == 1 {
			b = 1<<25 + 1<<17
		}
		for l := range 4 {
			if x[i][l] > b {
				t.Fatalf("%s: limb %d lane %d = %#x above %#x", what, i, l, x[i][l], b)
			}
		}
	}
}

// TestFE4Arithmetic checks the AVX2 field operations against math/big
// modulo p = 2^255 − 19, with operands drawn up to the bounds the ladder
// feeds them (including the bounds exactly), and the outputs' bounds.
func TestFE4Arithmetic(t *testing.T) {
	if !hasLadder4 {
		t.Skip("no AVX2 ladder on this machine")
	}
	rng := mrand.New(mrand.NewPCG(41, 42))
	const reducedEven, reducedOdd = 1 << 26, 1<<25 + 1<<17
	const wideEven, wideOdd = 3<<26 - 1, 3<<25 - 1 // < 1.5·2^27, 1.5·2^26
	mod := func(v *big.Int) *big.Int { return new(big.Int).Mod(v, fieldP) }
	for trial := range 300 {
		a := randomFE4(rng, wideEven, wideOdd)
		b := randomFE4(rng, wideEven, wideOdd)
		r1 := randomFE4(rng, reducedEven, reducedOdd)
		r2 := randomFE4(rng, reducedEven, reducedOdd)
		var z, scratch fe4
		for l := range 4 {
			fe4Mul(&z, a, b)
			if got, want := mod(laneValue(&z, l)), mod(new(big.Int).Mul(laneValue(a, l), laneValue(b, l))); got.Cmp(want) != 0 {
				t.Fatalf("trial %d lane %d: mul %x, want %x", trial, l, got, want)
			}
			checkReduced(t, "mul", &z)
			fe4Sqr(&z, a, &scratch)
			if got, want := mod(laneValue(&z, l)), mod(new(big.Int).Mul(laneValue(a, l), laneValue(a, l))); got.Cmp(want) != 0 {
				t.Fatalf("trial %d lane %d: sqr %x, want %x", trial, l, got, want)
			}
			checkReduced(t, "sqr", &z)
			fe4MulA24(&z, a)
			if got, want := mod(laneValue(&z, l)), mod(new(big.Int).Mul(laneValue(a, l), big.NewInt(121665))); got.Cmp(want) != 0 {
				t.Fatalf("trial %d lane %d: a24 %x, want %x", trial, l, got, want)
			}
			checkReduced(t, "a24", &z)
			fe4Add(&z, r1, r2)
			if got, want := laneValue(&z, l), new(big.Int).Add(laneValue(r1, l), laneValue(r2, l)); got.Cmp(want) != 0 {
				t.Fatalf("trial %d lane %d: add %x, want %x", trial, l, got, want)
			}
			fe4Sub(&z, r1, r2)
			if got, want := mod(laneValue(&z, l)), mod(new(big.Int).Sub(laneValue(r1, l), laneValue(r2, l))); got.Cmp(want) != 0 {
				t.Fatalf("trial %d lane %d: sub %x, want %x", trial, l, got, want)
			}
			for i := range 10 { // the sum and difference stay within the wide bounds
				if z[i][l] > wideEven || (i%2 == 1 && z[i][l] > wideOdd) {
					t.Fatalf("trial %d: sub limb %d = %#x too wide", trial, i, z[i][l])
				}
			}
		}
		// Aliasing the output with an input, as the ladder does.
		c := *a
		fe4Mul(&c, &c, b)
		var want fe4
		fe4Mul(&want, a, b)
		if c != want {
			t.Fatalf("trial %d: aliased mul differs", trial)
		}
		x, y := *r1, *r2
		fe4CSwap(&x, &y, 0)
		if x != *r1 || y != *r2 {
			t.Fatal("swap with mask 0 moved something")
		}
		fe4CSwap(&x, &y, ^uint64(0))
		if x != *r2 || y != *r1 {
			t.Fatal("swap with mask all ones did not swap")
		}
	}
}
