package fl

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"

	"github.com/dpfl/dpfl/accounting"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/simd"
)

// The client and server transforms of the distributed discrete Gaussian
// mechanism of Kairouz, Liu & Steinke, "The Distributed Discrete Gaussian
// Mechanism for Federated Learning with Secure Aggregation" (ICML 2021;
// arXiv 2102.06387, numbered as in its v4; KLS21 below), Algorithm 1:
//
//	client i:  x_i = R·clip_C(Δ_i)/γ ∈ R^p          (clip, flatten, scale)
//	           x̃_i = conditional randomized rounding of x_i ∈ Z^p
//	           y_i = x̃_i + N_Z(0, σ²)^p  mod m       (its own noise share)
//	secure aggregation reveals  S = Σ_i y_i mod m
//	server:    Σ̂ = γ·Rᵀ·centre_m(S), truncated to d
//
// with R = H·D/√p the seeded randomized Hadamard rotation
// (simd.HadamardRotation), m = 2^b, and centre_m the representative in
// [−m/2, m/2). The server adds no noise and never holds an un-noised sum:
// every value it sees is a sum in which the n noise shares are already
// present. Privacy is KLS21's: the n shares sum to noise that is close to
// N_Z(0, nσ²) (accounting.DistributedDiscreteGaussianRho), and one
// client's x̃_i is bounded in L2 norm by Δ₂ (DDGSensitivity), whatever the
// float arithmetic before the rounding did, because the rounding loop
// checks the bound exactly, in integers. The reduction mod m and every
// step of the decoding are post-processing; wrap-around costs accuracy,
// never privacy.
//
// SecureAggregator (Distributed) and devices (package device) run it
// inside secure aggregation, with a fresh public rotation seed per
// round (DDGRound); the job layer charges DDGRhoAt in the ledger.

// DDGBeta is the default conditional-rounding bias β = e^(−1/2) of
// ChooseDDGParams, the value used in KLS21's experiments and what
// TensorFlow Federated's distributed_dp aggregator recommends when β > 0.
// Each rounding attempt then meets the norm bound with probability at
// least 1 − β ≈ 0.39 (KLS21 Theorem 1), in practice almost always.
const DDGBeta = 0.6065306597126334 // math.Exp(-0.5)

// DDGWrapProbability is the probability, per round and for all PaddedDim
// coordinates together, that ChooseDDGParams allows the noisy integer sum
// to leave [−m/2, m/2) and wrap. The chooser keeps
//
//	m/2 − n ≥ k·√( (n·C/γ)²/p + n·σ² ),  k = √(2·ln(2p / DDGWrapProbability)),
//
// so that, with n bounding the clients' conditional-rounding errors
// (each < 1 per coordinate) and the rest sub-Gaussian, a union bound over
// the p coordinates gives P[some coordinate wraps] ≤ 2p·exp(−k²/2) =
// DDGWrapProbability. The sub-Gaussian proxies: a coordinate of
// R·v = H·D·v/√p is a Rademacher sum with proxy ‖v‖²/p (Hoeffding), and
// ‖Σ_i x_i‖ ≤ n·C/γ; the discrete Gaussian N_Z(0, σ²) has proxy σ²
// (Canonne, Kamath, Steinke 2020, §2: E[e^{tX}] ≤ e^{t²σ²/2}). This is
// KLS21 §4's flattening argument and the k-standard-deviation rule of
// TFF's _heuristic_scale_factor, with a rigorous union bound in place of
// TFF's per-coordinate 10⁻⁴ (its k ≈ 3.9; here k ≈ 6.9 at p = 8192) and
// the rounding errors bounded deterministically rather than by their
// variance n/4. It holds for inputs chosen independently of the
// rotation's signs: a client that knows the seed before it computes its
// update can force a wrap, which spoils the round's accuracy only.
const DDGWrapProbability = 1e-6

// DDGMaxAccuracyLoss is the largest AccuracyLoss ChooseDDGParams accepts:
// the expected squared error of the decoded sum may exceed the central
// Gaussian mechanism's at the same noise multiplier (d·z²·C²) by at most
// 10%, which covers the norm inflation of the rounding (more noise for
// the same ρ), the rounding error itself and the modular wrap.
const DDGMaxAccuracyLoss = 0.1

