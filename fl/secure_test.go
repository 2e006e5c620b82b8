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
	if st.ClippedFraction == 0 || st.MeanNorm == 0 {
		t.Fatalf("clipping stats not reported: %+v", st)
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
