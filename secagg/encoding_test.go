package secagg

import (
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"
)

func TestNewEncodingBound(t *testing.T) {
	for _, c := range []struct {
		n    int
		clip float64
	}{{1, 1}, {2, 0.5}, {10, 1}, {1000, 0.1}, {1000, 1}, {1 << 16, 1}, {100, 1e-6}, {3, 1000}} {
		e, err := NewEncoding(c.n, c.clip)
		if err != nil {
			t.Fatalf("NewEncoding(%d, %v): %v", c.n, c.clip, err)
		}
		fits := func(f int) bool { return float64(c.n)*(c.clip*math.Exp2(float64(f))+1) <= math.MaxInt32 }
		if e.FracBits < 8 || e.FracBits > 30 || !fits(e.FracBits) || (e.FracBits < 30 && fits(e.FracBits+1)) {
			t.Fatalf("NewEncoding(%d, %v) = %d fractional bits: not the largest that fits", c.n, c.clip, e.FracBits)
		}
	}
	for _, c := range []struct {
		n    int
		clip float64
	}{{0, 1}, {10, 0}, {10, -1}, {10, math.NaN()}, {10, math.Inf(1)}, {1 << 20, 100}} {
		if _, err := NewEncoding(c.n, c.clip); err == nil {
			t.Errorf("NewEncoding(%d, %v) did not fail", c.n, c.clip)
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	e, _ := NewEncoding(100, 2)
	x := make([]float32, 10000)
	for i := range x {
		x[i] = float32(4*rng.Float64() - 2)
	}
	x[0], x[1] = 2, -2
	enc := make([]uint32, len(x))
	e.Encode(enc, x, rng)
	dec := make([]float64, len(x))
	e.Decode(dec, enc)
	ulp := math.Exp2(-float64(e.FracBits))
	for i := range x {
		if d := math.Abs(dec[i] - float64(x[i])); d >= ulp {
			t.Fatalf("x[%d] = %v decodes to %v, error %g ≥ 2^−f", i, x[i], dec[i], d)
		}
	}
	// Out-of-range values clamp to ±clip, NaN to 0.
	e.Encode(enc[:4], []float32{3, -1e30, float32(math.NaN()), float32(math.Inf(1))}, rng)
	e.Decode(dec[:4], enc[:4])
	if dec[0] != 2 || dec[1] != -2 || dec[2] != 0 || dec[3] != 2 {
		t.Fatalf("clamping: got %v, want [2 -2 0 2]", dec[:4])
	}
}

// TestEncodeUnbiased checks E[decode(encode(x))] ≈ x statistically, with
// a fixed seed so that it is reproducible: for values whose scaled
// fraction φ is 0.3, 0.5, 0.9 or 1/3 (and their negatives), round-to-
// nearest or truncation would be off by up to φ·2^−f, while stochastic
// rounding's mean over N entries is within a few standard errors
// √(φ(1−φ)/N)·2^−f of x (the 2^−(f+32) granularity of u is far below
// that). 6 standard errors: a correct implementation fails with
// probability < 10^−8 per case; a biased one (say by 0.01 units) fails.
func TestEncodeUnbiased(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{5, 6}))
	for _, f := range []int{10, 30} {
		e := Encoding{FracBits: f, Clip: 1}
		ulp := math.Exp2(-float64(f))
		for _, frac := range []float64{0.3, 0.5, 0.9, 1.0 / 3} {
			for _, sign := range []float64{1, -1} {
				v := float32(sign * (37 + frac) * ulp)
				const N = 200_000
				x := make([]float32, N)
				for i := range x {
					x[i] = v
				}
				enc := make([]uint32, N)
				e.Encode(enc, x, rng)
				dec := make([]float64, N)
				e.Decode(dec, enc)
				var sum float64
				for _, d := range dec {
					sum += d
				}
				mean := sum / N
				phi := float64(v)/ulp - math.Floor(float64(v)/ulp)
				se := math.Sqrt(phi*(1-phi)/N) * ulp
				if math.Abs(mean-float64(v)) > 6*se {
					t.Errorf("f=%d value %v (fraction %v): mean %v, want %v ± %v", f, v, phi, mean, float64(v), 6*se)
				}
			}
		}
	}
}

