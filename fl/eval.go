package fl

import (
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// Evaluator computes a model's loss and accuracy on held-out data, split
// across workers. Buffers are allocated once by NewEvaluator. Not safe for
// concurrent use. A panic in a worker is re-raised, as a *PanicError, in
// the goroutine that called the method.
type Evaluator struct {
	m       model.Model
	chunk   int
	workers []evalWorker
}

type evalWorker struct {
	ws model.Workspace
	x  []float32
	y  []uint8
}

// Metrics are the mean loss and accuracy over Examples examples.
type Metrics struct {
	Loss     float64 `json:"loss"`
	Accuracy float64 `json:"accuracy"`
	Examples int     `json:"examples"`
}

// NewEvaluator returns an evaluator for m using workers goroutines (≤ 0:
// GOMAXPROCS).
func NewEvaluator(m model.Model, workers int) *Evaluator {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	const chunk = 256
	e := &Evaluator{m: m, chunk: chunk, workers: make([]evalWorker, workers)}
	for i := range e.workers {
		e.workers[i] = evalWorker{
			ws: m.NewWorkspace(chunk),
			x:  make([]float32, chunk*m.InputDim()),
			y:  make([]uint8, chunk),
		}
	}
	return e
}

// Dataset evaluates params on every example of ds (its rows are contiguous,
// so workers read them in place).
func (e *Evaluator) Dataset(params []float32, ds *data.Dataset) Metrics {
	n := ds.Len()
	per := (n + len(e.workers) - 1) / len(e.workers)
	loss := make([]float64, len(e.workers))
	correct := make([]int, len(e.workers))
	panics := make([]*PanicError, len(e.workers))
	var wg sync.WaitGroup
	for i := range e.workers {
		lo, hi := min(i*per, n), min((i+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					panics[i] = newPanicError(p)
				}
			}()
			loss[i], correct[i] = e.workers[i].ws.Evaluate(params, ds.X[lo*ds.Dim:hi*ds.Dim], ds.Y[lo:hi])
		}()
	}
	wg.Wait()
	rethrow(panics)
	return sumMetrics(loss, correct, n)
}

// ClientMetrics are evaluations on the clients' own held-out examples.
type ClientMetrics struct {
	// Weighted pools every held-out example (example-weighted).
	Weighted Metrics `json:"weighted"`
	// MeanAccuracy is the unweighted mean of per-client accuracies, over
	// clients with at least one held-out example; P10Accuracy and
	// MinAccuracy are the 10th percentile (nearest rank) and the minimum
	// of that distribution, the tail a mean hides (Field Guide §4.2.1).
	MeanAccuracy float64 `json:"mean_accuracy"`
	P10Accuracy  float64 `json:"p10_accuracy"`
	MinAccuracy  float64 `json:"min_accuracy"`
	// Clients is the number of clients evaluated.
	Clients int `json:"clients"`
}

// Clients evaluates params on the held-out examples of the clients ids of
// pop (every client when ids is nil). It returns false when none of them
// holds examples out.
func (e *Evaluator) Clients(params []float32, pop data.Population, ids []int) (ClientMetrics, bool) {
	return e.perClient(params, pop, ids, func(c data.Client) [2][]int32 { return [2][]int32{c.HeldOut} })
}

// Users evaluates params on all the examples of the users ids of pop:
// users held out of training altogether (Field Guide §4.2.1).
func (e *Evaluator) Users(params []float32, pop data.Population, ids []int) (ClientMetrics, bool) {
	return e.perClient(params, pop, ids, func(c data.Client) [2][]int32 { return [2][]int32{c.HeldOut, c.Train} })
}

// perClient scores every client of ids (all when nil) that holds examples
// in the parts examples picks from it. Each client is built once, by the
// worker that scores it (an on-demand population samples a user's data
// on every Client call).
func (e *Evaluator) perClient(params []float32, pop data.Population, ids []int, examples func(data.Client) [2][]int32) (ClientMetrics, bool) {
	type result struct {
		loss    float64
		correct int
		n       int
		accs    []float64
	}
	res := make([]result, len(e.workers))
	panics := make([]*PanicError, len(e.workers))
	next := make(chan int, 64)
	var wg sync.WaitGroup
	for i := range e.workers {
		w, r := &e.workers[i], &res[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// Re-raised in the caller's goroutine (rethrow), which a
				// job runner recovers; keep taking ids so the sender
				// finishes.
				if p := recover(); p != nil {
					panics[i] = newPanicError(p)
					for range next {
					}
				}
			}()
			dim := pop.Base().Dim
			for id := range next {
				parts := examples(pop.Client(id))
				n := len(parts[0]) + len(parts[1])
				if n == 0 {
					continue
				}
				var c int
				for _, idx := range parts {
					for s := 0; s < len(idx); s += e.chunk {
						b := idx[s:min(s+e.chunk, len(idx))]
						pop.Base().Gather(w.x[:len(b)*dim], w.y[:len(b)], b)
						l, k := w.ws.Evaluate(params, w.x[:len(b)*dim], w.y[:len(b)])
						r.loss += l
						c += k
					}
				}
				r.correct += c
				r.n += n
				r.accs = append(r.accs, float64(c)/float64(n))
			}
		}()
	}
	if ids == nil {
		for id := range pop.NumClients() {
			next <- id
		}
	} else {
		for _, id := range ids {
			next <- id
		}
	}
	close(next)
	wg.Wait()
	rethrow(panics)
	var out ClientMetrics
	loss := make([]float64, len(res))
	correct := make([]int, len(res))
	var n int
	var accs []float64
	for i, r := range res {
		loss[i], correct[i] = r.loss, r.correct
		n += r.n
		accs = append(accs, r.accs...)
	}
	if len(accs) == 0 {
		return out, false
	}
	out.Clients = len(accs)
	out.Weighted = sumMetrics(loss, correct, n)
	slices.Sort(accs)
	var sum float64
	for _, a := range accs {
		sum += a
	}
	out.MeanAccuracy = sum / float64(len(accs))
	out.MinAccuracy = accs[0]
	out.P10Accuracy = accs[max(int(math.Ceil(0.1*float64(len(accs))))-1, 0)]
	return out, true
}

func sumMetrics(loss []float64, correct []int, n int) Metrics {
	if n == 0 {
		return Metrics{}
	}
	var l float64
	var c int
	for i := range loss {
		l += loss[i]
		c += correct[i]
	}
	return Metrics{Loss: l / float64(n), Accuracy: float64(c) / float64(n), Examples: n}
}
