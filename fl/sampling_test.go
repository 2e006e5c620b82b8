package fl

import (
	"github.com/dpfl/dpfl/dp"
	"math"
	"math/rand/v2"
	"testing"
)

// Each client's inclusion count over T Poisson draws is Binomial(T, q), and
// the cohort size is Binomial(n, q); both checked to 6 standard deviations
// (failure probability < 1e-8 per check, so the test is not flaky).
func TestPoissonInclusionIsBernoulliQ(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, T = 40, 20000
	for _, q := range []float64{0.02, 0.3, 0.9} {
		s := Poisson{Q: q}
		counts := make([]int, n)
		var sizeSum, sizeSq float64
		for range T {
			c := s.Sample(n, rng)
			for i := 1; i < len(c); i++ {
				if c[i] <= c[i-1] {
					t.Fatalf("cohort not strictly increasing: %v", c)
				}
			}
			for _, id := range c {
				counts[id]++
			}
			sizeSum += float64(len(c))
			sizeSq += float64(len(c) * len(c))
		}
		sd := math.Sqrt(T * q * (1 - q))
		for id, k := range counts {
			if math.Abs(float64(k)-T*q) > 6*sd {
				t.Fatalf("q=%v: client %d included %d times, want %v ± %v", q, id, k, T*q, 6*sd)
			}
		}
		mean := sizeSum / T
		if math.Abs(mean-n*q) > 6*math.Sqrt(n*q*(1-q)/T) {
			t.Fatalf("q=%v: mean cohort %v, want %v", q, mean, n*q)
		}
		variance := sizeSq/T - mean*mean
		if math.Abs(variance-n*q*(1-q)) > 0.1*n*q*(1-q) {
			t.Fatalf("q=%v: cohort variance %v, want %v", q, variance, n*q*(1-q))
		}
	}
}

func TestPoissonEdgeRates(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	if c := (Poisson{Q: 1}).Sample(17, rng); len(c) != 17 {
		t.Fatalf("q=1 sampled %d of 17", len(c))
	}
	// A large population with a small rate: size ≈ q·n.
	c := Poisson{Q: 0.001}.Sample(1_000_000, rng)
	if math.Abs(float64(len(c))-1000) > 6*math.Sqrt(1000) {
		t.Fatalf("q=0.001, n=1e6: cohort %d", len(c))
	}
	if c[len(c)-1] >= 1_000_000 {
		t.Fatal("sampled an ID outside the population")
	}
}

func TestFixedIsUniformWithoutReplacement(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, k, T = 30, 7, 30000
	counts := make([]int, n)
	for range T {
		c := Fixed{K: k}.Sample(n, rng)
		if len(c) != k {
			t.Fatalf("cohort of %d, want %d", len(c), k)
		}
		for i := 1; i < len(c); i++ {
			if c[i] <= c[i-1] {
				t.Fatalf("duplicate or unsorted cohort %v", c)
			}
		}
		for _, id := range c {
			counts[id]++
		}
	}
	p := float64(k) / n
	sd := math.Sqrt(T * p * (1 - p))
	for id, got := range counts {
		if math.Abs(float64(got)-T*p) > 6*sd {
			t.Fatalf("client %d included %d times, want %v ± %v", id, got, T*p, 6*sd)
		}
	}
	if c := (Fixed{K: n}).Sample(n, rng); len(c) != n || c[n-1] != n-1 {
		t.Fatalf("K = n: %v", c)
	}
}

// BenchmarkSampleTenMillion draws one round's cohort from 10,000,000
// users with the secure generator: Poisson at q = 0.001 (geometric skips,
// O(q·N)) and a fixed cohort of 10,000 (Floyd, O(K)). Target: < 50 ms.
func BenchmarkSampleTenMillion(b *testing.B) {
	rng, err := dp.NewSecureRand()
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000_000
	for _, s := range []Sampler{Poisson{Q: 0.001}, Fixed{K: 10_000}} {
		b.Run(s.String(), func(b *testing.B) {
			for b.Loop() {
				if c := s.Sample(n, rng); len(c) == 0 {
					b.Fatal("empty cohort")
				}
			}
		})
	}
}
