package data

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustOnDemand(t testing.TB, ds *Dataset, opt OnDemandOptions) *OnDemand {
	t.Helper()
	p, err := NewOnDemand(ds, opt)
	if err != nil {
		t.Fatalf("NewOnDemand(%+v): %v", opt, err)
	}
	return p
}

func sameClient(a, b Client) bool {
	return a.ID == b.ID && slices.Equal(a.Train, b.Train) && slices.Equal(a.HeldOut, b.HeldOut)
}

// A user's data is a function of (Seed, id): the same id twice, or from a
// second population with the same options, or from goroutines at once,
// gives the same lists; another seed gives other lists.
func TestOnDemandDeterministic(t *testing.T) {
	ds := labelled(repeat(500, 10), 30)
	opt := OnDemandOptions{NumClients: 1_000_000, Alpha: 0.3, SizeMu: math.Log(50), SizeSigma: 1,
		MaxExamples: 500, HeldOutFraction: 0.2, EvalUserFraction: 0.1, Seed: 7}
	p, q := mustOnDemand(t, ds, opt), mustOnDemand(t, ds, opt)
	opt.Seed = 8
	r := mustOnDemand(t, ds, opt)
	ids := []int{0, 1, 2, 3, 12345, 500_000, 999_999}
	for _, id := range ids {
		a := p.Client(id)
		if a.ID != id || len(a.Train) == 0 {
			t.Fatalf("client %d: ID %d, %d train examples", id, a.ID, len(a.Train))
		}
		if !sameClient(a, p.Client(id)) || !sameClient(a, q.Client(id)) {
			t.Errorf("client %d not regenerated identically", id)
		}
		if sameClient(a, r.Client(id)) {
			t.Errorf("client %d identical under seeds 7 and 8", id)
		}
		if p.IsEvalUser(id) != q.IsEvalUser(id) {
			t.Errorf("client %d: eval flag not reproducible", id)
		}
	}
	// Neighbouring ids must not share data either.
	if sameClient(p.Client(0), Client{ID: 0, Train: p.Client(1).Train, HeldOut: p.Client(1).HeldOut}) {
		t.Errorf("clients 0 and 1 identical")
	}
	want := make([]Client, 200)
	for id := range want {
		want[id] = p.Client(id)
	}
	var wg sync.WaitGroup
	bad := make([]int, 4)
	for g := range bad {
		wg.Go(func() {
			for id := range want {
				if !sameClient(p.Client(id), want[id]) {
					bad[g]++
				}
			}
		})
	}
	wg.Wait()
	if slices.Max(bad) != 0 {
		t.Errorf("concurrent Client calls disagree with sequential ones: %v mismatches", bad)
	}
}

// allocBytes is the mean number of bytes (and allocations) f allocates.
func allocBytes(f func()) (bytes, allocs float64) {
	const runs = 5
	f()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&b)
	return float64(b.TotalAlloc-a.TotalAlloc) / runs, float64(b.Mallocs-a.Mallocs) / runs
}

// Building a population of 10^7 users allocates what one of 10^3 does:
// the class pools (4 bytes per base example) and O(classes) more.
func TestNewOnDemandConstantInN(t *testing.T) {
	ds := labelled(repeat(2000, 10), 31)
	build := func(n int) func() {
		return func() {
			mustOnDemand(t, ds, OnDemandOptions{NumClients: n, Alpha: 0.5, SizeMu: 4, SizeSigma: 1, MaxExamples: 1000, Seed: 1})
		}
	}
	small, smallAllocs := allocBytes(build(1000))
	big, bigAllocs := allocBytes(build(10_000_000))
	huge, _ := allocBytes(build(MaxOnDemandClients))
	t.Logf("bytes allocated: N=1e3 %.0f, N=1e7 %.0f, N=1e9 %.0f; allocations %.0f, %.0f", small, big, huge, smallAllocs, bigAllocs)
	if big > small+512 || huge > small+512 || bigAllocs > smallAllocs {
		t.Errorf("allocation grows with N: %.0f bytes (%.0f allocs) at N=1e3, %.0f (%.0f) at 1e7, %.0f at 1e9", small, smallAllocs, big, bigAllocs, huge)
	}
	if n := float64(ds.Len()); small > 4*n+4096 {
		t.Errorf("NewOnDemand allocates %.0f bytes for %v examples, want about 4 per example", small, n)
	}
}

