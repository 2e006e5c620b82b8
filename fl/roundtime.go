package fl

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// RoundTimeModel estimates how long a simulated round would take on real
// devices: the model of Wang et al. 2021 ("A Field Guide to Federated
// Optimization"), §5.4, eqs. 9–10,
//
//	T_round = max_{i reporting} ( S_down/B_down,i + S_up/B_up,i + R_comp,i·T_sim,i + C_comp ) + T_server,
//
// where S_down and S_up are the bytes a client downloads and uploads,
// T_sim,i is client i's local training time in the simulation, modelled
// from its own work (SimulatedSeconds) rather than measured, so that no
// client's time depends on another's data through CPU contention,
// R_comp the ratio of device to simulation compute time, C_comp a fixed
// per-round device overhead and T_server the server's aggregation time.
// With identical devices (both sigmas 0) this is the Field Guide's
// S_down/B_down + S_up/B_up + max_i(R_comp·T_sim,i + C_comp) + T_server.
// Heterogeneous devices divide their bandwidths and multiply their R_comp
// by log-normal factors exp(σ·z), z ~ N(0, 1), drawn per client and round.
type RoundTimeModel struct {
	// DownBandwidth and UpBandwidth are B_down and B_up in bytes/s (the
	// Field Guide's 0.75 MB/s and 0.25 MB/s).
	DownBandwidth float64 `json:"down_bandwidth"`
	UpBandwidth   float64 `json:"up_bandwidth"`
	// ComputeRatio is R_comp (7) and ComputeOverhead C_comp in seconds (10).
	ComputeRatio    float64 `json:"compute_ratio"`
	ComputeOverhead float64 `json:"compute_overhead"`
	// BandwidthSigma and ComputeSigma are the log-normal spreads σ of the
	// devices' bandwidth and compute factors (0: identical devices).
	BandwidthSigma float64 `json:"bandwidth_sigma"`
	ComputeSigma   float64 `json:"compute_sigma"`
}

// DefaultRoundTimeModel has the Field Guide's parameters and identical
// devices.
func DefaultRoundTimeModel() RoundTimeModel {
	return RoundTimeModel{DownBandwidth: 0.75e6, UpBandwidth: 0.25e6, ComputeRatio: 7, ComputeOverhead: 10}
}

// Validate reports the first parameter out of range; the error starts with
// the field's name.
func (m RoundTimeModel) Validate() error {
	pos := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
	nonneg := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	switch {
	case !pos(m.DownBandwidth):
		return fmt.Errorf("down_bandwidth: must be a finite number of bytes/s > 0, got %v", m.DownBandwidth)
	case !pos(m.UpBandwidth):
		return fmt.Errorf("up_bandwidth: must be a finite number of bytes/s > 0, got %v", m.UpBandwidth)
	case !nonneg(m.ComputeRatio):
		return fmt.Errorf("compute_ratio: must be a finite number ≥ 0, got %v", m.ComputeRatio)
	case !nonneg(m.ComputeOverhead):
		return fmt.Errorf("compute_overhead: must be a finite number of seconds ≥ 0, got %v", m.ComputeOverhead)
	case !(m.BandwidthSigma >= 0 && m.BandwidthSigma <= 5):
		return fmt.Errorf("bandwidth_sigma: must be in [0, 5], got %v", m.BandwidthSigma)
	case !(m.ComputeSigma >= 0 && m.ComputeSigma <= 5):
		return fmt.Errorf("compute_sigma: must be in [0, 5], got %v", m.ComputeSigma)
	}
	return nil
}

// ReferenceFLOPS is the simulation compute rate, in floating-point
// operations per second, that SimulatedSeconds assumes: about one core of
// the simulation server on the MLP (12.5k examples/s × 1.2 MFLOP).
const ReferenceFLOPS = 15e9

// SimulatedSeconds models T_sim,i for a client that trains a model of d
// parameters for epochs passes over its examples: 6·d floating-point
// operations per example and pass (forward and backward, 2 + 4 per
// parameter) at ReferenceFLOPS. It depends only on the client's own
// example count and its (seeded) epochs, never on a clock. For the CNN,
// whose convolutions reuse their weights, it underestimates the work.
func SimulatedSeconds(d, examples, epochs int) float64 {
	return 6 * float64(d) * float64(examples) * float64(epochs) / ReferenceFLOPS
}

// DeviceTime is one reporting client's part of a round: its modelled
// simulation time and its device factors.
type DeviceTime struct {
	// SimSeconds is T_sim,i.
	SimSeconds float64
	// Bandwidth divides B_down and B_up; Compute multiplies R_comp.
	Bandwidth, Compute float64
}

// Device draws a client's factors (simulation randomness) for a client
// whose local training is modelled to take simSeconds (SimulatedSeconds).
func (m RoundTimeModel) Device(simSeconds float64, rng *rand.Rand) DeviceTime {
	d := DeviceTime{SimSeconds: simSeconds, Bandwidth: 1, Compute: 1}
	if m.BandwidthSigma > 0 {
		d.Bandwidth = math.Exp(m.BandwidthSigma * rng.NormFloat64())
	}
	if m.ComputeSigma > 0 {
		d.Compute = math.Exp(m.ComputeSigma * rng.NormFloat64())
	}
	return d
}

// ClientSeconds is eq. 10 for one device: S_down/B_down + S_up/B_up +
// R_comp·T_sim + C_comp, with the device's factors.
func (m RoundTimeModel) ClientSeconds(downBytes, upBytes float64, d DeviceTime) float64 {
	return downBytes/(m.DownBandwidth*d.Bandwidth) + upBytes/(m.UpBandwidth*d.Bandwidth) +
		m.ComputeRatio*d.Compute*d.SimSeconds + m.ComputeOverhead
}

// RoundSeconds is eq. 9: the slowest reporting device plus T_server. With
// no reporting device it is T_server.
func (m RoundTimeModel) RoundSeconds(downBytes, upBytes float64, devices []DeviceTime, serverSeconds float64) float64 {
	var slowest float64
	for _, d := range devices {
		slowest = max(slowest, m.ClientSeconds(downBytes, upBytes, d))
	}
	return slowest + serverSeconds
}