// TestEncodeUnbiasedAcrossCalls checks the expectation over the seed that
// Encode draws from rng per call, not just over one call's entries: the
// same entry (first and last position, fast path and tail) averaged over
// N calls must be within 6 standard errors of x·2^f.
func TestEncodeUnbiasedAcrossCalls(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{9}))
	e := Encoding{FracBits: 12, Clip: 1}
	const phi = 0.7
	v := float32((-5 + phi) / 4096)
	x := []float32{v, 0, 0, 0, 0, v} // v in the first block and in the tail
	enc := make([]uint32, len(x))
	const N = 100_000
	var up [2]int
	for range N {
		e.Encode(enc, x, rng)
		for k, i := range []int{0, 5} {
			switch int32(enc[i]) {
			case -4:
				up[k]++
			case -5:
			default:
				t.Fatalf("entry %d encodes to %d, want −5 or −4", i, int32(enc[i]))
			}
		}
	}
	se := math.Sqrt(phi * (1 - phi) / N)
	for k, u := range up {
		if p := float64(u) / N; math.Abs(p-phi) > 6*se {
			t.Errorf("position %d: rounded up in %v of calls, want %v ± %v", k, p, phi, 6*se)
		}
	}
}

// TestEncodeWorstCaseNoWrap sums n vectors at ±clip in Z_{2^32} and checks
// that the decoded sum equals the exact integer sum of the encodings: no
// wrap-around, even at the edge of NewEncoding's bound.
func TestEncodeWorstCaseNoWrap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		n    int
		clip float64
	}{{2, 1}, {1000, 1}, {1 << 14, 0.37}, {5000, 3}} {
		e, err := NewEncoding(c.n, c.clip)
		if err != nil {
			t.Fatal(err)
		}
		for _, sign := range []float32{1, -1} {
			x := []float32{sign * float32(c.clip), sign * float32(c.clip)}
			enc := make([]uint32, 2)
			sum := make([]uint32, 2)
			var exact [2]int64
			for range c.n {
				e.Encode(enc, x, rng)
				for i := range enc {
					sum[i] += enc[i]
					exact[i] += int64(int32(enc[i]))
				}
			}
			dec := make([]float64, 2)
			e.Decode(dec, sum)
			for i := range dec {
				if want := float64(exact[i]) * math.Exp2(-float64(e.FracBits)); dec[i] != want {
					t.Fatalf("n=%d clip=%v sign=%v: decoded sum %v, exact %v (wrapped)", c.n, c.clip, sign, dec[i], want)
				}
				if math.Abs(dec[i]-float64(c.n)*float64(x[i])) > float64(c.n)*math.Exp2(-float64(e.FracBits)) {
					t.Fatalf("n=%d clip=%v: decoded sum %v far from n·clip", c.n, c.clip, dec[i])
				}
			}
		}
	}
}

func TestRoundingSlack(t *testing.T) {
	e := Encoding{FracBits: 16}
	if got, want := e.RoundingSlack(10000), 100*math.Exp2(-16); got != want {
		t.Fatalf("RoundingSlack = %v, want %v", got, want)
	}
}

// refXoroshiro128pp is the test's own transcription of the published
// xoroshiro128++ reference code (Blackman and Vigna, xoroshiro128plusplus.c),
// kept apart from the package's so that the reference encoding below does
// not share its code.
type refXoroshiro128pp struct{ s [2]uint64 }

// next returns the generator's next output and advances it.
func (g *refXoroshiro128pp) next() uint64 {
	rotl := func(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }
	s0, s1 := g.s[0], g.s[1]
	result := rotl(s0+s1, 17) + s0
	s1 ^= s0
	g.s[0] = rotl(s0, 49) ^ s1 ^ (s1 << 21)
	g.s[1] = rotl(s1, 28)
	return result
}

