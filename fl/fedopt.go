package fl

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ServerOptConfig names a server optimizer and its hyperparameters.
// Fields an optimizer does not use are ignored.
type ServerOptConfig struct {
	// Name is "sgd", "momentum" (FedAvgM), "adagrad", "adam" or "yogi".
	Name string
	// LR is the server learning rate η_s > 0.
	LR float64
	// Momentum is β of "momentum", in [0, 1).
	Momentum float64
	// Beta1 and Beta2 are the first- and second-moment decay rates of the
	// adaptive optimizers, in [0, 1) (Beta2 unused by "adagrad").
	Beta1, Beta2 float64
	// Tau is the adaptivity τ > 0 of the adaptive optimizers.
	Tau float64
}

// DefaultServerOptConfig is FedAvg (server SGD, η_s = 1) with the
// hyperparameter defaults of Reddi et al. 2021 (β1 = 0.9, β2 = 0.99,
// τ = 1e-3) and FedAvgM's β = 0.9 (Hsu et al. 2019).
func DefaultServerOptConfig() ServerOptConfig {
	return ServerOptConfig{Name: "sgd", LR: 1, Momentum: 0.9, Beta1: 0.9, Beta2: 0.99, Tau: 1e-3}
}

// ServerOptimizerNames lists the optimizers NewServerOptimizer knows.
func ServerOptimizerNames() []string { return []string{"sgd", "momentum", "adagrad", "adam", "yogi"} }

// Validate reports the first hyperparameter out of range, naming it as a
// job's server.* field.
func (c ServerOptConfig) Validate() error {
	unit := func(x float64) bool { return x >= 0 && x < 1 }
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("lr: server learning rate must be a finite number > 0, got %v", c.LR)
	case c.Name == "momentum" && !unit(c.Momentum):
		return fmt.Errorf("momentum: must be in [0, 1), got %v", c.Momentum)
	case isAdaptive(c.Name) && !unit(c.Beta1):
		return fmt.Errorf("beta1: must be in [0, 1), got %v", c.Beta1)
	case (c.Name == "adam" || c.Name == "yogi") && !unit(c.Beta2):
		return fmt.Errorf("beta2: must be in [0, 1), got %v", c.Beta2)
	case isAdaptive(c.Name) && !(c.Tau > 0 && c.Tau < 1):
		return fmt.Errorf("tau: must be in (0, 1), got %v", c.Tau)
	}
	return nil
}

func isAdaptive(name string) bool { return name == "adagrad" || name == "adam" || name == "yogi" }

// NewServerOptimizer returns the optimizer c names, after c.Validate.
func NewServerOptimizer(c ServerOptConfig) (ServerOptimizer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Name {
	case "sgd", "":
		return &SGD{LR: float32(c.LR)}, nil
	case "momentum":
		return &Momentum{LR: float32(c.LR), Beta: float32(c.Momentum)}, nil
	case "adagrad", "adam", "yogi":
		return &Adaptive{Kind: c.Name, LR: float32(c.LR), Beta1: float32(c.Beta1), Beta2: float32(c.Beta2), Tau: float32(c.Tau)}, nil
	}
	return nil, fmt.Errorf("unknown server optimizer %q (known: sgd, momentum, adagrad, adam, yogi)", c.Name)
}

// Momentum is server SGD with heavy-ball momentum, FedAvgM (Hsu, Qi,
// Brown 2019, "Measuring the Effects of Non-Identical Data Distribution",
// §3): m ← β·m + g, x ← x − η_s·m, with m₋₁ = 0. β = 0 is SGD.
type Momentum struct {
	LR, Beta float32
	m        []float32
}

// Name returns "momentum".
func (o *Momentum) Name() string { return "momentum" }

// Step applies one FedAvgM update to params with pseudo-gradient g.
func (o *Momentum) Step(params, g []float32) {
	if len(params) != len(g) {
		panic("fl: momentum step length mismatch")
	}
	if len(o.m) != len(g) {
		o.m = make([]float32, len(g))
	}
	m := o.m[:len(g)]
	for i, gi := range g {
		m[i] = o.Beta*m[i] + gi
		params[i] -= o.LR * m[i]
	}
}

