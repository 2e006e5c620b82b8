package accounting

import "math"

// gaussianRDP is the RDP of the Gaussian mechanism with noise multiplier z
// at order α: α/(2z²) (Mironov 2017, Prop. 7).
func gaussianRDP(alpha, z float64) float64 { return alpha / (2 * z * z) }

// poissonGaussianRDP is the RDP at order α of the Gaussian mechanism with
// noise multiplier z on a Poisson subsample of rate q, under add/remove
// adjacency: log(A_α)/(α−1) with A_α from Mironov, Talwar, Zhang 2019
// ("Rényi Differential Privacy of the Sampled Gaussian Mechanism"), §3.3
// for integer α (a binomial sum) and §3.3's two-series expansion for
// fractional α. All arithmetic is in log space.
func poissonGaussianRDP(q, z, alpha float64) float64 {
	if q == 1 {
		return gaussianRDP(alpha, z)
	}
	var logA float64
	if alpha == math.Floor(alpha) {
		logA = logAInt(q, z, int(alpha))
	} else {
		logA = logAFrac(q, z, alpha)
	}
	return logA / (alpha - 1)
}

// logAInt: A_α = Σ_{k=0}^{α} C(α,k) (1−q)^{α−k} q^k exp((k²−k)/(2z²)).
func logAInt(q, z float64, alpha int) float64 {
	logA := math.Inf(-1)
	lq, l1q := math.Log(q), math.Log1p(-q)
	for k := 0; k <= alpha; k++ {
		t := logBinom(float64(alpha), float64(k)) + float64(k)*lq + float64(alpha-k)*l1q +
			float64(k*k-k)/(2*z*z)
		logA = logAdd(logA, t)
	}
	return logA
}

// logAFrac is A_α for fractional α as the sum of two convergent series
// (MTZ 2019 §3.3): with z₀ = z² log(1/q − 1) + 1/2, the integral splits at
// z₀ and each side expands binomially with terms weighted by Gaussian tail
// masses (erfc). Terms of the generalised binomial C(α, i) alternate in
// sign once i > α, so positive and negative terms are accumulated apart.
func logAFrac(q, z, alpha float64) float64 {
	log0, log1 := math.Inf(-1), math.Inf(-1)
	z0 := z*z*math.Log(1/q-1) + 0.5
	lq, l1q := math.Log(q), math.Log1p(-q)
	for i := 0; ; i++ {
		fi := float64(i)
		logCoef, sign := logAbsBinom(alpha, fi)
		j := alpha - fi
		t0 := logCoef + fi*lq + j*l1q
		t1 := logCoef + j*lq + fi*l1q
		e0 := math.Log(0.5) + logErfc((fi-z0)/(math.Sqrt2*z))
		e1 := math.Log(0.5) + logErfc((z0-j)/(math.Sqrt2*z))
		s0 := t0 + (fi*fi-fi)/(2*z*z) + e0
		s1 := t1 + (j*j-j)/(2*z*z) + e1
		if sign > 0 {
			log0, log1 = logAdd(log0, s0), logAdd(log1, s1)
		} else {
			log0, log1 = logSub(log0, s0), logSub(log1, s1)
		}
		if math.Max(s0, s1) < -30 || i > 10000 {
			break
		}
	}
	return logAdd(log0, log1)
}

// worGaussianRDP bounds the RDP at order α of the Gaussian mechanism with
// noise multiplier z (w.r.t. replace-one sensitivity) on a uniformly random
// subset of fraction γ = sample/source, under replace-one adjacency: Wang,
// Balle, Kasiviswanathan 2019 ("Subsampled Rényi Differential Privacy and
// Analytical Moments Accountant"), Theorem 9 with ε(∞) = ∞ for the
// Gaussian, at integer α:
//
//	(α−1)·ε'(α) ≤ log(1 + γ² C(α,2) min{4(e^{ε(2)}−1), 2e^{ε(2)}}
//	                     + Σ_{j=3}^{α} 2 γ^j C(α,j) e^{(j−1)ε(j)}).
//
// For fractional α it interpolates (α−1)ε'(α) linearly between ⌊α⌋ and
// ⌈α⌉, an upper bound because (α−1)·D_α is convex in α (van Erven &
// Harremoës 2014, Thm. 11) and 0 at α = 1.
func worGaussianRDP(gamma, z, alpha float64) float64 {
	if gamma == 1 {
		return gaussianRDP(alpha, z)
	}
	cgf := func(a int) float64 { // (a−1)·ε'(a)
		if a <= 1 {
			return 0
		}
		eps2 := gaussianRDP(2, z)
		lg := math.Log(gamma)
		t2 := math.Min(math.Log(4)+logExpm1(eps2), math.Log(2)+eps2)
		s := logAdd(0, 2*lg+logBinom(float64(a), 2)+t2)
		for j := 3; j <= a; j++ {
			fj := float64(j)
			s = logAdd(s, math.Log(2)+fj*lg+logBinom(float64(a), fj)+(fj-1)*gaussianRDP(fj, z))
		}
		return s
	}
	lo := math.Floor(alpha)
	if lo == alpha {
		return cgf(int(alpha)) / (alpha - 1)
	}
	t := alpha - lo
	return ((1-t)*cgf(int(lo)) + t*cgf(int(lo)+1)) / (alpha - 1)
}

// logAdd is log(e^a + e^b).
func logAdd(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// logSub is log(e^a − e^b) for a ≥ b; −∞ when equal. A b > a from rounding
// in the alternating tail is clamped to −∞ (the true value is tiny).
func logSub(a, b float64) float64 {
	if math.IsInf(b, -1) {
		return a
	}
	if b >= a {
		return math.Inf(-1)
	}
	return a + math.Log(-math.Expm1(b-a))
}

// logExpm1 is log(e^x − 1) for x > 0.
func logExpm1(x float64) float64 {
	if x > 50 {
		return x
	}
	return math.Log(math.Expm1(x))
}

// logBinom is log C(n, k) for real n ≥ k ≥ 0 with n − k > −1.
func logBinom(n, k float64) float64 {
	a, _ := math.Lgamma(n + 1)
	b, _ := math.Lgamma(k + 1)
	c, _ := math.Lgamma(n - k + 1)
	return a - b - c
}

// logAbsBinom is log|C(α, i)| and its sign for the generalised binomial
// coefficient Γ(α+1)/(Γ(i+1)Γ(α−i+1)).
func logAbsBinom(alpha, i float64) (float64, int) {
	a, sa := math.Lgamma(alpha + 1)
	b, sb := math.Lgamma(i + 1)
	c, sc := math.Lgamma(alpha - i + 1)
	return a - b - c, sa * sb * sc
}

// logErfc is log(erfc(x)), with the asymptotic expansion (Abramowitz &
// Stegun 7.1.23) where erfc underflows.
func logErfc(x float64) float64 {
	if x < 25 {
		return math.Log(math.Erfc(x))
	}
	r := 1 / (x * x)
	return -x*x - math.Log(x) - 0.5*math.Log(math.Pi) + math.Log1p(-r/2+3*r*r/4-15*r*r*r/8)
}