// TestXoroshiro128ppReference pins both the package's generator step and
// the test's transcription to the reference implementation's outputs for
// the state (1, 2), as published with rand_xoshiro's test suite.
func TestXoroshiro128ppReference(t *testing.T) {
	want := []uint64{393217, 669327710093319, 1732421326133921491, 11394790081659126983,
		9555452776773192676, 3586421180005889563, 1691397964866707553,
		10735626796753111697, 15216282715349408991, 14247243556711267923}
	ref := refXoroshiro128pp{[2]uint64{1, 2}}
	s0, s1 := uint64(1), uint64(2)
	for i, w := range want {
		var got uint64
		got, s0, s1 = xoroshiro128pp(s0, s1)
		if got != w {
			t.Fatalf("xoroshiro128pp output %d = %d, want %d", i, got, w)
		}
		if r := ref.next(); r != w {
			t.Fatalf("reference transcription output %d = %d, want %d", i, r, w)
		}
	}
}

// refRoundingBits returns the 32-bit rounding values that Encode's doc
// promises for n entries when rng yields seed for Encode's four draws:
// entries 4j, 4j+1 take the low and high halves of the first generator's
// j-th output, 4j+2, 4j+3 those of the second's.
func refRoundingBits(seed [4]uint64, n int) []uint32 {
	g0 := refXoroshiro128pp{[2]uint64{seed[0], seed[1]}}
	g1 := refXoroshiro128pp{[2]uint64{seed[2], seed[3]}}
	u := make([]uint32, 0, n+3)
	for len(u) < n {
		r, q := g0.next(), g1.next()
		u = append(u, uint32(r), uint32(r>>32), uint32(q), uint32(q>>32))
	}
	return u[:n]
}

// refEncode is Encode's documented value computed in exact rational
// arithmetic: x̂ = x clamped to ±c (c = Clip, or (2^31−1)·2^−f when Clip is
// not positive or larger) with NaN as 0, then
// ⌊(trunc(x̂·2^(f+32)) + u) / 2^32⌋. It also returns x̂·2^f.
func refEncode(e Encoding, x float32, u uint32) (int64, *big.Rat) {
	pow2 := func(k int) *big.Rat { // 2^k, exactly
		r := new(big.Rat)
		if k >= 0 {
			return r.SetInt(new(big.Int).Lsh(big.NewInt(1), uint(k)))
		}
		return r.SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), uint(-k)))
	}
	f := e.FracBits
	c := new(big.Rat).Mul(big.NewRat(math.MaxInt32, 1), pow2(-f))
	if e.Clip > 0 && !math.IsInf(e.Clip, 1) {
		if cl := new(big.Rat).SetFloat64(e.Clip); cl.Cmp(c) < 0 {
			c = cl
		}
	}
	xh := new(big.Rat)
	switch {
	case x != x:
	case math.IsInf(float64(x), 1):
		xh.Set(c)
	case math.IsInf(float64(x), -1):
		xh.Neg(c)
	default:
		xh.SetFloat64(float64(x))
		if xh.Cmp(c) > 0 {
			xh.Set(c)
		} else if xh.Cmp(new(big.Rat).Neg(c)) < 0 {
			xh.Neg(c)
		}
	}
	X := new(big.Rat).Mul(xh, pow2(f))
	t := new(big.Rat).Mul(X, pow2(32))
	a := new(big.Int).Quo(t.Num(), t.Denom()) // truncates toward zero
	a.Add(a, new(big.Int).SetUint64(uint64(u)))
	a.Div(a, new(big.Int).Lsh(big.NewInt(1), 32)) // Euclidean: floor for a positive divisor
	return a.Int64(), X
}

// testClip is the c that Encode's doc defines for e: Clip, or the int32
// bound (2^31−1)·2^−f when Clip is not positive or exceeds it.
func testClip(e Encoding) float64 {
	c := math.Ldexp(math.MaxInt32, -e.FracBits)
	if e.Clip > 0 && e.Clip < c {
		c = e.Clip
	}
	return c
}

