package fl

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/simd"
)

// Independent truths for the DDG tests: the rotation as the O(p²) matrix
// product H·D/√p in float64 (only the seeded signs come from the code
// under test), the clip in float64, the discrete Gaussian's variance by
// summing its pmf, and KLS21 Theorem 1's norm bound from the formula.

// ddgNaiveRotate returns H·D·[x; 0]/√p in float64, H_ij = (−1)^popcount(i&j).
func ddgNaiveRotate(rot *simd.HadamardRotation, x []float64) []float64 {
	p := rot.PaddedDim()
	out := make([]float64, p)
	s := 1 / math.Sqrt(float64(p))
	for i := range out {
		var acc float64
		for j, v := range x {
			h := 1.0
			if bits.OnesCount(uint(i&j))%2 == 1 {
				h = -1
			}
			acc += h * float64(rot.Sign(j)) * v
		}
		out[i] = acc * s
	}
	return out
}

// ddgClip64 returns min(1, c/‖x‖)·x in float64.
func ddgClip64(x []float32, c float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	f := 1.0
	if n := math.Sqrt(ss); n > c {
		f = c / n
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) * f
	}
	return out
}

// ddgDgVariance is Var N_Z(0, σ²) = Σ x²·e^(−x²/2σ²) / Σ e^(−x²/2σ²).
func ddgDgVariance(s2 float64) float64 {
	var num, den float64
	lim := int(40*math.Sqrt(s2)) + 40
	for x := -lim; x <= lim; x++ {
		w := math.Exp(-float64(x*x) / (2 * s2))
		num += float64(x*x) * w
		den += w
	}
	return num / den
}

// ddgTheorem1Bound2 is KLS21 Theorem 1's Δ₂² in integer units.
func ddgTheorem1Bound2(c, gamma, beta float64, p int) float64 {
	cs, sp := c/gamma, math.Sqrt(float64(p))
	b := (cs + sp) * (cs + sp)
	if beta > 0 {
		b = math.Min(b, cs*cs+float64(p)/4+math.Sqrt(2*math.Log(1/beta))*(cs+sp/2))
	}
	return b
}

func ddgCentred(u uint32, b int) int64 {
	m := uint64(1) << b
	v := uint64(u) & (m - 1)
	if v >= m/2 {
		return int64(v) - int64(m)
	}
	return int64(v)
}

func ddgTestRot(d int, tag byte) *simd.HadamardRotation {
	var seed [32]byte
	seed[0], seed[1] = tag, 0xdd
	return simd.NewHadamardRotation(d, seed)
}

// ddgRandomDeltas returns n vectors of length d with norms spread around c
// (some clipped, some not).
func ddgRandomDeltas(rng *rand.Rand, n, d int, c float64) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, d)
		var ss float64
		for j := range v {
			v[j] = float32(rng.NormFloat64())
			ss += float64(v[j]) * float64(v[j])
		}
		f := float32(c * (0.5 + rng.Float64()) / math.Sqrt(ss)) // norm in [C/2, 3C/2)
		for j := range v {
			v[j] *= f
		}
		out[i] = v
	}
	return out
}

func ddgSumClipped(deltas [][]float32, c float64) []float64 {
	sum := make([]float64, len(deltas[0]))
	for _, d := range deltas {
		for j, v := range ddgClip64(d, c) {
			sum[j] += v
		}
	}
	return sum
}

// ddgRingRound encodes every delta (noise nil: no shares) and returns the
// ring sum, as secure aggregation would reveal it.
func ddgRingRound(t *testing.T, deltas [][]float32, p DDGParams, rot *simd.HadamardRotation, noise *dp.DiscreteGaussian, rng *rand.Rand) []uint32 {
	t.Helper()
	sum := make([]uint32, p.PaddedDim)
	enc := make([]uint32, p.PaddedDim)
	for _, d := range deltas {
		var err error
		if noise != nil {
			_, err = DDGEncode(enc, d, p, rot, noise, rng)
		} else {
			_, err = ddgEncode(enc, d, p, rot, nil, rng)
		}
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range enc {
			sum[j] += v
		}
	}
	return sum
}

