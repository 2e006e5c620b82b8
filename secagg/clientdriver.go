package secagg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// ClientTransport carries one client's part of an instance between a
// ClientDriver and the server: the server's request of each stage and the
// client's message. Over a network each call may block; every call
// returns an error if the instance went on without the client. The
// in-process one is Memory's; api/client.Participation is the one over
// HTTP.
type ClientTransport interface {
	// Await blocks until stage is open to this client.
	Await(ctx context.Context, stage Stage) error
	// AdvertiseKeys sends the client's message of stage advertise_keys.
	AdvertiseKeys(ctx context.Context, m AdvertiseKeysMsg) error
	// ShareKeysRequest fetches the server's request of stage share_keys;
	// ShareKeys sends the client's answer.
	ShareKeysRequest(ctx context.Context) (ShareKeysRequest, error)
	ShareKeys(ctx context.Context, m ShareKeysMsg) error
	// MaskedInputRequest fetches the server's request of stage
	// masked_input; MaskedInput sends the client's answer.
	MaskedInputRequest(ctx context.Context) (MaskedInputRequest, error)
	MaskedInput(ctx context.Context, m MaskedInputMsg) error
	// UnmaskRequest fetches the server's request of stage unmask; Unmask
	// sends the client's answer.
	UnmaskRequest(ctx context.Context) (UnmaskRequest, error)
	Unmask(ctx context.Context, m UnmaskMsg) error
}

// ClientDriver runs one client's side of one instance over a
// ClientTransport: in each stage it fetches the server's request, has its
// Client compute the answer, and sends it. Not safe for concurrent use.
type ClientDriver struct {
	// ID is the client's ID from the server, Session the instance's.
	ID      ClientID
	Session []byte
	// Rand is the source of the client's secrets (nil: crypto/rand).
	Rand io.Reader
	// Workers bounds the goroutines of the client's key agreements and
	// mask expansions (≤ 0: GOMAXPROCS; a simulation running many
	// clients in parallel gives each 1).
	Workers int
	// Input returns the client's encoded input (Encoding.Encode, length
	// d), which the driver then owns and masks in place. It is called
	// once: by Run right after advertising keys, so that the client's
	// work (training) overlaps the wait for the other clients, or else
	// by the masked_input step.
	Input func(ctx context.Context) ([]uint32, error)
	// Pairs, in a simulation only, is the instance's PairCache shared by
	// all its simulated clients, so that each pair's agreement runs once
	// (nil, as on a device: the client computes every agreement). Where
	// Rand is nil it also supplies the client's keys, drawn from
	// crypto/rand many clients at a time (keyPool); a Rand of its own
	// keeps the client drawing its keys from it.
	Pairs *PairCache

	client   *Client
	input    []uint32
	inputErr error
	hasInput bool
}

// Client is the driver's protocol state machine (nil before the
// advertise_keys step).
func (d *ClientDriver) Client() *Client { return d.client }

// Run takes part in the instance from advertise_keys to unmask, awaiting
// each stage on t. It returns the first error: of the transport, of the
// client (ErrTooFewSurvivors when too few neighbours remain for it to go
// on safely), or of Input.
func (d *ClientDriver) Run(ctx context.Context, t ClientTransport) error {
	for _, st := range Stages {
		if err := t.Await(ctx, st); err != nil {
			return err
		}
		if err := d.Step(ctx, st, t); err != nil {
			return err
		}
		if st == StageAdvertiseKeys {
			if d.takeInput(ctx); d.inputErr != nil {
				return d.inputErr
			}
		}
	}
	return nil
}

// Step is the client's part of stage, which must be open: fetch the
// request, answer it, send the answer. Stages must come in order.
func (d *ClientDriver) Step(ctx context.Context, stage Stage, t ClientTransport) error {
	if stage == StageAdvertiseKeys {
		return d.advertise(ctx, t)
	}
	if d.client == nil {
		return fmt.Errorf("secagg: client %d: stage %v before advertise_keys", d.ID, stage)
	}
	switch stage {
	case StageShareKeys:
		req, err := t.ShareKeysRequest(ctx)
		if err != nil {
			return err
		}
		m, err := d.client.ShareKeys(req)
		if err != nil {
			return err
		}
		return t.ShareKeys(ctx, m)
	case StageMaskedInput:
		return d.maskedInput(ctx, t)
	case StageUnmask:
		req, err := t.UnmaskRequest(ctx)
		if err != nil {
			return err
		}
		m, err := d.client.Unmask(req)
		if err != nil {
			return err
		}
		return t.Unmask(ctx, m)
	}
	return fmt.Errorf("secagg: client %d: no step for stage %v", d.ID, stage)
}

// advertise draws the client's keys and sends them.
func (d *ClientDriver) advertise(ctx context.Context, t ClientTransport) error {
	if d.client != nil {
		return fmt.Errorf("secagg: client %d: advertise_keys %w", d.ID, ErrWrongStage)
	}
	rnd := d.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	var pool *keyPool
	if d.Rand == nil && d.Pairs != nil {
		pool = &d.Pairs.keys
	}
	c, m, err := newClient(d.ID, d.Session, rnd, pool)
	if err != nil {
		return err
	}
	c.workers, c.pairs = d.Workers, d.Pairs
	if c.workers <= 0 {
		c.workers = runtime.GOMAXPROCS(0)
	}
	if err := t.AdvertiseKeys(ctx, m); err != nil {
		return err
	}
	d.client = c
	return nil
}

// maskedInput fetches the shares, masks the input and sends it.
func (d *ClientDriver) maskedInput(ctx context.Context, t ClientTransport) error {
	req, err := t.MaskedInputRequest(ctx)
	if err != nil {
		return err
	}
	d.takeInput(ctx)
	if d.inputErr != nil {
		return d.inputErr
	}
	x := d.input
	d.input = nil // the message owns it now
	m, err := d.client.maskInPlace(req, x)
	if err != nil {
		return err
	}
	return t.MaskedInput(ctx, m)
}

// takeInput calls Input, once.
func (d *ClientDriver) takeInput(ctx context.Context) {
	if d.hasInput {
		return
	}
	d.hasInput = true
	if d.Input == nil {
		d.inputErr = errors.New("secagg: ClientDriver without Input")
		return
	}
	d.input, d.inputErr = d.Input(ctx)
}
