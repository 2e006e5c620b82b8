package parallel

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Every item runs exactly once, and no two items run on the same worker
// index at the same time (so per-worker scratch is safe).
func TestForRunsEveryItemOnceWithExclusiveWorkers(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 16} {
		const n = 1000
		var seen [n]atomic.Int32
		busy := make([]atomic.Int32, Workers(workers, n))
		err := For(context.Background(), workers, n, func(w, i int) error {
			if busy[w].Add(1) != 1 {
				t.Errorf("worker %d runs two items at once", w)
			}
			seen[i].Add(1)
			busy[w].Add(-1)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("workers=%d: item %d ran %d times", workers, i, c)
			}
		}
	}
}

func TestForHonoursTheWorkerLimit(t *testing.T) {
	var mu sync.Mutex
	running, peak := 0, 0
	err := For(context.Background(), 4, 200, func(w, i int) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		for j := 0; j < 1000; j++ {
			_ = j * j
		}
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	if err != nil || peak > 4 {
		t.Fatalf("err %v, peak concurrency %d > 4", err, peak)
	}
}

func TestForReturnsTheErrorAndRecoversPanics(t *testing.T) {
	boom := errors.New("boom")
	if err := For(context.Background(), 3, 100, func(w, i int) error {
		if i == 7 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	for _, workers := range []int{1, 4} {
		err := For(context.Background(), workers, 10, func(w, i int) error {
			if i == 3 {
				panic("worker panic")
			}
			return nil
		})
		var pe *PanicError
		if !errors.As(err, &pe) || pe.Value != "worker panic" || len(pe.Stack) == 0 {
			t.Fatalf("workers=%d: got %v, want a *PanicError with a stack", workers, err)
		}
	}
}

func TestForStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	err := For(ctx, 2, 100, func(w, i int) error { ran.Add(1); return nil })
	if !errors.Is(err, context.Canceled) || ran.Load() != 0 {
		t.Fatalf("err %v, %d items ran after cancel", err, ran.Load())
	}
}
