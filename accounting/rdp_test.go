package accounting

import (
	"math"
	"testing"

	"github.com/google/differential-privacy/go/v3/noise"
)

func poisson(q, z float64) Event {
	return PoissonSampled{SamplingProbability: q, Event: Gaussian{NoiseMultiplier: z}}
}

func rdpAt(t *testing.T, e Event, orders []float64) []float64 {
	t.Helper()
	a := NewRDPAccountant(orders)
	if err := a.Compose(e, 1); err != nil {
		t.Fatal(err)
	}
	_, r := a.RDP()
	return r
}

// q = 1 is the plain Gaussian: α/(2z²) (Mironov 2017, Prop. 7).
func TestUnsampledIsGaussianClosedForm(t *testing.T) {
	orders := DefaultOrders()
	for _, z := range []float64{0.5, 1, 3} {
		r := rdpAt(t, poisson(1, z), orders)
		for i, a := range orders {
			if math.Abs(r[i]-a/(2*z*z)) > 1e-12*r[i] {
				t.Fatalf("z=%v α=%v: %v, want %v", z, a, r[i], a/(2*z*z))
			}
		}
	}
}

// bruteA integrates A_α = E_{x~N(0,σ²)}[((1−q) + q·exp((2x−1)/(2σ²)))^α]
// (MTZ 2019, §3) with Simpson's rule on a wide grid: an independent route
// to the same quantity as the closed-form series.
func bruteA(q, s, alpha float64) float64 {
	lo, hi := -30*s, 30*s+alpha
	const n = 400000
	h := (hi - lo) / n
	f := func(x float64) float64 {
		return math.Exp(-x*x/(2*s*s)) / (s * math.Sqrt(2*math.Pi)) *
			math.Pow(1-q+q*math.Exp((2*x-1)/(2*s*s)), alpha)
	}
	sum := f(lo) + f(hi)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(lo+float64(i)*h)
	}
	return sum * h / 3
}

func TestPoissonRDPMatchesNumericalIntegration(t *testing.T) {
	orders := []float64{1.5, 2, 2.5, 3, 3.7, 8, 16.3, 20}
	for _, c := range []struct{ q, z float64 }{{0.01, 1}, {0.1, 0.8}, {0.5, 2}, {0.02, 1.1}} {
		r := rdpAt(t, poisson(c.q, c.z), orders)
		for i, a := range orders {
			want := math.Log(bruteA(c.q, c.z, a)) / (a - 1)
			if math.Abs(r[i]-want) > 1e-6*want+1e-12 {
				t.Errorf("q=%v z=%v α=%v: RDP %.10g, integration %.10g", c.q, c.z, a, r[i], want)
			}
		}
	}
}

// The fractional-order series and the integer binomial sum are two
// formulas for the same A_α: evaluate both at integer α.
func TestFractionalSeriesAgreesWithIntegerSum(t *testing.T) {
	for _, c := range []struct{ q, z float64 }{{0.01, 1}, {0.2, 0.7}, {0.001, 5}} {
		for _, a := range []int{2, 3, 7, 32} {
			i, f := logAInt(c.q, c.z, a), logAFrac(c.q, c.z, float64(a))
			if math.Abs(i-f) > 1e-9*math.Max(1, math.Abs(i)) {
				t.Errorf("q=%v z=%v α=%d: integer %v, series %v", c.q, c.z, a, i, f)
			}
		}
	}
}

