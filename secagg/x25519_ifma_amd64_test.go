package secagg

import (
	"crypto/rand"
	"encoding/hex"
	"math/big"
	mrand "math/rand/v2"
	"testing"

	"github.com/cloudflare/circl/dh/x25519"
	fp "github.com/cloudflare/circl/math/fp25519"
)

// Limb bounds of the IFMA arithmetic (gen_fe8.go): what the instructions
// read, reduced and wide limbs (exclusive).
const (
	ifmaBound    = 1 << 52
	reducedBound = 1<<51 + 1<<16
	wideBound    = 267 << 52
	carryBound   = 1 << 62
)

// laneValue8 is lane l of x as an integer (not reduced mod p).
func laneValue8(x *fe8, l int) *big.Int {
	v := new(big.Int)
	for i := range 5 {
		v.Add(v, new(big.Int).Lsh(new(big.Int).SetUint64(x[i][l]), 51*uint(i)))
	}
	return v
}

// randomFE8 draws limbs uniformly below bound, with lane 7 at bound − 1
// in every limb and lane 6 mixing bound − 1 and 0 (the worst cases for
// overflow).
func randomFE8(rng *mrand.Rand, bound uint64) *fe8 {
	var x fe8
	for i := range 5 {
		for l := range 8 {
			x[i][l] = rng.Uint64N(bound)
		}
		x[i][7] = bound - 1
		x[i][6] = (bound - 1) * uint64(rng.IntN(2))
	}
	return &x
}

// checkBound fails unless every limb of x is below bound.
func checkBound(t *testing.T, what string, x *fe8, bound uint64) {
	t.Helper()
	for i := range 5 {
		for l := range 8 {
			if x[i][l] >= bound {
				t.Fatalf("%s: limb %d lane %d = %#x, not below %#x", what, i, l, x[i][l], bound)
			}
		}
	}
}

func modP(v *big.Int) *big.Int { return new(big.Int).Mod(v, fieldP) }

// TestFE8Arithmetic checks the IFMA field operations against math/big
// modulo p = 2^255 − 19, with operands drawn up to the bounds each
// accepts (and at them), and the bounds of the results.
func TestFE8Arithmetic(t *testing.T) {
	if !cpuLadder8 {
		t.Skip("no IFMA ladder on this machine")
	}
	rng := mrand.New(mrand.NewPCG(43, 44))
	check := func(trial int, what string, got *fe8, bound uint64, want func(l int) *big.Int) {
		t.Helper()
		checkBound(t, what, got, bound)
		for l := range 8 {
			if g, w := modP(laneValue8(got, l)), modP(want(l)); g.Cmp(w) != 0 {
				t.Fatalf("trial %d lane %d: %s %x, want %x", trial, l, what, g, w)
			}
		}
	}
	for trial := range 500 {
		a, b := randomFE8(rng, ifmaBound), randomFE8(rng, ifmaBound)
		w1, w2 := randomFE8(rng, wideBound), randomFE8(rng, wideBound)
		r1, r2 := randomFE8(rng, reducedBound), randomFE8(rng, reducedBound)
		c := randomFE8(rng, carryBound)
		var z, e, f fe8
		fe8Mul(&z, a, b)
		check(trial, "mul", &z, wideBound, func(l int) *big.Int { return new(big.Int).Mul(laneValue8(a, l), laneValue8(b, l)) })
		fe8Sqr(&z, a)
		check(trial, "sqr", &z, wideBound, func(l int) *big.Int { return new(big.Int).Mul(laneValue8(a, l), laneValue8(a, l)) })
		fe8Carry(&z, c)
		check(trial, "carry", &z, reducedBound, func(l int) *big.Int { return laneValue8(c, l) })
		fe8AddCarry(&z, w1, w2)
		check(trial, "add", &z, reducedBound, func(l int) *big.Int { return new(big.Int).Add(laneValue8(w1, l), laneValue8(w2, l)) })
		fe8SubCarry(&z, w1, w2)
		check(trial, "sub", &z, reducedBound, func(l int) *big.Int { return new(big.Int).Sub(laneValue8(w1, l), laneValue8(w2, l)) })
		fe8MulA24(&e, &f, r1, r2)
		check(trial, "a24 e", &e, reducedBound, func(l int) *big.Int { return new(big.Int).Sub(laneValue8(r1, l), laneValue8(r2, l)) })
		check(trial, "a24 f", &f, reducedBound, func(l int) *big.Int {
			e := new(big.Int).Sub(laneValue8(r1, l), laneValue8(r2, l))
			return e.Add(e.Mul(e, big.NewInt(121665)), laneValue8(r1, l))
		})

		// Aliasing the output with an input, as the ladder does; the
		// product is symmetric limb for limb.
		m := *a
		fe8Mul(&m, &m, b)
		var want fe8
		fe8Mul(&want, b, a)
		if m != want {
			t.Fatalf("trial %d: aliased or swapped mul differs", trial)
		}
		s := *a
		fe8Sqr(&s, &s)
		fe8Mul(&want, a, a)
		if s != want {
			t.Fatalf("trial %d: sqr differs from mul, limb for limb", trial)
		}
		x, y := *r1, *r2
		fe8CSwap(&x, &y, 0)
		if x != *r1 || y != *r2 {
			t.Fatal("swap with mask 0 moved something")
		}
		fe8CSwap(&x, &y, ^uint64(0))
		if x != *r2 || y != *r1 {
			t.Fatal("swap with mask all ones did not swap")
		}
	}
}