// DDGMaxRoundingTries caps the attempts of the conditional randomized
// rounding (KLS21 Algorithm 1; TFF's max_tries is also 1000). With
// β ≤ DDGBeta an input of norm ≤ C/γ fails all of them with probability
// below β¹⁰⁰⁰ < 10⁻²¹⁷.
const DDGMaxRoundingTries = 1000

// ErrDDGOverflow: the modulus 2^b cannot hold the noisy sum of n clients
// within DDGWrapProbability (too few bits for n, the noise and the
// signal), or an exact quantity would not fit its integer type.
var ErrDDGOverflow = errors.New("fl: distributed discrete Gaussian: the modulus cannot hold the noisy sum")

// ErrDDGAccuracy: the parameters would lose more accuracy than
// DDGMaxAccuracyLoss allows (too few bits for this z, C, d and n).
var ErrDDGAccuracy = errors.New("fl: distributed discrete Gaussian: accuracy loss above DDGMaxAccuracyLoss")

// ErrDDGRounding: the conditional randomized rounding missed its norm
// bound DDGMaxRoundingTries times (only parameters that do not follow
// Theorem 1's bound, or a broken generator, make this happen).
var ErrDDGRounding = errors.New("fl: distributed discrete Gaussian: conditional rounding missed its norm bound")

// DDGParams are the public parameters of one round of the distributed
// discrete Gaussian mechanism (KLS21 Algorithm 1), shared by the server
// and every client. The first eight fields define the transforms; the
// rest is ChooseDDGParams's report and is not read by DDGEncode or
// DDGDecode. Sigma2 is shared, not copied: treat it as immutable.
type DDGParams struct {
	// Clip is C, the L2 bound on each client's update, in model units;
	// finite and > 0.
	Clip float64 `json:"clip"`
	// Dim is d, the update's length (1 ≤ d ≤ 2³⁰).
	Dim int `json:"dim"`
	// PaddedDim is p, the next power of two ≥ d: the length of the
	// rotated, encoded vectors (simd.HadamardRotation.PaddedDim).
	PaddedDim int `json:"padded_dim"`
	// Bits is b, 1 ≤ b ≤ 32: the sum is computed modulo m = 2^b. The
	// encoded values lie in [0, 2^b) and travel as uint32 in the ring
	// Z_2³² of secure aggregation; since 2^b divides 2³², the server
	// reduces the ring sum mod 2^b (DDGDecode).
	Bits int `json:"bits"`
	// Gamma is γ, the rounding granularity in model units per integer
	// step (the client scales by 1/γ; KLS21's γ); finite and > 0.
	Gamma float64 `json:"gamma"`
	// Beta is the conditional rounding bias β ∈ [0, 1) of KLS21 Theorem
	// 1; 0 means unconditional randomized rounding with the deterministic
	// bound Δ₂ = C/γ + √p.
	Beta float64 `json:"beta"`
	// Sigma2 is σ², the variance parameter of each client's discrete
	// Gaussian share N_Z(0, σ²), in integer units, as the exact rational
	// the sampler uses (dp.NewDiscreteGaussian) and the accountant must
	// use; > 0 and ≤ dp.MaxDiscreteGaussianSigma2, and ≥ 1/4 when
	// Clients ≥ 2 (KLS21's hypothesis σ ≥ 1/2).
	Sigma2 *big.Rat `json:"sigma2"`
	// Clients is n, the number of noise shares the parameters are sized
	// for: the shares sum to N_Z-like noise of variance ≈ n·σ², and the
	// wrap bound assumes at most n clients in the sum.
	Clients int `json:"clients"`

	// NoiseMultiplier is ChooseDDGParams's z: the n shares' total
	// standard deviation √n·σ is ≥ z·Δ₂ (DDGSensitivity), so the round is
	// ρ-zCDP with ρ ≤ 1/(2z²) plus KLS21's slack τ·p.
	NoiseMultiplier float64 `json:"noise_multiplier"`
	// WrapStdDevs is (m/2 − n)/√((n·C/γ)²/p + n·σ²), the k that the
	// modulus holds (DDGParams.WrapBound; ≥ the k of
	// DDGWrapProbability when chosen by ChooseDDGParams).
	WrapStdDevs float64 `json:"wrap_std_devs"`
	// NoiseError, RoundingError and WrapError bound the expected squared
	// L2 error of the decoded d-dimensional sum due to the noise
	// (d·n·σ²·γ²), the randomized rounding (d·n·γ²/4: each rounding error
	// has variance ≤ 1/4, spread evenly by the orthogonal unrotation) and
	// modular wrap (see ChooseDDGParams), in model units squared.
	NoiseError    float64 `json:"noise_sq_error"`
	RoundingError float64 `json:"rounding_sq_error"`
	WrapError     float64 `json:"wrap_sq_error"`
	// CentralError is d·z²·C², the central Gaussian mechanism's expected
	// squared error at noise multiplier z (the same ρ = 1/(2z²)).
	CentralError float64 `json:"central_sq_error"`
	// AccuracyLoss is (NoiseError + RoundingError + WrapError) /
	// CentralError − 1: the relative excess squared error over the
	// central Gaussian mechanism at the same privacy.
	AccuracyLoss float64 `json:"accuracy_loss"`
}

