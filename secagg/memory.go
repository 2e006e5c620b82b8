package secagg

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/dpfl/dpfl/internal/parallel"
)

// Memory is the in-process ServerTransport, for simulations and tests:
// when a stage opens, every simulated client still in the instance, each
// run by its ClientDriver, answers it at once through direct calls on
// Server, on up to Workers goroutines; then no more messages can come.
// Nothing is serialised or copied beyond what Server and Client copy to
// keep their state their own.
//
// A client's own abort (ErrTooFewSurvivors: too few of its neighbours
// remain for it to go on safely, Bonawitz et al. 2017, Fig. 4) is its
// dropping out, as it is for a device; any other error of a client ends
// the instance.
type Memory struct {
	// Server is the instance's state machine (the ServerDriver's).
	Server *Server
	// Clients are the simulated clients, their IDs distinct.
	Clients []*ClientDriver
	// Workers bounds the clients answering at once (≤ 0: GOMAXPROCS).
	Workers int
	// Drop, if set, reports whether client i (of Clients) drops out
	// before stage: it sends nothing in that stage or later (simulated
	// dropouts).
	Drop func(i int, stage Stage) bool
	// Wrap, if set, replaces the transport of client i (tests watch and
	// tamper with messages with it).
	Wrap func(i int, t ClientTransport) ClientTransport

	out     []bool // by client: dropped out or aborted
	aborted []bool // by client: aborted with ErrTooFewSurvivors
}

// closed is a done channel that is always closed.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Open runs every remaining client's step of stage and returns a closed
// channel (no more messages will come), or the first client error that is
// not an abort.
func (m *Memory) Open(ctx context.Context, stage Stage, _ time.Time) (<-chan struct{}, error) {
	if m.out == nil {
		m.out, m.aborted = make([]bool, len(m.Clients)), make([]bool, len(m.Clients))
	}
	var live []int
	for i := range m.Clients {
		if !m.out[i] && m.Drop != nil && m.Drop(i, stage) {
			m.out[i] = true
		}
		if !m.out[i] {
			live = append(live, i)
		}
	}
	workers := m.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	err := parallel.For(ctx, workers, len(live), func(_, k int) error {
		i := live[k]
		var t ClientTransport = memoryConn{m.Server, m.Clients[i].ID}
		if m.Wrap != nil {
			t = m.Wrap(i, t)
		}
		err := m.Clients[i].Step(ctx, stage, t)
		if errors.Is(err, ErrTooFewSurvivors) {
			m.out[i], m.aborted[i] = true, true
			return nil
		}
		return err
	})
	return closed, err
}

// Close does nothing: simulated clients only act when a stage opens.
func (m *Memory) Close() {}

// memoryConn is one simulated client's ClientTransport: direct calls on
// the server.
type memoryConn struct {
	srv *Server
	id  ClientID
}

func (c memoryConn) Await(context.Context, Stage) error { return nil }

func (c memoryConn) AdvertiseKeys(_ context.Context, m AdvertiseKeysMsg) error {
	return c.srv.AdvertiseKeys(m)
}

func (c memoryConn) ShareKeysRequest(context.Context) (ShareKeysRequest, error) {
	return c.srv.ShareKeysRequest(c.id)
}

func (c memoryConn) ShareKeys(_ context.Context, m ShareKeysMsg) error { return c.srv.ShareKeys(m) }

func (c memoryConn) MaskedInputRequest(context.Context) (MaskedInputRequest, error) {
	return c.srv.MaskedInputRequest(c.id)
}

func (c memoryConn) MaskedInput(_ context.Context, m MaskedInputMsg) error {
	return c.srv.MaskedInput(m)
}

func (c memoryConn) UnmaskRequest(context.Context) (UnmaskRequest, error) {
	return c.srv.UnmaskRequest(c.id)
}

func (c memoryConn) Unmask(_ context.Context, m UnmaskMsg) error { return c.srv.Unmask(m) }
