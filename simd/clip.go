package simd

import "math"

// ClipToNorm performs the per-user clipping π(Δ, S) of DP-FedAvg
// (McMahan et al. 2018, Algorithm 1): if ‖dst‖₂ > c it scales dst in place
// by (about) c/‖dst‖₂, otherwise it leaves dst untouched. It returns the
// pre-clip norm ‖dst‖₂ as computed by Norm2; clipping happened iff the
// returned norm is > c.
//
// The sensitivity bound of the Gaussian mechanism needs ‖π(Δ, S)‖₂ ≤ S to
// hold for the float32 vector actually added, so the scale factor is
// rounded down, aimed slightly (≈2⁻²³ relative) below c, and the result is
// re-measured: if float32 rounding of the products still left it too long,
// it is shrunk again by a growing margin until it fits. The check leaves
// room for Norm2's own float64 rounding (at most (n+64)·2⁻⁵³ relative for
// any summation order), so after a clip the exact Euclidean norm of dst is
// ≤ c, normally a few 10⁻⁷ relative below it. For extremely small c
// (below ≈10⁻³⁵·√n, where float32 products go subnormal) the result may
// be shrunk far more than c/‖dst‖₂, down to zero; it still satisfies the
// bound.
//
// c must be > 0 (+Inf never clips); otherwise ClipToNorm panics. Callers
// should reject non-finite updates first (AllFinite): if dst holds a NaN or
// ±Inf the returned norm is NaN or +Inf and dst is left unchanged, since no
// rescaling can make such an update meaningful. ClipToNorm does not
// allocate.
func ClipToNorm(dst []float32, c float64) (norm float64) {
	if !(c > 0) {
		panic("simd: ClipToNorm needs c > 0")
	}
	norm = Norm2(dst)
	if !(norm > c) || math.IsInf(norm, 1) {
		return norm
	}
	// A computed norm r ≤ target implies an exact norm ≤ r·(1+tol) < c.
	tol := float64(len(dst)+64) * 0x1p-53
	target := c * (1 - 2*tol)
	// First pass: aim 2⁻²³ below target, which absorbs the ≤2⁻²⁴ relative
	// rounding of each product, so normally no second pass is needed.
	scale(dst, roundDown32(target/norm*(1-0x1p-23)))
	margin := 0x1p-22
	for r := Norm2(dst); r > target; r = Norm2(dst) {
		// Only reachable through subnormal products; the margin doubles
		// up to ½, after which every pass at least halves each element,
		// so dst reaches zero in a few hundred passes at worst.
		scale(dst, roundDown32(target/r*(1-margin)))
		margin = min(2*margin, 0.5)
	}
	return norm
}

// ClipAdd adds the clipped update π(delta, c) of DP-FedAvg (McMahan et al.
// 2018, Algorithm 1) to sum in one fused pass and returns delta's pre-clip
// norm ‖delta‖₂ (as Norm2 computes it): it has the effect of
//
//	ClipToNorm(delta, c); Add(sum, delta)
//
// bit for bit, including the guarantee that the exact Euclidean norm of
// the float32 vector added to sum is ≤ c, but reads delta twice and writes
// only sum, and leaves delta unchanged.
//
// The fusion is exact because ClipToNorm's first pass already meets its
// check whenever c ≥ √n·2⁻¹²⁵ and n ≤ 2²⁶: its scale factor s aims 2⁻²³
// below the target, and the rounding of the products fl(s·δ_i) adds at most
// 2⁻²⁴ relative plus 2⁻¹⁵⁰ absolute per element (subnormal results), i.e.
// √n·2⁻¹⁵⁰ ≤ c·2⁻²⁵ on the norm, while Norm2's own error (n+64)·2⁻⁵³ stays
// below 2⁻²⁶; so sum += fl(s·δ_i) (Axpy, which does not fuse the multiply
// and add) adds exactly the vector ClipToNorm would have left in delta.
// Outside that range (tiny c or huge n) ClipAdd runs ClipToNorm on delta
// in place and then Add, so delta is clipped as a side effect.
//
// Like ClipToNorm it panics unless c > 0, and a delta holding NaN or ±Inf
// gives a NaN or +Inf norm and leaves sum unchanged, so a caller rejects
// such an update by its returned norm, without a separate AllFinite pass
// (a finite float32 vector's norm never overflows float64). It panics if len(sum) != len(delta)
// and does not allocate.
func ClipAdd(sum, delta []float32, c float64) (norm float64) {
	if !(c > 0) {
		panic("simd: ClipAdd needs c > 0")
	}
	if len(sum) != len(delta) {
		panic(errLength)
	}
	norm = Norm2(delta)
	if math.IsNaN(norm) || math.IsInf(norm, 1) {
		return norm
	}
	if !(norm > c) {
		add(sum, delta)
		return norm
	}
	n := len(delta)
	if n > 1<<26 || c < math.Sqrt(float64(n))*0x1p-125 {
		ClipToNorm(delta, c)
		add(sum, delta)
		return norm
	}
	tol := float64(n+64) * 0x1p-53
	target := c * (1 - 2*tol)
	axpy(sum, roundDown32(target/norm*(1-0x1p-23)), delta)
	return norm
}

// roundDown32 returns the largest float32 ≤ s, for s ≥ 0.
func roundDown32(s float64) float32 {
	f := float32(s)
	if float64(f) > s {
		f = math.Nextafter32(f, 0)
	}
	return f
}
