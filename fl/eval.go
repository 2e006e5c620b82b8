package fl

import (
	"context"
	"math"
	"runtime"
	"slices"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/parallel"
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
// so workers read them in place), in one contiguous chunk per worker.
func (e *Evaluator) Dataset(params []float32, ds *data.Dataset) Metrics {
	n := ds.Len()
	k := len(e.workers)
	per := (n + k - 1) / k
	loss := make([]float64, k)
	correct := make([]int, k)
	e.each(k, func(w, i int) {
		lo, hi := min(i*per, n), min((i+1)*per, n)
		loss[i], correct[i] = e.workers[w].ws.Evaluate(params, ds.X[lo*ds.Dim:hi*ds.Dim], ds.Y[lo:hi])
	})
	return sumMetrics(loss, correct, n)
}

// each runs f(w, i) for i in [0, n) on the workers, w the worker's index;
// a panic in f is re-raised in the caller's goroutine as a *PanicError,
// which a job runner recovers.
func (e *Evaluator) each(n int, f func(w, i int)) {
	err := parallel.For(context.Background(), len(e.workers), n, func(w, i int) error {
		f(w, i)
		return nil
	})
	if err != nil {
		panic(err)
	}
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

// clientScore is one worker's running sums over the clients it scored.
type clientScore struct {
	loss    float64
	correct int
	n       int
	accs    []float64 // per-client accuracies
}

// perClient scores every client of ids (all when nil) that holds examples
// in the parts examples picks from it. Each client is built once, by the
// worker that scores it (an on-demand population samples a user's data
// on every Client call).
func (e *Evaluator) perClient(params []float32, pop data.Population, ids []int, examples func(data.Client) [2][]int32) (ClientMetrics, bool) {
	res := make([]clientScore, len(e.workers))
	n := len(ids)
	if ids == nil {
		n = pop.NumClients()
	}
	e.each(n, func(w, i int) {
		id := i
		if ids != nil {
			id = ids[i]
		}
		e.score(&res[w], &e.workers[w], params, pop.Base(), examples(pop.Client(id)))
	})
	return clientMetrics(res)
}

// score adds one client's examples (the two index lists of parts into
// base) to r, using worker w's buffers; a client without examples is
// skipped.
func (e *Evaluator) score(r *clientScore, w *evalWorker, params []float32, base *data.Dataset, parts [2][]int32) {
	n := len(parts[0]) + len(parts[1])
	if n == 0 {
		return
	}
	dim := base.Dim
	var c int
	for _, idx := range parts {
		for s := 0; s < len(idx); s += e.chunk {
			b := idx[s:min(s+e.chunk, len(idx))]
			base.Gather(w.x[:len(b)*dim], w.y[:len(b)], b)
			l, k := w.ws.Evaluate(params, w.x[:len(b)*dim], w.y[:len(b)])
			r.loss += l
			c += k
		}
	}
	r.correct += c
	r.n += n
	r.accs = append(r.accs, float64(c)/float64(n))
}

// clientMetrics pools the workers' scores; false when no client was
// scored.
func clientMetrics(res []clientScore) (ClientMetrics, bool) {
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