// ddgMaxScaled bounds C/γ + √p, so that every rounded coordinate fits in
// an int64 and ‖x̃‖² in 128 bits.
const ddgMaxScaled = 1 << 60

// Validate checks the eight fields that define the transforms: ranges as
// documented on DDGParams, PaddedDim = the next power of two ≥ Dim, and
// C/γ + √p ≤ 2⁶⁰ (so that the exact integer arithmetic cannot overflow).
// It returns an error describing the first violation.
func (p DDGParams) Validate() error {
	switch {
	case !(p.Clip > 0) || math.IsInf(p.Clip, 0):
		return fmt.Errorf("fl: DDG clip norm must be finite and > 0, got %v", p.Clip)
	case p.Dim < 1 || p.Dim > 1<<30:
		return fmt.Errorf("fl: DDG dimension must be in [1, 2^30], got %d", p.Dim)
	case p.PaddedDim != ddgNextPow2(p.Dim):
		return fmt.Errorf("fl: DDG padded dimension must be %d for dimension %d, got %d", ddgNextPow2(p.Dim), p.Dim, p.PaddedDim)
	case p.Bits < 1 || p.Bits > 32:
		return fmt.Errorf("fl: DDG modulus bits must be in [1, 32], got %d", p.Bits)
	case !(p.Gamma > 0) || math.IsInf(p.Gamma, 0):
		return fmt.Errorf("fl: DDG granularity γ must be finite and > 0, got %v", p.Gamma)
	case !(p.Beta >= 0 && p.Beta < 1):
		return fmt.Errorf("fl: DDG rounding bias β must be in [0, 1), got %v", p.Beta)
	case p.Sigma2 == nil || p.Sigma2.Sign() <= 0:
		return errors.New("fl: DDG noise σ² must be set and > 0")
	case p.Sigma2.Cmp(new(big.Rat).SetFloat64(dp.MaxDiscreteGaussianSigma2)) > 0:
		return fmt.Errorf("fl: DDG noise σ² must be ≤ 2^64, got %s", p.Sigma2.FloatString(0))
	case p.Clients < 1:
		return fmt.Errorf("fl: DDG needs n ≥ 1 clients, got %d", p.Clients)
	case p.Clients >= 2 && p.Sigma2.Cmp(big.NewRat(1, 4)) < 0:
		return fmt.Errorf("fl: DDG with %d noise shares needs σ ≥ 1/2 (KLS21), got σ² = %s", p.Clients, p.Sigma2.RatString())
	}
	if s := p.Clip/p.Gamma + math.Sqrt(float64(p.PaddedDim)); !(s <= ddgMaxScaled) {
		return fmt.Errorf("%w: C/γ + √p = %g exceeds 2^60", ErrDDGOverflow, s)
	}
	return nil
}

// WrapBound returns k = (m/2 − n)/√((n·C/γ)²/p + n·σ²), how many
// sub-Gaussian standard deviations of the sum's coordinates fit between
// the rounding errors' worst case n and the edge m/2 of the centred range
// (see DDGWrapProbability); P[some coordinate wraps] ≤ 2p·exp(−k²/2).
// It is −Inf when n ≥ m/2.
func (p DDGParams) WrapBound() float64 {
	room := math.Ldexp(1, p.Bits-1) - float64(p.Clients)
	if room <= 0 {
		return math.Inf(-1)
	}
	n := float64(p.Clients)
	sig, _ := p.Sigma2.Float64()
	sc := n * p.Clip / p.Gamma
	return room / math.Sqrt(sc*sc/float64(p.PaddedDim)+n*sig)
}

