package fl

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic recovered in one of fl's worker goroutines. A
// panic there cannot be recovered by the caller, so it would end the
// process; instead the worker recovers it and the call that started the
// worker returns it as an error (FedAvg.Round, SecureAggregator.Release)
// or panics with it in the caller's goroutine (Evaluator), where a
// job runner can recover it. Stack is the worker's stack at the panic.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the panicking goroutine's stack trace (debug.Stack).
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic in a worker: %v", e.Value) }

// newPanicError wraps a recovered value with the current stack; call it
// from the deferred function that recovered.
func newPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

// rethrow panics with the first non-nil error of errs in the caller's
// goroutine (the workers' recovered panics).
func rethrow(errs []*PanicError) {
	for _, e := range errs {
		if e != nil {
			panic(e)
		}
	}
}
