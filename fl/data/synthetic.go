package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Shape of the FedProx synthetic task (Li et al. 2020, §5.1 and
// Appendix C.1): 60 features, 10 classes.
const (
	SyntheticDim     = 60
	SyntheticClasses = 10
)

// maxSyntheticExamples bounds the examples Synthetic may draw (2^24, about
// 4 GiB of float32 features), so that a heavy size tail or a mistyped
// device count fails fast instead of exhausting memory.
const maxSyntheticExamples = 1 << 24

// SyntheticConfig configures Synthetic, the Synthetic(α, β) data of Li,
// Sahu, Zaheer, Sanjabi, Talwalkar, Smith, "Federated Optimization in
// Heterogeneous Networks" (MLSys 2020, FedProx), §5.1 and Appendix C.1.
// FedProxSynthetic returns the paper's settings.
type SyntheticConfig struct {
	// Alpha (α ≥ 0, finite) controls how much the devices' models differ:
	// u_k ~ N(0, α). Beta (β ≥ 0, finite) controls how much their feature
	// distributions differ: B_k ~ N(0, β). As in the paper's notation,
	// the second argument of N is the VARIANCE (unless StdDevParams).
	// The paper uses (α, β) ∈ {(0, 0), (0.5, 0.5), (1, 1)}. Both are
	// ignored when IID is set.
	Alpha, Beta float64
	// StdDevParams reads Alpha and Beta as standard deviations instead, as
	// the authors' public generator does (generate_synthetic.py passes α
	// and β as numpy.random.normal's scale): u_k ~ N(0, α²), B_k ~ N(0, β²).
	// The two readings agree at α, β ∈ {0, 1} and differ at 0.5.
	StdDevParams bool
	// IID selects the paper's Synthetic-IID: one W, b with entries
	// ~ N(0, 1) shared by all devices and v_k = 0, so every device draws
	// from the same distribution.
	IID bool
	// Devices is the number of devices K, in [1, MaxClients] (30 in the
	// paper).
	Devices int
	// Device k has n_k = ⌊exp(SizeMu + SizeSigma·z_k)⌋ + MinSize examples,
	// z_k ~ N(0, 1): a lognormal ("power law" in the paper) plus a floor.
	// The paper's text only says the sizes follow a power law; its public
	// generator draws numpy.random.lognormal(4, 2).astype(int) + 50, so
	// FedProxSynthetic sets SizeMu = 4, SizeSigma = 2, MinSize = 50
	// (median ≈ 104, mean ≈ 453 examples per device). SizeSigma ≥ 0 and
	// SizeMu must be finite, MinSize ≥ 1.
	SizeMu, SizeSigma float64
	MinSize           int
	// TrainFraction f in (0, 1) splits each device's n_k examples into
	// ⌊f·n_k⌋ training and n_k − ⌊f·n_k⌋ test examples. The paper's
	// Appendix C.1 says 80% / 20% (FedProxSynthetic's 0.8); the public
	// generator uses 0.9.
	TrainFraction float64
	// HeldOutFraction is passed to NewFederatedFromClients for the
	// training population: of a device's training examples, a further
	// ⌊HeldOutFraction·m⌋ are held out for per-client evaluation. 0 (the
	// paper) holds none out.
	HeldOutFraction float64
	// Seed makes the data reproducible: the same config gives the same
	// examples, labels and split.
	Seed uint64
}

// FedProxSynthetic returns the configuration of the paper's
// Synthetic(alpha, beta) (30 devices, lognormal(4, 2) + 50 sizes, 80/20
// split, α and β as variances), with IID false and seed 0.
func FedProxSynthetic(alpha, beta float64) SyntheticConfig {
	return SyntheticConfig{
		Alpha: alpha, Beta: beta, Devices: 30,
		SizeMu: 4, SizeSigma: 2, MinSize: 50, TrainFraction: 0.8,
	}
}

// Synthetic draws FedProx's Synthetic(α, β) data (Li et al. 2020, §5.1,
// Appendix C.1): per device k = 0, …, K−1,
//
//	u_k ~ N(0, α),  W_k ∈ R^{10×60}, b_k ∈ R^10 with entries ~ N(u_k, 1),
//	B_k ~ N(0, β),  v_k ∈ R^60 with entries ~ N(B_k, 1),
//	x ~ N(v_k, Σ),  Σ = diag(j^−1.2), j = 1, …, 60,
//	y = argmax softmax(W_k x + b_k) = argmax (W_k x + b_k),
//
// all independent, with n_k examples per device (see SizeMu). With IID,
// W_k = W and b_k = b for all k with entries ~ N(0, 1), and v_k = 0. The
// feature vectors are stored as float32 and the labels are computed from
// the stored (rounded) features, so the Dataset's labels are exactly the
// argmax of each device's own model on its stored rows.
//
// Device k is client k of both returned populations: train holds its
// ⌊TrainFraction·n_k⌋ training examples (a Federated built by
// NewFederatedFromClients, with cfg.HeldOutFraction), test its other
// examples (as the clients' Train lists, none held out); train.Base() and
// test.Base() are the pooled Datasets (Dim 60, Classes 10), with each
// device's rows contiguous. The paper reports accuracy on the pooled test
// set.
//
// Randomness is a math/rand/v2 PCG seeded from cfg.Seed, drawn in a fixed
// order (sizes; u, B; v; then per device W_k, b_k and x), so data for
// the same config is reproducible; it will not match the authors'
// numpy-generated files.
//
// Errors name the field: Alpha or Beta negative or not finite, Devices
// outside [1, MaxClients], SizeMu not finite, SizeSigma negative or not
// finite, MinSize < 1, TrainFraction outside (0, 1), HeldOutFraction
// outside [0, 1), and sizes that total more than 2^24 examples. A device
// with ⌊f·n_k⌋ = 0 or n_k − ⌊f·n_k⌋ = 0 is allowed (its list is empty).
func Synthetic(cfg SyntheticConfig) (train, test *Federated, err error) {
	s, err := synthesize(cfg)
	if err != nil {
		return nil, nil, err
	}
	if train, err = NewFederatedFromClients(s.train, s.trainIdx, cfg.HeldOutFraction, cfg.Seed); err != nil {
		return nil, nil, err
	}
	if test, err = NewFederatedFromClients(s.test, s.testIdx, 0, cfg.Seed); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// synthData is everything synthesize draws; tests read the device models.
type synthData struct {
	train, test       *Dataset
	trainIdx, testIdx [][]int32
	sizes             []int
	u, bk             []float64   // u_k and B_k
	w, b, v           [][]float64 // W_k (10×60 row-major), b_k, v_k per device
}

func (cfg SyntheticConfig) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(cfg.Alpha >= 0) || !finite(cfg.Alpha):
		return fmt.Errorf("synthetic: alpha must be a finite number ≥ 0, got %v", cfg.Alpha)
	case !(cfg.Beta >= 0) || !finite(cfg.Beta):
		return fmt.Errorf("synthetic: beta must be a finite number ≥ 0, got %v", cfg.Beta)
	case cfg.Devices < 1 || cfg.Devices > MaxClients:
		return fmt.Errorf("synthetic: devices must be in [1, %d], got %d", MaxClients, cfg.Devices)
	case !finite(cfg.SizeMu):
		return fmt.Errorf("synthetic: size_mu must be finite, got %v", cfg.SizeMu)
	case !(cfg.SizeSigma >= 0) || !finite(cfg.SizeSigma):
		return fmt.Errorf("synthetic: size_sigma must be a finite number ≥ 0, got %v", cfg.SizeSigma)
	case cfg.MinSize < 1:
		return fmt.Errorf("synthetic: min_size must be ≥ 1, got %d", cfg.MinSize)
	case !(cfg.TrainFraction > 0 && cfg.TrainFraction < 1):
		return fmt.Errorf("synthetic: train_fraction must be in (0, 1), got %v", cfg.TrainFraction)
	case !(cfg.HeldOutFraction >= 0 && cfg.HeldOutFraction < 1):
		return fmt.Errorf("synthetic: held_out_fraction must be in [0, 1), got %v", cfg.HeldOutFraction)
	}
	return nil
}