// ddgK is the k of DDGWrapProbability for padded dimension pd.
func ddgK(pd int) float64 {
	return math.Sqrt(2 * math.Log(2*float64(pd)/DDGWrapProbability))
}

// ddgNormBound2 returns ⌊Δ₂²⌋ as a 128-bit integer (hi, lo), the bound
// that DDGEncode's conditional rounding enforces on ‖x̃‖₂² exactly: the
// floor of the float64 value of KLS21 Theorem 1's bound in integer units,
//
//	Δ₂² = min{ (C/γ)² + p/4 + √(2 ln(1/β))·(C/γ + √p/2),  (C/γ + √p)² }
//
// (the first term only for β > 0). Since ‖x̃‖² is an integer, "≤ Δ₂²"
// and "≤ ⌊Δ₂²⌋" are the same test; the float64 rounding of the formula
// only moves the acceptance probability by a negligible amount, never the
// guarantee, which is stated for the integer returned here. p must be
// valid (Validate), so the value is < 2¹²⁰.
func ddgNormBound2(p DDGParams) (hi, lo uint64) {
	c := p.Clip / p.Gamma
	sp := math.Sqrt(float64(p.PaddedDim))
	b := (c + sp) * (c + sp)
	if p.Beta > 0 {
		s := math.Sqrt(2 * math.Log(1/p.Beta))
		b = math.Min(b, c*c+float64(p.PaddedDim)/4+s*(c+sp/2))
	}
	f := math.Floor(b)
	h := math.Floor(math.Ldexp(f, -64))
	return uint64(h), uint64(f - math.Ldexp(h, 64)) // both exact: f is an integer < 2¹²⁰
}

// DDGSensitivity returns Δ₂, the L2 bound that DDGEncode enforces on each
// client's rounded integer vector x̃ (KLS21 Theorem 1's inflated norm,
// in integer units: √⌊Δ₂²⌋ of ddgNormBound2, rounded up), the
// l2Sensitivity that accounting.DistributedDiscreteGaussianRho needs
// under add/remove adjacency (one client's x̃ present or absent; double
// it for replace-one). NaN if p is not valid.
func DDGSensitivity(p DDGParams) (l2 float64) {
	if p.Validate() != nil {
		return math.NaN()
	}
	hi, lo := ddgNormBound2(p)
	f := math.Ldexp(float64(hi), 64) + float64(lo) // exact: the float64 ⌊Δ₂²⌋ split above
	return math.Nextafter(math.Sqrt(f), math.Inf(1))
}

// DDGRho returns ρ such that one round's release, the sum of the encoded
// vectors of clients among which at least survivors honest clients added
// their noise share, is ρ-zCDP: accounting.DistributedDiscreteGaussianRho
// with n = survivors, dimension PaddedDim, σ = √Sigma2 (rounded down) and
// Δ₂ = DDGSensitivity(p). Fewer survivors than p.Clients means less noise
// in the sum and a larger ρ (≈ Clients/survivors times the planned one):
// the guarantee degrades gracefully, and the ledger should record ρ at the
// minimum number of survivors the round allows. Errors: p invalid, or the
// accountant's errors (survivors < 1, σ < 1/2 with survivors ≥ 2).
func DDGRho(p DDGParams, survivors int) (float64, error) {
	return DDGRhoAt(p, survivors, OneClip)
}

// DDGRhoAt is DDGRho for a release whose sum one user moves by sens·Δ₂
// in L2 norm: OneClip under add/remove adjacency (one client's vector in
// or out), TwoClips under replace-one (one client's vector replaced by
// another's, as with a fixed cohort or devices). Errors are DDGRho's.
func DDGRhoAt(p DDGParams, survivors int, sens Sensitivity) (float64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	s2, _ := p.Sigma2.Float64()
	s2 = math.Nextafter(s2, 0) // ≤ σ² whatever the rounding of Float64
	sigma := math.Nextafter(math.Sqrt(s2), 0)
	return accounting.DistributedDiscreteGaussianRho(survivors, p.PaddedDim, sigma, float64(sens)*DDGSensitivity(p))
}

