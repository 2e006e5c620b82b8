package fl

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/secagg"
)

func secureRand(t *testing.T) *rand.Rand {
	t.Helper()
	r, err := dp.NewSecureRand()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// release feeds deltas to agg through two accumulators, as two workers
// would, and returns the released Δ_t.
func release(t *testing.T, agg Aggregator, deltas [][]float32, expected float64) ([]float32, AggregateStats, error) {
	t.Helper()
	d := len(deltas[0])
	accs := []Accumulator{agg.NewAccumulator(d), agg.NewAccumulator(d)}
	for i, x := range deltas {
		if err := accs[i%2].Add(append([]float32(nil), x...), 10); err != nil {
			t.Fatal(err)
		}
	}
	dst := make([]float32, d)
	st, err := agg.Release(dst, accs, expected)
	return dst, st, err
}

// Without noise, secure aggregation releases the plain clipped mean up to
// the fixed point: per coordinate, each client's encoding is off by less
// than 2^−f, and clipping to C − s instead of C (s the rounding slack)
// moves a coordinate by at most s.
func TestSecureAggregatorMatchesPlainClippedSum(t *testing.T) {
	const n, d, clip, expected = 20, 1000, 0.5, 25.0
	gen := rand.New(rand.NewPCG(7, 7))
	deltas := make([][]float32, n)
	for i := range deltas {
		deltas[i] = make([]float32, d)
		scale := gen.Float64() * 0.05 // norms from 0 to ~1.6: some clipped
		for j := range deltas[i] {
			deltas[i][j] = float32(gen.NormFloat64() * scale)
		}
	}
	plain, _, err := release(t, &GaussianAggregator{Params: dp.Params{ClipNorm: clip}, Rand: secureRand(t)}, deltas, expected)
	if err != nil {
		t.Fatal(err)
	}
	sec := &SecureAggregator{Params: dp.Params{ClipNorm: clip}, DP: true, MinClients: 3, Rand: secureRand(t), Dropouts: rand.New(rand.NewPCG(1, 1))}
	got, st, err := release(t, sec, deltas, expected)
	if err != nil {
		t.Fatal(err)
	}
	if st.SecAgg == nil || st.SecAgg.Survivors != n || st.SecAgg.Dropped != 0 || st.Clients != n {
		t.Fatalf("stats %+v / %+v", st, st.SecAgg)
	}
	enc, err := secagg.NewEncoding(n, clip)
	if err != nil {
		t.Fatal(err)
	}
	step := math.Ldexp(1, -enc.FracBits)
	bound := n*(enc.RoundingSlack(d)+step)/expected + 1e-6
	worst := 0.0
	for j := range got {
		worst = max(worst, math.Abs(float64(got[j]-plain[j])))
	}
	if worst > bound {
		t.Fatalf("secure and plain releases differ by %g, bound %g (f = %d)", worst, bound, enc.FracBits)
	}
	if st.ClippedFraction != 0 || st.MeanNorm != 0 {
		t.Fatalf("per-client statistics leaked out of secure aggregation: %+v", st)
	}
}

// Noise is added in the ring, before decoding: with the noise draws
// coupled, the noisy ring sums with and without an honest client differ
// by exactly its encoded update mod 2^32, even when a malicious client has
// pushed a coordinate to the edge of the int32 range (where decoding
// first and adding noise after would move the output by ~2^32·2^−f).
func TestRingNoiseMakesWrapAroundPostProcessing(t *testing.T) {
	enc, err := secagg.NewEncoding(10, 1)
	if err != nil {
		t.Fatal(err)
	}
	const d = 256
	malicious := make([]uint32, d)
	honest := make([]uint32, d)
	for i := range malicious {
		malicious[i] = math.MaxInt32 - uint32(i) // decodes near +2^31·2^−f
		honest[i] = uint32(int32(i%7) - 3)       // a small signed update
	}
	with, without := make([]uint32, d), make([]uint32, d)
	for i := range with {
		with[i] = malicious[i] + honest[i]
		without[i] = malicious[i]
	}
	sigma := 2.5 * math.Ldexp(1, enc.FracBits)
	addRingNoise(with, sigma, rand.New(rand.NewPCG(9, 9)))
	addRingNoise(without, sigma, rand.New(rand.NewPCG(9, 9)))
	moved := 0
	for i := range with {
		if with[i]-without[i] != honest[i] {
			t.Fatalf("coordinate %d: noisy sums differ by %d, the honest update is %d", i, int32(with[i]-without[i]), int32(honest[i]))
		}
		if int32(without[i]) < 0 {
			moved++ // wrapped past +2^31: post-processing of the noisy sum, covered
		}
	}
	if moved == 0 {
		t.Fatal("no coordinate wrapped: the test does not exercise the wrap-around")
	}
}

// Simulated dropouts only remove contributions: with client i's update the
// unit vector e_i (scaled), the released coordinates that are non-zero are
// exactly the survivors', and there are as many as the stats say.
func TestSecureAggregatorDropouts(t *testing.T) {
	const n, expected = 30, 30.0
	deltas := make([][]float32, n)
	for i := range deltas {
		deltas[i] = make([]float32, n)
		deltas[i][i] = 0.25
	}
	sec := &SecureAggregator{Params: dp.Params{ClipNorm: 0.5}, DP: true, MinClients: 3, DropoutRate: 0.3,
		Rand: secureRand(t), Dropouts: rand.New(rand.NewPCG(3, 3))}
	got, st, err := release(t, sec, deltas, expected)
	if err != nil {
		t.Fatal(err)
	}
	if st.SecAgg.Dropped == 0 || st.SecAgg.Survivors+st.SecAgg.Dropped != n {
		t.Fatalf("dropout rate 0.3 over %d clients: %+v", n, st.SecAgg)
	}
	nonzero := 0
	for _, v := range got {
		switch {
		case math.Abs(float64(v)-0.25/expected) < 1e-4:
			nonzero++
		case math.Abs(float64(v)) > 1e-4:
			t.Fatalf("released %v: neither one client's 0.25/%v nor 0", v, expected)
		}
	}
	if nonzero != st.SecAgg.Survivors {
		t.Fatalf("%d contributions in the sum, %d survivors reported", nonzero, st.SecAgg.Survivors)
	}
}

// Below the minimum cohort the instance aborts and releases nothing.
func TestSecureAggregatorAbortsBelowMinimum(t *testing.T) {
	deltas := [][]float32{{0.1, 0.2}, {0.3, 0.1}}
	sec := &SecureAggregator{Params: dp.Params{ClipNorm: 1}, MinClients: 3, Rand: secureRand(t), Dropouts: rand.New(rand.NewPCG(1, 1))}
	got, _, err := release(t, sec, deltas, 2)
	if !errors.Is(err, secagg.ErrTooFewSurvivors) {
		t.Fatalf("2 clients, minimum 3: got %v, want ErrTooFewSurvivors", err)
	}
	if got[0] != 0 || got[1] != 0 {
		t.Fatalf("aborted instance released %v", got)
	}
}

// BenchmarkSecureRelease is one round of the secure-aggregation demo
// (examples/demo-secagg-job.json) on the aggregation side: 120 simulated
// clients (q = 0.02 of 6,000 users), d = 7,850 (logreg 784×10+10), DP with
// the cohort bound the job uses (μ + 10√μ + 10 = 239), no protocol dropouts:
// the whole protocol, every client's keys, shares and masks, and the
// server's unmasking. Profile it with -cpuprofile.
func BenchmarkSecureRelease(b *testing.B) {
	const n, d = 120, 784*10 + 10
	gen := rand.New(rand.NewPCG(5, 5))
	deltas := make([][]float32, n)
	for i := range deltas {
		deltas[i] = make([]float32, d)
		for j := range deltas[i] {
			deltas[i][j] = float32(gen.NormFloat64() * 0.01)
		}
	}
	noise, err := dp.NewSecureRand()
	if err != nil {
		b.Fatal(err)
	}
	sec := &SecureAggregator{Params: dp.Params{ClipNorm: 0.5, NoiseMultiplier: 1}, DP: true, MinClients: 3,
		Rand: noise, Dropouts: rand.New(rand.NewPCG(1, 1)), MaxClients: 239}
	accs := []Accumulator{sec.NewAccumulator(d), sec.NewAccumulator(d)}
	dst := make([]float32, d)
	for b.Loop() {
		for _, a := range accs {
			a.Reset()
		}
		for i, x := range deltas {
			if err := accs[i%2].Add(x, 10); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := sec.Release(dst, accs, n); err != nil {
			b.Fatal(err)
		}
	}
}
