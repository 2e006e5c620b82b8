package fl

import "github.com/dpfl/dpfl/fl/model"

// worker is one goroutine's scratch, allocated once: the trainer's
// buffers and the generators of the local shuffles and of the
// simulation's draws, reseeded per client, so that training a client
// allocates nothing.
type worker struct {
	trainer  *clientTrainer
	shuffles simRand // the same stream as rand.New(rand.NewPCG(Seed, round<<32 | id))
	sim      simRand
}

func newWorker(m model.Model, cfg ClientConfig) worker {
	return worker{trainer: newClientTrainer(m, cfg), shuffles: newSimRand(), sim: newSimRand()}
}

// report is one client's trained update on its way into the aggregate.
type report struct {
	id        int
	examples  int // n_i
	steps     int // local steps K_i
	loss      float64
	weight    float64 // the variant's a_i
	straggler bool
	dropped   bool // a straggler that did not report
	dev       DeviceTime
	delta     []float32 // held only while waiting for a Target
}

// tally is a round's running account of the reports, kept in cohort
// order (or, for a Target, in order of device time).
type tally struct {
	lossSum    float64 // Σ n_i·loss_i
	weightSum  float64 // Σ n_i·a_i
	examples   int
	rejected   int
	stragglers int
	late       int
	devices    []DeviceTime // the aggregated reports' devices
	held       []report     // waiting for the Target
	spare      [][]float32  // last round's held deltas, for reuse
}

func (t *tally) reset() {
	for _, r := range t.held {
		t.spare = append(t.spare, r.delta)
	}
	*t = tally{devices: t.devices[:0], held: t.held[:0], spare: t.spare}
}

// add puts report r with update delta into the aggregate.
func (t *tally) add(acc Accumulator, r report, delta []float32) {
	if err := acc.Add(delta, r.examples); err != nil {
		t.rejected++
		return
	}
	t.weightSum += r.weight * float64(r.examples)
	t.devices = append(t.devices, r.dev)
	t.lossSum += r.loss * float64(r.examples)
	t.examples += r.examples
}

// hold keeps report r with a copy of delta until the round closes.
func (t *tally) hold(r report, delta []float32) {
	if n := len(t.spare); n > 0 {
		r.delta, t.spare = t.spare[n-1], t.spare[:n-1]
	} else {
		r.delta = make([]float32, len(delta))
	}
	copy(r.delta, delta)
	t.held = append(t.held, r)
}

// closeAt adds the first keep held reports and counts the rest as late.
func (t *tally) closeAt(keep int, acc Accumulator) {
	for _, r := range t.held[:keep] {
		t.add(acc, r, r.delta)
	}
	t.late += len(t.held) - keep
}

// stats is the round's counts for a cohort of the given size.
func (t *tally) stats(cohort int) RoundStats {
	st := RoundStats{Cohort: cohort, Examples: t.examples, Rejected: t.rejected, Stragglers: t.stragglers, Late: t.late}
	if t.examples > 0 {
		st.TrainLoss = t.lossSum / float64(t.examples)
	}
	return st
}
