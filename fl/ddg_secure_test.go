package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/simd"
)

// watchServer records what the clients send the server.
type watchServer struct {
	secagg.ClientTransport
	mu     *sync.Mutex
	masked *[][]uint32
	other  *int // messages of the other stages
}

func (w watchServer) MaskedInput(ctx context.Context, m secagg.MaskedInputMsg) error {
	w.mu.Lock()
	*w.masked = append(*w.masked, append([]uint32(nil), m.Masked...))
	w.mu.Unlock()
	return w.ClientTransport.MaskedInput(ctx, m)
}

func (w watchServer) AdvertiseKeys(ctx context.Context, m secagg.AdvertiseKeysMsg) error {
	w.count()
	return w.ClientTransport.AdvertiseKeys(ctx, m)
}

func (w watchServer) ShareKeys(ctx context.Context, m secagg.ShareKeysMsg) error {
	w.count()
	return w.ClientTransport.ShareKeys(ctx, m)
}

func (w watchServer) Unmask(ctx context.Context, m secagg.UnmaskMsg) error {
	w.count()
	return w.ClientTransport.Unmask(ctx, m)
}

func (w watchServer) count() {
	w.mu.Lock()
	*w.other++
	w.mu.Unlock()
}

// Under the distributed discrete Gaussian the server only ever holds
// noisy sums. Every message the simulated clients send it is watched:
// the only vectors are the masked inputs, whose values are uniform on
// Z_2³² (a chi-square test on their top four bits), and the unmasked sum
// it holds differs from the noiseless sum of the clients' rotated,
// scaled updates by noise of variance n·σ² per coordinate, the n shares'
// (within 20%; the rounding alone would give at most n/4, 10⁻¹⁴ of it).
// With the shares left out this test fails.
func TestDistributedServerSeesOnlyNoisySums(t *testing.T) {
	const n, d, clip = 16, 1000, 1.0
	p, err := ChooseDDGParams(clip, d, n, 32, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	v := make([]float32, d)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	var mu sync.Mutex
	var masked [][]uint32
	other := 0
	var sum []uint32
	var round DDGRound
	s := &SecureAggregator{DP: true, MinClients: n, Rand: rng, Dropouts: rng, Workers: 2, MaxClients: n, Distributed: &p,
		wrap: func(_ int, t secagg.ClientTransport) secagg.ClientTransport {
			return watchServer{ClientTransport: t, mu: &mu, masked: &masked, other: &other}
		},
		sawSum: func(s []uint32, r DDGRound) { sum, round = append([]uint32(nil), s...), r },
	}
	acc := s.NewAccumulator(d)
	for range n {
		if err := acc.Add(v, 1); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]float32, d)
	st, err := s.Release(dst, []Accumulator{acc}, n)
	if err != nil {
		t.Fatal(err)
	}
	if st.Clients != n || len(masked) != n || other != 3*n || len(sum) != p.PaddedDim {
		t.Fatalf("%d survivors, %d masked inputs, %d other messages, sum of %d; want %d, %d, %d, %d", st.Clients, len(masked), other, len(sum), n, n, 3*n, p.PaddedDim)
	}

	// The masked inputs: top four bits uniform (chi-square, 15 degrees
	// of freedom; 70 is exceeded with probability < 10⁻⁸).
	var hist [16]float64
	total := 0.0
	for _, m := range masked {
		if len(m) != p.PaddedDim {
			t.Fatalf("a masked input of %d values, want %d", len(m), p.PaddedDim)
		}
		for _, x := range m {
			hist[x>>28]++
			total++
		}
	}
	chi := 0.0
	for _, h := range hist {
		e := total / 16
		chi += (h - e) * (h - e) / e
	}
	if chi > 70 {
		t.Errorf("masked inputs' top bits: χ² = %.1f over 15 degrees of freedom, not uniform", chi)
	}

	// The sum: centred, minus the noiseless n·R·clip(v)/γ.
	clipped := append([]float32(nil), v...)
	simd.ClipToNorm(clipped, clip)
	x := make([]float32, p.PaddedDim)
	round.Rotation().Rotate(x, clipped)
	s2, _ := p.Sigma2.Float64()
	var ss float64
	for j, u := range sum {
		c := float64(int32(u)) // b = 32: centred
		r := c - n*float64(x[j])/p.Gamma
		ss += r * r
	}
	ratio := ss / float64(p.PaddedDim) / (n * s2)
	if ratio < 0.8 || ratio > 1.2 {
		t.Errorf("the server's sum differs from the noiseless one by %.3g·n·σ² per coordinate, want ≈ 1 (the n noise shares)", ratio)
	}
	// And the release estimates the clipped update (n identical
	// clients over a denominator of n).
	var errNorm, ref float64
	for i := range dst {
		e := float64(dst[i]) - float64(clipped[i])
		errNorm += e * e
		ref += float64(clipped[i]) * float64(clipped[i])
	}
	// ‖noise‖ ≈ √(d·n·σ²)·γ/n; its square is a chi-square of d degrees
	// of freedom, within ±20% of its mean with probability > 1 − 10⁻⁸.
	want := math.Sqrt(1.2*float64(d)*n*s2) * p.Gamma / n
	if math.Sqrt(errNorm) > want {
		t.Errorf("released mean is %.3g from the clipped update (norm %.3g), want ≤ %.3g", math.Sqrt(errNorm), math.Sqrt(ref), want)
	}
}