// sizeLaw is the exact distribution of a user's size, brute force: with
// X = exp(mu + sigma·Z), P(m = 1) = P(X < 3/2), P(m = k) = P(k−½ ≤ X <
// k+½) and P(m = cap) = P(X ≥ cap−½).
func sizeLaw(mu, sigma float64, cap int) []float64 {
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-(math.Log(x)-mu)/sigma/math.Sqrt2) }
	pk := make([]float64, cap+1)
	for k := 1; k <= cap; k++ {
		lo, hi := 0.0, 1.0
		if k > 1 {
			lo = cdf(float64(k) - 0.5)
		}
		if k < cap {
			hi = cdf(float64(k) + 0.5)
		}
		pk[k] = hi - lo
	}
	return pk
}

// Sizes are rounded log-normals clamped to [1, MaxExamples]: the sample
// mean and variance of log m match the exact discrete law (sizeLaw), as do
// the shares clamped to 1 and to the cap (binomial, 5 sd), and
// ExpectedSize matches Σ k·P(m = k) and the sample mean.
func TestOnDemandSizes(t *testing.T) {
	ds := labelled(repeat(1000, 10), 32)
	const users, mu, sigma, cap = 50000, 3.0, 1.3, 150
	p := mustOnDemand(t, ds, OnDemandOptions{NumClients: MaxOnDemandClients, Alpha: 1, SizeMu: mu, SizeSigma: sigma, MaxExamples: cap, HeldOutFraction: 0.1, Seed: 33})
	var logm, m moments
	ones, capped := 0, 0
	for id := range users {
		c := p.Client(id * 19_997)
		k := len(c.Train) + len(c.HeldOut)
		if k < 1 || k > cap {
			t.Fatalf("user %d has %d examples, outside [1, %d]", id*19_997, k, cap)
		}
		logm.add(math.Log(float64(k)))
		m.add(float64(k))
		if k == 1 {
			ones++
		}
		if k == cap {
			capped++
		}
	}
	law := sizeLaw(mu, sigma, cap)
	var el, el2, em float64
	for k, pk := range law {
		if k > 0 {
			l := math.Log(float64(k))
			el += pk * l
			el2 += pk * l * l
			em += pk * float64(k)
		}
	}
	mean, v, seMean, seVar := logm.stats()
	if math.Abs(mean-el) > 5*seMean || math.Abs(v-(el2-el*el)) > 5*seVar {
		t.Errorf("log size: mean %.4f ± %.4f, var %.4f ± %.4f; exact law %.4f, %.4f", mean, seMean, v, seVar, el, el2-el*el)
	}
	for _, b := range []struct {
		name string
		got  int
		p    float64
	}{{"size 1", ones, law[1]}, {"size cap", capped, law[cap]}} {
		sd := math.Sqrt(users * b.p * (1 - b.p))
		if math.Abs(float64(b.got)-users*b.p) > 5*sd+1 {
			t.Errorf("%s: %d of %d users, expected %.1f ± %.1f", b.name, b.got, users, users*b.p, sd)
		}
	}
	if e := p.ExpectedSize(); math.Abs(e-em) > 1e-9*em {
		t.Errorf("ExpectedSize %.12g, exact Σ k·P(k) %.12g", e, em)
	}
	if mm, _, se, _ := m.stats(); math.Abs(mm-em) > 5*se {
		t.Errorf("mean size %.3f ± %.3f, expected %.3f", mm, se, em)
	}
	t.Logf("log size mean %.4f var %.4f (exact %.4f %.4f); %d ones, %d capped; E[m] = %.3f", mean, v, el, el2-el*el, ones, capped, em)
}

