// Package device is dpfl's device program: one real device that takes part
// in a devices job's rounds with its own data, running local training
// (fl.LocalTrainer) and the client side of secure aggregation
// (secagg.ClientDriver, Bonawitz et al. 2017, Fig. 4) against the server.
// 'dpfl-client participate' parses its flags and runs a Device over the
// REST API (HTTP); tests run one against an in-process server or a fake.
package device

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/secagg"
)

// Server is a device's connection to the server of one job.
type Server interface {
	// RoundStatus polls the job's open round.
	RoundStatus(ctx context.Context, jobID string) (types.RoundStatus, error)
	// Join joins the open round: the round's client ID, session, model
	// and encoding, and the transport of its protocol instance.
	Join(ctx context.Context, jobID string) (types.JoinInfo, secagg.ClientTransport, error)
}

// HTTP is the Server behind a REST API client made with the device's
// credential; the protocol polls the round's stage every poll (≤ 0:
// client.DefaultPoll).
func HTTP(c *client.Client, poll time.Duration) Server { return httpServer{c, poll} }

type httpServer struct {
	c    *client.Client
	poll time.Duration
}

func (s httpServer) RoundStatus(ctx context.Context, jobID string) (types.RoundStatus, error) {
	return s.c.RoundStatus(ctx, jobID)
}

func (s httpServer) Join(ctx context.Context, jobID string) (types.JoinInfo, secagg.ClientTransport, error) {
	p, err := s.c.Join(ctx, jobID)
	if err != nil {
		return types.JoinInfo{}, nil, err
	}
	p.Poll = s.poll
	return p.Info, p, nil
}

// Device takes part in a devices job's rounds.
type Device struct {
	// Server is the connection to the job's server (HTTP in production).
	Server Server
	// JobID is the devices job to take part in.
	JobID string
	// Data are the device's training examples (Fashion-MNIST's shape).
	Data *data.Dataset
	// Poll is how often the device polls for a round to join (≤ 0:
	// client.DefaultPoll).
	Poll time.Duration
	// Rounds, when > 0, stops the device after taking part in that many.
	Rounds int
	// SaveDir, if set, is the directory (made 0700) where each round's
	// global model and this device's unmasked encoded update are written
	// (client.SavedInput, files 0600), for audits.
	SaveDir string
	// Workers bounds the goroutines of the protocol's key agreements and
	// mask expansions (≤ 0: GOMAXPROCS).
	Workers int
	// Out receives one line per step (nil: discarded).
	Out io.Writer
}

// Run joins every round (each attempt once) until the job ends, or until
// it took part in Rounds rounds. A round it cannot finish (it was too
// slow, the round went on without it, the server refused a message) is
// logged and skipped; Run returns only on ctx's end, an error polling the
// job, or the end of the job (nil).
func (d *Device) Run(ctx context.Context) error {
	if d.Out == nil {
		d.Out = io.Discard
	}
	fmt.Fprintf(d.Out, "device with %d examples joining job %s\n", d.Data.Len(), d.JobID)
	seen := map[[2]int]bool{}
	taken := 0
	for {
		st, err := d.Server.RoundStatus(ctx, d.JobID)
		if err != nil {
			return err
		}
		if st.State.Terminal() {
			fmt.Fprintf(d.Out, "job %s is %s; took part in %d rounds\n", d.JobID, st.State, taken)
			return nil
		}
		if key := [2]int{st.Round, st.Attempt}; st.Stage == types.StageJoin && !seen[key] {
			seen[key] = true
			if err := d.round(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(d.Out, "round %d: gave up: %v\n", st.Round, err)
			} else if taken++; d.Rounds > 0 && taken >= d.Rounds {
				return nil
			}
			continue
		}
		if err := sleep(ctx, d.Poll); err != nil {
			return err
		}
	}
}

// round takes part in the open round: join, then the protocol, training
// right after advertising keys.
func (d *Device) round(ctx context.Context) error {
	info, t, err := d.Server.Join(ctx, d.JobID)
	if err != nil {
		return err
	}
	drv := &secagg.ClientDriver{
		ID: info.ClientID, Session: info.Session, Workers: d.Workers,
		Input: func(context.Context) ([]uint32, error) { return d.input(info) },
	}
	out := d.Out
	if out == nil {
		out = io.Discard
	}
	return drv.Run(ctx, logged{t, out, info})
}

// input trains on the device's data from the round's model and, with
// SaveDir, keeps a private copy of the encoded update.
func (d *Device) input(info types.JoinInfo) ([]uint32, error) {
	x, err := train(d.Data, info)
	if err != nil {
		return nil, err
	}
	if d.SaveDir != "" {
		if err := saveInput(d.SaveDir, info, x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// sleep waits d (≤ 0: client.DefaultPoll), or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		d = client.DefaultPoll
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// LoadData reads a device's IDX pair, train-images-idx3-ubyte and
// train-labels-idx1-ubyte in dir, each gzip'd or not, as 10-class data.
func LoadData(dir string) (*data.Dataset, error) {
	find := func(name string) (string, error) {
		for _, p := range []string{name, name + ".gz"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				return filepath.Join(dir, p), nil
			}
		}
		return "", fmt.Errorf("device: %s has no %s[.gz]", dir, name)
	}
	img, err := find("train-images-idx3-ubyte")
	if err != nil {
		return nil, err
	}
	lab, err := find("train-labels-idx1-ubyte")
	if err != nil {
		return nil, err
	}
	return data.LoadIDXPair(img, lab, 10)
}
