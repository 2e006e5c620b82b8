package accounting

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// logSumExp is log Σ exp(xs), −∞ for none.
func logSumExp(xs []float64) float64 {
	m := math.Inf(-1)
	for _, x := range xs {
		m = math.Max(m, x)
	}
	if math.IsInf(m, -1) {
		return m
	}
	var s float64
	for _, x := range xs {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// ddgSumLogPMF is the log pmf of the sum of n independent N_Z(0, σ²) on
// [−x, x] (index v + x), computed by direct convolution in log space of n
// copies of N_Z(0, σ²) truncated to [−k, k] and renormalised there. It
// picks k so that the truncation moves the log pmf at every point of
// [−x, x] by less than 1e-30, and returns that bound, η:
//
//   - renormalising: the mass of N_Z(0, σ²) beyond k is at most
//     tail = 2e^{−(k+1)²/2σ²}/(1 − e^{−(2k+3)/2σ²}) over a normalising
//     constant Z ≥ 1, so the truncated pmf is at most (1 − tail)^{−n}
//     times the true one;
//   - the sums lost: the true P(S = v) loses, at most, the combinations
//     with some |u_i| > k, whose mass is ≤ n·tail·Z^{n−1}/Z^n (drop the
//     constraint on the other summands), against P(S = v) ≥
//     e^{−(v²/n + n/4)/2σ²}/Z^n (the balanced combination u_i ∈ {⌊v/n⌋,
//     ⌈v/n⌉}), a fraction r ≤ n·tail·Z^{n−1}·e^{(x²/n + n/4)/2σ²}.
func ddgSumLogPMF(t *testing.T, n int, sigma float64, x int) (lp []float64, eta float64) {
	t.Helper()
	s2 := 2 * sigma * sigma
	logZ := math.Log1p(math.Sqrt(2*math.Pi) * sigma) // Z ≤ 1 + √(2π)σ
	logTail := func(k int) float64 {
		return math.Log(2) - float64((k+1)*(k+1))/s2 - math.Log1p(-math.Exp(-float64(2*k+3)/s2))
	}
	logR := func(k int) float64 {
		if n == 1 {
			return math.Inf(-1) // nothing is convolved
		}
		return math.Log(float64(n)) + logTail(k) + float64(n-1)*logZ + (float64(x*x)/float64(n)+float64(n)/4)/s2
	}
	k := x
	for logR(k) > math.Log(1e-31) || float64(n)*math.Exp(logTail(k)) > 1e-31 {
		k++
	}
	eta = math.Max(-float64(n)*math.Log1p(-math.Exp(logTail(k))), -math.Log1p(-math.Exp(logR(k))))
	if !(eta < 1e-30) {
		t.Fatalf("n=%d σ=%v: truncation error %v is not below 1e-30", n, sigma, eta)
	}

	one := make([]float64, 2*k+1)
	for v := -k; v <= k; v++ {
		one[v+k] = -float64(v*v) / s2
	}
	lz := logSumExp(one)
	for i := range one {
		one[i] -= lz
	}
	cur, half := append([]float64(nil), one...), k // cur on [−half, half]
	for range n - 1 {
		nh := half + k
		next := make([]float64, 2*nh+1)
		terms := make([]float64, 0, 2*k+1)
		for v := -nh; v <= nh; v++ {
			terms = terms[:0]
			for u := -k; u <= k; u++ {
				w := v - u
				if w < -half || w > half {
					continue
				}
				terms = append(terms, cur[w+half]+one[u+k])
			}
			next[v+nh] = logSumExp(terms)
		}
		cur, half = next, nh
	}
	return cur[half-x : half+x+1], eta
}

// renyiShift is D_α(P(· − Δ) ‖ P) for the pmf P given as log pmf on
// [−x, x], summing over the points where both P(v − Δ) and P(v) are
// known. It fails t if the terms at either end of that range are not
// below 1e-30 of the total: the range must hold all but a negligible part
// of the divergence.
func renyiShift(t *testing.T, lp []float64, x, delta int, alpha float64) float64 {
	t.Helper()
	var terms []float64
	for v := -x + delta; v <= x; v++ {
		terms = append(terms, alpha*lp[v-delta+x]+(1-alpha)*lp[v+x])
	}
	total := logSumExp(terms)
	if lo, hi := terms[0]-total, terms[len(terms)-1]-total; lo > math.Log(1e-30) || hi > math.Log(1e-30) {
		t.Fatalf("Δ=%d α=%v: Rényi sum not converged at the ends of [−%d, %d] (log terms %v, %v)", delta, alpha, x, x, lo, hi)
	}
	return total / (alpha - 1)
}

// TestDistributedDiscreteGaussianNumerical checks the zCDP claim against
// an independent computation: for d = 1, the exact pmf of the sum of n
// discrete Gaussians (by convolution), and its Rényi divergence from its
// own shift by Δ, at several orders: D_α ≤ α·ρ. (The pmf is even, so the
// divergence of the shift the other way is the same.) For n = 1 the bound
// is the discrete Gaussian's Δ²/(2σ²), attained where αΔ is an integer.
func TestDistributedDiscreteGaussianNumerical(t *testing.T) {
	alphas := []float64{1.5, 2, 4, 8, 16}
	const maxDelta = 2
	minMargin, minRel := math.Inf(1), math.Inf(1)
	var at string
	for _, n := range []int{1, 2, 3, 5} {
		for _, sigma := range []float64{0.5, 1, 2} {
			s := math.Sqrt(float64(n)) * sigma
			x := int(math.Ceil(alphas[len(alphas)-1]*maxDelta+12*s)) + maxDelta + 5
			lp, eta := ddgSumLogPMF(t, n, sigma, x)
			for delta := 1; delta <= maxDelta; delta++ {
				rho, err := DistributedDiscreteGaussianRho(n, 1, sigma, float64(delta))
				if err != nil {
					t.Fatal(err)
				}
				if n == 1 && rho != float64(delta*delta)/(2*sigma*sigma) {
					t.Errorf("n=1 σ=%v Δ=%d: ρ = %v, want Δ²/(2σ²) = %v", sigma, delta, rho, float64(delta*delta)/(2*sigma*sigma))
				}
				for _, alpha := range alphas {
					d := renyiShift(t, lp, x, delta, alpha)
					bound := alpha * rho
					margin := bound - d
					// Rounding in the log-space sums is far below tol, and
					// the truncation moves every log pmf by at most η, so
					// D_α by at most (2α−1)η/(α−1).
					tol := 1e-10*math.Max(1, bound) + (2*alpha-1)*eta/(alpha-1)
					if margin < -tol {
						t.Errorf("n=%d σ=%v Δ=%d α=%v: D_α = %.15g > α·ρ = %.15g", n, sigma, delta, alpha, d, bound)
					}
					if n == 1 {
						// The discrete Gaussian's Rényi divergence is
						// αΔ²/(2σ²) exactly when αΔ is an integer (CKS20).
						if ad := alpha * float64(delta); ad == math.Trunc(ad) && math.Abs(margin) > tol {
							t.Errorf("n=1 σ=%v Δ=%d α=%v: D_α = %.15g, want exactly %.15g", sigma, delta, alpha, d, bound)
						}
					}
					t.Logf("n=%d σ=%v Δ=%d α=%-4v D_α=%-12.6g αρ=%-12.6g margin=%.3g", n, sigma, delta, alpha, d, bound, margin)
					if margin < minMargin {
						minMargin = margin
						at = fmt.Sprintf("n=%d σ=%v Δ=%d α=%v", n, sigma, delta, alpha)
					}
					if n > 1 && sigma == 0.5 {
						minRel = math.Min(minRel, margin/bound)
					}
				}
			}
		}
	}
	t.Logf("min(α·ρ − D_α) = %.3g at %s; σ = 1/2, n ≥ 2: min relative margin %.3g", minMargin, at, minRel)
}

// ρ by hand for n = 2, σ = 1/2, Δ₂ = 1, d = 1: τ = 10·e^{−π²/4}, and
// the first bound 1/(2·2·¼) + τ = 1 + τ is below ½(√2 + τ)²; for d = 16 the
// second, ½(√2 + 4τ)², is below 1 + 16τ. With Δ₁ = 1 (d = 16) the L1
// bound ½(2 + 2√2·τ + 16τ²) is below both.
func TestDistributedDiscreteGaussianRhoByHand(t *testing.T) {
	tau := 10 * math.Exp(-math.Pi*math.Pi/4)
	if got := DistributedDiscreteGaussianTau(2, 0.5); math.Abs(got-tau) > 1e-15 {
		t.Fatalf("τ = %v, want %v", got, tau)
	}
	for _, c := range []struct {
		d         int
		l1, want  float64
		withL1    bool
		rationale string
	}{
		{1, 0, 1 + tau, false, "Δ²/(2nσ²) + τd"},
		{16, 0, (math.Sqrt2 + 4*tau) * (math.Sqrt2 + 4*tau) / 2, false, "½(Δ/(√nσ) + τ√d)²"},
		{16, 1, (2 + 2*math.Sqrt2*tau + 16*tau*tau) / 2, true, "½(Δ²/(nσ²) + 2Δ₁τ/(√nσ) + τ²d)"},
	} {
		var got float64
		var err error
		if c.withL1 {
			got, err = DistributedDiscreteGaussianRhoL1(2, c.d, 0.5, 1, c.l1)
		} else {
			got, err = DistributedDiscreteGaussianRho(2, c.d, 0.5, 1)
		}
		if err != nil || math.Abs(got-c.want) > 1e-12*c.want {
			t.Errorf("d=%d: ρ = %v (%v), want %s = %v", c.d, got, err, c.rationale, c.want)
		}
	}
	// Δ₁ = √d·Δ₂ makes the L1 bound the third: no change.
	a, _ := DistributedDiscreteGaussianRho(3, 9, 0.7, 2)
	b, _ := DistributedDiscreteGaussianRhoL1(3, 9, 0.7, 2, 6)
	if math.Abs(a-b) > 1e-12*a {
		t.Errorf("Δ₁ = √d·Δ₂: ρ %v, without Δ₁ %v", b, a)
	}
	// Large σ: τ underflows to 0 and ρ is the continuous Gaussian's
	// Δ²/(2nσ²), whatever d.
	if rho, _ := DistributedDiscreteGaussianRho(1000, 1<<24, 10, 3); math.Abs(rho-9.0/(2*1000*100)) > 1e-15*rho {
		t.Errorf("σ = 10: ρ = %v, want %v", rho, 9.0/(2*1000*100))
	}
}

// τ beyond its exactly summed terms is bounded from above, never below,
// and stays close.
func TestDistributedDiscreteGaussianTauLargeN(t *testing.T) {
	const sigma = 0.5
	n := ddgTauExactTerms + 1000
	c := 2 * math.Pi * math.Pi * sigma * sigma
	var exact float64
	for k := 1; k < n; k++ {
		exact += math.Exp(-c * float64(k) / float64(k+1))
	}
	exact *= 10
	got := DistributedDiscreteGaussianTau(n, sigma)
	if got < exact*(1-1e-12) || got > exact*(1+1e-6) {
		t.Fatalf("τ(n=%d) = %v, summed exactly %v", n, got, exact)
	}
	// A cohort of 2⁴⁰ costs no more than 2²⁰ terms.
	if tau := DistributedDiscreteGaussianTau(1<<40, 1); !(tau > 0) || math.IsInf(tau, 0) {
		t.Fatalf("τ(2⁴⁰) = %v", tau)
	}
}

// ρ decreases in σ, increases in Δ₂ and d; at σ where τ is negligible it
// decreases in n (the total variance nσ²). At small σ, τ grows with n,
// and ρ need not decrease: more clients at σ = 1/2 can cost privacy.
func TestDistributedDiscreteGaussianMonotone(t *testing.T) {
	rho := func(n, d int, sigma, l2 float64) float64 {
		t.Helper()
		r, err := DistributedDiscreteGaussianRho(n, d, sigma, l2)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sigmas := []float64{0.5, 0.6, 0.8, 1, 1.5, 2, 4, 16}
	for _, n := range []int{2, 10, 1000} {
		for _, d := range []int{1, 1000, 1 << 20} {
			prev := math.Inf(1)
			for _, s := range sigmas {
				r := rho(n, d, s, 1)
				if !(r < prev) {
					t.Errorf("n=%d d=%d: ρ(σ=%v) = %v not below %v", n, d, s, r, prev)
				}
				prev = r
			}
			for _, s := range []float64{0.5, 1, 3} {
				prev := 0.0
				for _, l2 := range []float64{0.1, 1, 2, 10, 100} {
					if r := rho(n, d, s, l2); !(r > prev) {
						t.Errorf("n=%d d=%d σ=%v: ρ(Δ=%v) = %v not above %v", n, d, s, l2, r, prev)
					} else {
						prev = r
					}
				}
			}
		}
	}
	for _, s := range []float64{0.5, 1, 4} {
		for _, n := range []int{1, 2, 50} {
			prev := 0.0
			for _, d := range []int{1, 10, 1000, 1 << 20} {
				r := rho(n, d, s, 1)
				if r < prev || (n > 1 && s < 2 && !(r > prev)) {
					t.Errorf("n=%d σ=%v: ρ(d=%d) = %v, after %v", n, s, d, r, prev)
				}
				prev = r
			}
		}
	}
	// In n·σ²: at σ ≥ 2 (τd < 1e-10 here), ρ falls as n grows, and equal
	// n·σ² gives equal ρ up to τ.
	for _, s := range []float64{2, 3} {
		prev := math.Inf(1)
		for _, n := range []int{1, 2, 5, 100, 10000} {
			r := rho(n, 1<<20, s, 1)
			if !(r < prev) {
				t.Errorf("σ=%v: ρ(n=%d) = %v not below %v", s, n, r, prev)
			}
			prev = r
		}
	}
	if a, b := rho(4, 1000, 2, 1), rho(16, 1000, 4, 4); math.Abs(a-b) > 1e-12 {
		// nσ² = 16 vs 256 with Δ² 1 vs 16: the same Δ²/(nσ²)
		t.Errorf("same Δ²/(nσ²): ρ %v vs %v", a, b)
	}
	if a, b := rho(2, 1<<20, 0.5, 1), rho(200, 1<<20, 0.5, 1); !(b > a) {
		t.Errorf("σ = 1/2, d = 2²⁰: ρ(n=200) = %v not above ρ(n=2) = %v (τ·d dominates)", b, a)
	}
}

func TestDistributedDiscreteGaussianErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		n, d      int
		sigma, l2 float64
	}{
		{0, 1, 1, 1}, {-3, 1, 1, 1}, {2, 0, 1, 1}, {2, -1, 1, 1},
		{2, 1, 0, 1}, {2, 1, -1, 1}, {2, 1, nan, 1}, {2, 1, inf, 1},
		{2, 1, 0.49, 1}, {2, 1, 1, 0}, {2, 1, 1, -1}, {2, 1, 1, nan}, {2, 1, 1, inf},
		{1, 1, 1e-300, 1e300}, // ρ overflows
	} {
		if r, err := DistributedDiscreteGaussianRho(c.n, c.d, c.sigma, c.l2); err == nil {
			t.Errorf("%+v: ρ = %v accepted", c, r)
		}
		if _, err := DistributedDiscreteGaussianEvent(c.n, c.d, c.sigma, c.l2); err == nil {
			t.Errorf("%+v: event accepted", c)
		}
		if _, err := DistributedDiscreteGaussianEpsilon(c.n, c.d, c.sigma, c.l2, 10, 1e-5); err == nil {
			t.Errorf("%+v: ε accepted", c)
		}
	}
	// One share at σ < 1/2 is the plain discrete Gaussian, valid at any σ.
	if r, err := DistributedDiscreteGaussianRho(1, 1, 0.1, 1); err != nil || r != 1/(2*0.1*0.1) {
		t.Errorf("n=1, σ=0.1: ρ = %v, %v", r, err)
	}
	for _, l1 := range []float64{0, -1, nan, inf} {
		if _, err := DistributedDiscreteGaussianRhoL1(2, 4, 1, 1, l1); err == nil {
			t.Errorf("Δ₁ = %v accepted", l1)
		}
	}
	for _, c := range []struct {
		rounds int
		delta  float64
	}{{-1, 1e-5}, {10, 0}, {10, 1}, {10, nan}} {
		if _, err := DistributedDiscreteGaussianEpsilon(100, 1000, 2, 1, c.rounds, c.delta); err == nil {
			t.Errorf("rounds=%d δ=%v accepted", c.rounds, c.delta)
		}
	}
}

// The RDP path for ρ-zCDP: ZCDP{ρ = 1/(2z²)} has the Gaussian's RDP
// curve, so the same ε; ε is never above Bun & Steinke's conversion
// ρT + 2√(ρT·log(1/δ)) (2016, Prop. 1.3), and never below the optimum of
// the CKS20 conversion over all real α > 1.
func TestEpsilonZCDP(t *testing.T) {
	for _, z := range []float64{0.7, 1, 3} {
		for _, T := range []int{1, 10, 500} {
			want, err := EpsilonPoissonGaussian(1, z, T, 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			got, err := EpsilonZCDP(1/(2*z*z), T, 1e-5)
			if err != nil || math.Abs(got-want) > 1e-12*want {
				t.Errorf("z=%v T=%d: zCDP ε %v (%v), Gaussian ε %v", z, T, got, err, want)
			}
		}
	}
	for _, c := range []struct{ rhoT, delta float64 }{{0.05, 1e-5}, {0.5, 1e-5}, {2, 1e-6}, {10, 1e-9}} {
		got, err := EpsilonZCDP(c.rhoT/10, 10, c.delta)
		if err != nil {
			t.Fatal(err)
		}
		bs := c.rhoT + 2*math.Sqrt(c.rhoT*math.Log(1/c.delta))
		best := math.Inf(1)
		for a := 1.001; a < 2000; a *= 1.0005 {
			best = math.Min(best, c.rhoT*a+math.Log1p(-1/a)-(math.Log(c.delta)+math.Log(a))/(a-1))
		}
		if !(got <= bs) || got < best-1e-12 || got > best*1.01 {
			t.Errorf("ρT=%v δ=%v: ε %v; Bun–Steinke %v, continuous optimum %v", c.rhoT, c.delta, got, bs, best)
		}
	}
	// Where τ underflows the distributed discrete Gaussian is the
	// Gaussian mechanism of noise multiplier √n·σ/Δ₂ (KLS21's point: no
	// loss against central DP at such σ).
	got, err := DistributedDiscreteGaussianEpsilon(120, 1<<20, 12, 100, 200, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := EpsilonPoissonGaussian(1, math.Sqrt(120)*12/100, 200, 1e-5)
	if math.Abs(got-want) > 1e-12*want {
		t.Errorf("large σ: ε %v, Gaussian %v", got, want)
	}
}

// The event's JSON is dp_accounting's ZCDpEvent (rho, xi = 0 by default),
// decoded as strictly as the other events.
func TestZCDPEventJSON(t *testing.T) {
	for _, c := range []struct {
		e    Event
		want string
	}{
		{ZCDP{Rho: 0.5}, `{"type":"ZCDpEvent","rho":0.5}`},
		{ZCDP{Rho: 0.125, Xi: 0.01}, `{"type":"ZCDpEvent","rho":0.125,"xi":0.01}`},
		{ZCDP{}, `{"type":"ZCDpEvent","rho":0}`},
		{SelfComposed{Event: ZCDP{Rho: 2e-3}, Count: 100}, `{"type":"SelfComposedDpEvent","count":100,"event":{"type":"ZCDpEvent","rho":0.002}}`},
		{Composed{Events: []Event{ZCDP{Rho: 1}, poisson(0.1, 2)}}, `{"type":"ComposedDpEvent","events":[{"type":"ZCDpEvent","rho":1},{"type":"PoissonSampledDpEvent","sampling_probability":0.1,"event":{"type":"GaussianDpEvent","noise_multiplier":2}}]}`},
	} {
		b, err := MarshalEvent(c.e)
		if err != nil || string(b) != c.want {
			t.Errorf("%#v encodes as %s (%v), want %s", c.e, b, err, c.want)
			continue
		}
		back, err := UnmarshalEvent(b)
		if err != nil || !reflect.DeepEqual(back, c.e) {
			t.Errorf("%s decodes to %#v (%v)", b, back, err)
		}
	}
	// −0 is written as 0: one spelling per event (the audit compares
	// stored events byte for byte).
	if b, err := MarshalEvent(ZCDP{Rho: math.Copysign(0, -1), Xi: math.Copysign(0, -1)}); err != nil || string(b) != `{"type":"ZCDpEvent","rho":0}` {
		t.Errorf("ZCDP{−0, −0} encodes as %s (%v)", b, err)
	}
	if e, err := UnmarshalEvent([]byte(`{"type":"ZCDpEvent","rho":-0}`)); err != nil || math.Signbit(e.(ZCDP).Rho) {
		t.Errorf("rho −0 decodes to %#v (%v)", e, err)
	}
	// xi present at its default reads as absent; key order is free.
	for _, in := range []string{`{"type":"ZCDpEvent","rho":0.5,"xi":0}`, `{"xi":0,"rho":0.5,"type":"ZCDpEvent"}`, ` {"type":"ZCDpEvent","rho":5e-1}` + "\n"} {
		if e, err := UnmarshalEvent([]byte(in)); err != nil || e != (ZCDP{Rho: 0.5}) {
			t.Errorf("%s: %#v, %v", in, e, err)
		}
	}
	for _, bad := range []string{
		`{"type":"ZCDpEvent"}`,
		`{"type":"ZCDpEvent","xi":0.1}`,
		`{"type":"ZCDpEvent","rho":null}`,
		`{"type":"ZCDpEvent","rho":-0.5}`,
		`{"type":"ZCDpEvent","rho":-1e-300}`,
		`{"type":"ZCDpEvent","rho":0.5,"xi":-0.1}`,
		`{"type":"ZCDpEvent","rho":"NaN"}`,
		`{"type":"ZCDpEvent","rho":NaN}`,
		`{"type":"ZCDpEvent","rho":1e999}`,
		`{"type":"ZCDpEvent","rho":0.5,"xi":1e999}`,
		`{"type":"ZCDpEvent","rho":"0.5"}`,
		`{"type":"ZCDpEvent","rho":[0.5]}`,
		`{"type":"ZCDpEvent","Rho":0.5}`,
		`{"type":"ZCDpEvent","rho":0.5,"rho":0}`,
		`{"type":"ZCDpEvent","rho":0.5,"epsilon":1}`,
		`{"type":"ZCDpEvent","rho":0.5,"noise_multiplier":1}`,
		`{"type":"ZCDpEvent","rho":0.5,"event":{"type":"NonPrivateDpEvent"}}`,
		`{"type":"GaussianDpEvent","noise_multiplier":1,"rho":0.5}`,
		`{"type":"ZCDPEvent","rho":0.5}`,
		`{"type":"ZCDpEvent","rho":0.5}{"type":"NonPrivateDpEvent"}`,
	} {
		if e, err := UnmarshalEvent([]byte(bad)); err == nil {
			t.Errorf("%s accepted as %#v", bad, e)
		}
	}
	for _, e := range []Event{ZCDP{Rho: -1}, ZCDP{Rho: math.NaN()}, ZCDP{Rho: math.Inf(1)}, ZCDP{Rho: 1, Xi: -1}, ZCDP{Rho: 1, Xi: math.NaN()}} {
		if b, err := MarshalEvent(e); err == nil {
			t.Errorf("%#v encoded as %s", e, b)
		}
		if err := NewRDPAccountant(nil).Compose(e, 1); err == nil {
			t.Errorf("%#v composed", e)
		}
	}
}

// The accountants take ZCDP as RDP ξ + ρα at every order, and their
// reports say the PLD accountant does not cover it.
func TestZCDPAccounting(t *testing.T) {
	e := ZCDP{Rho: 0.01, Xi: 0.002}
	a := NewRDPAccountant(nil)
	if err := a.Compose(SelfComposed{Event: e, Count: 7}, 3); err != nil {
		t.Fatal(err)
	}
	orders, rdp := a.RDP()
	for i, alpha := range orders {
		if want := 21 * (0.002 + 0.01*alpha); math.Abs(rdp[i]-want) > 1e-12*want {
			t.Fatalf("α=%v: RDP %v, want 21·(ξ + ρα) = %v", alpha, rdp[i], want)
		}
	}
	events := append(repeat(ZCDP{Rho: 0.02}, 50), NoOp{})
	rep, err := Account(events, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := EpsilonZCDP(0.02, 50, 1e-5)
	if rep.PLD.Valid || !strings.Contains(rep.PLD.Note, "RDP used") || rep.Best.Accountant != "rdp" || rep.Epsilon() != want {
		t.Fatalf("report %+v, ε %v, want RDP's %v", rep, rep.Epsilon(), want)
	}
	// Mixed with a Poisson-sampled Gaussian, still RDP, and the sum.
	mixed := append(repeat(poisson(0.02, 1), 20), repeat(ZCDP{Rho: 0.02}, 5)...)
	rep, err = Account(mixed, 1e-5)
	if err != nil || rep.PLD.Valid || rep.Best.Accountant != "rdp" {
		t.Fatalf("mixed ledger: %+v, %v", rep, err)
	}
	acc := NewAccountant()
	for _, ev := range mixed {
		if err := acc.Compose(ev, 1); err != nil {
			t.Fatal(err)
		}
	}
	got, err := acc.Epsilon(1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameReport(got, rep); d != "" {
		t.Fatalf("Accountant differs from Account: %s", d)
	}
	if fits, err := acc.FitsWith(ZCDP{Rho: 0.02}, 1, 1e-5, rep.Epsilon()); err != nil || fits {
		t.Fatalf("one more round fits the spent budget: %v, %v", fits, err)
	}
}

// A sampled zCDP event is refused by every accountant, however nested:
// no amplification of zCDP by sampling is claimed.
func TestSampledZCDPRefused(t *testing.T) {
	z := ZCDP{Rho: 0.1}
	for _, e := range []Event{
		PoissonSampled{SamplingProbability: 0.01, Event: z},
		PoissonSampled{SamplingProbability: 1, Event: z},
		SampledWithoutReplacement{SourceDatasetSize: 1000, SampleSize: 100, Event: z},
		PoissonSampled{SamplingProbability: 0.01, Event: SelfComposed{Event: z, Count: 2}},
		PoissonSampled{SamplingProbability: 0.01, Event: Composed{Events: []Event{Gaussian{NoiseMultiplier: 1}, z}}},
		SelfComposed{Event: PoissonSampled{SamplingProbability: 0.5, Event: z}, Count: 10},
		Composed{Events: []Event{z, SampledWithoutReplacement{SourceDatasetSize: 10, SampleSize: 10, Event: z}}},
	} {
		// It is valid vocabulary: it encodes and decodes.
		b, err := MarshalEvent(e)
		if err != nil {
			t.Fatalf("%#v: %v", e, err)
		}
		if _, err := UnmarshalEvent(b); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		r := NewRDPAccountant(nil)
		if err := r.Compose(e, 1); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: RDP accountant: %v", b, err)
		}
		if _, rdp := r.RDP(); rdp[0] != 0 {
			t.Errorf("%s: refused event changed the accountant", b)
		}
		if rep, err := Account([]Event{z, e}, 1e-5); err == nil {
			t.Errorf("%s: Account gave %+v", b, rep)
		}
		acc := NewAccountant()
		if err := acc.Compose(e, 1); err == nil {
			t.Errorf("%s: Accountant composed it", b)
		}
		if _, err := acc.EpsilonWith(e, 1, 1e-5); err == nil {
			t.Errorf("%s: EpsilonWith accepted it", b)
		}
	}
}
