package fl

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Reports reach the next stage in cohort order whatever order the workers
// finish in (here the early positions are the slowest), each with the
// update its client trained, and the hand-off allocates at most
// workers − 1 spare buffers.
func TestInOrderHandsReportsOnInCohortOrder(t *testing.T) {
	const n, workers, d = 60, 4, 3
	o := newInOrder(d, workers)
	for run := range 2 {
		var got []int
		err := o.run(context.Background(), workers, n, func(w, i int, buf []float32) report {
			if i%7 == 0 {
				time.Sleep(2 * time.Millisecond) // finishes after later positions
			}
			buf[0], buf[1], buf[2] = float32(i), float32(run), float32(-i)
			return report{id: i}
		}, func(r report, buf []float32) {
			if buf[0] != float32(r.id) || buf[1] != float32(run) || buf[2] != float32(-r.id) {
				t.Errorf("report %d handed on with the update %v", r.id, buf)
			}
			got = append(got, r.id)
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("run %d: %d reports handed on, want %d", run, len(got), n)
		}
		for i, id := range got {
			if id != i {
				t.Fatalf("run %d: position %d got report %d", run, i, id)
			}
		}
	}
	if o.spares > workers-1 {
		t.Fatalf("%d spare buffers for %d workers", o.spares, workers)
	}
}

// A panic in the client whose turn it is, while the other workers wait
// for buffers, reaches the caller as a *PanicError instead of leaving the
// waiters blocked; a cancelled ctx likewise ends the run with its error.
func TestInOrderFailuresReleaseTheWaiters(t *testing.T) {
	const n, workers = 40, 4
	o := newInOrder(1, workers)
	var taken atomic.Int32
	take := func(report, []float32) { taken.Add(1) }
	err := o.run(context.Background(), workers, n, func(w, i int, buf []float32) report {
		if i == 0 {
			time.Sleep(20 * time.Millisecond) // let the others park and wait
			panic("boom")
		}
		return report{id: i}
	}, take)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("run: %v, want the panic as a *PanicError", err)
	}
	if taken.Load() != 0 {
		t.Fatalf("%d reports handed on past a failed first one", taken.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	err = o.run(ctx, workers, n, func(w, i int, buf []float32) report {
		if i == 0 {
			cancel()
			time.Sleep(20 * time.Millisecond)
		}
		return report{id: i}
	}, take)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run with a cancelled ctx: %v", err)
	}
}
