package fl

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// Scaffold is the state of SCAFFOLD (Karimireddy et al. 2020, "SCAFFOLD:
// Stochastic Controlled Averaging for Federated Learning", Algorithm 1,
// option II): the server control variate c and every client's c_i,
// persisted across rounds (stateful clients: a cross-silo algorithm).
// Each local step uses the corrected gradient g_i(y) − c_i + c; after K
// local steps at rate η_l a client sets c_i⁺ = c_i − c + (x − y_i)/(K·η_l)
// = c_i − c − Δ_i/(K·η_l), and the server adds (1/N)·Σ_{i∈S}(c_i⁺ − c_i)
// to c. Clients not yet seen have c_i = 0, so the first round is FedAvg.
//
// It is not combined with DP: c_i depends on client i's data in every
// round it took part in, and the server's c aggregates them unclipped and
// without noise, outside what DP-FedAvg's analysis covers.
//
// A *Scaffold is a ClientVariant (FedAvg.Variant, or FedAvg.Scaffold).
type Scaffold struct {
	// N is the population size, the 1/N of the server's c update.
	N int

	mu   sync.Mutex // guards ci: workers read it while another client's c_i is written
	c    []float32
	ci   map[int][]float32
	sum  []float32   // Σ (c_i⁺ − c_i) of the round so far
	corr [][]float32 // each worker's c − c_i
}

func (s *Scaffold) setup(d, workers int, _ ClientConfig) {
	s.init(d)
	s.corr = make([][]float32, workers)
	for w := range s.corr {
		s.corr[w] = make([]float32, d)
	}
}

func (s *Scaffold) init(d int) {
	if len(s.c) != d {
		s.c, s.sum = make([]float32, d), make([]float32, d)
	}
	if s.ci == nil {
		s.ci = map[int][]float32{}
	}
}

// beforeTraining returns c − c_i in worker w's buffer: the correction of
// every local gradient of client id.
func (s *Scaffold) beforeTraining(w, id int) []float32 {
	dst := s.corr[w]
	s.mu.Lock()
	ci := s.ci[id]
	s.mu.Unlock()
	copy(dst, s.c)
	if ci != nil {
		for j, v := range ci {
			dst[j] -= v
		}
	}
	return dst
}

// afterTraining applies option II's c_i update for client id after k ≥ 1
// local steps at rate lr with update delta, and adds c_i⁺ − c_i to the
// round's sum (in cohort order, so the sum does not depend on the
// workers).
func (s *Scaffold) afterTraining(id int, delta []float32, k int, lr float32) float64 {
	inv := 1 / (float32(k) * lr)
	s.mu.Lock()
	defer s.mu.Unlock()
	ci := s.ci[id]
	if ci == nil {
		ci = make([]float32, len(delta))
		s.ci[id] = ci
	}
	for j, dv := range delta {
		diff := -s.c[j] - dv*inv // c_i⁺ − c_i
		ci[j] += diff
		s.sum[j] += diff
	}
	return 0
}

func (s *Scaffold) beforeServerStep([]float32, float64) {}

// afterRound adds (1/N)·Σ(c_i⁺ − c_i) to c and clears the sum.
func (s *Scaffold) afterRound() {
	f := 1 / float32(s.N)
	for j, v := range s.sum {
		s.c[j] += f * v
	}
	clear(s.sum)
}

// MarshalState returns c and every c_i (ids ascending is not required).
func (s *Scaffold) MarshalState() []byte {
	b := appendFloats(nil, s.c)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s.ci)))
	for id, ci := range s.ci {
		b = binary.LittleEndian.AppendUint64(b, uint64(id))
		b = appendFloats(b, ci)
	}
	return b
}

// UnmarshalState restores what MarshalState returned.
func (s *Scaffold) UnmarshalState(b []byte) error {
	c, rest, err := readFloats(b)
	if err != nil || len(rest) < 8 {
		return fmt.Errorf("fl: scaffold state: malformed")
	}
	n := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if n > uint64(len(rest)) {
		return fmt.Errorf("fl: scaffold state: %d clients in %d bytes", n, len(rest))
	}
	ci := make(map[int][]float32, n)
	for range n {
		if len(rest) < 8 {
			return fmt.Errorf("fl: scaffold state: truncated")
		}
		id := binary.LittleEndian.Uint64(rest)
		var v []float32
		if v, rest, err = readFloats(rest[8:]); err != nil || len(v) != len(c) || id > math.MaxInt32 {
			return fmt.Errorf("fl: scaffold state: client entry malformed")
		}
		ci[int(id)] = v
	}
	if len(rest) != 0 {
		return fmt.Errorf("fl: scaffold state: %d trailing bytes", len(rest))
	}
	s.c, s.ci, s.sum = c, ci, make([]float32, len(c))
	return nil
}
