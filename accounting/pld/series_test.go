package pld

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// resetSeriesCaches empties every cache of EpsilonPoissonGaussian, so the
// next call computes from nothing.
func resetSeriesCaches() {
	dropAllTables()
	grids.Lock()
	grids.m = nil
	grids.Unlock()
	floorCache.Lock()
	floorCache.m = nil
	floorCache.Unlock()
}

// One and two steps against the exact δ(ε) of the mechanism (the closed
// form oneStepDelta and its numerical convolution twoStepDelta) in both
// directions: at the reported ε the exact δ is at most δ, so the exact ε
// is at most the reported one, and at 0.99 of it the exact δ is above δ,
// so the report is within 1% of the exact ε.
func TestSeriesExactSmallCounts(t *testing.T) {
	for _, tc := range []struct {
		q, z  float64
		n     int
		delta float64
	}{
		{0.2, 0.5, 1, 1e-5}, {0.02, 1, 1, 1e-5}, {0.5, 1, 1, 1e-3}, {1, 0.8, 1, 1e-6},
		{0.2, 0.5, 2, 1e-5}, {0.02, 1, 2, 1e-5}, {1, 0.8, 2, 1e-6},
	} {
		got, err := EpsilonPoissonGaussian(tc.q, tc.z, tc.n, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		exact := func(eps float64) float64 {
			d := 0.0
			for _, add := range []bool{false, true} {
				if tc.n == 1 {
					d = math.Max(d, oneStepDelta(tc.q, tc.z, eps, add))
				} else {
					d = math.Max(d, twoStepDelta(tc.q, tc.z, eps, add))
				}
			}
			return d
		}
		if d := exact(got); d > tc.delta*(1+1e-9) {
			t.Errorf("%+v: at the reported ε = %.7f the exact δ is %.6g > δ", tc, got, d)
		}
		if d := exact(0.99 * got); !(d > tc.delta) {
			t.Errorf("%+v: at 0.99·ε = %.7f the exact δ is already %.6g ≤ δ: not within 1%%", tc, 0.99*got, d)
		}
	}
}

// The spectral power on a window equals the plain fold — n−1 Compose of
// the one-step PLD on the epoch's own grid, direct or FFT convolution
// with its own truncation — for every count of the first eight epochs:
// the two differ only in where they put tails of about windowTail·δ
// (windows) and 1e-16 (trims), which moves ε by a relative 1e-6 at most.
// The reported ε is never below its grid's.
func TestSeriesMatchesFold(t *testing.T) {
	for _, tc := range []struct{ q, z, delta float64 }{{0.02, 1, 1e-5}, {0.2, 0.7, 1e-6}, {1, 3, 1e-5}} {
		folds := map[float64]*PLD{} // grid interval → latest fold
		counts := map[float64]int{}
		for n := 1; n <= 128; n++ {
			e := epochOf(n)
			h := gridInterval(tc.q, tc.z, tc.delta, e)
			one, err := PoissonGaussian(tc.q, tc.z, h)
			if err != nil {
				t.Fatal(err)
			}
			p, k := folds[h], counts[h]
			if p == nil {
				p, k = one, 1
			}
			for ; k < n; k++ {
				if p, err = p.Compose(one); err != nil {
					t.Fatal(err)
				}
			}
			folds[h], counts[h] = p, k
			want, _ := p.Epsilon(tc.delta)
			raw, err := rawEpsilon(tc.q, tc.z, tc.delta, e, n)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(raw-want) > 1e-6*want+1e-12 {
				t.Fatalf("%+v n=%d: spectral ε = %.12f, fold %.12f", tc, n, raw, want)
			}
			got, err := EpsilonPoissonGaussian(tc.q, tc.z, n, tc.delta)
			if err != nil {
				t.Fatal(err)
			}
			if got < raw {
				t.Fatalf("%+v n=%d: ε = %v below its own grid's %v", tc, n, got, raw)
			}
		}
	}
}

// The result is the larger ε of the two directions, each computed by
// SelfCompose on the same grid, to a relative 1e-6 (the windows): also
// where the add direction's bound (dominated) lets it be skipped, and
// where it does not (two cases in which the directions are within 7%).
func TestSeriesDirections(t *testing.T) {
	for _, tc := range []struct {
		q, z  float64
		n     int
		delta float64
		skip  bool
	}{
		{0.02, 1, 300, 1e-5, true},
		{0.02, 1, 3000, 1e-5, true},
		{0.2, 0.5, 3, 1e-5, true},
		{0.001, 0.8, 500, 1e-6, true},
		{0.01, 2, 4096, 1e-5, false},
		{1e-4, 1, 2048, 1e-5, true},
		{1e-4, 1, 10000, 1e-5, false},
	} {
		if testing.Short() && tc.n > 1000 {
			continue
		}
		e := epochOf(tc.n)
		g := getGrid(gridKey{tc.q, tc.z, gridInterval(tc.q, tc.z, tc.delta, e)})
		one, err := PoissonGaussian(tc.q, tc.z, g.h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := one.SelfCompose(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		rem, add := p.dirs[0].epsilon(g.h, tc.delta), p.dirs[1].epsilon(g.h, tc.delta)
		raw, err := g.epsilon(tc.n, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Max(rem, add)
		if math.Abs(raw-want) > 1e-6*want {
			t.Errorf("%+v: ε = %.9f, directions by SelfCompose %.9f and %.9f", tc, raw, rem, add)
		}
		skip := g.dirs[1].dominated(g.h, tc.n, tc.delta, raw)
		if skip != tc.skip {
			t.Errorf("%+v: add direction skipped = %v", tc, skip)
		}
		if skip && add > rem*(1+1e-6) {
			t.Errorf("%+v: the add direction was skipped but its ε %.9f exceeds remove's %.9f", tc, add, rem)
		}
	}
}

// A count's ε does not depend on what was computed before it: counts
// computed in increasing order (a ledger), in decreasing order, and one
// at a time from empty caches give the same bits.
func TestSeriesBatchEqualsIncremental(t *testing.T) {
	const q, z, delta = 0.02, 1.0, 1e-5
	resetSeriesCaches()
	const top = 300
	inOrder := make([]float64, top+1)
	for n := 1; n <= top; n++ {
		v, err := EpsilonPoissonGaussian(q, z, n, delta)
		if err != nil {
			t.Fatal(err)
		}
		inOrder[n] = v
	}
	resetSeriesCaches()
	for n := top; n >= 1; n-- {
		if v, _ := EpsilonPoissonGaussian(q, z, n, delta); math.Float64bits(v) != math.Float64bits(inOrder[n]) {
			t.Fatalf("n=%d: %.17g in decreasing order, %.17g in increasing order", n, v, inOrder[n])
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 4, 5, 64, 65, 128, 129, 299, 300, 1 + rng.IntN(top), 1 + rng.IntN(top)} {
		resetSeriesCaches()
		if v, _ := EpsilonPoissonGaussian(q, z, n, delta); math.Float64bits(v) != math.Float64bits(inOrder[n]) {
			t.Fatalf("n=%d: %.17g from empty caches, %.17g in increasing order", n, v, inOrder[n])
		}
	}
	// Around round 10,000, where the window and its tables are large:
	// a ledger's rounds against each count from empty caches.
	if testing.Short() {
		return
	}
	resetSeriesCaches()
	var ledger []float64
	for n := 9990; n <= 10010; n++ {
		v, _ := EpsilonPoissonGaussian(q, z, n, delta)
		ledger = append(ledger, v)
	}
	for _, n := range []int{9990, 9999, 10000, 10001, 10010} {
		resetSeriesCaches()
		if v, _ := EpsilonPoissonGaussian(q, z, n, delta); math.Float64bits(v) != math.Float64bits(ledger[n-9990]) {
			t.Fatalf("n=%d: %.17g from empty caches, %.17g in a ledger", n, v, ledger[n-9990])
		}
	}
}

// More rounds never lower ε (a composition of n+1 releases can be
// post-processed into one of n): checked at every count, across the grid
// changes at powers of two, in four regimes.
func TestSeriesMonotone(t *testing.T) {
	for _, tc := range []struct {
		q, z  float64
		top   int
		delta float64
	}{{0.02, 1, 1100, 1e-5}, {0.001, 0.8, 300, 1e-6}, {0.5, 0.5, 200, 1e-5}, {1, 2, 200, 1e-5}} {
		prev := 0.0
		for n := 1; n <= tc.top; n++ {
			v, err := EpsilonPoissonGaussian(tc.q, tc.z, n, tc.delta)
			if err != nil {
				t.Fatal(err)
			}
			if v < prev {
				t.Fatalf("%+v: ε(%d) = %.17g below ε(%d) = %.17g", tc, n, v, n-1, prev)
			}
			prev = v
		}
	}
}

// Goroutines sharing the caches get what one goroutine gets alone.
func TestSeriesConcurrent(t *testing.T) {
	const q, z, delta = 0.05, 1.1, 1e-5
	counts := []int{1, 7, 64, 65, 100, 255, 256, 257, 400, 511, 512, 513}
	resetSeriesCaches()
	want := map[int]float64{}
	for _, n := range counts {
		want[n], _ = EpsilonPoissonGaussian(q, z, n, delta)
	}
	resetSeriesCaches()
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(counts))
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range counts {
				n := counts[(i*(w+1)+w)%len(counts)]
				if v, _ := EpsilonPoissonGaussian(q, z, n, delta); math.Float64bits(v) != math.Float64bits(want[n]) {
					errs <- fmt.Sprintf("n=%d: %.17g concurrently, %.17g alone", n, v, want[n])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// Dropping the spectrum tables (what purgeTables does past tableBudget)
// releases their memory from tableBytes and changes no result.
func TestSeriesDropTables(t *testing.T) {
	resetSeriesCaches()
	if b := tableBytes.Load(); b != 0 {
		t.Fatalf("tableBytes = %d with no grid cached", b)
	}
	want := map[int]float64{}
	for _, n := range []int{2, 100, 1000, 1001, 3000} {
		want[n], _ = EpsilonPoissonGaussian(0.02, 1, n, 1e-5)
	}
	if b := tableBytes.Load(); !(b > 0 && b <= tableBudget) {
		t.Fatalf("tableBytes = %d after five counts", b)
	}
	dropAllTables()
	if b := tableBytes.Load(); b != 0 {
		t.Fatalf("tableBytes = %d after dropping every table", b)
	}
	for n, w := range want {
		if v, _ := EpsilonPoissonGaussian(0.02, 1, n, 1e-5); math.Float64bits(v) != math.Float64bits(w) {
			t.Errorf("n=%d: %.17g after dropping the tables, %.17g before", n, v, w)
		}
	}
}

// Counts beyond the limit are refused; a δ near 1 is fine.
func TestSeriesLimits(t *testing.T) {
	if _, err := EpsilonPoissonGaussian(0.01, 1, maxSeriesSteps+1, 1e-5); err == nil {
		t.Error("2⁴⁰+1 steps: no error")
	}
	if e, err := EpsilonPoissonGaussian(0.01, 1, 100, 0.5); err != nil || !(e >= 0 && e < 0.1) {
		t.Errorf("δ = 0.5: ε = %v, %v", e, err)
	}
	for n, want := range map[int]int{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 1024: 10, 1025: 11} {
		if got := epochOf(n); got != want {
			t.Errorf("epochOf(%d) = %d, want %d", n, got, want)
		}
	}
}

// EpsilonPoissonGaussianV1, kept for recomputing "pld/1" reports: exact
// at q = 1 within 1% (never below), and the demo job's published 2.200.
func TestEpsilonPoissonGaussianV1(t *testing.T) {
	for _, tc := range []struct {
		z     float64
		n     int
		delta float64
	}{{1, 1, 1e-5}, {4, 10, 1e-5}, {2, 100, 1e-9}} {
		got, err := EpsilonPoissonGaussianV1(1, tc.z, tc.n, tc.delta)
		if err != nil {
			t.Fatal(err)
		}
		want := gaussianEpsilon(tc.z/math.Sqrt(float64(tc.n)), tc.delta)
		if got < want || got > 1.01*want {
			t.Errorf("%+v: ε = %.6f, exact %.6f", tc, got, want)
		}
	}
	// README of commit 671ea47: the demo job, q = 0.02, z = 1, 300
	// rounds, δ = 1e-5, ε = 2.200 by PLD.
	if e, err := EpsilonPoissonGaussianV1(0.02, 1, 300, 1e-5); err != nil || math.Abs(e-2.2) > 0.0005 {
		t.Errorf("demo: ε = %v, %v; published 2.200", e, err)
	}
	if _, err := EpsilonPoissonGaussianV1(0, 1, 10, 1e-5); err == nil {
		t.Error("q = 0: no error")
	}
}
