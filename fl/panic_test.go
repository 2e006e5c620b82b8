package fl

import (
	"context"
	"errors"
	"testing"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// panicky is a population whose client bad panics when built, as a bug
// in a population would: the panic happens in one of fl's workers.
type panicky struct {
	base *data.Dataset
	bad  int
}

func (p panicky) Base() *data.Dataset { return p.base }
func (p panicky) NumClients() int     { return 8 }
func (p panicky) Client(id int) data.Client {
	if id == p.bad {
		panic("injected failure")
	}
	return data.Client{ID: id, Train: []int32{0}, HeldOut: []int32{0}}
}

// A panic in a worker goroutine cannot be recovered by the caller and
// would end the process; fl's workers recover it, FedAvg.Round returns it
// as a *PanicError with the worker's stack (and leaves params unchanged),
// and the Evaluator re-raises it in the caller's goroutine. Neither
// deadlocks on the rest of the cohort.
func TestWorkerPanicsReachTheCaller(t *testing.T) {
	base := &data.Dataset{Dim: 4, Classes: 2, X: []float32{1, 2, 3, 4}, Y: []uint8{1}}
	m, err := model.New("logreg", 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	pop := panicky{base: base, bad: 5}
	params := make([]float32, m.NumParams())
	f := &FedAvg{Model: m, Client: ClientConfig{Epochs: 1, BatchSize: 1, LR: 0.1}, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 3, Rounds: 1}
	_, err = f.Round(context.Background(), 1, params, pop, []int{0, 1, 2, 3, 4, 5, 6, 7}, 8)
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "injected failure" || len(pe.Stack) == 0 {
		t.Fatalf("Round: %v, want the worker's panic as a *PanicError", err)
	}
	for i, v := range params {
		if v != 0 {
			t.Fatalf("params[%d] = %v after a failed round, want unchanged", i, v)
		}
	}

	func() {
		defer func() {
			p := recover()
			if pe, ok := p.(*PanicError); !ok || pe.Value != "injected failure" {
				t.Fatalf("Evaluator.Clients panicked with %v, want the worker's *PanicError", p)
			}
		}()
		NewEvaluator(m, 3).Clients(params, pop, nil)
		t.Fatal("Evaluator.Clients returned despite a worker's panic")
	}()
}
