package fl

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/secagg"
)

// DeltaNoiseMultiplier against its closed form and the paper's example:
// z⁻² = z_Δ⁻² + (2σ_b)⁻², and undefined for 2σ_b ≤ z.
func TestDeltaNoiseMultiplier(t *testing.T) {
	for _, c := range []struct{ z, sb float64 }{{1, 6}, {1, 0.51}, {0.5, 100}, {3, 2}} {
		zd, err := DeltaNoiseMultiplier(c.z, c.sb)
		if err != nil {
			t.Fatalf("z=%v σ_b=%v: %v", c.z, c.sb, err)
		}
		if got := 1/(zd*zd) + 1/(4*c.sb*c.sb); math.Abs(got-1/(c.z*c.z)) > 1e-12 {
			t.Errorf("z=%v σ_b=%v: z_Δ⁻² + (2σ_b)⁻² = %v, want z⁻² = %v", c.z, c.sb, got, 1/(c.z*c.z))
		}
		if !(zd > c.z) {
			t.Errorf("z=%v σ_b=%v: z_Δ = %v should exceed z", c.z, c.sb, zd)
		}
	}
	// The paper's default σ_b = m/20 at m = 100 clients is 5; z = 1 then
	// leaves z_Δ = (1 − 1/100)^(−1/2) ≈ 1.00504, by hand.
	if zd, _ := DeltaNoiseMultiplier(1, 5); math.Abs(zd-1/math.Sqrt(0.99)) > 1e-12 {
		t.Errorf("z_Δ(1, 5) = %v, want %v", zd, 1/math.Sqrt(0.99))
	}
	for _, c := range []struct{ z, sb float64 }{{1, 0.5}, {1, 0.2}, {0, 1}, {1, 0}, {math.Inf(1), 1}, {math.NaN(), 1}} {
		if _, err := DeltaNoiseMultiplier(c.z, c.sb); err == nil {
			t.Errorf("z=%v σ_b=%v accepted", c.z, c.sb)
		}
	}
}

// adaptiveRelease runs GaussianAggregator.Release with adaptive clipping
// over deltas at clip c and expected cohort m, with the noise drawn from
// a generator seeded by seed, and returns the released sum, b̃ and the
// next clip norm.
func adaptiveRelease(t *testing.T, deltas [][]float32, c, z, sb, m float64, seed uint64) ([]float32, float64, float64) {
	t.Helper()
	g := &GaussianAggregator{Params: dp.Params{NoiseMultiplier: z}, Rand: rand.New(rand.NewPCG(seed, 1)),
		Adaptive: &AdaptiveClip{Clip: c, TargetQuantile: 0.5, LearningRate: 0.2, CountStd: sb}}
	d := len(deltas[0])
	acc := g.NewAccumulator(d)
	acc.Reset()
	for _, delta := range deltas {
		if err := acc.Add(append([]float32(nil), delta...), 1); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]float32, d)
	st, err := g.Release(dst, []Accumulator{acc}, m)
	if err != nil {
		t.Fatal(err)
	}
	if st.Adaptive == nil || st.Adaptive.ClipNorm != c {
		t.Fatalf("stats %+v, want the round's clip %v", st.Adaptive, c)
	}
	return dst, st.Adaptive.NoisyUnclippedFraction, g.Adaptive.Clip
}

