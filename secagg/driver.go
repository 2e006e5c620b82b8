package secagg

import (
	"context"
	"time"
)

// ServerTransport carries one instance's stages between a ServerDriver and
// the clients. The clients' requests and messages reach the driver's
// Server directly (its methods are safe for concurrent use); the
// transport tells the clients which stage is open and, where it can, when
// no more messages will come. Memory is the in-process one; package job
// has the one for devices over HTTP.
type ServerTransport interface {
	// Open opens stage to the clients until deadline (zero: none): from
	// now on they may fetch their request of stage from the Server and
	// send it their message. The returned channel is closed once no more
	// messages of stage can come (every client answered or gave up, as in
	// memory); it is nil when that is never known (over a network). An
	// error ends the instance.
	Open(ctx context.Context, stage Stage, deadline time.Time) (done <-chan struct{}, err error)
	// Close tells the clients that no stage is open any more: the server
	// is unmasking the sum, or the instance ended or aborted. The driver
	// calls it once, last.
	Close()
}

// ServerDriver runs the server's side of one instance over a
// ServerTransport (Bonawitz et al. 2017, Fig. 4, the server's rounds 0–4
// with their timeouts): for each stage it opens the stage, waits until
// every expected client's message was accepted, the stage's deadline
// passed, or the transport reports that no more can come, and closes the
// stage; after the last it unmasks the sum. The expected clients of a
// stage are those the previous one kept (U1, U2, U3).
type ServerDriver struct {
	// Server is the instance's state machine.
	Server *Server
	// Transport carries the stages to the clients.
	Transport ServerTransport
	// Clients is how many clients may advertise keys (the cohort):
	// advertise_keys closes as soon as that many have. ≤ 0: no bound.
	Clients int
	// AdvertiseTimeout is how long advertise_keys stays open. At its end
	// the stage closes if max(MinClients, 2) clients advertised, and
	// otherwise stays open until they have: clients join over time, and an
	// instance that cannot start waits rather than abort. StageTimeout is
	// how long each later stage stays open; at its end the stage closes
	// with what arrived (the missing clients dropped out). Zero: no
	// deadline.
	AdvertiseTimeout, StageTimeout time.Duration
}

// Run drives the instance to its end and returns Finish's Result. It
// returns the first error of a stage's close (wrapping ErrTooFewSurvivors
// when too few clients remain: the instance aborted, and no sum is
// revealed), of the transport, of Finish, or ctx's error. Call it once.
func (d *ServerDriver) Run(ctx context.Context) (Result, error) {
	for _, st := range Stages {
		if err := d.runStage(ctx, st); err != nil {
			d.Transport.Close()
			return Result{}, err
		}
	}
	d.Transport.Close()
	return d.Server.Finish()
}

// runStage opens stage, waits for its messages and closes it (unmask is
// closed by Finish).
func (d *ServerDriver) runStage(ctx context.Context, st Stage) error {
	timeout, expected, least := d.StageTimeout, 0, 0
	if st == StageAdvertiseKeys {
		timeout, expected, least = d.AdvertiseTimeout, d.Clients, max(d.Server.cfg.MinClients, 2)
	} else {
		expected = d.Server.Accepted(st - 1)
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	done, err := d.Transport.Open(ctx, st, deadline)
	if err != nil {
		return err
	}
	if err := d.wait(ctx, st, expected, least, deadline, done); err != nil {
		return err
	}
	if st == StageUnmask {
		return nil
	}
	return d.Server.closeStage(st)
}

// wait returns once expected (> 0) messages of st were accepted, done is
// closed, or the deadline (if any) has passed with at least least
// messages; or with ctx's error.
func (d *ServerDriver) wait(ctx context.Context, st Stage, expected, least int, deadline time.Time, done <-chan struct{}) error {
	var timeUp <-chan time.Time
	passed := false
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeUp = t.C
	}
	for {
		n := d.Server.Accepted(st)
		if (expected > 0 && n >= expected) || (passed && n >= least) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case <-d.Server.wake:
		case <-timeUp:
			passed, timeUp = true, nil
		}
	}
}