// ladderStep8Ref is ladderStep8 composed of the single operations (each
// checked against math/big by TestFE8Arithmetic), in the same order, so
// the fused step must match it limb for limb.
func ladderStep8Ref(s *ladder8, mask uint64) {
	fe8CSwap(&s.x2, &s.x3, mask)
	fe8CSwap(&s.z2, &s.z3, mask)
	var a, b, c, d, da, cb, aa, bb, sum, diff, e, f fe8
	fe8AddCarry(&a, &s.x2, &s.z2)
	fe8SubCarry(&b, &s.x2, &s.z2)
	fe8AddCarry(&c, &s.x3, &s.z3)
	fe8SubCarry(&d, &s.x3, &s.z3)
	fe8Mul(&da, &d, &a)
	fe8Mul(&cb, &c, &b)
	fe8Sqr(&aa, &a)
	fe8Carry(&aa, &aa)
	fe8Sqr(&bb, &b)
	fe8Carry(&bb, &bb)
	fe8AddCarry(&sum, &da, &cb)
	fe8SubCarry(&diff, &da, &cb)
	fe8Sqr(&s.x3, &sum)
	fe8Mul(&s.x2, &aa, &bb)
	fe8Sqr(&diff, &diff)
	fe8Carry(&diff, &diff)
	fe8MulA24(&e, &f, &aa, &bb)
	fe8Mul(&s.z3, &diff, &s.x1)
	fe8Mul(&s.z2, &e, &f)
}