// The sensitivity of adaptive clipping's release against neighbouring
// cohorts, brute force: with the noise draws coupled (one seed), the
// released sum moves by ‖ΔS‖ and the released count by |ΔB|; in units of
// their noise (z_Δ·C and σ_b) the joint move must be at most 1/z under
// add/remove and 2/z under replace-one, the sensitivity of the Gaussian
// event of multiplier z that the ledger records for the round, and reach
// it (a client of norm exactly C is both counted and fully clipped).
func TestAdaptiveClippingSensitivity(t *testing.T) {
	const d, c, z, sb = 8, 0.7, 1.3, 4.0
	zd, err := DeltaNoiseMultiplier(z, sb)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	vec := func(norm float64) []float32 {
		v := make([]float32, d)
		var s float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			s += float64(v[i]) * float64(v[i])
		}
		for i := range v {
			v[i] = float32(float64(v[i]) * norm / math.Sqrt(s))
		}
		return v
	}
	// Adversaries on both sides of C, at C, and one pointing against
	// another.
	var adversaries [][]float32
	for _, norm := range []float64{0, 0.1 * c, c, c * (1 + 1e-6), 3 * c, 1e3 * c} {
		adversaries = append(adversaries, vec(norm))
	}
	atC := vec(c * (1 - 1e-6)) // at C, below it after float32 rounding: bit 1
	neg := make([]float32, d)
	for i := range atC {
		neg[i] = -atC[i]
	}
	clippedNeg := make([]float32, d) // −atC at 3C: clipped, bit 0
	for i := range neg {
		clippedNeg[i] = 3 * neg[i]
	}
	adversaries = append(adversaries, atC, neg, clippedNeg)
	base := [][]float32{vec(0.3 * c), vec(2 * c), vec(c), vec(0.9 * c)}

	move := func(a, b [][]float32, seed uint64) float64 {
		sa, fa, _ := adaptiveRelease(t, a, c, z, sb, 1, seed)
		sbv, fb, _ := adaptiveRelease(t, b, c, z, sb, 1, seed)
		var s2 float64
		for i := range sa {
			x := float64(sa[i]) - float64(sbv[i])
			s2 += x * x
		}
		sumMove := math.Sqrt(s2) / (zd * c)
		countMove := math.Abs(fa-fb) / sb // expected cohort 1: b̃ moves by ΔB
		return math.Hypot(sumMove, countMove)
	}
	var worstAdd, worstReplace float64
	for i, adv := range adversaries {
		with := append(append([][]float32(nil), base...), adv)
		worstAdd = max(worstAdd, move(base, with, uint64(i)))
		for j, other := range adversaries {
			a := append(append([][]float32(nil), base...), adv)
			b := append(append([][]float32(nil), base...), other)
			worstReplace = max(worstReplace, move(a, b, uint64(100+i*len(adversaries)+j)))
		}
	}
	const tol = 1e-5
	if worstAdd > (1+tol)/z || worstAdd < (1-1e-3)/z {
		t.Errorf("add/remove: joint move %v noise units, want at most and close to 1/z = %v", worstAdd, 1/z)
	}
	if worstReplace > (1+tol)*2/z || worstReplace < (1-1e-3)*2/z {
		t.Errorf("replace-one: joint move %v noise units, want at most and close to 2/z = %v", worstReplace, 2/z)
	}
}

// The geometric update moves C towards the γ-quantile of the norms: with
// little noise and every client at norm 1, C rises from below and falls
// from above, and the fraction it reports tracks the truth.
func TestAdaptiveClipTracksQuantile(t *testing.T) {
	deltas := make([][]float32, 200)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range deltas {
		norm := 0.5 + rng.Float64() // uniform on [0.5, 1.5]: median 1
		deltas[i] = []float32{float32(norm), 0, 0, 0}
	}
	for _, start := range []float64{0.05, 20} {
		c := start
		for round := range 200 {
			_, frac, next := adaptiveRelease(t, deltas, c, 0.5, 1, float64(len(deltas)), uint64(round))
			var truth int
			for _, v := range deltas {
				if float64(v[0]) <= c {
					truth++
				}
			}
			// σ_b = 1 over m = 200: b̃ within 4σ_b/m = 0.02 of the truth.
			if want := float64(truth) / float64(len(deltas)); math.Abs(frac-want) > 0.02 {
				t.Fatalf("round %d: b̃ = %v, want %v", round, frac, want)
			}
			c = next
		}
		if math.Abs(c-1) > 0.05 {
			t.Errorf("from C_0 = %v: C after 200 rounds = %v, want the median 1", start, c)
		}
	}
}

