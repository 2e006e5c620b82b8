package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/device"
)

// participate is 'dpfl-client participate JOB': one real device that
// joins a devices job's rounds with its own data (package device: local
// training and the client side of secure aggregation over the REST API).
// It authenticates with the device's credential from 'devices enroll',
// not the API token.
func participate(ctx context.Context, c *command, args []string, out io.Writer) error {
	jobID := c.fs.String("job", "", "job ID to take part in (or give it as the argument JOB)")
	credFlag := c.fs.String("credential", "", "DEPRECATED (visible in ps): this device's credential; use $DPFL_DEVICE_CREDENTIAL or --credential-file")
	credFile := c.fs.String("credential-file", "", "file holding this device's credential from 'dpfl-client devices enroll JOB' (default $DPFL_DEVICE_CREDENTIAL)")
	dir := c.fs.String("data-dir", "", "directory with this device's train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] (required)")
	c.deprecatedFlag("data", "data-dir")
	rounds := c.fs.Int("rounds", 0, "stop after taking part in this many rounds (0: until the job ends)")
	poll := c.fs.Duration("poll", client.DefaultPoll, "how often to poll the round's stage")
	save := c.fs.String("save-inputs", "", "directory (made 0700) to write each round's global model and this device's unmasked encoded update to, files 0600 (for audits; keep them private)")
	workers := c.fs.Int("workers", 0, "goroutines for the protocol's key agreements and mask expansions (0: all CPUs)")
	pos, err := c.positional(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 1 && (*jobID == "" || *jobID == pos[0]):
		*jobID = pos[0]
	case len(pos) > 0:
		return fmt.Errorf("participate: want one JOB (or --job JOB), got arguments %q", pos)
	case *jobID == "":
		return errors.New("participate: which job? give JOB (or --job JOB)")
	}
	if *dir == "" {
		return errors.New("participate: --data-dir is required")
	}
	cred, err := c.secret("credential", *credFlag, *credFile, "DPFL_DEVICE_CREDENTIAL")
	if err != nil {
		return err
	}
	if cred == "" {
		return fmt.Errorf("participate: a device credential is required ($DPFL_DEVICE_CREDENTIAL or --credential-file); an administrator enrolls this device with 'dpfl-client devices enroll %s'", *jobID)
	}
	ds, err := device.LoadData(*dir)
	if err != nil {
		return fmt.Errorf("participate: %w", err)
	}
	cl, err := c.connect(cred)
	if err != nil {
		return err
	}
	d := &device.Device{
		Server: device.HTTP(cl, *poll), JobID: *jobID, Data: ds, Poll: *poll, Rounds: *rounds,
		SaveDir: *save, Workers: *workers, Out: out,
	}
	return d.Run(ctx)
}
