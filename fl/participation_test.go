package fl

import (
	"github.com/dpfl/dpfl/dp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpfl/dpfl/fl/model"
)

// Diurnal availability averages 1 − a/2 over users' phases (the mean of
// (1 + cos)/2 over a uniform phase is 1/2), and dropouts happen at their
// rate, within binomial tolerances; the draws are reproducible.
func TestAvailabilityAndDropoutRates(t *testing.T) {
	p := Participation{DiurnalAmplitude: 0.8, PeriodRounds: 24, DropoutRate: 0.1, Seed: 5}
	const n = 40000
	avail, drop := 0, 0
	for u := range n {
		if p.Available(u, 7) {
			avail++
		}
		if p.Drops(u, 7) {
			drop++
		}
	}
	within := func(got int, prob float64) bool {
		return math.Abs(float64(got)-n*prob) <= 5*math.Sqrt(n*prob*(1-prob))
	}
	if !within(avail, 1-0.8/2) || !within(drop, 0.1) {
		t.Fatalf("available %d, dropped %d of %d; want about %v and %v", avail, drop, n, n*0.6, n*0.1)
	}
	if p.Available(123, 7) != p.Available(123, 7) || (Participation{}).AvailableProb(9, 3) != 1 {
		t.Fatal("availability is not reproducible, or not 1 without a diurnal amplitude")
	}
	kept, un, dr := p.Filter([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 3)
	if len(kept)+un+dr != 10 {
		t.Fatalf("filter lost users: %d kept, %d unavailable, %d dropped", len(kept), un, dr)
	}
	s := p.SampleAvailable(1000, 50, 3, rand.New(rand.NewPCG(1, 1)))
	if len(s) != 50 || !slices.IsSorted(s) || len(slices.Compact(slices.Clone(s))) != 50 {
		t.Fatalf("SampleAvailable: %d users, sorted %v", len(s), slices.IsSorted(s))
	}
	for _, u := range s {
		if !p.Available(u, 3) {
			t.Fatalf("user %d sampled while unavailable", u)
		}
	}
}

// Over-selection closes the round when Target devices have reported: with
// no compute term, a device's time is its communication at its bandwidth
// factor plus C_comp, so the round's estimate is the Target-th smallest of
// those, recomputed here from the same seeded factors; a deadline between
// the fastest and slowest devices discards exactly those past it.
func TestTargetAndDeadline(t *testing.T) {
	ds := blobs(300, 10)
	fed := population(t, ds, 10)
	m, _ := model.New("logreg", 784, 10)
	rt := DefaultRoundTimeModel()
	rt.ComputeRatio, rt.BandwidthSigma = 0, 1
	cohort := []int{0, 1, 2, 3, 4, 5, 6, 7}
	bytes := 4 * float64(m.NumParams())
	var times []float64
	for _, id := range cohort {
		rng := rand.New(rand.NewPCG(3^deviceStream, uint64(1)<<32|uint64(id)))
		times = append(times, rt.ClientSeconds(bytes, bytes, rt.Device(0, rng)))
	}
	sorted := slices.Sorted(slices.Values(times))
	run := func(target int, deadline float64) RoundStats {
		alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
			Aggregate: WeightedMean{}, Seed: 3, Simulation: Simulation{RoundTime: &rt, Target: target, DeadlineSeconds: deadline}}
		st, err := alg.Round(t.Context(), 1, make([]float32, m.NumParams()), fed, cohort, 8)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := run(3, 0)
	if st.Clients != 3 || st.Late != 5 || st.EstimatedSeconds < sorted[2] || st.EstimatedSeconds > sorted[2]+1 {
		t.Fatalf("target 3: %d reported, %d late, round %v s; the 3rd fastest device takes %v s", st.Clients, st.Late, st.EstimatedSeconds, sorted[2])
	}
	deadline := (sorted[3] + sorted[4]) / 2
	st = run(0, deadline)
	if st.Clients != 4 || st.Late != 4 || st.EstimatedSeconds > deadline+1 {
		t.Fatalf("deadline %v s: %d reported, %d late, round %v s (device times %v)", deadline, st.Clients, st.Late, st.EstimatedSeconds, sorted)
	}
	if sorted[0] == sorted[7] {
		t.Fatal("identical devices: the test cannot tell fast from slow")
	}
}

// Dropping users out of a round only removes their clipped updates: with
// the same seeds, a user's update does not depend on who else reports, so
// the clipped sum without the dropouts differs from the full one by
// exactly the dropped users' clipped updates, each of norm ≤ C — the
// sensitivity the accountant assumes is never exceeded.
func TestDropoutsOnlyRemoveClippedUpdates(t *testing.T) {
	ds := blobs(400, 11)
	fed := population(t, ds, 20)
	m, _ := model.New("logreg", 784, 10)
	const clip = 0.05
	sum := func(cohort []int) []float64 {
		alg := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 10, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}},
			Aggregate: &GaussianAggregator{Params: dp.Params{ClipNorm: clip}, Rand: rand.New(rand.NewPCG(1, 1))}, Workers: 1, Seed: 4}
		params := make([]float32, m.NumParams())
		if _, err := alg.Round(t.Context(), 1, params, fed, cohort, 1); err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(params))
		for i, v := range params {
			out[i] = float64(v) // x_1 = x_0 + Σ clipped Δ_i / 1, x_0 = 0
		}
		return out
	}
	cohort := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	p := Participation{DropoutRate: 0.4, Seed: 9}
	kept, _, dropped := p.Filter(cohort, 1)
	if dropped == 0 || len(kept) == len(cohort) {
		t.Fatal("no dropout drawn: the test needs some")
	}
	full, part := sum(cohort), sum(kept)
	removed := make([]float64, len(full))
	for i := range full {
		removed[i] = full[i] - part[i]
	}
	var n2 float64
	for _, v := range removed {
		n2 += v * v
	}
	if n := math.Sqrt(n2); n > float64(dropped)*clip*(1+1e-4) || n == 0 {
		t.Fatalf("dropouts changed the sum by %v, more than %d × C = %v (or not at all)", n, dropped, float64(dropped)*clip)
	}
	// One dropped user at a time: the change is that user's clipped update.
	for _, u := range cohort {
		if slices.Contains(kept, u) {
			continue
		}
		without := sum(slices.DeleteFunc(slices.Clone(cohort), func(v int) bool { return v == u }))
		var d2 float64
		for i := range full {
			d := full[i] - without[i]
			d2 += d * d
		}
		if d := math.Sqrt(d2); d > clip*(1+1e-4) || d < clip/100 {
			t.Fatalf("user %d's contribution has norm %v; clip C = %v", u, d, clip)
		}
	}
}
