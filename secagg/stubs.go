package secagg

// Signatures the core implementation fills in (this file is replaced by it).

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
)

// ErrTooFewSurvivors aborts an instance: fewer than the threshold (or
// MinClients) remain, so no sum is revealed.
var ErrTooFewSurvivors = errors.New("secagg: too few surviving clients")

// PeerError is a message refused because of what one client sent; Client
// names it.
type PeerError struct {
	Client ClientID
	Err    error
}

func (e *PeerError) Error() string { return fmt.Sprintf("secagg: client %d: %v", e.Client, e.Err) }
func (e *PeerError) Unwrap() error { return e.Err }

// ChooseParams picks k and t for n clients.
func ChooseParams(n int, dropoutRate float64) (Params, error) { panic("todo") }

// Server is the server's state machine of one instance.
type Server struct{}

// NewServer starts an instance in round 0.
func NewServer(cfg ServerConfig) (*Server, error) { panic("todo") }

// Advertise records a client's round-0 message.
func (s *Server) Advertise(m AdvertiseMsg) error { panic("todo") }

// CloseAdvertise ends round 0 and fixes U1, the graph and the params.
func (s *Server) CloseAdvertise() error { panic("todo") }

// Keys is the round-1 input of client id.
func (s *Server) Keys(id ClientID) (KeysMsg, error) { panic("todo") }

// ShareKeys records a client's round-1 message.
func (s *Server) ShareKeys(m ShareKeysMsg) error { panic("todo") }

// CloseShareKeys ends round 1 and fixes U2.
func (s *Server) CloseShareKeys() error { panic("todo") }

// Shares is the round-2 input of client id.
func (s *Server) Shares(id ClientID) (SharesMsg, error) { panic("todo") }

// MaskedInput adds a client's round-2 masked vector to the running sum.
func (s *Server) MaskedInput(m MaskedInputMsg) error { panic("todo") }

// CloseMaskedInput ends round 2 and fixes U3.
func (s *Server) CloseMaskedInput() error { panic("todo") }

// UnmaskRequest is the round-4 input of client id.
func (s *Server) UnmaskRequest(id ClientID) (UnmaskRequestMsg, error) { panic("todo") }

// Unmask records a client's round-4 shares.
func (s *Server) Unmask(m UnmaskMsg) error { panic("todo") }

// Finish reconstructs the dropped clients' mask keys and the survivors'
// self-mask seeds and returns the unmasked sum.
func (s *Server) Finish() (Result, error) { panic("todo") }

// Client is one client's state machine of one instance.
type Client struct{}

// NewClient generates the client's keys and returns its round-0 message.
func NewClient(id ClientID, session []byte, rand io.Reader) (*Client, AdvertiseMsg, error) {
	panic("todo")
}

// ShareKeys is round 1.
func (c *Client) ShareKeys(m KeysMsg) (ShareKeysMsg, error) { panic("todo") }

// MaskedInput is round 2; x is the client's encoded input.
func (c *Client) MaskedInput(m SharesMsg, x []uint32) (MaskedInputMsg, error) { panic("todo") }

// Unmask is round 4.
func (c *Client) Unmask(m UnmaskRequestMsg) (UnmaskMsg, error) { panic("todo") }

// Encoding maps clipped float32 updates into Z_{2^32} and back.
type Encoding struct {
	// FracBits is f: a value v encodes as round(v·2^f).
	FracBits int `json:"frac_bits"`
}

// NewEncoding picks f for up to n clients with clip norm C.
func NewEncoding(n int, clip float64) (Encoding, error) { panic("todo") }

// Encode writes the stochastic rounding of x·2^f into dst.
func (e Encoding) Encode(dst []uint32, x []float32, rng *rand.Rand) { panic("todo") }

// Decode writes the signed value of sum, divided by 2^f, into dst.
func (e Encoding) Decode(dst []float64, sum []uint32) { panic("todo") }

// RoundingSlack is the largest L2 norm that stochastic rounding can add to
// a vector of length d: √d·2^−f.
func (e Encoding) RoundingSlack(d int) float64 { panic("todo") }
