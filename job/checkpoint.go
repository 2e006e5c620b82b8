package job

import (
	"encoding/binary"
	"fmt"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/storage"
)

// modelState is what a round changes and a checkpoint keeps: the global
// model's parameters, the server optimizer's state and, for SCAFFOLD, the
// control variates.
type modelState struct {
	params   []float32
	server   fl.ServerOptimizer
	scaffold *fl.Scaffold
}

// restore builds job j's model state at its last committed round: the
// checkpoint of that round in db, or the initial model θ_0 (initParams)
// before the first. pop sizes SCAFFOLD's control variates.
func restore(db *storage.DB, j storage.Job, spec types.Spec, mdl model.Model, pop data.Population) (*modelState, error) {
	server, err := fl.NewServerOptimizer(serverOptConfig(spec.Server))
	if err != nil {
		return nil, err
	}
	s := &modelState{params: make([]float32, mdl.NumParams()), server: server}
	if spec.Algorithm == "scaffold" && pop != nil {
		s.scaffold = &fl.Scaffold{N: pop.NumClients()}
	}
	ck, ok, err := db.Checkpoint(j.ID)
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	case ok && ck.Round == j.Round && len(ck.Params) == len(s.params):
		copy(s.params, ck.Params)
		if err := unmarshalAlgState(ck.OptState, s.server, s.scaffold); err != nil {
			return nil, fmt.Errorf("restoring server optimizer: %w", err)
		}
	case j.Round == 0:
		initParams(mdl, s.params, spec.Seed)
	default:
		return nil, fmt.Errorf("checkpoint of round %d missing or mismatched", j.Round)
	}
	return s, nil
}

// checkpoint is the state after round r, for storage.
func (s *modelState) checkpoint(r int) (storage.Checkpoint, error) {
	st, err := marshalAlgState(s.server, s.scaffold)
	return storage.Checkpoint{Round: r, Params: s.params, OptState: st}, err
}

// marshalAlgState is the checkpoint's optimizer state: the server
// optimizer's, followed for SCAFFOLD by the control variates.
func marshalAlgState(server fl.ServerOptimizer, scaffold *fl.Scaffold) ([]byte, error) {
	st, err := server.MarshalState()
	if err != nil || scaffold == nil {
		return st, err
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(st)))
	return append(append(b, st...), scaffold.MarshalState()...), nil
}

// unmarshalAlgState restores what marshalAlgState wrote.
func unmarshalAlgState(b []byte, server fl.ServerOptimizer, scaffold *fl.Scaffold) error {
	if scaffold == nil {
		return server.UnmarshalState(b)
	}
	if len(b) < 8 || binary.LittleEndian.Uint64(b) > uint64(len(b)-8) {
		return fmt.Errorf("scaffold checkpoint state malformed (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if err := server.UnmarshalState(b[8 : 8+n]); err != nil {
		return err
	}
	return scaffold.UnmarshalState(b[8+n:])
}
