package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/secagg"
)

// stageOrder is the order of a round's stages, to tell "not yet" from
// "already past".
var stageOrder = []string{job.StageJoin, job.StageShareKeys, job.StageMaskedInput, job.StageUnmask}

// participate is 'dpfl-client participate JOB': one real device that
// joins a devices job's rounds with its own data, running local training
// and the client side of secure aggregation over the REST API. It
// authenticates with the device's credential from 'devices enroll', not
// the API token.
func participate(ctx context.Context, c *command, args []string, out io.Writer) error {
	jobID := c.fs.String("job", "", "job ID to take part in (or give it as the argument JOB)")
	credFlag := c.fs.String("credential", "", "DEPRECATED (visible in ps): this device's credential; use $DPFL_DEVICE_CREDENTIAL or --credential-file")
	credFile := c.fs.String("credential-file", "", "file holding this device's credential from 'dpfl-client devices enroll JOB' (default $DPFL_DEVICE_CREDENTIAL)")
	dir := c.fs.String("data", "", "directory with this device's train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] (required)")
	rounds := c.fs.Int("rounds", 0, "stop after taking part in this many rounds (0: until the job ends)")
	poll := c.fs.Duration("poll", 200*time.Millisecond, "how often to poll the round's stage")
	save := c.fs.String("save-inputs", "", "directory (made 0700) to write each round's global model and this device's unmasked encoded update to, files 0600 (for audits; keep them private)")
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
		return errors.New("participate: --data is required")
	}
	cred, err := c.secret("credential", *credFlag, *credFile, "DPFL_DEVICE_CREDENTIAL")
	if err != nil {
		return err
	}
	if cred == "" {
		return fmt.Errorf("participate: a device credential is required ($DPFL_DEVICE_CREDENTIAL or --credential-file); an administrator enrolls this device with 'dpfl-client devices enroll %s'", *jobID)
	}
	ds, err := loadDeviceData(*dir)
	if err != nil {
		return err
	}
	cl, err := c.connect(cred)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "device with %d examples joining job %s\n", ds.Len(), *jobID)
	seen := map[[2]int]bool{}
	taken := 0
	for {
		st, err := cl.RoundStatus(ctx, *jobID)
		if err != nil {
			return err
		}
		if st.State.Terminal() {
			fmt.Fprintf(out, "job %s is %s; took part in %d rounds\n", *jobID, st.State, taken)
			return nil
		}
		key := [2]int{st.Round, st.Attempt}
		if st.Stage == job.StageJoin && !seen[key] {
			seen[key] = true
			d := &device{cl: cl, jobID: *jobID, ds: ds, poll: *poll, save: *save, out: out}
			if err := d.round(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				fmt.Fprintf(out, "round %d: gave up: %v\n", st.Round, err)
			} else if taken++; *rounds > 0 && taken >= *rounds {
				return nil
			}
			continue
		}
		if err := sleep(ctx, *poll); err != nil {
			return err
		}
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// loadDeviceData reads the device's IDX pair, gzip'd or not.
func loadDeviceData(dir string) (*data.Dataset, error) {
	find := func(name string) (string, error) {
		for _, p := range []string{name, name + ".gz"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				return filepath.Join(dir, p), nil
			}
		}
		return "", fmt.Errorf("participate: %s has no %s[.gz]", dir, name)
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

type device struct {
	cl    *client.Client
	jobID string
	ds    *data.Dataset
	poll  time.Duration
	save  string
	out   io.Writer
}

// round takes part in the open round: join, train, and the four client
// steps of secure aggregation, each in its stage.
func (d *device) round(ctx context.Context) error {
	p, err := d.cl.Join(ctx, d.jobID)
	if err != nil {
		return err
	}
	info := p.Info
	sc, adv, err := secagg.NewClient(info.ClientID, info.Session, crand.Reader)
	if err != nil {
		return err
	}
	if err := p.Advertise(ctx, adv); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "round %d: joined as client %d\n", info.Round, info.ClientID)

	input, err := d.train(info)
	if err != nil {
		return err
	}
	if d.save != "" {
		if err := d.saveInput(info, input); err != nil {
			return err
		}
	}

	if err := d.waitStage(ctx, info, job.StageShareKeys); err != nil {
		return err
	}
	keys, err := p.Keys(ctx)
	if err != nil {
		return err
	}
	shares, err := sc.ShareKeys(keys)
	if err != nil {
		return err
	}
	if err := p.ShareKeys(ctx, shares); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "round %d: shares sent to %d neighbours\n", info.Round, len(shares.Shares))

	if err := d.waitStage(ctx, info, job.StageMaskedInput); err != nil {
		return err
	}
	got, err := p.Shares(ctx)
	if err != nil {
		return err
	}
	masked, err := sc.MaskedInput(got, input)
	if err != nil {
		return err
	}
	if err := p.MaskedInput(ctx, masked); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "round %d: masked input sent\n", info.Round)

	if err := d.waitStage(ctx, info, job.StageUnmask); err != nil {
		return err
	}
	req, err := p.UnmaskRequest(ctx)
	if err != nil {
		return err
	}
	unmask, err := sc.Unmask(req)
	if err != nil {
		return err
	}
	if err := p.Unmask(ctx, unmask); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "round %d: unmask shares sent (%d survivors, %d dropped)\n", info.Round, len(req.Survivors), len(req.Dropped))
	return nil
}

