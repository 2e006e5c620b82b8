// Package parallel is dpfl's one parallel-for: n independent items run on
// at most workers goroutines (golang.org/x/sync/errgroup with SetLimit),
// each goroutine with a stable worker index so that callers can keep
// per-worker scratch buffers. A panic in an item is recovered and
// returned as a *PanicError, because a panic in a goroutine the caller did
// not start cannot be recovered by the caller and would end the process
// (a job server must fail that job, not every job).
package parallel

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// PanicError is a panic recovered in a worker goroutine.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack trace (debug.Stack).
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic in a worker: %v", e.Value) }

// Workers is the number of goroutines For starts for n items and a
// workers setting: min(workers, n), at least 1 (workers ≤ 0 means 1).
func Workers(workers, n int) int {
	return max(1, min(workers, n))
}

// For calls f(w, i) for every i in [0, n), on Workers(workers, n)
// goroutines numbered w = 0, 1, …; items are handed out in increasing
// order as goroutines become free, so f must not depend on which worker
// gets which item except through per-worker scratch. It returns the first
// error (a recovered panic is a *PanicError); after an error, items not yet
// started are skipped. With one worker it runs on the caller's goroutine.
// ctx cancels the items not yet started (For then returns ctx's error).
func For(ctx context.Context, workers, n int, f func(w, i int) error) error {
	if n <= 0 {
		return nil
	}
	k := Workers(workers, n)
	if k == 1 {
		return run(ctx, 0, n, new(atomic.Int64), f)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(k)
	var next atomic.Int64
	for w := range k {
		g.Go(func() error { return run(ctx, w, n, &next, f) })
	}
	return g.Wait()
}

// run is one worker's loop: take the next item until none is left, an
// item fails or ctx is done.
func run(ctx context.Context, w, n int, next *atomic.Int64, f func(w, i int) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	for {
		i := int(next.Add(1) - 1)
		if i >= n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f(w, i); err != nil {
			return err
		}
	}
}
