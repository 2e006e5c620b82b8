package fl

import (
	"fmt"

	"github.com/dpfl/dpfl/simd"
)

// ServerOptimizer applies the round's pseudo-gradient to the global model:
// x_{t+1} = ServerOpt(x_t, g_t, η_s, t) with g_t = −Δ_t (Reddi et al. 2021,
// Algorithm 1; Wang et al. 2021, Algorithm 1). Implementations keep their
// own state (momentum, second moments) and must serialise it so a job can
// resume from a checkpoint exactly.
type ServerOptimizer interface {
	// Name is the optimizer's identifier in job configurations ("sgd").
	Name() string
	// Step updates params in place given the pseudo-gradient g (same length).
	Step(params, g []float32)
	// SetLR sets the server learning rate η_s of the next steps (a
	// schedule's value for the round).
	SetLR(lr float32)
	// MarshalState returns the optimizer state (nil when stateless).
	MarshalState() ([]byte, error)
	// UnmarshalState restores a state returned by MarshalState.
	UnmarshalState([]byte) error
}

// SGD is server gradient descent x ← x − η_s·g. With η_s = 1 this is the
// plain FedAvg server update x ← x + Δ̄ (McMahan et al. 2017).
type SGD struct {
	// LR is the server learning rate η_s (> 0).
	LR float32
}

// Name returns "sgd".
func (s *SGD) Name() string { return "sgd" }

// Step sets params ← params − LR·g.
func (s *SGD) Step(params, g []float32) { simd.Axpy(params, -s.LR, g) }

// SetLR sets η_s.
func (s *SGD) SetLR(lr float32) { s.LR = lr }

// MarshalState returns nil: SGD is stateless.
func (s *SGD) MarshalState() ([]byte, error) { return nil, nil }

// UnmarshalState accepts only an empty state.
func (s *SGD) UnmarshalState(b []byte) error {
	if len(b) != 0 {
		return fmt.Errorf("fl: sgd server optimizer has no state, got %d bytes", len(b))
	}
	return nil
}
