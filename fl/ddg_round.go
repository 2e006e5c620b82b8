package fl

import (
	crand "crypto/rand"
	"fmt"
	"math/big"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/simd"
)

// DDGRound is one round of the distributed discrete Gaussian (KLS21
// Algorithm 1) as the server publishes it to the round's clients: the
// job's parameters and the round's rotation seed. Both are public; the
// seed is drawn fresh from crypto/rand for every protocol instance, after
// the clients' updates are fixed only in the sense that a client learns
// it when it joins (see DDGWrapProbability: a client that knew it earlier
// could force a wrap, which costs accuracy, never privacy).
type DDGRound struct {
	Params DDGParams
	Seed   [32]byte
}

// NewDDGRound draws a fresh rotation seed for p from crypto/rand.
// Errors: p invalid, or the entropy source failing.
func NewDDGRound(p DDGParams) (DDGRound, error) {
	if err := p.Validate(); err != nil {
		return DDGRound{}, err
	}
	r := DDGRound{Params: p}
	if _, err := crand.Read(r.Seed[:]); err != nil {
		return DDGRound{}, fmt.Errorf("fl: drawing the rotation seed: %w", err)
	}
	return r, nil
}

// Rotation is the round's randomized Hadamard rotation R = H·D/√p of
// dimension Params.Dim (simd.NewHadamardRotation with Seed).
func (r DDGRound) Rotation() *simd.HadamardRotation {
	return simd.NewHadamardRotation(r.Params.Dim, r.Seed)
}

// NewDDGParams rebuilds the transform parameters of DDGParams from their
// wire form (σ² as the exact rational "num/den" of big.Rat's text form),
// as a device receives them, and validates them (DDGParams.Validate).
// The report fields stay zero.
func NewDDGParams(clip float64, dim, paddedDim, bits int, gamma, beta float64, sigma2 string, clients int) (DDGParams, error) {
	s2, ok := new(big.Rat).SetString(sigma2)
	if !ok {
		return DDGParams{}, fmt.Errorf("fl: DDG σ² %q is not a rational number", sigma2)
	}
	p := DDGParams{Clip: clip, Dim: dim, PaddedDim: paddedDim, Bits: bits, Gamma: gamma, Beta: beta, Sigma2: s2, Clients: clients}
	return p, p.Validate()
}

// EncodeDDGInput is a client's whole step of the round: DDGEncode of
// delta (len Params.Dim) into dst (len Params.PaddedDim) with rot =
// r.Rotation() and its own discrete Gaussian share, all randomness from
// a fresh dp.NewSecureRand (ChaCha8 keyed from crypto/rand). Errors are
// DDGEncode's.
func EncodeDDGInput(dst []uint32, delta []float32, r DDGRound, rot *simd.HadamardRotation) error {
	noise, err := dp.NewDiscreteGaussian(r.Params.Sigma2)
	if err != nil {
		return err
	}
	rng, err := dp.NewSecureRand()
	if err != nil {
		return err
	}
	_, err = DDGEncode(dst, delta, r.Params, rot, noise, rng)
	return err
}

// ReleaseDDGSum is the server's step: it decodes the unmasked ring sum
// of the survivors' EncodeDDGInput outputs (DDGDecode; the server adds
// no noise: the n shares in the sum are the noise) and divides by
// denominator (> 0; the expected cohort under DP). dst has
// Params.Dim values, sum Params.PaddedDim.
func ReleaseDDGSum(dst []float32, sum []uint32, r DDGRound, rot *simd.HadamardRotation, denominator float64) error {
	if !(denominator > 0) {
		return fmt.Errorf("fl: denominator must be > 0, got %v", denominator)
	}
	if err := DDGDecode(dst, sum, r.Params, rot); err != nil {
		return err
	}
	inv := float32(1 / denominator)
	for i := range dst {
		dst[i] *= inv
	}
	return nil
}