// encodeTestValues returns inputs that exercise e's edges: random values
// within and beyond ±Clip at many magnitudes (down to subnormals), ±Clip
// exactly and the float32s next to it, values whose x·2^f or x·2^(f+32) is
// an integer, ±0, ±Inf, NaN and the extreme float32s.
func encodeTestValues(e Encoding, rng *rand.Rand, n int) []float32 {
	c := testClip(e)
	c32 := float32(c)
	ulp := math.Ldexp(1, -e.FracBits)
	special := []float32{
		0, float32(math.Copysign(0, -1)), c32, -c32,
		math.Nextafter32(c32, 0), -math.Nextafter32(c32, 0),
		math.Nextafter32(c32, float32(math.Inf(1))), -math.Nextafter32(c32, float32(math.Inf(1))),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
		float32(ulp), float32(-ulp), float32(3 * ulp), float32(-7 * ulp),
		float32(ulp / 2), float32(-ulp / 2), float32(ulp * 0x1p-32), float32(-ulp * 0x1p-33),
		float32(c * 0.5), float32(-c * 0.999), float32(2 * c), float32(-3 * c),
	}
	x := make([]float32, 0, n+len(special))
	for len(x) < n {
		var v float64
		switch rng.IntN(4) {
		case 0: // uniform over ±1.25c: mostly in range, some clamped
			v = (2*rng.Float64() - 1) * 1.25 * c
		case 1: // log-uniform magnitudes from subnormal to c
			v = c * math.Exp2(-160*rng.Float64())
		case 2: // an integer multiple of 2^−f, possibly plus a dyadic bit
			v = float64(rng.IntN(int(math.Min(c/ulp, 1<<20))+1)) * ulp
			if rng.IntN(2) == 0 {
				v += ulp * math.Ldexp(1, -rng.IntN(40))
			}
		default: // one of the special values
			x = append(x, special[rng.IntN(len(special))])
			continue
		}
		if rng.IntN(2) == 0 {
			v = -v
		}
		x = append(x, float32(v))
	}
	return append(x, special...)
}

// TestEncodeMatchesReference compares Encode with refEncode on the same
// rounding bits (seeded identically), for encodings from NewEncoding and
// built by hand (f = 8 and 30, a non-dyadic clip, Clip 0, and f outside
// [8, 30]), at lengths that leave every tail length and put out-of-range
// entries into some blocks only. It also checks the documented bounds
// directly: the result is ⌊x̂·2^f⌋ or ⌈x̂·2^f⌉ and in the int32 range.
func TestEncodeMatchesReference(t *testing.T) {
	var encs []Encoding
	for _, c := range []struct {
		n    int
		clip float64
	}{{120, 1}, {1, 1}, {10, 0.37}, {1000, 1e-6}, {3, 1000}} {
		e, err := NewEncoding(c.n, c.clip)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, e)
	}
	encs = append(encs,
		Encoding{FracBits: 8, Clip: 0.1}, Encoding{FracBits: 8, Clip: 1e6},
		Encoding{FracBits: 30, Clip: 1}, Encoding{FracBits: 30, Clip: 0.3},
		Encoding{FracBits: 16}, Encoding{FracBits: 16, Clip: -1}, Encoding{FracBits: 16, Clip: math.NaN()},
		Encoding{FracBits: 16, Clip: math.Inf(1)}, Encoding{FracBits: 10, Clip: 1e9},
		Encoding{FracBits: 0, Clip: 100}, Encoding{FracBits: -5}, Encoding{FracBits: 31},
		Encoding{FracBits: 62, Clip: 1e-12}, Encoding{FracBits: 95}, Encoding{FracBits: 96}, Encoding{FracBits: 200})
	data := rand.New(rand.NewPCG(11, 12))
	for _, e := range encs {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 9, 4000, 4001, 4002, 4003} {
			x := encodeTestValues(e, data, n)
			x = x[:n+data.IntN(len(x)-n+1)]
			if n < 10 { // keep the short cases short, to test the tail alone
				x = x[:n]
				for i := range x {
					x[i] = float32((2*data.Float64() - 1) * 1.5 * math.Min(testClip(e), 1e3))
				}
			}
			seed := [32]byte{byte(n), byte(e.FracBits)}
			var want [4]uint64
			ref := rand.New(rand.NewChaCha8(seed))
			for i := range want {
				want[i] = ref.Uint64()
			}
			u := refRoundingBits(want, len(x))
			dst := make([]uint32, len(x))
			e.Encode(dst, x, rand.New(rand.NewChaCha8(seed)))
			for i, v := range x {
				got := int64(int32(dst[i]))
				w, X := refEncode(e, v, u[i])
				if got != w {
					t.Fatalf("%+v: Encode(x[%d] = %v) = %d, reference %d (x̂·2^f = %v, u = %#x)", e, i, v, got, w, X.FloatString(12), u[i])
				}
				if e.FracBits < 0 || e.FracBits > 30 {
					continue
				}
				fl := new(big.Int).Div(X.Num(), X.Denom()) // ⌊X⌋
				if g := big.NewInt(got); g.Cmp(fl) != 0 && (X.IsInt() || g.Cmp(fl.Add(fl, big.NewInt(1))) != 0) {
					t.Fatalf("%+v: Encode(%v) = %d is not ⌊x̂·2^f⌋ or ⌈x̂·2^f⌉ (x̂·2^f = %v)", e, v, got, X.FloatString(12))
				}
				if got > math.MaxInt32 || got < -math.MaxInt32 {
					t.Fatalf("%+v: Encode(%v) = %d beyond ±(2^31−1)", e, v, got)
				}
			}
		}
	}
}