// ExpectedSize beyond 4096 uses the continuous tail: against the brute
// force E[m] = 1 + Σ_{k=2..cap} P(X ≥ k−½) for large caps, and exact for
// σ = 0.
func TestOnDemandExpectedSizeTail(t *testing.T) {
	for _, c := range []struct {
		mu, sigma float64
		cap       int
	}{{math.Log(2000), 1.5, 1 << 20}, {math.Log(50), 2.5, 100_000}, {8, 0.3, 5000}} {
		want := 1.0
		for k := 2; k <= c.cap; k++ {
			want += 0.5 * math.Erfc((math.Log(float64(k)-0.5)-c.mu)/c.sigma/math.Sqrt2)
		}
		if got := expectedSize(c.mu, c.sigma, c.cap); math.Abs(got-want) > 1e-7*want {
			t.Errorf("expectedSize(%g, %g, %d) = %.10g, brute force %.10g", c.mu, c.sigma, c.cap, got, want)
		}
	}
	for _, c := range []struct {
		mu   float64
		cap  int
		want float64
	}{{math.Log(100), 1000, 100}, {math.Log(100), 40, 40}, {-3, 10, 1}, {math.Log(7.6), 10, 8}} {
		if got := expectedSize(c.mu, 0, c.cap); got != c.want {
			t.Errorf("expectedSize(%g, 0, %d) = %v, want %v", c.mu, c.cap, got, c.want)
		}
	}
}

// Users of exactly m = 100 examples with class proportions x_c =
// count_c/m: under q ~ Dir(α·p) and multinomial counts, E[x_c] = p_c and
// Var[x_c] = Var[q_c] + E[q_c(1−q_c)]/m = p_c(1−p_c)/(α+1)·(1 + α/m),
// where Var[q_c] = α_c(α_0−α_c)/(α_0²(α_0+1)) with α_c = α·p_c, α_0 = α;
// IID (α = 0 or ∞) is the limit p_c(1−p_c)/m. Checked on a skewed prior
// p_c ∝ c+1, to 5 standard errors.
func TestOnDemandLabelMoments(t *testing.T) {
	const classes, users, m = 10, 3000, 100
	counts := make([]int, classes)
	for c := range counts {
		counts[c] = 200 * (c + 1)
	}
	ds := labelled(counts, 34)
	n := float64(ds.Len())
	for _, alpha := range []float64{MinOnDemandAlpha, 0.1, 1, 10, 1000, 0, math.Inf(1)} {
		p := mustOnDemand(t, ds, OnDemandOptions{NumClients: 1_000_000, Alpha: alpha, SizeMu: math.Log(m), MaxExamples: 1000, Seed: 35})
		st := make([]moments, classes)
		for id := range users {
			c := p.Client(id)
			if len(c.Train) != m {
				t.Fatalf("α=%g user %d: %d examples, want %d", alpha, id, len(c.Train), m)
			}
			for cl, x := range classCounts(ds, c.Train) {
				st[cl].add(float64(x) / m)
			}
		}
		for c := range st {
			pc := float64(counts[c]) / n
			wantVar := pc * (1 - pc) / m
			if alpha > 0 && !math.IsInf(alpha, 1) {
				wantVar = pc * (1 - pc) / (alpha + 1) * (1 + alpha/m)
			}
			mean, v, seMean, seVar := st[c].stats()
			if math.Abs(mean-pc) > 5*seMean || math.Abs(v-wantVar) > 5*seVar {
				t.Errorf("α=%g class %d: mean %.4f ± %.4f (prior %.4f), var %.5f ± %.5f (closed form %.5f)",
					alpha, c, mean, seMean, pc, v, seVar, wantVar)
			}
		}
	}
	// α = 0 and α = ∞ are the same IID population.
	a := mustOnDemand(t, ds, OnDemandOptions{NumClients: 10, SizeMu: 3, SizeSigma: 1, MaxExamples: 100, Seed: 36})
	b := mustOnDemand(t, ds, OnDemandOptions{NumClients: 10, Alpha: math.Inf(1), SizeMu: 3, SizeSigma: 1, MaxExamples: 100, Seed: 36})
	for id := range 10 {
		if !sameClient(a.Client(id), b.Client(id)) {
			t.Errorf("user %d differs between α = 0 and α = ∞", id)
		}
	}
}