// ChooseDDGParams chooses the distributed discrete Gaussian's parameters
// for clip norm C = clip, dimension d, n noise shares (clients in the
// sum), b = bits of modulus and noise multiplier z > 0, following KLS21
// §4–5 and the heuristics of TensorFlow Federated's distributed_dp
// aggregator (_heuristic_scale_factor, inflated_l2_norm_bound):
//
//   - β = DDGBeta, p = the next power of two ≥ d;
//   - noise: each client's σ² = z²·Δ₂²/n in integer units, rounded up to
//     a rational with a power-of-two denominator (relative change ≤ 2⁻⁴⁰),
//     so the n shares have total standard deviation ≥ z·Δ₂ and the round
//     is ρ-zCDP with ρ ≤ 1/(2z²) + τ·p (DDGRho): z is the noise
//     multiplier of the central Gaussian mechanism with the same ρ, up to
//     KLS21's slack τ ≤ 10(n−1)·e^(−π²σ²), negligible for σ ≥ 2;
//   - scale: the smallest γ with which the modulus holds the sum (see
//     DDGWrapProbability): k²·((nC)²/p + z²·(γΔ₂)²) ≤ γ²·(m/2 − n)², a
//     quadratic in γ since (γΔ₂)² ≤ C² + a₁·C·γ + a₂·γ² by Theorem 1
//     (a₁ = √(2 ln(1/β)), a₂ = p/4 + a₁√p/2; or a₁ = 2√p, a₂ = p), solved
//     with k enlarged by 10⁻⁹ and re-checked with the final σ²; TFF solves
//     the same equation with variance n/4 for the rounding and its own k.
//
// The expected squared error of the decoded sum (model units, over the d
// coordinates) is then at most NoiseError + RoundingError + WrapError
// (cross terms with the wrap, and the small bias of conditional rounding,
// neglected), where the wrap term bounds E[(wrap error)²] of each of the
// p rotated coordinates by 16·(room² + 2s² + n²)·exp(−room²/(2s²))·γ²
// with room = m/2 − n and s² the sub-Gaussian proxy above. AccuracyLoss
// compares it with the central Gaussian mechanism's d·z²·C².
//
// Errors: invalid arguments; ErrDDGOverflow when m/2 ≤ n or the noise
// alone cannot fit (wrapped, with the figures); ErrDDGAccuracy when
// AccuracyLoss > DDGMaxAccuracyLoss (the returned params carry the
// figures). More bits always help: b = 32 costs nothing extra in this
// package's ring Z_2³², smaller b saves bandwidth where secure
// aggregation runs with a 2^b modulus.
func ChooseDDGParams(clip float64, d, n, bits int, z float64) (DDGParams, error) {
	switch {
	case !(clip > 0) || math.IsInf(clip, 0):
		return DDGParams{}, fmt.Errorf("fl: DDG clip norm must be finite and > 0, got %v", clip)
	case d < 1 || d > 1<<30:
		return DDGParams{}, fmt.Errorf("fl: DDG dimension must be in [1, 2^30], got %d", d)
	case n < 1:
		return DDGParams{}, fmt.Errorf("fl: DDG needs n ≥ 1 clients, got %d", n)
	case bits < 1 || bits > 32:
		return DDGParams{}, fmt.Errorf("fl: DDG modulus bits must be in [1, 32], got %d", bits)
	case !(z > 0) || math.IsInf(z, 0):
		return DDGParams{}, fmt.Errorf("fl: DDG noise multiplier must be finite and > 0, got %v", z)
	}
	pd := ddgNextPow2(d)
	fp, fn := float64(pd), float64(n)
	k := ddgK(pd)
	room := math.Ldexp(1, bits-1) - fn
	if room <= 0 {
		return DDGParams{}, fmt.Errorf("%w: m/2 = 2^%d must exceed the n = %d clients' rounding errors", ErrDDGOverflow, bits-1, n)
	}
	kk := k * (1 + 1e-9)
	k2z2 := kk * kk * z * z
	c0 := kk * kk * clip * clip * (fn*fn/fp + z*z)
	s := math.Sqrt(2 * math.Log(1/DDGBeta))
	gamma := math.Inf(1)
	for _, a := range [][2]float64{{s, fp/4 + s*math.Sqrt(fp)/2}, {2 * math.Sqrt(fp), fp}} {
		qa := room*room - k2z2*a[1]
		if !(qa > 0) {
			continue
		}
		qb := k2z2 * a[0] * clip // −B
		g := (qb + math.Sqrt(qb*qb+4*qa*c0)) / (2 * qa)
		gamma = math.Min(gamma, g)
	}
	if math.IsInf(gamma, 1) {
		return DDGParams{}, fmt.Errorf("%w: with %d bits, %d clients and z = %g the noise alone exceeds the modulus", ErrDDGOverflow, bits, n, z)
	}
	p := DDGParams{Clip: clip, Dim: d, PaddedDim: pd, Bits: bits, Gamma: gamma, Beta: DDGBeta, Clients: n, NoiseMultiplier: z, Sigma2: big.NewRat(1, 1)}
	if err := p.Validate(); err != nil { // C/γ too large (tiny γ): a bug in the caller's figures
		return DDGParams{}, err
	}
	delta := DDGSensitivity(p)
	s2 := z * z * delta * delta / fn
	if !(s2 <= dp.MaxDiscreteGaussianSigma2) {
		return DDGParams{}, fmt.Errorf("%w: per-client σ² = %g exceeds 2^64", ErrDDGOverflow, s2)
	}
	p.Sigma2 = ratCeil(s2)
	if err := p.Validate(); err != nil {
		return DDGParams{}, err
	}
	p.WrapStdDevs = p.WrapBound()
	if !(p.WrapStdDevs >= k) {
		return DDGParams{}, fmt.Errorf("%w: the modulus holds %.3g < %.3g standard deviations", ErrDDGOverflow, p.WrapStdDevs, k)
	}
	ddgErrors(&p)
	if p.AccuracyLoss > DDGMaxAccuracyLoss {
		return p, fmt.Errorf("%w: %d bits with %d clients, C = %g, d = %d, z = %g: expected squared error %.4g vs central %.4g (+%.1f%% > %.0f%%)",
			ErrDDGAccuracy, bits, n, clip, d, z, p.NoiseError+p.RoundingError+p.WrapError, p.CentralError, 100*p.AccuracyLoss, 100*DDGMaxAccuracyLoss)
	}
	return p, nil
}

