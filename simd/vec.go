package simd

import "math"

// Axpy computes dst += alpha·x element-wise (BLAS saxpy with unit strides).
// It is the SGD step x ← x − η·g of ClientUpdate (McMahan et al. 2017,
// Algorithm 1) with alpha = −η, and the weighted accumulation Σ n_k·Δ_k of
// FedAvg's aggregation. Each element is rounded once per operation (or once
// in total where the platform fuses the multiply-add).
//
// It panics if len(dst) != len(x).
func Axpy(dst []float32, alpha float32, x []float32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	axpy(dst, alpha, x)
}

// Dot returns Σ x_i·y_i accumulated in float32.
//
// The sum runs in four independent accumulators, each adding ⌊n/8⌋ sums
// of two products and at most two tail products, which are then added
// pairwise. A term therefore passes through at most ⌊n/8⌋+6 roundings
// (product, pair sum, accumulator additions, two-level combine), and by the
// standard analysis of summation (Higham, "Accuracy and Stability of
// Numerical Algorithms", 2nd ed., §3.1, eq. 3.5)
//
//	|Dot(x, y) − x·y| ≤ γ_{⌊n/8⌋+6} · Σ|x_i·y_i|,  γ_m = m·u/(1−m·u), u = 2⁻²⁴,
//
// barring overflow and underflow to subnormals; a fused multiply-add, where
// the platform uses one, only removes roundings. For n = 199,210 this is
// about 1.5·10⁻³ relative to Σ|x_i·y_i|; use Norm2's float64 accumulation
// where that matters.
//
// It panics if len(x) != len(y).
func Dot(x, y []float32) float32 {
	if len(x) != len(y) {
		panic(errLength)
	}
	return dot(x, y)
}

// Norm2 returns the Euclidean norm ‖x‖₂ = sqrt(Σ x_i²), accumulated in
// float64 because it decides DP-FedAvg clipping (McMahan et al. 2018,
// Algorithm 1), where an under-estimated norm would weaken the sensitivity
// bound.
//
// Each square of a float32 is exact in float64 and only the float64
// additions round (four accumulators of pair sums: at most ≈(n/8+10)·2⁻⁵³
// relative to Σ x_i², half that on the norm), followed by one correctly
// rounded square root. No scaling is done and none is needed: a float32
// squared is at most ≈1.2·10⁷⁷ and at least 2⁻²⁹⁸, so the float64 sum can
// neither overflow (that would take more than 10²³¹ elements) nor lose
// subnormal inputs.
//
// A NaN element gives NaN; an infinite one (and no NaN) gives +Inf.
func Norm2(x []float32) float64 {
	return math.Sqrt(sumSquares(x))
}

// Scale computes dst *= alpha element-wise (BLAS sscal with unit stride),
// e.g. the 1/Σn_k normalisation of a weighted FedAvg sum.
func Scale(dst []float32, alpha float32) {
	scale(dst, alpha)
}

// Add computes dst += x element-wise, e.g. merging two partial aggregation
// sums. It panics if len(dst) != len(x).
func Add(dst, x []float32) {
	if len(dst) != len(x) {
		panic(errLength)
	}
	add(dst, x)
}

// Sub computes dst = x − y element-wise, e.g. the client update
// Δ_i = x_i − x_t (McMahan et al. 2017, Algorithm 1). dst may alias x or y
// exactly (same first element); partial overlap gives unspecified results.
// It panics unless all three lengths are equal.
func Sub(dst, x, y []float32) {
	if len(dst) != len(x) || len(dst) != len(y) {
		panic(errLength)
	}
	sub(dst, x, y)
}

// AllFinite reports whether no element of x is NaN or ±Inf. Aggregators use
// it to reject a corrupt client update before it can poison a sum or a
// clip-norm computation. It reads the whole slice (no early exit), so its
// cost does not depend on the data.
func AllFinite(x []float32) bool {
	return allFinite(x)
}

// ReLU sets every element v_i < 0 of v to +0 in place (the rectifier
// max(0, v_i) of the MLP's hidden layers); NaN and −0 are left as they
// are, so a diverged model still shows up in the loss and in AllFinite.
// It is exact: every build and path gives the same bits.
func ReLU(v []float32) {
	relu(v)
}

// ReLUMask zeroes d_i (to +0) wherever !(a_i > 0): the backward pass of a
// ReLU whose outputs were a, δ ← δ ⊙ 1[a > 0], with the derivative at 0
// taken as 0. Exact, like ReLU. It panics if len(d) != len(a).
func ReLUMask(d, a []float32) {
	if len(d) != len(a) {
		panic(errLength)
	}
	reluMask(d, a)
}

const errLength = "simd: slice lengths differ"