// Small α concentrates users on few classes: over 10 balanced classes the
// mean largest class share is near 1 at α = 0.05 (Dir(0.005, …) puts
// almost all mass on one class) and near 1/10 at α = 1000, and it falls
// as α grows.
func TestOnDemandLabelConcentration(t *testing.T) {
	ds := labelled(repeat(1000, 10), 37)
	prev := 2.0
	for _, c := range []struct{ alpha, lo, hi float64 }{{0.05, 0.9, 1}, {1, 0.3, 0.8}, {1000, 0.1, 0.2}} {
		p := mustOnDemand(t, ds, OnDemandOptions{NumClients: 5000, Alpha: c.alpha, SizeMu: math.Log(100), MaxExamples: 1000, Seed: 38})
		var st moments
		for id := range 2000 {
			st.add(float64(slices.Max(classCounts(ds, p.Client(id).Train))) / 100)
		}
		mean, _, _, _ := st.stats()
		if mean < c.lo || mean > c.hi || mean >= prev {
			t.Errorf("α=%g: mean max class share %.3f, want in [%g, %g] and below %.3f (smaller α)", c.alpha, mean, c.lo, c.hi, prev)
		}
		prev = mean
		t.Logf("α=%g: mean max class share %.3f", c.alpha, mean)
	}
}

// Every index is in range and distinct within a user (pools of 1000 per
// class ≥ the cap), the labels are the class counts drawn (plan), and the
// held-out prefix has ⌊0.29·m⌋ examples, computed in integers.
func TestOnDemandClientContents(t *testing.T) {
	ds := labelled(repeat(1000, 10), 39)
	p := mustOnDemand(t, ds, OnDemandOptions{NumClients: 100_000_000, Alpha: 0.5, SizeMu: math.Log(40), SizeSigma: 1.2,
		MaxExamples: 1000, HeldOutFraction: 0.29, Seed: 40})
	seen := make(map[int32]bool)
	for u := range 2000 {
		id := u * 49_999
		c := p.Client(id)
		all := allIdx(c)
		mm := len(all)
		if len(c.HeldOut) != 29*mm/100 {
			t.Fatalf("user %d: %d held out of %d, want ⌊0.29·%d⌋ = %d", id, len(c.HeldOut), mm, mm, 29*mm/100)
		}
		clear(seen)
		for _, i := range all {
			if i < 0 || int(i) >= ds.Len() {
				t.Fatalf("user %d: index %d outside [0, %d)", id, i, ds.Len())
			}
			if seen[i] {
				t.Fatalf("user %d: example %d twice", id, i)
			}
			seen[i] = true
		}
		_, want := p.plan(id)
		if got := classCounts(ds, all); !slices.Equal(got, want) {
			t.Fatalf("user %d: labels %v, drawn class counts %v", id, got, want)
		}
	}
}

