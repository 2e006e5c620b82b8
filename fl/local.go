package fl

import (
	"math/rand/v2"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// LocalTrainer is ClientUpdate for one client that trains outside a
// simulated round: a real device (dpfl-client participate) holding its own
// data. It runs exactly the local training of a simulated client. Not safe
// for concurrent use; buffers are allocated once.
type LocalTrainer struct{ t *clientTrainer }

// NewLocalTrainer returns a trainer of m with the job's client
// configuration (which must be valid: see ClientConfig.Validate).
func NewLocalTrainer(m model.Model, cfg ClientConfig) *LocalTrainer {
	return &LocalTrainer{newClientTrainer(m, cfg)}
}

// Train runs the configured E epochs of minibatch SGD at learning rate lr
// (the round's η_l) from global on the examples idx of ds and writes
// Δ = x_local − global into delta (both of length m.NumParams()). It
// returns the mean training loss. rng drives the shuffles.
func (l *LocalTrainer) Train(delta, global []float32, ds *data.Dataset, idx []int32, lr float64, rng *rand.Rand) float64 {
	return l.t.train(delta, global, ds, idx, l.t.cfg.Epochs, float32(lr), rng)
}
