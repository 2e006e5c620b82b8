// Package pld is a privacy-loss-distribution (PLD) accountant for the
// Poisson-subsampled Gaussian mechanism under add/remove adjacency, in the
// manner of Google's dp_accounting pld module.
//
// # Privacy loss distributions
//
// For a pair of output distributions (P, Q) the privacy loss is
// L(x) = log(P(x)/Q(x)) and its distribution under x ~ P is the PLD
// (Sommer, Meiser, Mohammadi 2019; Koskela, Jälkö, Honkela 2020,
// "Computing tight differential privacy guarantees using FFT", AISTATS).
// The hockey-stick divergence, i.e. the tight δ for a given ε, is
//
//	δ(ε) = E_P[(1 − e^{ε−L})_+]   (an atom at L = +∞ contributes its mass),
//
// and composition of mechanisms is convolution of PLDs, computed here with
// the FFT (gonum.org/v1/gonum/dsp/fourier).
//
// For one step of the Gaussian mechanism with sensitivity 1 and noise
// standard deviation σ (the noise multiplier z), Poisson sampled with rate q,
// the two adjacency directions give two different pairs:
//
//	remove: P = (1−q)·N(0,σ²) + q·N(1,σ²),  Q = N(0,σ²)
//	add:    P = N(0,σ²),  Q = (1−q)·N(0,σ²) + q·N(1,σ²)
//
// A neighbouring pair of datasets is fixed across all steps of training, so
// a composition is the n-fold product of one of these pairs, never a mix.
// Like dp_accounting, a PLD here keeps one distribution per direction,
// composes each separately and reports the larger δ (equivalently, the
// larger ε). For q = 1 the two directions coincide and only one is stored.
//
// # Pessimistic discretization ("connect the dots")
//
// Losses are represented on the grid {k·h : k ∈ Z} plus an atom at +∞. One
// step is discretized with the connect-the-dots construction of Doroshenko,
// Ghazi, Kamath, Kumar, Manurangsi 2022 ("Connect the Dots: Tighter Discrete
// Approximations of Privacy Loss Distributions", PETS, §4): the privacy
// curve t ↦ δ(log t) is convex in t = e^ε, and the discrete PLD is chosen so
// that its curve is the piecewise-linear interpolation of the true curve
// through the grid points. A chord of a convex function lies above it, so
// the discrete δ(ε) is ≥ the true δ(ε) for every ε, not only on the grid;
// by Zhu, Dong, Wang 2022 ("Optimal accounting of differential privacy via
// characteristic function", AISTATS, §3) a pair whose curve is pointwise
// larger is a dominating pair, and dominating pairs compose (their product
// dominates the product of the dominated pairs). Concretely, each loss value l between grid points
// ε_i < l ≤ ε_{i+1} is split between the two neighbours with the P-mass and
// the Q-mass preserved; loss mass below the lowest grid point is moved up to
// it, and loss mass above the highest grid point is moved to +∞. Both moves
// only increase the loss, which increases (1 − e^{ε−L})_+ pointwise.
//
// Compared with the plain "round every loss up" bucketing of Meiser and
// Mohammadi 2018 ("Tight on budget?", CCS), which is also pessimistic but
// shifts the composed loss up by up to n·h, connect-the-dots preserves
// E_P[e^{−L}] exactly and only perturbs the mean loss at second order
// (≈ h²/12 per step), so a given accuracy needs a much coarser grid.
//
// # Truncation and the FFT
//
// After a convolution, tail bins whose total mass is below a tolerance
// (1e-16) are removed: the upper tail is added to the +∞ mass and the lower
// tail is moved up to the lowest kept bin, both pessimistic. The n-fold
// self-composition transforms once, raises the spectrum to the n-th power
// and transforms back (as dp_accounting does); its window of loss values is
// sized by Chernoff bounds on the n-fold sum. The Chernoff bound on the mass
// above the window is added to the +∞ mass; mass below the window wraps
// around the circular convolution to larger losses, which again only
// increases δ.
//
// # Many counts of one mechanism
//
// EpsilonPoissonGaussian (method "pld/2") answers ε for n = 1, 2, 3, … at
// a cost per count that does not grow with n's predecessors: one grid per
// doubling of n, the n-fold composition as a product of cached spectral
// powers S^(2^k) on a Chernoff-sized circular window (the same pessimistic
// rules as above), one inverse FFT per count (a radix-4/radix-3 real FFT
// of its own, fft.go), and the maximum with earlier epochs' last counts so
// that ε never decreases in n. EpsilonPoissonGaussianV1 (method "pld/1")
// refines a grid for each n separately, as dpfl did before; it is kept so
// that reports made with it can be recomputed exactly.
//
// # What is and is not rigorous
//
// Every approximation above moves privacy loss upward, so in exact
// arithmetic the reported δ(ε) and ε(δ) are upper bounds on the true values
// of the Poisson-subsampled Gaussian. Floating-point round-off (≈ 1e-16
// relative in the FFT, clamped at zero) is not bounded rigorously, as in
// dp_accounting; it is many orders of magnitude below the δ values of
// interest (≥ 1e-12).
package pld