// TestLadderStep8MatchesOps checks the fused ladder step against
// ladderStep8Ref on random states with wide limbs up to the bound (x1
// reduced), both swap masks, and that the results are the RFC 7748, §5
// formulas modulo p.
func TestLadderStep8MatchesOps(t *testing.T) {
	if !cpuLadder8 {
		t.Skip("no IFMA ladder on this machine")
	}
	rng := mrand.New(mrand.NewPCG(45, 46))
	for trial := range 300 {
		st := newLadder8()
		st.x1 = *randomFE8(rng, 1<<51)
		st.x2, st.z2 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
		st.x3, st.z3 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
		ref := *st
		mask := -uint64(trial % 2)
		ladderStep8(st, mask)
		ladderStep8Ref(&ref, mask)
		if st.x2 != ref.x2 || st.z2 != ref.z2 || st.x3 != ref.x3 || st.z3 != ref.z3 {
			t.Fatalf("trial %d: fused step differs from the single operations", trial)
		}
		for _, v := range []*fe8{&st.x2, &st.z2, &st.x3, &st.z3} {
			checkBound(t, "step", v, wideBound)
		}
	}
	// The formulas, in math/big, for one state.
	st := newLadder8()
	st.x1 = *randomFE8(rng, 1<<51)
	st.x2, st.z2 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
	st.x3, st.z3 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
	in := *st
	ladderStep8(st, 0)
	for l := range 8 {
		x1, x2, z2 := laneValue8(&in.x1, l), laneValue8(&in.x2, l), laneValue8(&in.z2, l)
		x3, z3 := laneValue8(&in.x3, l), laneValue8(&in.z3, l)
		mul := func(a, b *big.Int) *big.Int { return modP(new(big.Int).Mul(a, b)) }
		add := func(a, b *big.Int) *big.Int { return modP(new(big.Int).Add(a, b)) }
		sub := func(a, b *big.Int) *big.Int { return modP(new(big.Int).Sub(a, b)) }
		A, B, C, D := add(x2, z2), sub(x2, z2), add(x3, z3), sub(x3, z3)
		AA, BB, DA, CB := mul(A, A), mul(B, B), mul(D, A), mul(C, B)
		E := sub(AA, BB)
		want := []*big.Int{
			mul(AA, BB),
			mul(E, add(AA, mul(big.NewInt(121665), E))),
			mul(add(DA, CB), add(DA, CB)),
			mul(x1, mul(sub(DA, CB), sub(DA, CB))),
		}
		for i, v := range []*fe8{&st.x2, &st.z2, &st.x3, &st.z3} {
			if got := modP(laneValue8(v, l)); got.Cmp(want[i]) != 0 {
				t.Fatalf("lane %d, output %d: %x, want %x", l, i, got, want[i])
			}
		}
	}
}

// sharedBatch8 is sharedBatch on the IFMA ladder whatever the batch size.
func sharedBatch8(out []x25519.Key, ok []bool, sk *x25519.Key, pks []*x25519.Key) {
	k := *sk
	k[0] &= 248
	k[31] = k[31]&127 | 64
	xs, zs := make([]fp.Elt, len(pks)), make([]fp.Elt, len(pks))
	ladder8Batch(xs, zs, &k, pks)
	toAffineBatch(out, ok, xs, zs)
}

// TestLadder8MatchesCircl checks sharedBatch8, the IFMA ladder, against
// x25519.Shared (value and ok) for batch sizes 1 to 17 (full and partial
// groups of eight), many random keys and the edge inputs: u = 0, 1,
// p − 1, p, p + 1, 2^255 − 1 and other non-canonical u ≥ p, set top bits,
// the low-order points (lowOrderPoints) and their encodings u + p.
func TestLadder8MatchesCircl(t *testing.T) {
	if !cpuLadder8 {
		t.Skip("no IFMA ladder on this machine")
	}
	var pool []x25519.Key
	for _, pt := range lowOrderPoints {
		pool = append(pool, x25519.Key(pt))
		u := new(big.Int).SetBytes(reverse(pt[:]))
		if w := new(big.Int).Add(u, fieldP); w.BitLen() <= 255 {
			pool = append(pool, x25519.Key(reverse(w.FillBytes(make([]byte, 32)))))
		}
		top := x25519.Key(pt)
		top[31] |= 128
		pool = append(pool, top)
	}
	for _, d := range []int64{-1, 0, 1, 2, 3, 18} { // p − 1 … p + 18 = 2^255 − 1
		w := new(big.Int).Add(fieldP, big.NewInt(d))
		pool = append(pool, x25519.Key(reverse(w.FillBytes(make([]byte, 32)))))
	}
	for _, h := range []string{
		"0900000000000000000000000000000000000000000000000000000000000000",
		"0900000000000000000000000000000000000000000000000000000000000080",
		"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
		"0000000000000000000000000000000000000000000000000000000000000080",
	} {
		pool = append(pool, mustHex(t, h))
	}
	special := len(pool)
	for range 60 {
		var sk, pk x25519.Key
		rand.Read(sk[:])
		x25519.KeyGen(&pk, &sk)
		pool = append(pool, pk)
		var raw x25519.Key
		rand.Read(raw[:])
		pool = append(pool, raw)
	}
	rng := mrand.New(mrand.NewPCG(7, 8))
	for size := 1; size <= 17; size++ {
		for trial := range 8 {
			var sk x25519.Key
			rand.Read(sk[:])
			if trial == 1 { // all scalar bits that clamping leaves set
				for i := range sk {
					sk[i] = 0xff
				}
			}
			pks := make([]*x25519.Key, size)
			for i := range pks {
				pks[i] = &pool[rng.IntN(len(pool))]
				if trial == 0 {
					pks[i] = &pool[(size*3+i)%special]
				}
			}
			checkAgainstCircl(t, sharedBatch8, &sk, pks)
		}
	}
}