// A user wanting k_c > n_c examples of a class gets each of its n_c
// examples ⌊k_c/n_c⌋ or ⌈k_c/n_c⌉ times, exactly k_c mod n_c of them the
// larger number; classes without examples are never drawn.
func TestOnDemandSmallPools(t *testing.T) {
	ds := labelled([]int{3, 0, 5}, 41)
	for u := range 600 {
		id := u / 2
		alpha := []float64{2, 0}[u%2] // Dirichlet and IID
		p := mustOnDemand(t, ds, OnDemandOptions{NumClients: 1000, Alpha: alpha, SizeMu: math.Log(23), MaxExamples: 100, Seed: 42})
		c := p.Client(id)
		if len(c.Train) != 23 {
			t.Fatalf("user %d: %d examples, want 23", id, len(c.Train))
		}
		mult := make(map[int32]int)
		for _, i := range c.Train {
			mult[i]++
		}
		k := classCounts(ds, c.Train)
		if k[1] != 0 {
			t.Fatalf("user %d drew %d examples of the empty class", id, k[1])
		}
		for cl, nc := range []int{3, 0, 5} {
			if nc == 0 {
				continue
			}
			hiCount := 0
			for i, y := range ds.Y {
				if int(y) != cl {
					continue
				}
				switch mult[int32(i)] {
				case k[cl]/nc + 1:
					hiCount++
				case k[cl] / nc:
				default:
					t.Fatalf("user %d: example %d (class %d) appears %d times with %d of the class drawn", id, i, cl, mult[int32(i)], k[cl])
				}
			}
			if hiCount != k[cl]%nc {
				t.Fatalf("user %d class %d: %d examples appear ⌈k/n⌉ times, want k mod n = %d", id, cl, hiCount, k[cl]%nc)
			}
		}
	}
}

// IsEvalUser marks a fraction f of users (binomial, 5 sd), the same ones
// on every call, and an independent set under another seed (overlap f²).
func TestOnDemandEvalUsers(t *testing.T) {
	ds := labelled(repeat(10, 10), 43)
	const users, f = 200_000, 0.1
	opt := OnDemandOptions{NumClients: MaxOnDemandClients, SizeMu: 2, MaxExamples: 10, EvalUserFraction: f, Seed: 44}
	p := mustOnDemand(t, ds, opt)
	opt.Seed = 45
	q := mustOnDemand(t, ds, opt)
	opt.EvalUserFraction = 0
	none := mustOnDemand(t, ds, opt)
	eval, both := 0, 0
	for u := range users {
		id := u * 4999
		if p.IsEvalUser(id) {
			eval++
			if q.IsEvalUser(id) {
				both++
			}
		}
		if none.IsEvalUser(id) {
			t.Fatalf("user %d is an eval user at fraction 0", id)
		}
	}
	check := func(name string, got int, pr float64) {
		sd := math.Sqrt(users * pr * (1 - pr))
		if math.Abs(float64(got)-users*pr) > 5*sd {
			t.Errorf("%s: %d of %d users, expected %.0f ± %.0f", name, got, users, users*pr, sd)
		}
	}
	check("eval users", eval, f)
	check("eval under both seeds", both, f*f)
}

// RepeatsExamples flips where N·E[m] crosses the base size.
func TestOnDemandRepeatsExamples(t *testing.T) {
	ds := labelled(repeat(1000, 10), 46) // 10,000 examples
	for _, c := range []struct {
		n    int
		want bool
	}{{999, false}, {1000, false}, {1001, true}, {MaxOnDemandClients, true}} {
		p := mustOnDemand(t, ds, OnDemandOptions{NumClients: c.n, SizeMu: math.Log(10), MaxExamples: 50, Seed: 1})
		if p.ExpectedSize() != 10 || p.RepeatsExamples() != c.want {
			t.Errorf("N=%d, 10 examples each: E[m] = %v, RepeatsExamples %v, want %v", c.n, p.ExpectedSize(), p.RepeatsExamples(), c.want)
		}
	}
}

func TestOnDemandIDRange(t *testing.T) {
	ds := labelled(repeat(10, 2), 47)
	p := mustOnDemand(t, ds, OnDemandOptions{NumClients: MaxOnDemandClients, SizeMu: 1, MaxExamples: 5})
	if c := p.Client(MaxOnDemandClients - 1); len(c.Train) == 0 {
		t.Errorf("last user has no examples")
	}
	for _, id := range []int{-1, MaxOnDemandClients} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Client(%d) did not panic", id)
				}
			}()
			p.Client(id)
		}()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("IsEvalUser(%d) did not panic", id)
				}
			}()
			p.IsEvalUser(id)
		}()
	}
}