// Published figure: the TensorFlow Federated DP tutorial trains EMNIST with
// 3,383 clients, 120 per round (Poisson), z = 1.2, 100 rounds, and reports
// ε ≈ 2 at δ = 1e-5 from TF Privacy's RDP accountant.
func TestTFFTutorialEpsilon(t *testing.T) {
	eps, err := EpsilonPoissonGaussian(120.0/3383, 1.2, 100, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(eps-2) > 0.05 {
		t.Fatalf("ε = %v, the tutorial reports ≈ 2", eps)
	}
}

// analyticDelta is the exact δ(ε) of one Gaussian mechanism with L2
// sensitivity 1 and noise σ (Balle & Wang 2018, Thm. 8):
// Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ).
func analyticDelta(eps, s float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	return phi(1/(2*s)-eps*s) - math.Exp(eps)*phi(-1/(2*s)-eps*s)
}

// RDP is an upper bound: for one unsampled Gaussian it must never report
// less than the exact ε, which Google's DP library calibrates
// (noise.SigmaForGaussian inverts the analytic Gaussian mechanism), and it
// should not be far above it.
func TestSingleGaussianNeverBelowAnalytic(t *testing.T) {
	const delta = 1e-5
	for _, eps := range []float64{0.5, 1, 2, 4} {
		sigma := noise.SigmaForGaussian(1, 1, eps, delta)
		if d := analyticDelta(eps, sigma); math.Abs(d-delta) > 0.02*delta {
			t.Fatalf("Google DP σ=%v for ε=%v: analytic δ %v, want %v", sigma, eps, d, delta)
		}
		a := NewRDPAccountant(nil)
		a.Compose(Gaussian{NoiseMultiplier: sigma}, 1)
		got, _, _ := a.Epsilon(delta)
		if got < eps*(1-1e-3) || got > 1.6*eps {
			t.Fatalf("σ=%v: RDP ε = %v, exact ε = %v", sigma, got, eps)
		}
		// δ(ε) must likewise not be below the exact δ.
		d, _, _ := a.Delta(eps)
		if d < delta*(1-1e-3) {
			t.Fatalf("σ=%v: RDP δ(%v) = %v below exact %v", sigma, eps, d, delta)
		}
	}
}

func TestMonotone(t *testing.T) {
	eps := func(q, z float64, steps int) float64 {
		e, err := EpsilonPoissonGaussian(q, z, steps, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	prev := 0.0
	for _, s := range []int{1, 10, 100, 1000, 10000} {
		e := eps(0.01, 1, s)
		if !(e > prev) {
			t.Fatalf("ε(steps=%d) = %v not above %v", s, e, prev)
		}
		prev = e
	}
	prev = 0
	for _, q := range []float64{0.001, 0.01, 0.1, 0.5, 1} {
		e := eps(q, 1, 100)
		if !(e > prev) {
			t.Fatalf("ε(q=%v) = %v not above %v", q, e, prev)
		}
		prev = e
	}
	prev = math.Inf(1)
	for _, z := range []float64{0.6, 1, 2, 10, 100} {
		e := eps(0.01, z, 100)
		if !(e < prev) {
			t.Fatalf("ε(z=%v) = %v not below %v", z, e, prev)
		}
		prev = e
	}
	if e := eps(0.01, 1e4, 100); e > 1e-3 {
		t.Fatalf("z → ∞: ε = %v", e)
	}
}

// Composition adds RDP: SelfComposed(e, n), Composed of n copies and n
// separate Compose calls agree.
func TestCompositionForms(t *testing.T) {
	e := poisson(0.05, 1.3)
	a, b, c := NewRDPAccountant(nil), NewRDPAccountant(nil), NewRDPAccountant(nil)
	a.Compose(SelfComposed{Event: e, Count: 4}, 1)
	b.Compose(Composed{Events: []Event{e, e, NoOp{}, e, e}}, 1)
	for range 4 {
		c.Compose(e, 1)
	}
	_, ra := a.RDP()
	_, rb := b.RDP()
	_, rc := c.RDP()
	for i := range ra {
		if math.Abs(ra[i]-rb[i]) > 1e-12*ra[i] || math.Abs(ra[i]-rc[i]) > 1e-12*ra[i] {
			t.Fatalf("order %d: %v %v %v", i, ra[i], rb[i], rc[i])
		}
	}
	a.Compose(NonPrivate{}, 1)
	if eps, _, _ := a.Epsilon(1e-5); !math.IsInf(eps, 1) {
		t.Fatalf("after a non-private release ε = %v", eps)
	}
}

// Sampling without replacement (Wang et al. 2019, Thm. 9): γ = 1 is the
// plain Gaussian, the bound grows with γ, and subsampling never costs more
// than the unsampled Gaussian.
func TestWithoutReplacementBound(t *testing.T) {
	orders := []float64{2, 3, 4.5, 10, 32}
	full := rdpAt(t, SampledWithoutReplacement{SourceDatasetSize: 100, SampleSize: 100, Event: Gaussian{NoiseMultiplier: 2}}, orders)
	for i, a := range orders {
		if math.Abs(full[i]-a/8) > 1e-12 {
			t.Fatalf("γ=1 α=%v: %v, want %v", a, full[i], a/8)
		}
	}
	prev := make([]float64, len(orders))
	for _, k := range []int{1, 5, 20, 50} {
		r := rdpAt(t, SampledWithoutReplacement{SourceDatasetSize: 1000, SampleSize: k, Event: Gaussian{NoiseMultiplier: 2}}, orders)
		for i := range r {
			if !(r[i] > prev[i]) || r[i] > full[i] {
				t.Fatalf("k=%d α=%v: %v (previous %v, unsampled %v)", k, orders[i], r[i], prev[i], full[i])
			}
		}
		prev = r
	}
}

func TestEventJSONRoundTrip(t *testing.T) {
	events := []Event{
		poisson(0.02, 1),
		SampledWithoutReplacement{SourceDatasetSize: 6000, SampleSize: 120, Event: Gaussian{NoiseMultiplier: 0.5}},
		SelfComposed{Event: poisson(0.1, 2), Count: 7},
		Composed{Events: []Event{NoOp{}, Gaussian{NoiseMultiplier: 3}, NonPrivate{}}},
	}
	for _, e := range events {
		b, err := MarshalEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalEvent(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		b2, _ := MarshalEvent(back)
		if string(b) != string(b2) {
			t.Fatalf("round trip %s → %s", b, b2)
		}
	}
	b, _ := MarshalEvent(poisson(0.02, 1))
	if want := `{"type":"PoissonSampledDpEvent","sampling_probability":0.02,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}`; string(b) != want {
		t.Fatalf("wire form %s, want dp_accounting's names %s", b, want)
	}
	for _, bad := range []string{
		`{"type":"LaplaceDpEvent","noise_multiplier":1}`,
		`{"type":"GaussianDpEvent"}`,
		`{"type":"GaussianDpEvent","noise_multiplier":-1}`,
		`{"type":"PoissonSampledDpEvent","sampling_probability":1.5,"event":{"type":"GaussianDpEvent","noise_multiplier":1}}`,
		`{"type":"PoissonSampledDpEvent","sampling_probability":0.5}`,
		`[1,2]`,
		`{"type":"ComposedDpEvent","evnets":[{"type":"NonPrivateDpEvent"}]}`,
	} {
		if _, err := UnmarshalEvent([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestBadInput(t *testing.T) {
	a := NewRDPAccountant(nil)
	for _, e := range []Event{
		poisson(0, 1), poisson(1.1, 1), poisson(math.NaN(), 1), poisson(0.1, 0), poisson(0.1, math.Inf(1)),
		SampledWithoutReplacement{SourceDatasetSize: 10, SampleSize: 11, Event: Gaussian{NoiseMultiplier: 1}},
		SelfComposed{Event: Gaussian{NoiseMultiplier: 1}, Count: -1}, nil,
	} {
		if err := a.Compose(e, 1); err == nil {
			t.Errorf("%#v accepted", e)
		}
	}
	if err := a.Compose(Gaussian{NoiseMultiplier: 1}, -1); err == nil {
		t.Error("negative count accepted")
	}
	if _, r := a.RDP(); r[0] != 0 {
		t.Fatal("rejected events changed the accountant")
	}
	for _, d := range []float64{0, 1, -1, math.NaN()} {
		if _, _, err := a.Epsilon(d); err == nil {
			t.Errorf("δ = %v accepted", d)
		}
	}
}

func BenchmarkEpsilon10000Rounds(b *testing.B) {
	for b.Loop() {
		EpsilonPoissonGaussian(0.01, 1.1, 10000, 1e-5)
	}
}
