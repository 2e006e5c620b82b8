package fl

import (
	"context"
	"sync"

	"github.com/dpfl/dpfl/internal/parallel"
)

// inOrder runs a round's clients on the workers (parallel.For) and hands
// their reports to the next stage in cohort order, whatever worker trained
// which client and whenever it finished. Float sums depend on the order of
// their terms, so this is what makes a round's result the same, bit for
// bit, for every number of workers; and since every client's randomness is
// seeded per (round, client), the same as with one worker.
//
// Each client trains into a delta buffer of d floats. A worker that
// finishes before its turn parks its report with the buffer and takes a
// spare; workers − 1 spares are allocated at most, after which a worker
// waits for a buffer until the reports ahead of its own have been handed
// on. With the one aggregate that replaces one per worker, a round holds
// no more buffers of d floats than it did with per-worker aggregates. The
// report whose turn it is is always in training on some worker, so the
// wait ends. A failure (a panic in a client, a cancelled ctx) wakes every
// waiter and stops the hand-off.
type inOrder struct {
	d      int
	limit  int // spares allowed beyond one buffer per worker
	mu     sync.Mutex
	turn   sync.Cond // signalled when buffers free up or the run fails
	next   int       // the cohort position handed on next
	parked map[int]parked
	free   [][]float32
	bufs   [][]float32 // each worker's current buffer
	spares int
	failed bool
	gen    int // counts runs, so that a late abort of an old run is ignored
}

type parked struct {
	r   report
	buf []float32
}

func newInOrder(d, workers int) *inOrder {
	o := &inOrder{d: d, limit: workers - 1, parked: map[int]parked{}, bufs: make([][]float32, workers)}
	o.turn.L = &o.mu
	return o
}

// run calls train(w, i, buf) for every cohort position i in [0, n) on
// worker w, with buf that worker's delta buffer, and take(r, buf) for
// every report in increasing i, one at a time. It returns the first error
// (a *PanicError from train or take, ctx's error); then take may not have
// seen every report.
func (o *inOrder) run(ctx context.Context, workers, n int, train func(w, i int, buf []float32) report, take func(r report, buf []float32)) error {
	gen := o.reset()
	stop := context.AfterFunc(ctx, func() { o.abort(gen) })
	defer stop()
	err := parallel.For(ctx, workers, n, func(w, i int) error {
		if o.aborted() {
			return nil
		}
		done := false
		defer func() {
			if !done { // train or take panicked: release the waiters
				o.abort(gen)
			}
		}()
		buf := o.buffer(w)
		r := train(w, i, buf)
		o.bufs[w] = o.deliver(i, r, buf, take)
		done = true
		return nil
	})
	if err == nil && o.aborted() {
		err = ctx.Err()
	}
	return err
}

// reset makes every buffer available again for a new run and returns
// the run's number.
func (o *inOrder) reset() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, p := range o.parked {
		o.free = append(o.free, p.buf)
		delete(o.parked, i)
	}
	o.next, o.failed = 0, false
	o.gen++
	return o.gen
}

// abort fails run gen and wakes its waiters.
func (o *inOrder) abort(gen int) {
	o.mu.Lock()
	if o.gen == gen {
		o.failed = true
	}
	o.mu.Unlock()
	o.turn.Broadcast()
}

func (o *inOrder) aborted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

// buffer returns worker w's buffer (a free one, or a new one the first
// time).
func (o *inOrder) buffer(w int) []float32 {
	if o.bufs[w] != nil {
		return o.bufs[w]
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.free); n > 0 {
		o.bufs[w], o.free = o.free[n-1], o.free[:n-1]
	} else {
		o.bufs[w] = make([]float32, o.d)
	}
	return o.bufs[w]
}

// deliver hands report i on, with the parked reports it unblocks, or
// parks it; it returns the buffer the worker trains its next client in
// (nil after a failure).
func (o *inOrder) deliver(i int, r report, buf []float32, take func(report, []float32)) []float32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed {
		return buf
	}
	if i != o.next {
		o.parked[i] = parked{r, buf}
		return o.spare()
	}
	take(r, buf)
	o.next++
	for p, ok := o.parked[o.next]; ok; p, ok = o.parked[o.next] {
		delete(o.parked, o.next)
		take(p.r, p.buf)
		o.free = append(o.free, p.buf)
		o.next++
	}
	o.turn.Broadcast()
	return buf
}

// spare returns a free buffer, allocating one while under the limit and
// otherwise waiting for one (lock held).
func (o *inOrder) spare() []float32 {
	for len(o.free) == 0 && o.spares >= o.limit && !o.failed {
		o.turn.Wait()
	}
	switch {
	case o.failed:
		return nil
	case len(o.free) > 0:
		b := o.free[len(o.free)-1]
		o.free = o.free[:len(o.free)-1]
		return b
	}
	o.spares++
	return make([]float32, o.d)
}
