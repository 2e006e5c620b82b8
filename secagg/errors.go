package secagg

import (
	"errors"
	"fmt"
)

// ErrTooFewSurvivors aborts an instance: fewer than the threshold t (or
// ServerConfig.MinClients) clients remain at some round, or some secret the
// server must reconstruct has fewer than t shares, so no sum is revealed
// (Bonawitz et al. 2017, Fig. 4: "if |U_i| < t, abort").
var ErrTooFewSurvivors = errors.New("secagg: too few surviving clients")

// PeerError is a message refused because of what one client sent; Client
// names it. On the server, Client is the sender of the refused message; on a
// client, it is the neighbour whose ciphertext or keys were bad. A refused
// message leaves the state machine unchanged, so the instance can go on with
// the other clients.
type PeerError struct {
	Client ClientID
	Err    error
}

// Error names the client first, so that logs and HTTP replies say whose
// message was refused.
func (e *PeerError) Error() string { return fmt.Sprintf("secagg: client %d: %v", e.Client, e.Err) }

// Unwrap gives the cause, e.g. ErrTooFewSurvivors for a message sent to an
// aborted instance.
func (e *PeerError) Unwrap() error { return e.Err }

func peerErr(id ClientID, format string, args ...any) error {
	return &PeerError{Client: id, Err: fmt.Errorf(format, args...)}
}