// ddgErrors fills the error report of p (see ChooseDDGParams).
func ddgErrors(p *DDGParams) {
	fd, fn, g2 := float64(p.Dim), float64(p.Clients), p.Gamma*p.Gamma
	sig, _ := p.Sigma2.Float64()
	p.NoiseError = fd * fn * sig * g2
	p.RoundingError = fd * fn * g2 / 4
	room := math.Ldexp(1, p.Bits-1) - fn
	sc := fn * p.Clip / p.Gamma
	s2 := sc*sc/float64(p.PaddedDim) + fn*sig
	p.WrapError = float64(p.PaddedDim) * 16 * (room*room + 2*s2 + fn*fn) * math.Exp(-room*room/(2*s2)) * g2
	p.CentralError = fd * p.NoiseMultiplier * p.NoiseMultiplier * p.Clip * p.Clip
	p.AccuracyLoss = (p.NoiseError+p.RoundingError+p.WrapError)/p.CentralError - 1
}

// ratCeil returns a rational ≥ x > 0 within 2⁻⁴⁰ relative, with a
// power-of-two denominator chosen so that its numerator has about 41 bits
// (the discrete Gaussian sampler's 64/128-bit fast path).
func ratCeil(x float64) *big.Rat {
	_, e := math.Frexp(x) // x = f·2^e, f ∈ [½, 1)
	sh := max(0, 41-e)
	num, _ := new(big.Float).SetFloat64(math.Ceil(math.Ldexp(x, sh))).Int(nil)
	return new(big.Rat).SetFrac(num, new(big.Int).Lsh(big.NewInt(1), uint(sh)))
}

// ddgNextPow2 returns the smallest power of two ≥ d ≥ 1.
func ddgNextPow2(d int) int { return 1 << bits.Len(uint(d-1)) }

