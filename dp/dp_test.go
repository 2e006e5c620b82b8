package dp

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func norm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

func TestClippedSumBoundsEachContribution(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const dim, clip = 37, 0.5
	s := NewClippedSum(dim, clip)
	var want [dim]float64
	for i := 0; i < 50; i++ {
		d := make([]float32, dim)
		scale := math.Pow(10, float64(r.IntN(5)-2)) // norms from ~0.01 to ~100
		for j := range d {
			d[j] = float32(r.NormFloat64() * scale)
		}
		orig := norm(d)
		f := math.Min(1, clip/orig)
		for j := range d {
			want[j] += float64(d[j]) * f
		}
		before := append([]float32(nil), s.Sum()...)
		got, err := s.Add(d)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-orig) > 1e-6*orig {
			t.Fatalf("reported norm %v, want %v", got, orig)
		}
		// What the sum took in: float32 differences of the running sum
		// carry its rounding, a few ulps of the sum's magnitude.
		var inc float64
		for j, v := range s.Sum() {
			e := float64(v) - float64(before[j])
			inc += e * e
		}
		if n := math.Sqrt(inc); n > clip*(1+1e-5)+1e-5 {
			t.Fatalf("one update moved the sum by %v > C=%v", n, clip)
		}
	}
	for j, v := range s.Sum() {
		if math.Abs(float64(v)-want[j]) > 1e-4 {
			t.Fatalf("sum[%d]=%v, want %v", j, v, want[j])
		}
	}
	if s.Count() != 50 || s.ClippedFraction() <= 0 || s.ClippedFraction() >= 1 {
		t.Fatalf("count %d clipped fraction %v", s.Count(), s.ClippedFraction())
	}
}

func TestClippedSumRejectsBadUpdates(t *testing.T) {
	s := NewClippedSum(3, 1)
	if _, err := s.Add([]float32{1, 2}); err == nil {
		t.Fatal("wrong length accepted")
	}
	if _, err := s.Add([]float32{1, float32(math.NaN()), 0}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("NaN: got %v", err)
	}
	if _, err := s.Add([]float32{float32(math.Inf(1)), 0, 0}); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("Inf: got %v", err)
	}
	if s.Count() != 0 || s.Sum()[0] != 0 || s.Sum()[1] != 0 || s.Sum()[2] != 0 {
		t.Fatal("rejected update changed the sum")
	}
}

func TestMergeEqualsSequentialAdds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	a, b, all := NewClippedSum(5, 1), NewClippedSum(5, 1), NewClippedSum(5, 1)
	for i := 0; i < 10; i++ {
		d := []float32{float32(r.NormFloat64()), 2, -1, 0, float32(i)}
		e := append([]float32(nil), d...)
		if i%2 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
		all.Add(e)
	}
	a.Merge(b)
	for j := range a.Sum() {
		if math.Abs(float64(a.Sum()[j]-all.Sum()[j])) > 1e-5 {
			t.Fatalf("merged %v, sequential %v", a.Sum(), all.Sum())
		}
	}
	if a.Count() != 10 {
		t.Fatalf("count %d", a.Count())
	}
}

// The released average's sensitivity to one user is C/denominator
// (McMahan et al. 2018 §2): with z = 0 the outputs for neighbouring cohorts
// (one client removed) differ by at most that in L2.
func TestReleaseSensitivity(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const dim, clip, denom = 20, 0.7, 12.0
	with, without := NewClippedSum(dim, clip), NewClippedSum(dim, clip)
	for i := 0; i < 12; i++ {
		d := make([]float32, dim)
		for j := range d {
			d[j] = float32(r.NormFloat64() * 3)
		}
		e := append([]float32(nil), d...)
		with.Add(d)
		if i != 4 {
			without.Add(e)
		}
	}
	p := Params{ClipNorm: clip}
	sec, _ := NewSecureRand()
	a, b := make([]float32, dim), make([]float32, dim)
	Release(a, with.Sum(), p, denom, sec)
	Release(b, without.Sum(), p, denom, sec)
	diff := make([]float32, dim)
	for j := range diff {
		diff[j] = a[j] - b[j]
	}
	if n := norm(diff); n > clip/denom*(1+1e-5) || n < 0.5*clip/denom {
		t.Fatalf("neighbouring releases differ by %v, want (C/2, C]/denom = %v", n, clip/denom)
	}
}

// The noise has mean 0 and standard deviation z·C. With n = 200,000 draws
// the sample mean and variance lie within 6 standard errors of the truth
// except with probability < 1e-8.
func TestGaussianNoiseMoments(t *testing.T) {
	const n = 200000
	p := Params{ClipNorm: 0.5, NoiseMultiplier: 1.3}
	sigma := p.Sigma()
	sec, err := NewSecureRand()
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, n)
	AddGaussianNoise(x, sigma, sec)
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean := sum / n
	variance := sq/n - mean*mean
	if math.Abs(mean) > 6*sigma/math.Sqrt(n) {
		t.Fatalf("mean %v, want 0 ± %v", mean, 6*sigma/math.Sqrt(n))
	}
	// Var of the sample variance of a Gaussian is 2σ⁴/n.
	if math.Abs(variance-sigma*sigma) > 6*sigma*sigma*math.Sqrt(2.0/n) {
		t.Fatalf("variance %v, want %v", variance, sigma*sigma)
	}
}

// Two secure generators never produce the same stream: they are keyed from
// crypto/rand, not from a fixed seed.
func TestSecureRandIsKeyedFreshly(t *testing.T) {
	a, _ := NewSecureRand()
	b, _ := NewSecureRand()
	if a.Uint64() == b.Uint64() && a.Uint64() == b.Uint64() {
		t.Fatal("two secure generators produced the same output")
	}
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{{0, 1}, {-1, 1}, {math.NaN(), 1}, {1, -0.1}, {1, math.Inf(1)}, {math.Inf(1), 1}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := (Params{ClipNorm: 1, NoiseMultiplier: 0}).Validate(); err != nil {
		t.Errorf("z = 0 rejected: %v", err)
	}
}

func BenchmarkAddGaussianNoise(b *testing.B) {
	sec, _ := NewSecureRand()
	x := make([]float32, 199210)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		AddGaussianNoise(x, 1, sec)
	}
}

// BenchmarkClippedSumAdd adds one MLP-sized update (d = 199,210, the 2NN)
// whose norm exceeds C.
func BenchmarkClippedSumAdd(b *testing.B) {
	const d = 199_210
	s := NewClippedSum(d, 0.5)
	delta := make([]float32, d)
	for i := range delta {
		delta[i] = 0.01
	}
	b.SetBytes(4 * d)
	for b.Loop() {
		if _, err := s.Add(delta); err != nil {
			b.Fatal(err)
		}
	}
}
