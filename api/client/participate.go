package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/secagg"
)

// The calls in this file are a device's: make their Client with the
// device's credential (New(base, credential)), not the API token.

// RoundStatus polls the open round of a devices job. A 503 (the server
// cannot answer now: its store is unavailable, or, among several
// replicas, a job is between leaders) is asked again after
// unavailableWait, up to maxUnavailableRetries times, before it is
// returned: a device polling through a failover goes on.
func (c *Client) RoundStatus(ctx context.Context, jobID string) (types.RoundStatus, error) {
	for attempt := 0; ; attempt++ {
		var st types.RoundStatus
		err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(jobID)+"/participate", nil, &st)
		if !IsStatus(err, http.StatusServiceUnavailable) || attempt >= maxUnavailableRetries {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(unavailableWait):
		}
	}
}

// unavailableWait and maxUnavailableRetries bound how long RoundStatus
// waits out 503s: a failover takes about a lease TTL (5 s by default).
const (
	unavailableWait       = time.Second
	maxUnavailableRetries = 10
)

// DefaultPoll is how often a Participation polls the round's stage.
const DefaultPoll = 200 * time.Millisecond

// Participation is one device's part in one round, the device's end of
// secure aggregation over HTTP: a secagg.ClientTransport for
// secagg.ClientDriver. It holds the round token that Join returned, which
// every later message presents next to the device's credential. Each
// stage has one route, named as the stage (secagg.Stage.String): GET
// fetches the server's request, POST sends the device's message.
type Participation struct {
	c     *Client
	jobID string
	path  string
	// Info is what join returned: the client ID, session, model and token.
	Info types.JoinInfo
	// Poll is how often Await polls the round's stage (≤ 0: DefaultPoll).
	Poll time.Duration
}

// Join admits this device to the open round of a devices job, once per
// attempt of a round (a second join is a 409 *Error).
func (c *Client) Join(ctx context.Context, jobID string) (*Participation, error) {
	p := &Participation{c: c, jobID: jobID, path: "/v1/jobs/" + url.PathEscape(jobID) + "/participate"}
	if err := c.do(ctx, http.MethodPost, p.path+"/join", nil, &p.Info); err != nil {
		return nil, err
	}
	return p, nil
}

// deviceStages are the stages in the order a round goes through them, as
// RoundStatus names them: devices join and advertise keys in "join".
var deviceStages = []string{types.StageJoin, types.StageShareKeys, types.StageMaskedInput, types.StageUnmask}

func (p *Participation) post(ctx context.Context, stage secagg.Stage, msg any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return p.c.do(ctx, http.MethodPost, p.path+"/"+stage.String(), body, nil, types.ClientTokenHeader, p.Info.Token)
}

func (p *Participation) get(ctx context.Context, stage secagg.Stage, out any) error {
	return p.c.do(ctx, http.MethodGet, p.path+"/"+stage.String(), nil, out, types.ClientTokenHeader, p.Info.Token)
}

// Await polls the round until stage is open. It errors when the round
// went on without this device: it is past stage, in another round or
// attempt, or waiting (the instance ended or aborted).
func (p *Participation) Await(ctx context.Context, stage secagg.Stage) error {
	want := deviceStages[stage]
	poll := p.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	for {
		st, err := p.c.RoundStatus(ctx, p.jobID)
		if err != nil {
			return err
		}
		if st.Round != p.Info.Round || st.Attempt != p.Info.Attempt || st.Stage == types.StageWaiting ||
			slices.Index(deviceStages, st.Stage) > slices.Index(deviceStages, want) {
			return fmt.Errorf("round %d attempt %d went on without this device (now round %d attempt %d, stage %s)", p.Info.Round, p.Info.Attempt, st.Round, st.Attempt, st.Stage)
		}
		if st.Stage == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// AdvertiseKeys sends the device's public keys (stage advertise_keys).
func (p *Participation) AdvertiseKeys(ctx context.Context, m secagg.AdvertiseKeysMsg) error {
	return p.post(ctx, secagg.StageAdvertiseKeys, m)
}

// ShareKeysRequest fetches the neighbours' public keys (stage share_keys).
func (p *Participation) ShareKeysRequest(ctx context.Context) (m secagg.ShareKeysRequest, err error) {
	return m, p.get(ctx, secagg.StageShareKeys, &m)
}

// ShareKeys sends the encrypted shares (stage share_keys).
func (p *Participation) ShareKeys(ctx context.Context, m secagg.ShareKeysMsg) error {
	return p.post(ctx, secagg.StageShareKeys, m)
}

// MaskedInputRequest fetches the shares addressed to this device (stage
// masked_input).
func (p *Participation) MaskedInputRequest(ctx context.Context) (m secagg.MaskedInputRequest, err error) {
	return m, p.get(ctx, secagg.StageMaskedInput, &m)
}

// MaskedInput sends the masked input (stage masked_input).
func (p *Participation) MaskedInput(ctx context.Context, m secagg.MaskedInputMsg) error {
	return p.post(ctx, secagg.StageMaskedInput, m)
}

// UnmaskRequest fetches what the server asks to unmask (stage unmask).
func (p *Participation) UnmaskRequest(ctx context.Context) (m secagg.UnmaskRequest, err error) {
	return m, p.get(ctx, secagg.StageUnmask, &m)
}

// Unmask sends the unmasking shares (stage unmask).
func (p *Participation) Unmask(ctx context.Context, m secagg.UnmaskMsg) error {
	return p.post(ctx, secagg.StageUnmask, m)
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
	// Distributed is the round's distributed discrete Gaussian, when
	// the job uses it: Input is then already noisy (the device's share),
	// and decodes with these parameters and seed.
	Distributed *types.DistributedRound `json:"distributed,omitempty"`
}

var _ secagg.ClientTransport = (*Participation)(nil)