// train runs the job's local training on the device's data from the
// round's global model, then clips and encodes the delta.
func (d *device) train(info job.JoinInfo) ([]uint32, error) {
	m, err := model.New(info.Model, d.ds.Dim, d.ds.Classes)
	if err != nil {
		return nil, err
	}
	if m.NumParams() != len(info.Params) {
		return nil, fmt.Errorf("model %s on this device's data has %d parameters, the server's has %d", info.Model, m.NumParams(), len(info.Params))
	}
	cfg := info.Client.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng, err := dp.NewSecureRand()
	if err != nil {
		return nil, err
	}
	idx := make([]int32, d.ds.Len())
	for i := range idx {
		idx[i] = int32(i)
	}
	delta := make([]float32, len(info.Params))
	fl.NewLocalTrainer(m, cfg).Train(delta, info.Params, d.ds, idx, info.ClientLR, rng)
	input := make([]uint32, len(delta))
	if _, err := fl.EncodeSecureInput(input, delta, info.ClipNorm, info.Encoding, rng); err != nil {
		return nil, err
	}
	return input, nil
}

// saveInput writes the round's global model and this device's encoded
// update, unmasked: that update is exactly what secure aggregation keeps
// from the server, so the directory is 0700 and the files 0600.
func (d *device) saveInput(info job.JoinInfo, input []uint32) error {
	if err := os.MkdirAll(d.save, 0o700); err != nil {
		return err
	}
	if fi, err := os.Stat(d.save); err != nil {
		return err
	} else if fi.Mode().Perm()&0o077 != 0 {
		// MkdirAll leaves an existing directory as it was.
		if err := os.Chmod(d.save, 0o700); err != nil {
			return fmt.Errorf("--save-inputs %s is open to other users and cannot be made private: %w", d.save, err)
		}
	}
	b, err := json.Marshal(client.SavedInput{
		Round: info.Round, Attempt: info.Attempt, ClientID: info.ClientID, Encoding: info.Encoding,
		Global: info.Params, Input: input,
	})
	if err != nil {
		return err
	}
	name := filepath.Join(d.save, fmt.Sprintf("round-%d-attempt-%d.json", info.Round, info.Attempt))
	return writePrivate(name, b)
}

// writePrivate writes b to name with mode 0600, whatever the umask, and
// also if name existed with a wider mode.
func writePrivate(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitStage polls until the device's round reaches stage want; a round
// that moved past it, or on to another round or attempt, went on without
// this device.
func (d *device) waitStage(ctx context.Context, info job.JoinInfo, want string) error {
	for {
		st, err := d.cl.RoundStatus(ctx, d.jobID)
		if err != nil {
			return err
		}
		if st.Round != info.Round || st.Attempt != info.Attempt || slices.Index(stageOrder, st.Stage) > slices.Index(stageOrder, want) || st.Stage == job.StageWaiting {
			return fmt.Errorf("round %d attempt %d went on without this device (now round %d attempt %d, stage %s)", info.Round, info.Attempt, st.Round, st.Attempt, st.Stage)
		}
		if st.Stage == want {
			return nil
		}
		if err := sleep(ctx, d.poll); err != nil {
			return err
		}
	}
}