// (a) End to end: the decoded sum is unbiased and its error variance is
// n·Var(N_Z(0, σ²))·γ² plus the rounding's γ²·(1/p)·Σ_ij f_ij(1 − f_ij)
// per coordinate, with f_ij the fractional parts of the (independently
// computed) rotated, scaled inputs.
func TestDDGEndToEndUnbiasedVariance(t *testing.T) {
	const d, n, reps = 100, 10, 300
	chosen, err := ChooseDDGParams(1, d, n, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	coarse := DDGParams{Clip: 1, Dim: d, PaddedDim: 128, Bits: 16, Gamma: 1 / (3.3 * math.Sqrt(128)), Beta: 0, Sigma2: big.NewRat(1, 2), Clients: n}
	for _, tc := range []struct {
		name string
		p    DDGParams
	}{{"chosen", chosen}, {"coarse", coarse}} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			rot := ddgTestRot(d, 1)
			noise, err := dp.NewDiscreteGaussian(p.Sigma2)
			if err != nil {
				t.Fatal(err)
			}
			deltas := ddgRandomDeltas(rng, n, d, p.Clip)
			truth := ddgSumClipped(deltas, p.Clip)

			var fsum float64 // Σ_ij f(1 − f) over clients and rotated coordinates
			for _, dl := range deltas {
				for _, v := range ddgNaiveRotate(rot, ddgClip64(dl, p.Clip)) {
					f := v/p.Gamma - math.Floor(v/p.Gamma)
					fsum += f * (1 - f)
				}
			}
			s2, _ := p.Sigma2.Float64()
			g2 := p.Gamma * p.Gamma
			want := float64(n)*ddgDgVariance(s2)*g2 + g2*fsum/float64(p.PaddedDim)
			t.Logf("γ = %.4g, σ² = %.6g: predicted per-coordinate variance %.4g (rounding %.2f%% of it)", p.Gamma, s2, want, 100*g2*fsum/float64(p.PaddedDim)/want)

			mean := make([]float64, d)
			var sq float64
			dst := make([]float32, d)
			for r := 0; r < reps; r++ {
				sum := ddgRingRound(t, deltas, p, rot, noise, rng)
				if err := DDGDecode(dst, sum, p, rot); err != nil {
					t.Fatal(err)
				}
				for j, v := range dst {
					e := float64(v) - truth[j]
					mean[j] += e / reps
					sq += e * e
				}
			}
			// Unbiased: reps·Σ mean_j²/v is χ²_d.
			var chi float64
			for _, m := range mean {
				chi += m * m * reps / want
			}
			if math.Abs(chi-d) > 6*math.Sqrt(2*d) {
				t.Errorf("mean error: χ² = %.1f, want %d ± %.0f", chi, d, 6*math.Sqrt(2*d))
			}
			got := sq / (reps * d)
			if tol := 6 * math.Sqrt(2.0/(reps*d)); math.Abs(got/want-1) > tol {
				t.Errorf("error variance %.5g, predicted %.5g (ratio %.4f, tolerance %.3f)", got, want, got/want, tol)
			}
		})
	}
}