// Under secure aggregation the bit travels in the secure sum: with noise
// too small to move the rounded count (2σ_b = 0.002 ring units), b̃ is
// exactly the centred count of updates with norm ≤ C over m, plus 1/2,
// as the central aggregator computes it; the update's mean matches the
// central one up to the fixed point; C moves on by the same rule; and
// no per-client statistic leaves the protocol.
func TestSecureAdaptiveClipping(t *testing.T) {
	const n, d, clip, expected = 20, 300, 0.5, 25.0
	gen := rand.New(rand.NewPCG(11, 12))
	deltas := make([][]float32, n)
	unclipped := 0
	for i := range deltas {
		deltas[i] = make([]float32, d)
		scale := gen.Float64() * 0.06 // norms from 0 to ~1: about half clipped
		var s float64
		for j := range deltas[i] {
			deltas[i][j] = float32(gen.NormFloat64() * scale)
			s += float64(deltas[i][j]) * float64(deltas[i][j])
		}
		if math.Sqrt(s) <= clip {
			unclipped++
		}
	}
	if unclipped == 0 || unclipped == n {
		t.Fatalf("%d of %d unclipped: the test needs both", unclipped, n)
	}
	const z, sb = 1e-6, 1e-3
	state := func() *AdaptiveClip {
		return &AdaptiveClip{Clip: clip, TargetQuantile: 0.5, LearningRate: 0.2, CountStd: sb}
	}
	central := &GaussianAggregator{Params: dp.Params{NoiseMultiplier: z}, Rand: secureRand(t), Adaptive: state()}
	plain, pst, err := release(t, central, deltas, expected)
	if err != nil {
		t.Fatal(err)
	}
	sec := &SecureAggregator{Params: dp.Params{NoiseMultiplier: z}, DP: true, MinClients: 3, Rand: secureRand(t),
		Dropouts: rand.New(rand.NewPCG(1, 1)), Adaptive: state()}
	got, st, err := release(t, sec, deltas, expected)
	if err != nil {
		t.Fatal(err)
	}
	want := (float64(unclipped)-n/2.0)/expected + 0.5
	if st.Adaptive == nil || st.Adaptive.ClipNorm != clip || st.Adaptive.NoisyUnclippedFraction != want {
		t.Fatalf("secure adaptive stats %+v, want C = %v and b̃ = %v", st.Adaptive, clip, want)
	}
	if math.Abs(pst.Adaptive.NoisyUnclippedFraction-want) > 1e-3 {
		t.Fatalf("central b̃ = %v, want %v", pst.Adaptive.NoisyUnclippedFraction, want)
	}
	if next := sec.Adaptive.Clip; next != state().Next(clip, want) {
		t.Fatalf("next clip %v, want %v", next, state().Next(clip, want))
	}
	enc, err := secagg.NewEncoding(n, clip)
	if err != nil {
		t.Fatal(err)
	}
	bound := n*(enc.RoundingSlack(d)+math.Ldexp(1, -enc.FracBits))/expected + 1e-4
	for j := range got {
		if diff := math.Abs(float64(got[j] - plain[j])); diff > bound {
			t.Fatalf("coordinate %d: secure %v, central %v (bound %g)", j, got[j], plain[j], bound)
		}
	}
	if st.ClippedFraction != 0 || st.MeanNorm != 0 {
		t.Fatalf("per-client statistics leaked out of secure aggregation: %+v", st)
	}
}