func TestNewOnDemandErrors(t *testing.T) {
	ds := labelled(repeat(10, 2), 48)
	good := OnDemandOptions{NumClients: 10, SizeMu: 1, MaxExamples: 5}
	if _, err := NewOnDemand(ds, good); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for _, c := range []struct {
		field string
		edit  func(*OnDemandOptions)
	}{
		{"NumClients", func(o *OnDemandOptions) { o.NumClients = 0 }},
		{"NumClients", func(o *OnDemandOptions) { o.NumClients = MaxOnDemandClients + 1 }},
		{"Alpha", func(o *OnDemandOptions) { o.Alpha = -1 }},
		{"Alpha", func(o *OnDemandOptions) { o.Alpha = math.NaN() }},
		{"Alpha", func(o *OnDemandOptions) { o.Alpha = 1e-200 }},
		{"SizeMu", func(o *OnDemandOptions) { o.SizeMu = math.Inf(1) }},
		{"SizeSigma", func(o *OnDemandOptions) { o.SizeSigma = -0.1 }},
		{"SizeSigma", func(o *OnDemandOptions) { o.SizeSigma = math.NaN() }},
		{"MaxExamples", func(o *OnDemandOptions) { o.MaxExamples = 0 }},
		{"MaxExamples", func(o *OnDemandOptions) { o.MaxExamples = MaxOnDemandExamples + 1 }},
		{"HeldOutFraction", func(o *OnDemandOptions) { o.HeldOutFraction = 1 }},
		{"EvalUserFraction", func(o *OnDemandOptions) { o.EvalUserFraction = -0.5 }},
	} {
		opt := good
		c.edit(&opt)
		if _, err := NewOnDemand(ds, opt); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want one naming %s", opt, err, c.field)
		}
	}
	if _, err := NewOnDemand(&Dataset{Dim: 1, Classes: 2}, good); err == nil {
		t.Errorf("empty base accepted")
	}
}