// (b) The conditional rounding's output never exceeds Theorem 1's bound,
// for adversarial inputs at norm exactly C/γ (all fractional parts ½,
// which maximises the rounding's variance; one spike; random directions)
// and through DDGEncode for spiky updates at norm C.
func TestDDGConditionalRoundingNormBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const pd = 64
	for _, beta := range []float64{DDGBeta, 0.1, 0} {
		// C/γ = 20, so the flat vector has every coordinate 20/8 = 2.5.
		p := DDGParams{Clip: 1, Dim: pd, PaddedDim: pd, Bits: 32, Gamma: 0.05, Beta: beta, Sigma2: big.NewRat(1, 1), Clients: 1}
		bound := ddgTheorem1Bound2(p.Clip, p.Gamma, beta, pd)
		hi, lo := ddgNormBound2(p)
		if hi != 0 || float64(lo) != math.Floor(bound) {
			t.Fatalf("β = %v: bound (%d, %d), want ⌊%v⌋", beta, hi, lo, bound)
		}
		if s := DDGSensitivity(p); s < math.Sqrt(math.Floor(bound)) || s > math.Sqrt(bound)*(1+1e-15) {
			t.Errorf("β = %v: DDGSensitivity %v, want √⌊%v⌋", beta, s, bound)
		}
		cs := p.Clip / p.Gamma
		flat := make([]float64, pd)
		for j := range flat {
			flat[j] = cs / 8
		}
		spike := make([]float64, pd)
		spike[0] = cs // an integer: rounding leaves it alone
		spike2 := make([]float64, pd)
		spike2[0], spike2[1] = math.Sqrt(cs*cs-0.25), 0.5
		inputs := map[string][]float64{"flat ½": flat, "spike": spike, "spike+½": spike2}
		for r := 0; r < 5; r++ {
			v := make([]float64, pd)
			var ss float64
			for j := range v {
				v[j] = rng.NormFloat64()
				ss += v[j] * v[j]
			}
			for j := range v {
				v[j] *= cs / math.Sqrt(ss)
			}
			inputs[string(rune('a'+r))] = v
		}
		xt := make([]int64, pd)
		for name, x := range inputs {
			var meanNorm2 float64
			for draw := 0; draw < 2000; draw++ {
				if err := ddgRound(xt, x, hi, lo, rng); err != nil {
					t.Fatalf("β = %v, %s: %v", beta, name, err)
				}
				var ss int64
				for j, v := range xt {
					if math.Abs(float64(v)-x[j]) >= 1 {
						t.Fatalf("β = %v, %s: coordinate %d rounded %v to %d", beta, name, j, x[j], v)
					}
					ss += v * v
				}
				if float64(ss) > bound {
					t.Fatalf("β = %v, %s: ‖x̃‖² = %d > Δ₂² = %v", beta, name, ss, bound)
				}
				meanNorm2 += float64(ss) / 2000
			}
			if name == "flat ½" {
				t.Logf("β = %.3g: flat input, bound Δ₂² = %.1f, mean accepted ‖x̃‖² = %.1f (unconditional mean 416)", beta, bound, meanNorm2)
			}
		}
	}

	// Through the client transform: spikes and flat vectors at norm
	// exactly C (and far beyond it), no noise, every output within Δ₂.
	const d = 200
	p, err := ChooseDDGParams(0.5, d, 10, 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	rot := ddgTestRot(d, 2)
	delta2 := DDGSensitivity(p)
	enc := make([]uint32, p.PaddedDim)
	ups := [][]float32{make([]float32, d), make([]float32, d), make([]float32, d)}
	ups[0][7] = 0.5
	ups[1][0], ups[1][d-1] = 1e30, -1e30
	for j := range ups[2] {
		ups[2][j] = float32(0.5 / math.Sqrt(d))
	}
	for i, u := range ups {
		for draw := 0; draw < 300; draw++ {
			got, err := ddgEncode(enc, u, p, rot, nil, rng)
			if err != nil {
				t.Fatal(err)
			}
			if got != delta2 {
				t.Fatalf("returned bound %v, want DDGSensitivity %v", got, delta2)
			}
			var ss float64
			for _, v := range enc {
				c := float64(ddgCentred(v, p.Bits))
				ss += c * c
			}
			if math.Sqrt(ss) > delta2 {
				t.Fatalf("update %d: encoded norm %v > Δ₂ = %v", i, math.Sqrt(ss), delta2)
			}
		}
	}

	// An unreachable bound exhausts the retries.
	halves := []float64{1.5, 1.5, -1.5} // every rounding has ‖x̃‖² ≥ 3
	if err := ddgRound(make([]int64, 3), halves, 0, 2, rng); !errors.Is(err, ErrDDGRounding) {
		t.Errorf("impossible bound: err = %v, want ErrDDGRounding", err)
	}
}