// TestLadder8RFC7748 runs the test vectors of RFC 7748, §5.2 on the IFMA
// ladder: the two scalar multiplications, and the iteration k, u ← X25519(k,
// u), k after 1 and 1,000 iterations (batches of one: each depends on the
// last).
func TestLadder8RFC7748(t *testing.T) {
	if !cpuLadder8 {
		t.Skip("no IFMA ladder on this machine")
	}
	for _, c := range []struct{ k, u, want string }{
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
			"e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
			"c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
			"e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
			"95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
	} {
		k, u, want := mustHex(t, c.k), mustHex(t, c.u), mustHex(t, c.want)
		out, ok := make([]x25519.Key, 1), make([]bool, 1)
		sharedBatch8(out, ok, &k, []*x25519.Key{&u})
		if !ok[0] || out[0] != want {
			t.Fatalf("X25519(%x, %x) = %x, want %x", k, u, out[0], want)
		}
	}
	k, u := mustHex(t, "0900000000000000000000000000000000000000000000000000000000000000"), mustHex(t, "0900000000000000000000000000000000000000000000000000000000000000")
	after := map[int]string{
		1:    "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079",
		1000: "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51",
	}
	n := 1000
	if testing.Short() {
		n = 1
	}
	out, ok := make([]x25519.Key, 1), make([]bool, 1)
	for i := 1; i <= n; i++ {
		sharedBatch8(out, ok, &k, []*x25519.Key{&u})
		u, k = k, out[0]
		if w, found := after[i]; found && hex.EncodeToString(k[:]) != w {
			t.Fatalf("after %d iterations k = %x, want %s", i, k, w)
		}
	}
}

// BenchmarkLadderStep8 is one step of eight ladders (ladderStep8); a
// batch of k agreements costs about 255·k/8 of them.
func BenchmarkLadderStep8(b *testing.B) {
	if !cpuLadder8 {
		b.Skip("no IFMA ladder on this machine")
	}
	st := newLadder8()
	for l := range 8 {
		st.x2[0][l] = 1
	}
	for b.Loop() {
		ladderStep8(st, 0)
	}
}