// TestEncodeRangeAnyF checks that entries stay in ±(2^31−1) for any f,
// including f far outside what NewEncoding returns, where the doc promises
// only that.
func TestEncodeRangeAnyF(t *testing.T) {
	x := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32,
		-math.MaxFloat32, 1, -1, math.SmallestNonzeroFloat32, 0, 3e-30, -7e20}
	dst := make([]uint32, len(x))
	rng := rand.New(rand.NewChaCha8([32]byte{3}))
	for _, f := range []int{-5000, -2000, -1100, -64, 0, 40, 127, 1000, 1080, 1100, 5000} {
		for _, clip := range []float64{0, 1, 1e-300, 5e-324, 1e300} {
			e := Encoding{FracBits: f, Clip: clip}
			e.Encode(dst, x, rng)
			for i, d := range dst {
				if int32(d) == math.MinInt32 {
					t.Fatalf("%+v: Encode(%v) = −2^31", e, x[i])
				}
			}
			if dst[2] != 0 {
				t.Fatalf("%+v: NaN encodes as %d", e, int32(dst[2]))
			}
		}
	}
}

// TestEncodeBoundaries spells out the cases the doc names, independently
// of the reference: ±Clip and ±Inf decode to ±Clip exactly when Clip·2^f is
// an integer, NaN and ±0 to 0, values with x·2^f an integer exactly, the
// float32s just inside ±Clip within 2^−f, and those just outside clamp.
func TestEncodeBoundaries(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{4}))
	for _, f := range []int{8, 17, 30} {
		ulp := math.Exp2(-float64(f))
		clip := 1.5
		e := Encoding{FracBits: f, Clip: clip}
		in := math.Nextafter32(float32(clip), 0)
		out := math.Nextafter32(float32(clip), 2)
		x := []float32{float32(clip), float32(-clip), float32(math.Inf(1)), float32(math.Inf(-1)),
			float32(math.NaN()), 0, float32(math.Copysign(0, -1)), out, -out, 1e30, -1e30,
			float32(5 * ulp), float32(-9 * ulp), float32(ulp), in, -in}
		for range 50 {
			dst := make([]uint32, len(x))
			e.Encode(dst, x, rng)
			dec := make([]float64, len(x))
			e.Decode(dec, dst)
			want := []float64{clip, -clip, clip, -clip, 0, 0, 0, clip, -clip, clip, -clip, 5 * ulp, -9 * ulp, ulp}
			for i, w := range want {
				if dec[i] != w {
					t.Fatalf("f=%d: Encode(%v) decodes to %v, want %v", f, x[i], dec[i], w)
				}
			}
			for i := len(want); i < len(x); i++ {
				if d := math.Abs(dec[i] - float64(x[i])); d >= ulp || math.Abs(dec[i]) > clip {
					t.Fatalf("f=%d: Encode(%v) decodes to %v (error %g, clip %v)", f, x[i], dec[i], d, clip)
				}
			}
		}
	}
}

