package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/dpfl/dpfl/job"
	"github.com/dpfl/dpfl/secagg"
)

// The calls in this file are a device's: make their Client with the
// device's credential (New(base, credential)), not the API token.

// RoundStatus polls the open round of a devices job.
func (c *Client) RoundStatus(ctx context.Context, jobID string) (job.RoundStatus, error) {
	var st job.RoundStatus
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID)+"/participate", nil, &st)
	return st, err
}

// Participation is one device's part in one round: the round token that
// Join returned, which every later message presents next to the device's
// credential.
type Participation struct {
	c    *Client
	path string
	Info job.JoinInfo
}

// Join admits this device to the open round of a devices job, once per
// attempt of a round (a second join is a 409 *Error).
func (c *Client) Join(ctx context.Context, jobID string) (*Participation, error) {
	p := &Participation{c: c, path: "/v1/jobs/" + url.PathEscape(jobID) + "/participate"}
	if err := c.do(ctx, http.MethodPost, p.path+"/join", nil, &p.Info); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Participation) post(ctx context.Context, stage string, msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return p.c.do(ctx, http.MethodPost, p.path+"/"+stage, body, nil, job.ClientTokenHeader, p.Info.Token)
}

func (p *Participation) get(ctx context.Context, stage string, out any) error {
	return p.c.do(ctx, http.MethodGet, p.path+"/"+stage, nil, out, job.ClientTokenHeader, p.Info.Token)
}

// Advertise sends round 0's public keys.
func (p *Participation) Advertise(ctx context.Context, m secagg.AdvertiseMsg) error {
	return p.post(ctx, "advertise", m)
}

// Keys fetches the neighbours' public keys (stage share_keys).
func (p *Participation) Keys(ctx context.Context) (m secagg.KeysMsg, err error) {
	return m, p.get(ctx, "keys", &m)
}

// ShareKeys sends the encrypted shares.
func (p *Participation) ShareKeys(ctx context.Context, m secagg.ShareKeysMsg) error {
	return p.post(ctx, "shares", m)
}

// Shares fetches the shares addressed to this device (stage masked_input).
func (p *Participation) Shares(ctx context.Context) (m secagg.SharesMsg, err error) {
	return m, p.get(ctx, "shares", &m)
}

// MaskedInput sends the masked input.
func (p *Participation) MaskedInput(ctx context.Context, m secagg.MaskedInputMsg) error {
	return p.post(ctx, "masked-input", m)
}

// UnmaskRequest fetches what the server asks to unmask (stage unmask).
func (p *Participation) UnmaskRequest(ctx context.Context) (m secagg.UnmaskRequestMsg, err error) {
	return m, p.get(ctx, "unmask", &m)
}

// Unmask sends the unmasking shares.
func (p *Participation) Unmask(ctx context.Context, m secagg.UnmaskMsg) error {
	return p.post(ctx, "unmask", m)
}

// SavedInput is what 'dpfl-client participate --save-inputs' writes for
// every round the device took part in: the global model it trained from
// and the encoded update it sent (masked) to the server. It never leaves
// the device; audits and the end-to-end tests use it to check the
// server's sum.
type SavedInput struct {
	Round    int             `json:"round"`
	Attempt  int             `json:"attempt"`
	ClientID secagg.ClientID `json:"client_id"`
	Encoding secagg.Encoding `json:"encoding"`
	Global   []float32       `json:"global"`
	Input    []uint32        `json:"input"`
}