// Creation over a Fashion-MNIST-shaped base (60,000 examples, 10 classes)
// for 10^7 users: the per-class pools only.
func BenchmarkNewOnDemand10M(b *testing.B) {
	ds := labelled(repeat(6000, 10), 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewOnDemand(ds, OnDemandOptions{NumClients: 10_000_000, Alpha: 0.5, SizeMu: math.Log(100) - 0.125,
			SizeSigma: 0.5, MaxExamples: 1000, HeldOutFraction: 0.2, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// One user's data at mean size 100 (log-normal σ = 0.5, Dirichlet α = 0.5
// over 10 classes), cycling through user ids.
func BenchmarkClient(b *testing.B) {
	ds := labelled(repeat(6000, 10), 1)
	for _, alpha := range []float64{0.5, 0} {
		p := mustOnDemand(b, ds, OnDemandOptions{NumClients: 10_000_000, Alpha: alpha, SizeMu: math.Log(100) - 0.125,
			SizeSigma: 0.5, MaxExamples: 1000, HeldOutFraction: 0.2, Seed: 1})
		name := "dirichlet(alpha=0.5)"
		if alpha == 0 {
			name = "iid"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			id, examples := 0, 0
			for b.Loop() {
				c := p.Client(id)
				examples += len(c.Train) + len(c.HeldOut)
				id = (id + 7919) % 10_000_000
			}
			b.ReportMetric(float64(examples)/float64(b.N), "examples/op")
		})
	}
}

// The held-out examples are a uniformly random subset of each user's: given
// the user's class counts k_c, the held-out count h_c is hypergeometric
// with mean ⌊f·m⌋·k_c/m, so h_c − ⌊f·m⌋·k_c/m averages 0 over users (5
// standard errors), for every class.
func TestOnDemandHeldOutUniform(t *testing.T) {
	ds := labelled(repeat(1000, 10), 49)
	p := mustOnDemand(t, ds, OnDemandOptions{NumClients: 1_000_000, Alpha: 0.5, SizeMu: math.Log(60), SizeSigma: 0.5,
		MaxExamples: 500, HeldOutFraction: 0.25, Seed: 50})
	st := make([]moments, ds.Classes)
	for id := range 3000 {
		c := p.Client(id)
		m := float64(len(c.Train) + len(c.HeldOut))
		h := float64(len(c.HeldOut))
		held, all := classCounts(ds, c.HeldOut), classCounts(ds, allIdx(c))
		for cl := range st {
			st[cl].add(float64(held[cl]) - h*float64(all[cl])/m)
		}
	}
	for cl := range st {
		if mean, _, se, _ := st[cl].stats(); math.Abs(mean) > 5*se {
			t.Errorf("class %d: held-out count exceeds its hypergeometric mean by %.3f ± %.3f", cl, mean, se)
		}
	}
}

func ExampleNewOnDemand() {
	ds := labelled(repeat(6000, 10), 1) // 60,000 examples
	p, err := NewOnDemand(ds, OnDemandOptions{
		NumClients: 10_000_000, Alpha: 0.1, // label skew
		SizeMu: math.Log(20), MaxExamples: 1000, // 20 examples per user (SizeSigma 0)
		HeldOutFraction: 0.25, EvalUserFraction: 0.1, Seed: 1,
	})
	if err != nil {
		panic(err)
	}
	c := p.Client(9_999_999)
	fmt.Println(p.NumClients(), p.ExpectedSize(), p.RepeatsExamples(), len(c.Train), len(c.HeldOut))
	// Output: 10000000 20 true 15 5
}

// Neighbouring users draw independent data: the correlation of log sizes,
// and of the class-0 count, between users id and id+1 is 0 within 5
// standard errors (1/√n under independence), as is that between the same
// id under seeds s and s+1.
func TestOnDemandStreamsIndependent(t *testing.T) {
	ds := labelled(repeat(100, 4), 51)
	opt := OnDemandOptions{NumClients: 1_000_000, Alpha: 1, SizeMu: 2, SizeSigma: 1, MaxExamples: 100, Seed: 52}
	p := mustOnDemand(t, ds, opt)
	opt.Seed++
	q := mustOnDemand(t, ds, opt)
	const n = 20000
	type obs struct{ logm, c0 float64 }
	draw := func(p *OnDemand, id int) obs {
		_, k := p.plan(id)
		return obs{math.Log(float64(k[0] + k[1] + k[2] + k[3])), float64(k[0])}
	}
	corr := func(x, y []float64) float64 {
		var mx, my, sxy, sxx, syy float64
		for i := range x {
			mx += x[i] / float64(len(x))
			my += y[i] / float64(len(y))
		}
		for i := range x {
			sxy += (x[i] - mx) * (y[i] - my)
			sxx += (x[i] - mx) * (x[i] - mx)
			syy += (y[i] - my) * (y[i] - my)
		}
		return sxy / math.Sqrt(sxx*syy)
	}
	var a, b, c [2][]float64
	for i := range n {
		o, next, other := draw(p, 2*i), draw(p, 2*i+1), draw(q, 2*i)
		for j, v := range [][3]float64{{o.logm, next.logm, other.logm}, {o.c0, next.c0, other.c0}} {
			a[j] = append(a[j], v[0])
			b[j] = append(b[j], v[1])
			c[j] = append(c[j], v[2])
		}
	}
	for j, name := range []string{"log size", "class-0 count"} {
		if r := corr(a[j], b[j]); math.Abs(r) > 5/math.Sqrt(n) {
			t.Errorf("%s: correlation %.4f between users id and id+1", name, r)
		}
		if r := corr(a[j], c[j]); math.Abs(r) > 5/math.Sqrt(n) {
			t.Errorf("%s: correlation %.4f between seeds %d and %d", name, r, opt.Seed-1, opt.Seed)
		}
	}
}
