// Package dp implements the user-level differential privacy of DP-FedAvg
// (McMahan, Ramage, Talwar, Zhang 2018, "Learning Differentially Private
// Recurrent Language Models", ICLR; Algorithm 1): each client's model delta
// Δ_i is clipped to L2 norm at most C (the function π(Δ, S) of the paper),
// the clipped deltas are summed, Gaussian noise N(0, (z·C)²) is added to
// every coordinate of the sum, and the result is divided by a fixed
// denominator (the expected cohort size q·N under Poisson sampling, the
// estimator f̃_f of §2 with uniform weights), so that one user's
// contribution moves the released average by at most C/(q·N).
//
// # Randomness
//
// All randomness in this package is privacy-critical. It comes from
// math/rand/v2's ChaCha8 generator keyed with 32 bytes from crypto/rand
// (see NewSecureRand): a cryptographically secure stream cipher, so noise
// cannot be predicted or replayed from earlier outputs, and fast enough
// (hundreds of MB/s) to draw one Gaussian per model coordinate. Google's
// differential-privacy library (github.com/google/differential-privacy/go)
// is the right tool for calibrated scalar releases, but its
// noise.Gaussian().AddNoiseFloat64 recomputes σ on every call and costs
// ~10 µs per value, about one second per 100k-parameter update, so it is
// not used for vector noise here.
//
// # Floating-point caveat
//
// Gaussian samples are produced in float64 by the ziggurat method
// (rand.NormFloat64) and added in float32. Like every textbook
// floating-point implementation, this is not exactly the continuous
// Gaussian mechanism the accountant assumes: Mironov 2012 ("On
// Significance of the Least Significant Bits for Differential Privacy",
// CCS) showed that the pattern of representable outputs can leak the
// un-noised value. The deviation is far below the model's float32
// resolution but it is not covered by the (ε, δ) proof. Under secure
// aggregation the noise is added in the integer ring (fl.ReleaseSecureSum)
// as a rounded Gaussian, which makes wrap-around post-processing but does
// not close this gap; the exact discrete Gaussian sampler of Canonne,
// Kamath, Steinke 2020, which would, is not implemented yet.
package dp