// SetLR sets η_s.
func (o *Momentum) SetLR(lr float32) { o.LR = lr }

// MarshalState returns m (little-endian float32s).
func (o *Momentum) MarshalState() ([]byte, error) { return appendFloats(nil, o.m), nil }

// UnmarshalState restores m.
func (o *Momentum) UnmarshalState(b []byte) error {
	m, rest, err := readFloats(b)
	if err != nil || len(rest) != 0 {
		return fmt.Errorf("fl: momentum state: malformed (%d bytes)", len(b))
	}
	o.m = m
	return nil
}

// Adaptive is FedAdagrad, FedAdam or FedYogi of Reddi et al. 2021,
// "Adaptive Federated Optimization", Algorithm 2, on the pseudo-gradient
// g = −Δ_t (so m here is the negated m_t of the paper and the update's
// sign flips with it):
//
//	m_t = β1·m_{t−1} + (1 − β1)·g
//	v_t = v_{t−1} + g²                                  (adagrad)
//	v_t = β2·v_{t−1} + (1 − β2)·g²                      (adam)
//	v_t = v_{t−1} − (1 − β2)·g²·sign(v_{t−1} − g²)      (yogi)
//	x_{t+1} = x_t − η_s·m_t / (√v_t + τ)
//
// with m₋₁ = 0 and v₋₁ = τ², no bias correction, and τ added outside the
// square root as in the paper's analysis.
type Adaptive struct {
	// Kind is "adagrad", "adam" or "yogi".
	Kind                  string
	LR, Beta1, Beta2, Tau float32
	m, v                  []float32
}

// Name returns Kind.
func (o *Adaptive) Name() string { return o.Kind }

// Step applies one update of Algorithm 2 to params with pseudo-gradient g.
func (o *Adaptive) Step(params, g []float32) {
	if len(params) != len(g) {
		panic("fl: adaptive step length mismatch")
	}
	if len(o.m) != len(g) {
		o.m, o.v = make([]float32, len(g)), make([]float32, len(g))
		for i := range o.v {
			o.v[i] = o.Tau * o.Tau
		}
	}
	m, v := o.m[:len(g)], o.v[:len(g)]
	b1, b2 := o.Beta1, o.Beta2
	for i, gi := range g {
		m[i] = b1*m[i] + (1-b1)*gi
		g2 := gi * gi
		switch o.Kind {
		case "adagrad":
			v[i] += g2
		case "adam":
			v[i] = b2*v[i] + (1-b2)*g2
		case "yogi":
			switch {
			case v[i] > g2:
				v[i] -= (1 - b2) * g2
			case v[i] < g2:
				v[i] += (1 - b2) * g2
			}
		}
		params[i] -= o.LR * m[i] / (float32(math.Sqrt(float64(v[i]))) + o.Tau)
	}
}

// SetLR sets η_s.
func (o *Adaptive) SetLR(lr float32) { o.LR = lr }

// MarshalState returns m then v (each a length and little-endian
// float32s).
func (o *Adaptive) MarshalState() ([]byte, error) {
	return appendFloats(appendFloats(nil, o.m), o.v), nil
}

// UnmarshalState restores m and v.
func (o *Adaptive) UnmarshalState(b []byte) error {
	if len(b) == 0 {
		o.m, o.v = nil, nil
		return nil
	}
	m, rest, err := readFloats(b)
	if err == nil {
		var v []float32
		if v, rest, err = readFloats(rest); err == nil && len(rest) == 0 && len(v) == len(m) {
			o.m, o.v = m, v
			return nil
		}
	}
	return fmt.Errorf("fl: %s state: malformed (%d bytes)", o.Kind, len(b))
}

// appendFloats appends len(x) as a uint64 and x as little-endian
// float32s.
func appendFloats(b []byte, x []float32) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(x)))
	for _, f := range x {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// readFloats reads what appendFloats wrote and returns the rest.
func readFloats(b []byte) (x []float32, rest []byte, err error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("short state")
	}
	n := binary.LittleEndian.Uint64(b)
	b = b[8:]
	if n > uint64(len(b)/4) {
		return nil, nil, fmt.Errorf("state claims %d values in %d bytes", n, len(b))
	}
	x = make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x, b[4*n:], nil
}