// TestEncodeRoundingBitsDiffer guards against rounding bits that repeat:
// encoding the same non-dyadic vector twice with one rng must not give
// the same rounding, and within a call the rounding of equal entries must
// vary (were every entry given the same u, a call would round all of them
// the same way).
func TestEncodeRoundingBitsDiffer(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{8}))
	e := Encoding{FracBits: 20, Clip: 1}
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(0.5 * math.Exp2(-20)) // fraction 1/2
	}
	a, b := make([]uint32, len(x)), make([]uint32, len(x))
	e.Encode(a, x, rng)
	e.Encode(b, x, rng)
	var ones, same int
	for i := range a {
		ones += int(a[i])
		if a[i] == b[i] {
			same++
		}
	}
	// Each count is Binomial(64, 1/2): outside [8, 56] with probability < 10^−10.
	if ones < 8 || ones > 56 || same < 8 || same > 56 {
		t.Fatalf("rounding bits look constant: %d of 64 rounded up, %d of 64 equal across calls", ones, same)
	}
}

// seqSource is a rand.Source that yields fixed values, so that a test
// chooses the seeds Encode draws.
type seqSource struct {
	v []uint64
	i int
}

// Uint64 returns the next fixed value.
func (s *seqSource) Uint64() uint64 { s.i++; return s.v[s.i-1] }

// rngFirstOutputs returns an rng whose four draws seed Encode's two
// generators so that their first outputs are r and q: xoroshiro128++ from
// the state (0, rotr(r, 17)) outputs rotl(0+rotr(r, 17), 17)+0 = r.
func rngFirstOutputs(r, q uint64) *rand.Rand {
	return rand.New(&seqSource{v: []uint64{0, bits.RotateLeft64(r, -17), 0, bits.RotateLeft64(q, -17)}})
}

// TestEncodeChosenBits checks the formula of Encode's doc with hand-picked
// rounding bits u, on the fast path (a block of four in-range entries), the
// careful path (a block with a NaN) and the tail (fewer than four
// entries): with u = 0 the result is ⌊trunc(x·2^(f+32))/2^32⌋, with
// u = 2^32−1 it is ⌈trunc(x·2^(f+32))/2^32⌉. The truncation toward zero
// is visible only at these extremes: −2^−40 with f = 0 encodes as 0 even
// for u = 0 (rounding down first would give −1), and 2^−40 as 0 for
// u = 2^32−1.
func TestEncodeChosenBits(t *testing.T) {
	e := Encoding{FracBits: 0, Clip: 100}
	const lo, hi = 0, math.MaxUint32
	cases := []struct {
		x    float32
		u    uint32
		want int32
	}{
		{2.5, lo, 2}, {2.5, hi, 3}, {-2.5, lo, -3}, {-2.5, hi, -2},
		{2, lo, 2}, {2, hi, 2}, {-2, lo, -2}, {-2, hi, -2},
		{0x1p-40, lo, 0}, {0x1p-40, hi, 0}, {-0x1p-40, lo, 0}, {-0x1p-40, hi, 0},
		{-0x1p-32, lo, -1}, {-0x1p-32, 1, 0}, {0x1p-32, hi, 1}, {0x1p-32, hi - 1, 0},
		{100, hi, 100}, {-100, lo, -100}, {1e9, hi, 100}, {-1e9, lo, -100},
		// 0.75 + u·2^−32 reaches 1 at u = 2^30; −0.75 + u·2^−32 reaches 0 at u = 3·2^30.
		{0.75, 1<<30 - 1, 0}, {0.75, 1 << 30, 1}, {-0.75, 3<<30 - 1, -1}, {-0.75, 3 << 30, 0},
	}
	for _, c := range cases {
		for pos := range 4 {
			for _, mode := range []string{"fast", "careful", "tail"} {
				x := []float32{0.5, 0.5, 0.5, 0.5}
				switch mode {
				case "careful":
					x[(pos+1)%4] = float32(math.NaN())
				case "tail":
					x = x[:pos+1]
				}
				x[pos] = c.x
				var w [4]uint32
				w[pos] = c.u
				dst := make([]uint32, len(x))
				e.Encode(dst, x, rngFirstOutputs(uint64(w[1])<<32|uint64(w[0]), uint64(w[3])<<32|uint64(w[2])))
				if got := int32(dst[pos]); got != c.want {
					t.Errorf("%s path, entry %d: Encode(%v) with u = %#x gave %d, want %d", mode, pos, c.x, c.u, got, c.want)
				}
			}
		}
	}
}