// DDGEncode is a client's side of the distributed discrete Gaussian
// (KLS21 Algorithm 1): it writes into dst (len p.PaddedDim) the client's
// input to secure aggregation,
//
//	dst = x̃ + N_Z(0, σ²)^p  mod 2^b,  x̃ = round_β(R·clip_C(delta)/γ),
//
// where R = rot (seeded per round, the server holds the same seed),
// noise = dp.NewDiscreteGaussian(p.Sigma2) (checked), and round_β is the
// conditional randomized rounding: each coordinate goes to ⌊x⌋ + 1 with
// probability x − ⌊x⌋, otherwise ⌊x⌋, and the whole vector is redrawn
// until ‖x̃‖₂² ≤ ⌊Δ₂²⌋ (KLS21 Theorem 1; exact integer test), at most
// DDGMaxRoundingTries times (then ErrDDGRounding). It returns Δ₂ =
// DDGSensitivity(p), the bound the accountant must use. delta
// (len p.Dim) is not modified.
//
// Steps and their arithmetic: delta is clipped to C in float32
// (simd.ClipToNorm: exact norm ≤ C) and rotated in float32; the rotated
// vector is scaled by 1/γ in float64 and, if float32 rounding left its
// float64 norm above C/γ, shrunk back to C/γ (the rounding analysis needs
// ‖x‖ ≤ C/γ, and at large 1/γ float32 error alone would exceed Theorem
// 1's slack); the rounding uses rng.Float64 (bias ≤ 2⁻⁵³ per coordinate),
// the noise is added mod 2³² (dp.DiscreteGaussian.AddNoiseRing) and the
// result reduced mod 2^b. rng supplies all the randomness and must be
// dp.NewSecureRand's: the noise protects privacy.
//
// Errors: p invalid, rot's dimensions or the lengths not matching p, a
// nil noise sampler or one with another σ², a non-finite delta
// (dp.ErrNonFinite), ErrDDGRounding.
func DDGEncode(dst []uint32, delta []float32, p DDGParams, rot *simd.HadamardRotation, noise *dp.DiscreteGaussian, rng *rand.Rand) (l2Bound float64, err error) {
	if noise == nil {
		return 0, errors.New("fl: DDGEncode needs the client's discrete Gaussian sampler")
	}
	if p.Sigma2 != nil && noise.Sigma2().Cmp(p.Sigma2) != 0 {
		return 0, fmt.Errorf("fl: DDGEncode: the sampler's σ² = %s is not the parameters' %s", noise.Sigma2().RatString(), p.Sigma2.RatString())
	}
	return ddgEncode(dst, delta, p, rot, noise, rng)
}

// ddgEncode is DDGEncode with noise == nil allowed (no noise share), for
// tests of the rounding and the round trip only.
func ddgEncode(dst []uint32, delta []float32, p DDGParams, rot *simd.HadamardRotation, noise *dp.DiscreteGaussian, rng *rand.Rand) (float64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if err := ddgCheckRot(p, rot); err != nil {
		return 0, err
	}
	if len(dst) != p.PaddedDim || len(delta) != p.Dim {
		return 0, fmt.Errorf("fl: DDGEncode: want %d update values and %d outputs, got %d and %d", p.Dim, p.PaddedDim, len(delta), len(dst))
	}
	if rng == nil {
		return 0, errors.New("fl: DDGEncode needs a random generator")
	}
	if !simd.AllFinite(delta) {
		return 0, dp.ErrNonFinite
	}
	pd := p.PaddedDim
	buf := make([]float32, pd)
	copy(buf, delta)
	simd.ClipToNorm(buf[:p.Dim], p.Clip)
	rot.Rotate(buf, buf[:p.Dim])

	x := make([]float64, pd)
	inv := 1 / p.Gamma
	var ss float64
	for j, v := range buf {
		x[j] = float64(v) * inv
		ss += x[j] * x[j]
	}
	if c, nrm := p.Clip/p.Gamma, math.Sqrt(ss); nrm > c {
		f := c / nrm
		for j := range x {
			x[j] *= f
		}
	}
	xt := make([]int64, pd)
	hi, lo := ddgNormBound2(p)
	if err := ddgRound(xt, x, hi, lo, rng); err != nil {
		return 0, err
	}
	for j, v := range xt {
		dst[j] = uint32(v) // two's complement: v mod 2³²
	}
	if noise != nil {
		noise.AddNoiseRing(dst, rng)
	}
	if p.Bits < 32 {
		mask := uint32(1)<<p.Bits - 1
		for j := range dst {
			dst[j] &= mask
		}
	}
	return DDGSensitivity(p), nil
}

