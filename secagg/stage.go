package secagg

import "errors"

// Stage is one stage of a protocol instance: rounds 0, 1, 2 and 4 of
// Bonawitz et al. 2017, Fig. 4 (round 3, ConsistencyCheck, belongs to the
// malicious-server variant and is not implemented). In each stage the
// server sends every client still in the instance a request (nothing in
// advertise_keys) and the client answers with one message; the stage's
// name is the same word in Go (the message types), in JSON and in the
// participate routes.
type Stage int

const (
	// StageAdvertiseKeys is round 0: a client sends AdvertiseKeysMsg.
	StageAdvertiseKeys Stage = iota
	// StageShareKeys is round 1: ShareKeysRequest, then ShareKeysMsg.
	StageShareKeys
	// StageMaskedInput is round 2: MaskedInputRequest, then
	// MaskedInputMsg.
	StageMaskedInput
	// StageUnmask is round 4: UnmaskRequest, then UnmaskMsg.
	StageUnmask

	// The server's states after the last stage.
	stageFinished
	stageAborted
)

// Stages are the four protocol stages in order.
var Stages = [...]Stage{StageAdvertiseKeys, StageShareKeys, StageMaskedInput, StageUnmask}

var stageNames = [...]string{"advertise_keys", "share_keys", "masked_input", "unmask", "finished", "aborted"}

// String is the stage's name: advertise_keys, share_keys, masked_input or
// unmask ("finished" and "aborted" for a server past the last stage).
func (s Stage) String() string {
	if s < 0 || int(s) >= len(stageNames) {
		return "unknown stage"
	}
	return stageNames[s]
}

// ErrWrongStage is wrapped by every error for a call or message in the
// wrong stage (also inside a *PeerError); the state machine is unchanged
// by it. A transport can tell a late message (the stage closed while it
// was in flight) from a bad one with errors.Is.
var ErrWrongStage = errors.New("out of stage order")