// TestLadderMasks8 checks the per-lane masks (bit-matrix transposes)
// against ladderMasks of each lane's scalar alone, on random clamped and
// unclamped scalars and on the edge secrets.
func TestLadderMasks8(t *testing.T) {
	edge := keyGenEdgeSecrets()
	rng := mrand.New(mrand.NewPCG(7, 8))
	for trial := range 200 {
		var ks [8]x25519.Key
		for l := range ks {
			if trial%2 == 0 {
				ks[l] = edge[rng.IntN(len(edge))]
			} else {
				for i := range ks[l] {
					ks[l][i] = byte(rng.Uint32())
				}
			}
			if trial%3 == 0 {
				ks[l][0] &= 248
				ks[l][31] = ks[l][31]&127 | 64
			}
		}
		steps, final := ladderMasks8(&ks)
		for l := range ks {
			want, wantFinal := ladderMasks(&ks[l])
			for i := range steps {
				if got := steps[i] >> l & 1; got != want[i]&1 {
					t.Fatalf("trial %d lane %d step %d: bit %d, want %d", trial, l, i, got, want[i]&1)
				}
			}
			if final>>l&1 != wantFinal&1 {
				t.Fatalf("trial %d lane %d: final bit %d, want %d", trial, l, final>>l&1, wantFinal&1)
			}
		}
		for i := range steps {
			if steps[i]>>8 != 0 {
				t.Fatalf("step %d: mask %#x beyond the eight lanes", i, steps[i])
			}
		}
	}
}

// TestLadderStep8LaneMasks checks that a mask with a bit per lane swaps
// exactly the lanes whose bit is set (what keyGen8Batch relies on): on
// random states, each lane of the step (and of fe8CSwap) under a random
// 8-bit mask equals the same lane under the shared mask of its bit, all
// ones or zero; bits 8–63 must not matter.
func TestLadderStep8LaneMasks(t *testing.T) {
	if !cpuLadder8 {
		t.Skip("no IFMA ladder on this machine")
	}
	rng := mrand.New(mrand.NewPCG(47, 48))
	sameLane := func(a, b *fe8, l int) bool {
		for i := range a {
			if a[i][l] != b[i][l] {
				return false
			}
		}
		return true
	}
	for trial := range 200 {
		st := newLadder8()
		st.x1 = *randomFE8(rng, 1<<51)
		st.x2, st.z2 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
		st.x3, st.z3 = *randomFE8(rng, wideBound), *randomFE8(rng, wideBound)
		in := *st
		mask := rng.Uint64() & 0xff
		high := rng.Uint64() &^ 0xff // ignored bits
		if trial%2 == 0 {
			high = 0
		}
		none, all := newLadder8(), newLadder8()
		*none, *all = in, in
		ladderStep8(st, mask|high)
		ladderStep8(none, 0)
		ladderStep8(all, ^uint64(0))
		x, y := in.x2, in.x3
		fe8CSwap(&x, &y, mask|high)
		for l := range 8 {
			want, wx, wy := none, in.x2, in.x3
			if mask>>l&1 == 1 {
				want, wx, wy = all, in.x3, in.x2
			}
			for i, v := range []*fe8{&st.x2, &st.z2, &st.x3, &st.z3} {
				w := []*fe8{&want.x2, &want.z2, &want.x3, &want.z3}[i]
				if !sameLane(v, w, l) {
					t.Fatalf("trial %d, mask %#x: lane %d, output %d differs from its shared-mask step", trial, mask|high, l, i)
				}
			}
			if !sameLane(&x, &wx, l) || !sameLane(&y, &wy, l) {
				t.Fatalf("trial %d, mask %#x: fe8CSwap lane %d", trial, mask|high, l)
			}
		}
	}
}

// BenchmarkKeyGenMasks is ladderMasks8, the per-lane swap masks of eight
// scalars, against ladderMasks for one shared scalar: what a group of
// keyGen8Batch adds to one of ladder8Batch besides the ladder itself.
func BenchmarkKeyGenMasks(b *testing.B) {
	var ks [8]x25519.Key
	for l := range ks {
		rand.Read(ks[l][:])
	}
	b.Run("lanes", func(b *testing.B) {
		for b.Loop() {
			ladderMasks8(&ks)
		}
	})
	b.Run("shared", func(b *testing.B) {
		for b.Loop() {
			ladderMasks(&ks[0])
		}
	})
}
