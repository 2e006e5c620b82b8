package device

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// train runs the job's local training on ds from the round's global model
// (fl.LocalTrainer, all of ds each epoch), then clips the delta and
// encodes it for secure aggregation (fl.EncodeSecureInput), or, under
// the distributed discrete Gaussian, adds its own noise share to it
// (encodeDistributed).
func train(ds *data.Dataset, info types.JoinInfo) ([]uint32, error) {
	m, err := model.New(info.Model, ds.Dim, ds.Classes)
	if err != nil {
		return nil, err
	}
	if m.NumParams() != len(info.Params) {
		return nil, fmt.Errorf("model %s on this device's data has %d parameters, the server's has %d", info.Model, m.NumParams(), len(info.Params))
	}
	c := info.Client
	cfg := fl.ClientConfig{Epochs: c.Epochs, BatchSize: c.BatchSize, LR: c.LR, Momentum: c.Momentum, ProxMu: c.ProxMu}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng, err := dp.NewSecureRand()
	if err != nil {
		return nil, err
	}
	idx := make([]int32, ds.Len())
	for i := range idx {
		idx[i] = int32(i)
	}
	delta := make([]float32, len(info.Params))
	fl.NewLocalTrainer(m, cfg).Train(delta, info.Params, ds, idx, info.ClientLR, rng)
	if info.Distributed != nil {
		return encodeDistributed(delta, info.Distributed)
	}
	input := make([]uint32, len(delta))
	if _, err := fl.EncodeSecureInput(input, delta, info.ClipNorm, info.Encoding, rng); err != nil {
		return nil, err
	}
	return input, nil
}

// encodeDistributed is the device's step of the distributed discrete
// Gaussian (Kairouz, Liu & Steinke, ICML 2021, Algorithm 1): clip,
// rotate with the round's seed, round, and add this device's own
// discrete Gaussian share (fl.EncodeDDGInput, keyed from crypto/rand),
// so that the server's sum is noisy before the server sees it.
func encodeDistributed(delta []float32, w *types.DistributedRound) ([]uint32, error) {
	p, err := fl.NewDDGParams(w.ClipNorm, w.Dimension, w.PaddedDimension, w.ModulusBits, w.Gamma, w.Beta, w.Sigma2, w.Clients)
	if err != nil {
		return nil, fmt.Errorf("the round's distributed DP parameters: %w", err)
	}
	if p.Dim != len(delta) {
		return nil, fmt.Errorf("the round's distributed DP parameters are for %d values, the model has %d", p.Dim, len(delta))
	}
	r := fl.DDGRound{Params: p}
	if len(w.RotationSeed) != len(r.Seed) {
		return nil, fmt.Errorf("the round's rotation seed has %d bytes, want %d", len(w.RotationSeed), len(r.Seed))
	}
	copy(r.Seed[:], w.RotationSeed)
	input := make([]uint32, p.PaddedDim)
	if err := fl.EncodeDDGInput(input, delta, r, r.Rotation()); err != nil {
		return nil, err
	}
	return input, nil
}

// saveInput writes the round's global model and this device's encoded
// update into dir, unmasked: that update is exactly what secure
// aggregation keeps from the server, so the directory is 0700 and the
// file 0600.
func saveInput(dir string, info types.JoinInfo, input []uint32) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil {
		return err
	} else if fi.Mode().Perm()&0o077 != 0 {
		// MkdirAll leaves an existing directory as it was.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("--save-inputs %s is open to other users and cannot be made private: %w", dir, err)
		}
	}
	b, err := json.Marshal(client.SavedInput{
		Round: info.Round, Attempt: info.Attempt, ClientID: info.ClientID, Encoding: info.Encoding,
		Global: info.Params, Input: input, Distributed: info.Distributed,
	})
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, SavedInputName(info.Round, info.Attempt)), b)
}

// SavedInputName is the file name of a round's saved input in the
// --save-inputs directory.
func SavedInputName(round, attempt int) string {
	return fmt.Sprintf("round-%d-attempt-%d.json", round, attempt)
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