// ddgRound writes into dst the conditional randomized rounding of x
// (KLS21 Algorithm 1): unbiased randomized rounding of every coordinate,
// redrawn until Σ dst_j² ≤ (hi, lo) (a 128-bit integer), at most
// DDGMaxRoundingTries times (then ErrDDGRounding). Each |x_j| must be
// < 2⁶² and Σ(|x_j| + 1)² < 2¹²⁸ (Validate's bound on C/γ + √p ensures it
// for ‖x‖ ≤ C/γ), so the sum of squares is exact.
func ddgRound(dst []int64, x []float64, hi, lo uint64, rng *rand.Rand) error {
	fl := make([]int64, len(x))
	fr := make([]float64, len(x))
	for j, v := range x {
		f := math.Floor(v)
		fl[j], fr[j] = int64(f), v-f
	}
	for try := 0; try < DDGMaxRoundingTries; try++ {
		var sh, sl uint64
		for j, f := range fl {
			if rng.Float64() < fr[j] {
				f++
			}
			dst[j] = f
			a := uint64(f)
			if f < 0 {
				a = uint64(-f)
			}
			h, l := bits.Mul64(a, a)
			var c uint64
			sl, c = bits.Add64(sl, l, 0)
			sh += h + c
		}
		if sh < hi || sh == hi && sl <= lo {
			return nil
		}
	}
	return fmt.Errorf("%w after %d tries", ErrDDGRounding, DDGMaxRoundingTries)
}

// ddgCheckRot checks that rot has p's dimensions.
func ddgCheckRot(p DDGParams, rot *simd.HadamardRotation) error {
	if rot == nil || rot.Dim() != p.Dim || rot.PaddedDim() != p.PaddedDim {
		return fmt.Errorf("fl: DDG rotation must have dimension %d padded to %d", p.Dim, p.PaddedDim)
	}
	return nil
}

// DDGDecode is the server's side of the distributed discrete Gaussian
// (KLS21 Algorithm 1, the server's step): from the ring sum of the
// clients' DDGEncode outputs that secure aggregation reveals (sum, len
// p.PaddedDim, Σ_i y_i mod 2³²; not modified) it writes into dst (len
// p.Dim)
//
//	dst = (γ·Rᵀ·centre(sum mod 2^b))[:d],
//
// centre mapping [0, 2^b) to [−2^(b−1), 2^(b−1)), R = rot (the round's
// seed, the clients' rotation). dst estimates Σ_i clip_C(Δ_i) plus the
// clients' noise: unbiased (with β = 0; conditional rounding adds a small
// bias toward shorter vectors), with per-coordinate noise variance
// ≈ n·σ²·γ² plus the rounding's ≤ n·γ²/4, as long as no coordinate
// wrapped (DDGWrapProbability). The server adds no noise.
//
// Round-trip bound: without noise shares and without wrap, for n clients,
//
//	‖dst − Σ_i clip_C(Δ_i)‖₂ ≤ n·γ·√p + (5u + 3·γ_L)·n·(C + γ√p)·1.01,
//
// u = 2⁻²⁴, γ_L = L·u/(1 − L·u), L = log₂p + 2: the rounding moves each
// coordinate by < 1 (deterministically; √n·γ·√p/2 in root mean square),
// and the rest is the float32 clip, rotation, conversion and unrotation
// (simd.WHTOrtho's bound), the scaling and sums being exact or float64.
//
// Errors: p invalid, rot's dimensions or the lengths not matching p.
func DDGDecode(dst []float32, sum []uint32, p DDGParams, rot *simd.HadamardRotation) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := ddgCheckRot(p, rot); err != nil {
		return err
	}
	if len(sum) != p.PaddedDim || len(dst) != p.Dim {
		return fmt.Errorf("fl: DDGDecode: want a sum of %d values and %d outputs, got %d and %d", p.PaddedDim, p.Dim, len(sum), len(dst))
	}
	m := uint64(1) << p.Bits
	y := make([]float32, p.PaddedDim)
	for j, s := range sum {
		u := uint64(s) & (m - 1)
		c := int64(u)
		if u >= m/2 {
			c -= int64(m)
		}
		y[j] = float32(float64(c) * p.Gamma)
	}
	rot.Unrotate(y)
	copy(dst, y[:p.Dim])
	return nil
}

// ddgRoundTripBound is DDGDecode's round-trip bound for n clients.
func ddgRoundTripBound(p DDGParams, n int) float64 {
	const u = 0x1p-24
	l := float64(bits.Len(uint(p.PaddedDim))-1) + 2
	gl := l * u / (1 - l*u)
	fn, sp := float64(n), math.Sqrt(float64(p.PaddedDim))
	return fn*p.Gamma*sp + (5*u+3*gl)*fn*(p.Clip+p.Gamma*sp)*1.01
}