// The released sum's sensitivity under replace-one adjacency, as the
// ledger charges it (job's ddgRho: 2Δ₂): for neighbouring cohorts that
// differ in one client's update (adversarial: zero, huge spikes, the
// antipode of the other's), with every other client's rounding coupled
// (the same generator in both worlds) and no noise shares, the two ring
// sums differ, centred mod 2^b, by at most 2Δ₂ in L2 norm, exactly in
// integers. The antipodal pair moves the sum by more than Δ₂, so a charge
// at one Δ₂ (add/remove's) would be wrong here.
func TestDDGSumSensitivityReplaceOne(t *testing.T) {
	const n, d, clip = 8, 100, 1.0
	p, err := ChooseDDGParams(clip, d, n, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	rot := ddgTestRot(d, 7)
	delta2 := DDGSensitivity(p)
	rng := rand.New(rand.NewPCG(3, 4))
	others := make([][]float32, n-1)
	for i := range others {
		others[i] = make([]float32, d)
		for j := range others[i] {
			others[i][j] = float32(rng.NormFloat64() * 0.2)
		}
	}
	flat := make([]float32, d)
	for j := range flat {
		flat[j] = float32(clip / math.Sqrt(d))
	}
	anti := make([]float32, d)
	for j := range anti {
		anti[j] = -flat[j]
	}
	spike := make([]float32, d)
	spike[0], spike[d-1] = 1e30, -1e30
	pairs := [][2][]float32{{make([]float32, d), spike}, {flat, anti}, {spike, anti}, {others[0], flat}}
	sum := func(u []float32, seed uint64) []uint32 {
		s := make([]uint32, p.PaddedDim)
		enc := make([]uint32, p.PaddedDim)
		for i, x := range append([][]float32{u}, others...) {
			// Client i's rounding draws the same in both worlds (i ≥ 1);
			// the replaced client draws its own.
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			if _, err := ddgEncode(enc, x, p, rot, nil, r); err != nil {
				t.Fatal(err)
			}
			for j, v := range enc {
				s[j] += v
			}
		}
		return s
	}
	worst := 0.0
	for k, pr := range pairs {
		for draw := range 50 {
			seed := uint64(100*k + draw)
			a, b := sum(pr[0], seed), sum(pr[1], seed)
			var ss int64
			for j := range a {
				c := ddgCentred(a[j]-b[j], p.Bits)
				ss += c * c
			}
			if float64(ss) > 4*delta2*delta2 {
				t.Fatalf("pair %d: neighbouring sums differ by %v > 2Δ₂ = %v", k, math.Sqrt(float64(ss)), 2*delta2)
			}
			worst = max(worst, math.Sqrt(float64(ss)))
		}
	}
	if worst <= delta2 {
		t.Fatalf("the sums differed by at most %v ≤ Δ₂ = %v: the adversaries do not reach the replace-one case", worst, delta2)
	}
	t.Logf("neighbouring sums differ by up to %.4g = %.3f·Δ₂ (bound 2Δ₂)", worst, worst/delta2)
}
