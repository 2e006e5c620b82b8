package fl

import "github.com/dpfl/dpfl/internal/parallel"

// PanicError is a panic recovered in one of fl's worker goroutines
// (internal/parallel's). A panic there cannot be recovered by the caller,
// so it would end the process; instead the call that started the worker
// returns it as an error (FedAvg.Round, SecureAggregator.Release) or
// panics with it in the caller's goroutine (Evaluator), where a job
// runner can recover it. Stack is the worker's stack at the panic.
type PanicError = parallel.PanicError
