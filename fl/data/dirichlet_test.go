package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// expectedDistinct is E[#classes present] for m draws with replacement from
// q ~ Dir(α·p): Σ_c 1 − E[(1−q_c)^m], where 1−q_c ~ Beta(α(1−p_c), α·p_c),
// so E[(1−q_c)^m] = Π_{j<m} (b+j)/(a+b+j), a = α·p_c, b = α(1−p_c).
func expectedDistinct(alpha float64, p []float64, m int) float64 {
	var e float64
	for _, pc := range p {
		a, b := alpha*pc, alpha*(1-pc)
		prod := 1.0
		for j := range m {
			prod *= (b + float64(j)) / (a + b + float64(j))
		}
		e += 1 - prod
	}
	return e
}

// Hsu et al. 2019, §3: each client's labels are m draws from q ~ Dir(α·p).
// Until a class runs out the class counts are exactly multinomial(m, q),
// so the mean number of distinct classes among the first clients (who see
// full pools: 200 of 1000 clients take 20% of the data) must match the
// closed form, and it must fall as α falls.
func TestDirichletDistinctClasses(t *testing.T) {
	const classes, perClass, k, m, first = 10, 10000, 1000, 100, 200
	ds := labelled(repeat(perClass, classes), 10)
	p := make([]float64, classes)
	for c := range p {
		p[c] = 1.0 / classes
	}
	var prev float64
	for _, alpha := range []float64{0.1, 1, 100} {
		f := mustFederated(t, ds, Options{NumClients: k, Partitioner: Dirichlet{Alpha: alpha}, Seed: 11})
		var st moments
		for id := range first {
			st.add(float64(distinct(classCounts(ds, f.Client(id).Train))))
		}
		mean, _, se, _ := st.stats()
		want := expectedDistinct(alpha, p, m)
		if math.Abs(mean-want) > max(5*se, 0.02) {
			t.Errorf("α=%g: mean distinct classes %.3f ± %.3f, closed form %.3f", alpha, mean, se, want)
		}
		if mean <= prev {
			t.Errorf("α=%g: mean distinct classes %.3f not above %.3f of the smaller α", alpha, mean, prev)
		}
		prev = mean
		t.Logf("α=%g: mean distinct classes per client %.3f (closed form %.3f)", alpha, mean, want)
	}
}

// Per-client class proportions x_c = count_c/m under q ~ Dir(α·p) and
// multinomial draws have E[x_c] = p_c and Var[x_c] = Var[q_c] +
// E[q_c(1−q_c)]/m = p_c(1−p_c)/(α+1) · (1 + α/m). Checked on the first 300
// of 1100 clients (full pools) with a skewed prior p_c ∝ c+1.
func TestDirichletProportionsMatchPrior(t *testing.T) {
	const classes, k, m, first = 10, 1100, 100, 300
	counts := make([]int, classes)
	for c := range counts {
		counts[c] = 2000 * (c + 1)
	}
	ds := labelled(counts, 12)
	n := float64(ds.Len())
	for _, alpha := range []float64{0.1, 1, 10} {
		f := mustFederated(t, ds, Options{NumClients: k, Partitioner: Dirichlet{Alpha: alpha}, Seed: 13})
		st := make([]moments, classes)
		for id := range first {
			for c, x := range classCounts(ds, f.Client(id).Train) {
				st[c].add(float64(x) / m)
			}
		}
		for c := range st {
			p := float64(counts[c]) / n
			mean, v, seMean, seVar := st[c].stats()
			wantVar := p * (1 - p) / (alpha + 1) * (1 + alpha/m)
			if math.Abs(mean-p) > 5*seMean || math.Abs(v-wantVar) > 5*seVar {
				t.Errorf("α=%g class %d: mean %.4f ± %.4f (prior %.4f), var %.5f ± %.5f (closed form %.5f)",
					alpha, c, mean, seMean, p, v, seVar, wantVar)
			}
		}
	}
}