// (c) Modular wrap: with accepted parameters the modulus holds the sum
// (the chooser's inequality, recomputed here; and no wrapped coordinate
// for worst-case aligned inputs); with too small a γ the same inputs
// wrap, and the chooser refuses too few bits.
func TestDDGModularWrap(t *testing.T) {
	const d, n = 1000, 50
	p, err := ChooseDDGParams(1, d, n, 12, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := p.Sigma2.Float64()
	k := math.Sqrt(2 * math.Log(2*float64(p.PaddedDim)/1e-6))
	room := math.Ldexp(1, p.Bits-1) - n
	spread := math.Sqrt(math.Pow(n*p.Clip/p.Gamma, 2)/float64(p.PaddedDim) + n*s2)
	if room < k*spread {
		t.Fatalf("accepted parameters: m/2 − n = %v < k·s = %v·%v", room, k, spread)
	}
	t.Logf("b = 12, n = %d, d = %d: γ = %.4g, k = %.2f (need %.2f), loss %.2f%%", n, d, p.Gamma, p.WrapStdDevs, k, 100*p.AccuracyLoss)

	rng := rand.New(rand.NewPCG(3, 3))
	rot := ddgTestRot(d, 3)
	noise, err := dp.NewDiscreteGaussian(p.Sigma2)
	if err != nil {
		t.Fatal(err)
	}
	spike := make([]float32, d)
	spike[0] = 1
	dense := make([]float32, d) // random signs, independent of the rotation's
	for j := range dense {
		dense[j] = float32((2*float64(rng.IntN(2)) - 1) / math.Sqrt(d))
	}
	for name, in := range map[string][]float32{"spike": spike, "dense": dense} {
		deltas := make([][]float32, n)
		for i := range deltas {
			deltas[i] = in // every client aligned: the largest sum
		}
		want := ddgNaiveRotate(rot, ddgSumClipped(deltas, p.Clip))
		sum := ddgRingRound(t, deltas, p, rot, noise, rng)
		var worst float64
		for j, v := range sum {
			dev := math.Abs(float64(ddgCentred(v, p.Bits)) - want[j]/p.Gamma)
			worst = max(worst, dev)
		}
		// No wrap: only rounding (< n) and noise (≤ 7 std devs here).
		if lim := n + 7*math.Sqrt(n*s2); worst > lim {
			t.Errorf("%s: a coordinate is %v from the expected sum (limit %v, m = %d): wrapped", name, worst, lim, 1<<p.Bits)
		}
		max := 0.0
		for _, v := range want {
			max = math.Max(max, math.Abs(v/p.Gamma))
		}
		t.Logf("%s: largest expected |coordinate| %.0f of m/2 = %d, largest deviation %.1f", name, max, 1<<(p.Bits-1), worst)
	}

	// An eighth of the chosen γ: the aligned spikes sum to n·C/(γ√p) ≈
	// 2.3·m/2 in every coordinate, and the decoded sum is wrong.
	bad := p
	bad.Gamma = p.Gamma / 8
	if bad.WrapBound() >= k {
		t.Errorf("γ/8: WrapBound %v should fall below k = %v", bad.WrapBound(), k)
	}
	deltas := make([][]float32, n)
	for i := range deltas {
		deltas[i] = spike
	}
	sum := ddgRingRound(t, deltas, bad, rot, nil, rng)
	dst := make([]float32, d)
	if err := DDGDecode(dst, sum, bad, rot); err != nil {
		t.Fatal(err)
	}
	if e := math.Abs(float64(dst[0]) - n); e < 1 {
		t.Errorf("γ/8: decoded spike sum %v, expected a wrap far from %d", dst[0], n)
	}

	for _, tc := range []struct {
		bits, n int
	}{{8, 120}, {7, 127}, {1, 1}, {10, 1000}} {
		if _, err := ChooseDDGParams(0.5, 7850, tc.n, tc.bits, 1); !errors.Is(err, ErrDDGOverflow) {
			t.Errorf("b = %d, n = %d: err = %v, want ErrDDGOverflow", tc.bits, tc.n, err)
		}
	}
	if _, err := ChooseDDGParams(0.5, 7850, 120, 11, 1); !errors.Is(err, ErrDDGAccuracy) {
		t.Errorf("b = 11 at the demo's size: err = %v, want ErrDDGAccuracy", err)
	}
}

// (d) The server's rotation, rebuilt from the round's seed, undoes the
// clients'; another seed does not.
func TestDDGRotationSeed(t *testing.T) {
	const d, n = 300, 5
	p, err := ChooseDDGParams(1, d, n, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	deltas := ddgRandomDeltas(rng, n, d, 1)
	truth := ddgSumClipped(deltas, 1)
	sum := ddgRingRound(t, deltas, p, ddgTestRot(d, 7), nil, rng)
	for _, tc := range []struct {
		name  string
		tag   byte
		match bool
	}{{"same seed, new instance", 7, true}, {"other seed", 8, false}} {
		dst := make([]float32, d)
		if err := DDGDecode(dst, sum, p, ddgTestRot(d, tc.tag)); err != nil {
			t.Fatal(err)
		}
		var e2, t2 float64
		for j, v := range dst {
			e2 += (float64(v) - truth[j]) * (float64(v) - truth[j])
			t2 += truth[j] * truth[j]
		}
		if b := ddgRoundTripBound(p, n); tc.match && math.Sqrt(e2) > b {
			t.Errorf("%s: error %v > bound %v", tc.name, math.Sqrt(e2), b)
		} else if !tc.match && math.Sqrt(e2) < 0.5*math.Sqrt(t2) {
			t.Errorf("%s: error %v, expected garbage (‖truth‖ = %v)", tc.name, math.Sqrt(e2), math.Sqrt(t2))
		}
	}
	if err := DDGDecode(make([]float32, d), sum, p, ddgTestRot(d+1, 7)); err == nil {
		t.Error("a rotation of another dimension was accepted")
	}
}

// (e) Without noise shares, decode∘encode recovers the clipped sum
// within DDGDecode's stated bound, and its mean squared error is the
// rounding's γ²·(d/p)·Σ_ij f_ij(1 − f_ij) (β = 0: exactly unbiased).
func TestDDGRoundTripNoNoise(t *testing.T) {
	const d, n, reps = 300, 8, 200
	rng := rand.New(rand.NewPCG(5, 5))
	rot := ddgTestRot(d, 5)
	chosen32, err := ChooseDDGParams(1, d, n, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	chosen16, err := ChooseDDGParams(1, d, n, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	coarse := DDGParams{Clip: 1, Dim: d, PaddedDim: 512, Bits: 16, Gamma: 0.01, Beta: 0, Sigma2: big.NewRat(1, 1), Clients: n}
	deltas := ddgRandomDeltas(rng, n, d, 1)
	truth := ddgSumClipped(deltas, 1)
	for _, tc := range []struct {
		name string
		p    DDGParams
	}{{"b=32", chosen32}, {"b=16", chosen16}, {"coarse β=0", coarse}} {
		p := tc.p
		var fsum float64
		for _, dl := range deltas {
			for _, v := range ddgNaiveRotate(rot, ddgClip64(dl, 1)) {
				f := v/p.Gamma - math.Floor(v/p.Gamma)
				fsum += f * (1 - f)
			}
		}
		wantMSE := p.Gamma * p.Gamma * float64(d) / float64(p.PaddedDim) * fsum
		bound := ddgRoundTripBound(p, n)
		dst := make([]float32, d)
		var mse, worst float64
		for r := 0; r < reps; r++ {
			if err := DDGDecode(dst, ddgRingRound(t, deltas, p, rot, nil, rng), p, rot); err != nil {
				t.Fatal(err)
			}
			var e2 float64
			for j, v := range dst {
				e2 += (float64(v) - truth[j]) * (float64(v) - truth[j])
			}
			worst = max(worst, math.Sqrt(e2))
			mse += e2 / reps
		}
		if worst > bound {
			t.Errorf("%s: round-trip error %v > stated bound %v", tc.name, worst, bound)
		}
		t.Logf("%s: γ = %.3g, worst error %.3g (bound %.3g), MSE %.4g (rounding's %.4g)", tc.name, p.Gamma, worst, bound, mse, wantMSE)
		if tc.p.Beta == 0 && math.Abs(mse/wantMSE-1) > 0.1 {
			t.Errorf("%s: MSE %v, rounding predicts %v", tc.name, mse, wantMSE)
		}
	}
}

// DDGRho is the accountant's ρ at the chosen σ and Δ₂, ≈ 1/(2z²) as
// planned, and larger with fewer survivors.
func TestDDGRho(t *testing.T) {
	for _, z := range []float64{0.5, 1, 2} {
		p, err := ChooseDDGParams(0.5, 7850, 120, 20, z)
		if err != nil {
			t.Fatal(err)
		}
		rho, err := DDGRho(p, p.Clients)
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := p.Sigma2.Float64()
		ref, err := accounting.DistributedDiscreteGaussianRho(p.Clients, p.PaddedDim, math.Sqrt(s2), DDGSensitivity(p))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(rho/ref-1) > 1e-12 {
			t.Errorf("z = %v: DDGRho %v, accountant %v", z, rho, ref)
		}
		if plan := 1 / (2 * z * z); rho > plan*(1+1e-9) || rho < plan*(1-1e-6) {
			t.Errorf("z = %v: ρ = %v, planned 1/(2z²) = %v", z, rho, plan)
		}
		half, err := DDGRho(p, p.Clients/2)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(half/rho-2) > 1e-6 {
			t.Errorf("z = %v: ρ with half the survivors %v, want 2·%v", z, half, rho)
		}
	}
}

func TestDDGParamsValidation(t *testing.T) {
	p, err := ChooseDDGParams(0.5, 100, 10, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back DDGParams
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Sigma2.Cmp(p.Sigma2) != 0 || back.Gamma != p.Gamma || DDGSensitivity(back) != DDGSensitivity(p) {
		t.Errorf("JSON round trip changed the parameters: %s", raw)
	}
	for name, mod := range map[string]func(*DDGParams){
		"clip":    func(q *DDGParams) { q.Clip = math.Inf(1) },
		"padded":  func(q *DDGParams) { q.PaddedDim = 256 },
		"bits":    func(q *DDGParams) { q.Bits = 33 },
		"gamma":   func(q *DDGParams) { q.Gamma = 0 },
		"beta":    func(q *DDGParams) { q.Beta = 1 },
		"sigma":   func(q *DDGParams) { q.Sigma2 = nil },
		"small σ": func(q *DDGParams) { q.Sigma2 = big.NewRat(1, 5) },
		"clients": func(q *DDGParams) { q.Clients = 0 },
		"scale":   func(q *DDGParams) { q.Gamma = 1e-30 },
	} {
		q := p
		mod(&q)
		if q.Validate() == nil {
			t.Errorf("%s: invalid parameters accepted", name)
		}
	}
	rng := rand.New(rand.NewPCG(6, 6))
	rot := ddgTestRot(100, 6)
	noise, _ := dp.NewDiscreteGaussian(p.Sigma2)
	other, _ := dp.NewDiscreteGaussian(big.NewRat(7, 1))
	dst := make([]uint32, p.PaddedDim)
	good := make([]float32, 100)
	nan := make([]float32, 100)
	nan[3] = float32(math.NaN())
	for name, call := range map[string]func() error{
		"nil noise":   func() error { _, err := DDGEncode(dst, good, p, rot, nil, rng); return err },
		"other σ²":    func() error { _, err := DDGEncode(dst, good, p, rot, other, rng); return err },
		"short dst":   func() error { _, err := DDGEncode(dst[:5], good, p, rot, noise, rng); return err },
		"long delta":  func() error { _, err := DDGEncode(dst, make([]float32, 101), p, rot, noise, rng); return err },
		"rotation":    func() error { _, err := DDGEncode(dst, good, p, ddgTestRot(99, 6), noise, rng); return err },
		"nil rng":     func() error { _, err := DDGEncode(dst, good, p, rot, noise, nil); return err },
		"decode dst":  func() error { return DDGDecode(make([]float32, 99), dst, p, rot) },
		"decode sum":  func() error { return DDGDecode(make([]float32, 100), dst[:100], p, rot) },
		"choose z=0":  func() error { _, err := ChooseDDGParams(0.5, 100, 10, 16, 0); return err },
		"choose d=0":  func() error { _, err := ChooseDDGParams(0.5, 0, 10, 16, 1); return err },
		"choose b=33": func() error { _, err := ChooseDDGParams(0.5, 100, 10, 33, 1); return err },
	} {
		if call() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := DDGEncode(dst, nan, p, rot, noise, rng); !errors.Is(err, dp.ErrNonFinite) {
		t.Errorf("NaN update: err = %v, want dp.ErrNonFinite", err)
	}
}

// The demo's size (d = 7850, n = 120, C = 0.5, z = 1): the chooser's
// figures per bit width, and one simulated round's error against the
// central Gaussian mechanism's expected d·z²·C².
func TestDDGDemoFigures(t *testing.T) {
	const d, n, c, z = 7850, 120, 0.5, 1.0
	var run DDGParams
	for _, b := range []int{10, 11, 12, 14, 16, 18, 20, 24, 32} {
		p, err := ChooseDDGParams(c, d, n, b, z)
		if err != nil && !errors.Is(err, ErrDDGAccuracy) {
			t.Logf("b = %2d: %v", b, err)
			continue
		}
		s2, _ := p.Sigma2.Float64()
		rho, rerr := DDGRho(p, n)
		if rerr != nil {
			t.Fatal(rerr)
		}
		t.Logf("b = %2d: γ = %.3g, Δ₂γ/C = %.5f, σ = %.4g, k = %.2f, ρ = %.6f, E‖err‖² = %.1f (noise %.1f, rounding %.3g, wrap %.2g) vs central %.1f: %+.2f%% (refused: %v)",
			b, p.Gamma, DDGSensitivity(p)*p.Gamma/c, math.Sqrt(s2), p.WrapStdDevs, rho,
			p.NoiseError+p.RoundingError+p.WrapError, p.NoiseError, p.RoundingError, p.WrapError, p.CentralError, 100*p.AccuracyLoss, err != nil)
		if b == 16 {
			run = p
		}
	}
	if testing.Short() {
		return
	}
	rng, err := dp.NewSecureRand()
	if err != nil {
		t.Fatal(err)
	}
	noise, err := dp.NewDiscreteGaussian(run.Sigma2)
	if err != nil {
		t.Fatal(err)
	}
	rot := ddgTestRot(d, 9)
	deltas := ddgRandomDeltas(rand.New(rand.NewPCG(9, 9)), n, d, c)
	truth := ddgSumClipped(deltas, c)
	dst := make([]float32, d)
	if err := DDGDecode(dst, ddgRingRound(t, deltas, run, rot, noise, rng), run, rot); err != nil {
		t.Fatal(err)
	}
	var e2 float64
	for j, v := range dst {
		e2 += (float64(v) - truth[j]) * (float64(v) - truth[j])
	}
	want := run.NoiseError + run.RoundingError
	t.Logf("b = 16, one round of %d clients: ‖err‖² = %.1f, predicted %.1f, central Gaussian %.1f", n, e2, want, run.CentralError)
	// ‖err‖² is a sum of d nearly independent squares: relative sd √(2/d).
	if math.Abs(e2/want-1) > 6*math.Sqrt(2.0/d) {
		t.Errorf("demo round: ‖err‖² = %v, predicted %v", e2, want)
	}
}