// The bit's ring encoding: ±1, summing to 2·Σ(b_i − 1/2), read back as a
// signed count.
func TestClipBitsInTheRing(t *testing.T) {
	if EncodeClipBit(0.5, 0.5) != 1 || EncodeClipBit(0.50001, 0.5) != math.MaxUint32 {
		t.Fatal("bit at and above C")
	}
	var sum uint32
	for i := range 7 { // 2 unclipped, 5 clipped: Σ2(b−½) = −3
		sum += EncodeClipBit(float64(i), 1.5)
	}
	if got := ReleaseClipBits([]uint32{sum}, 1e-9, 10, rand.New(rand.NewPCG(1, 1))); got != -1.5/10+0.5 {
		t.Fatalf("b̃ = %v, want %v", got, -1.5/10+0.5)
	}
}

// The sensitivity of adaptive clipping under secure aggregation, in the
// ring: one client's contribution to the unmasked sum is its encoded
// update x (int32 coordinates) and its bit u = ±1, which take noise
// z_Δ·C·2^f and 2σ_b. Over adversarial updates (norms around C, spikes,
// huge values) with the real stochastic rounding, ‖x‖/(z_Δ·C·2^f) and
// |u|/(2σ_b) together stay within 1/z (add/remove), and any two clients'
// contributions differ by at most 2/z (replace-one): the Gaussian(z)
// event the ledger records.
func TestSecureAdaptiveSensitivity(t *testing.T) {
	const d, clip, z, sb, bound = 64, 0.5, 1.1, 3.0, 50
	zd, err := DeltaNoiseMultiplier(z, sb)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := secagg.NewEncoding(bound, clip)
	if err != nil {
		t.Fatal(err)
	}
	scale := math.Ldexp(1, enc.FracBits)
	gen := rand.New(rand.NewPCG(21, 22))
	type contribution struct {
		x []int32
		u int32
	}
	var cs []contribution
	for trial := range 300 {
		delta := make([]float32, d)
		switch trial % 4 {
		case 0: // a spike, norm across C
			delta[gen.IntN(d)] = float32(clip * (0.5 + gen.Float64()))
		case 1: // dense at norm exactly C
			var s float64
			for i := range delta {
				delta[i] = float32(gen.NormFloat64())
				s += float64(delta[i]) * float64(delta[i])
			}
			for i := range delta {
				delta[i] = float32(float64(delta[i]) * clip / math.Sqrt(s))
			}
		case 2: // huge
			for i := range delta {
				delta[i] = float32(gen.NormFloat64() * 1e6)
			}
		default: // all coordinates ±C/√d·(1 ± ε): rounding pushes them up
			for i := range delta {
				delta[i] = float32((1 + 1e-3*gen.Float64()) * clip / math.Sqrt(d) * float64(1-2*gen.IntN(2)))
			}
		}
		x := make([]uint32, d)
		norm, err := EncodeSecureInput(x, delta, clip, enc, gen)
		if err != nil {
			t.Fatal(err)
		}
		c := contribution{x: make([]int32, d), u: int32(EncodeClipBit(norm, clip))}
		for i, v := range x {
			c.x[i] = int32(v)
		}
		cs = append(cs, c)
	}
	joint := func(dx float64, du int32) float64 {
		return math.Hypot(dx/(zd*clip*scale), float64(du)/(2*sb))
	}
	const tol = 1e-9
	for _, a := range cs {
		var s float64
		for _, v := range a.x {
			s += float64(v) * float64(v)
		}
		if j := joint(math.Sqrt(s), a.u); j > (1+tol)/z {
			t.Fatalf("one client moves the ring sum by %v noise units, over 1/z = %v", j, 1/z)
		}
	}
	for i := 0; i < len(cs); i += 7 {
		for k := 1; k < len(cs); k += 5 {
			var s float64
			for c := range cs[i].x {
				dv := float64(cs[i].x[c]) - float64(cs[k].x[c])
				s += dv * dv
			}
			if j := joint(math.Sqrt(s), cs[i].u-cs[k].u); j > (1+tol)*2/z {
				t.Fatalf("replacing a client moves the ring sum by %v noise units, over 2/z = %v", j, 2/z)
			}
		}
	}
}