// A million clients over 60,000 examples: 60,000 random clients get one
// example each, the rest none, and the partition is exact.
func TestDirichletMillionClients(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MB")
	}
	ds := labelled(repeat(6000, 10), 14)
	f := mustFederated(t, ds, Options{NumClients: 1_000_000, Partitioner: Dirichlet{Alpha: 0.1}, Seed: 15})
	seen := make([]bool, ds.Len())
	ones, high := 0, 0
	for id := range f.NumClients() {
		c := f.Client(id)
		if len(c.HeldOut) != 0 || len(c.Train) > 1 {
			t.Fatalf("client %d: %d train, %d held out", id, len(c.Train), len(c.HeldOut))
		}
		for _, i := range c.Train {
			if seen[i] {
				t.Fatalf("example %d twice", i)
			}
			seen[i] = true
			ones++
			if id >= 500_000 {
				high++
			}
		}
	}
	// The 60,000 non-empty clients are a uniform random subset: about
	// half of them have IDs ≥ 500,000 (binomial sd ≈ 122).
	if ones != ds.Len() || math.Abs(float64(high)-30000) > 1000 {
		t.Fatalf("%d non-empty clients, %d with ID ≥ 500000", ones, high)
	}
}

// Gamma(a, 1) has mean a and variance a.
func TestGammaMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const T = 200_000
	for _, a := range []float64{0.05, 0.3, 1, 2.5, 40} {
		var st moments
		for range T {
			st.add(math.Exp(gammaLog(a, rng)))
		}
		mean, v, seMean, seVar := st.stats()
		if math.Abs(mean-a) > 5*seMean || math.Abs(v-a) > 5*seVar {
			t.Errorf("Gamma(%g): mean %.4f ± %.4f, var %.4f ± %.4f; want %g, %g", a, mean, seMean, v, seVar, a, a)
		}
	}
}

// Dir(a) has E[q_i] = a_i/a_0, Var[q_i] = a_i(a_0−a_i)/(a_0²(a_0+1)) and
// Cov[q_i, q_j] = −a_i a_j/(a_0²(a_0+1)). The last case has concentrations
// so small that Gamma variates underflow in linear space.
func TestDirichletSamplerMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	const T = 200_000
	for _, conc := range [][]float64{{0.3, 0.5, 1.2}, {2, 5, 0.05}, {1e-3, 2e-3, 5e-3}} {
		var a0 float64
		for _, a := range conc {
			a0 += a
		}
		q := make([]float64, len(conc))
		st := make([]moments, len(conc))
		var cov moments
		for range T {
			sampleDirichlet(q, conc, rng)
			var s float64
			for i, v := range q {
				if math.IsNaN(v) || v < 0 || v > 1 {
					t.Fatalf("Dir%v: component %v", conc, v)
				}
				s += v
				st[i].add(v)
			}
			if math.Abs(s-1) > 1e-12 {
				t.Fatalf("Dir%v: sum %v", conc, s)
			}
			cov.add(q[0] * q[1])
		}
		for i, a := range conc {
			mean, v, seMean, seVar := st[i].stats()
			wm, wv := a/a0, a*(a0-a)/(a0*a0*(a0+1))
			if math.Abs(mean-wm) > 5*seMean || math.Abs(v-wv) > 5*seVar {
				t.Errorf("Dir%v component %d: mean %.5f ± %.5f, var %.5f ± %.5f; want %.5f, %.5f", conc, i, mean, seMean, v, seVar, wm, wv)
			}
		}
		m01, _, se01, _ := cov.stats()
		m0, _, _, _ := st[0].stats()
		m1, _, _, _ := st[1].stats()
		want := -conc[0] * conc[1] / (a0 * a0 * (a0 + 1))
		if got := m01 - m0*m1; math.Abs(got-want) > 5*se01+1e-4 {
			t.Errorf("Dir%v: Cov[q0,q1] = %.5f, want %.5f", conc, got, want)
		}
	}
}

func ExampleDirichlet() {
	ds := labelled(repeat(1000, 10), 1)
	f, err := NewFederated(ds, Options{NumClients: 100, Partitioner: Dirichlet{Alpha: 0.1}, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(f.NumClients(), f.TotalExamples(), f.ClientSize(0))
	// Output: 100 10000 100
}