// syntheticSizes draws n_k = ⌊exp(μ + σ z_k)⌋ + MinSize for each device,
// failing once the total exceeds maxSyntheticExamples.
func syntheticSizes(cfg SyntheticConfig, rng *rand.Rand) ([]int, error) {
	sizes := make([]int, cfg.Devices)
	total := 0
	for k := range sizes {
		e := math.Floor(math.Exp(cfg.SizeMu+cfg.SizeSigma*rng.NormFloat64())) + float64(cfg.MinSize)
		if e > float64(maxSyntheticExamples-total) {
			return nil, fmt.Errorf("synthetic: device sizes total more than %d examples (device %d draws %.0f); use fewer devices or a smaller size_mu/size_sigma", maxSyntheticExamples, k, e)
		}
		sizes[k] = int(e)
		total += sizes[k]
	}
	return sizes, nil
}

func synthesize(cfg SyntheticConfig) (*synthData, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, pcgStream))
	sizes, err := syntheticSizes(cfg, rng)
	if err != nil {
		return nil, err
	}
	const d, c = SyntheticDim, SyntheticClasses
	K := cfg.Devices
	s := &synthData{
		sizes: sizes, u: make([]float64, K), bk: make([]float64, K),
		w: make([][]float64, K), b: make([][]float64, K), v: make([][]float64, K),
		trainIdx: make([][]int32, K), testIdx: make([][]int32, K),
	}
	sdA, sdB := math.Sqrt(cfg.Alpha), math.Sqrt(cfg.Beta)
	if cfg.StdDevParams {
		sdA, sdB = cfg.Alpha, cfg.Beta
	}
	if !cfg.IID {
		for k := range K {
			s.u[k] = sdA * rng.NormFloat64()
		}
		for k := range K {
			s.bk[k] = sdB * rng.NormFloat64()
		}
	}
	for k := range K {
		s.v[k] = make([]float64, d)
		if !cfg.IID {
			for j := range s.v[k] {
				s.v[k][j] = s.bk[k] + rng.NormFloat64()
			}
		}
	}
	var sharedW, sharedB []float64
	if cfg.IID {
		sharedW, sharedB = gaussians(c*d, 0, rng), gaussians(c, 0, rng)
	}
	sd := make([]float64, d) // √Σ_jj
	for j := range sd {
		sd[j] = math.Sqrt(math.Pow(float64(j+1), -1.2))
	}
	nTrain, nTest := 0, 0
	for _, n := range sizes {
		m := int(math.Floor(cfg.TrainFraction*float64(n) + 1e-9))
		nTrain += m
		nTest += n - m
	}
	s.train = &Dataset{X: make([]float32, 0, nTrain*d), Y: make([]uint8, 0, nTrain), Dim: d, Classes: c}
	s.test = &Dataset{X: make([]float32, 0, nTest*d), Y: make([]uint8, 0, nTest), Dim: d, Classes: c}
	row := make([]float32, d)
	for k, n := range sizes {
		if cfg.IID {
			s.w[k], s.b[k] = sharedW, sharedB
		} else {
			s.w[k], s.b[k] = gaussians(c*d, s.u[k], rng), gaussians(c, s.u[k], rng)
		}
		m := int(math.Floor(cfg.TrainFraction*float64(n) + 1e-9))
		for i := range n {
			for j := range row {
				row[j] = float32(s.v[k][j] + sd[j]*rng.NormFloat64())
			}
			y := argmaxLogits(s.w[k], s.b[k], row)
			ds, idx := s.train, &s.trainIdx[k]
			if i >= m {
				ds, idx = s.test, &s.testIdx[k]
			}
			*idx = append(*idx, int32(ds.Len()))
			ds.X = append(ds.X, row...)
			ds.Y = append(ds.Y, y)
		}
	}
	return s, nil
}

// gaussians returns n independent N(mean, 1) draws.
func gaussians(n int, mean float64, rng *rand.Rand) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = mean + rng.NormFloat64()
	}
	return g
}

// argmaxLogits is argmax_c (W x + b)_c for W of len(b) rows of len(x),
// row-major (ties: the lowest class, as numpy.argmax).
func argmaxLogits(w, b []float64, x []float32) uint8 {
	best, arg := math.Inf(-1), 0
	d := len(x)
	for c := range b {
		z := b[c]
		for j, xj := range x {
			z += w[c*d+j] * float64(xj)
		}
		if z > best {
			best, arg = z, c
		}
	}
	return uint8(arg)
}
