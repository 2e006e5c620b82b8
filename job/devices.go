package job

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// Stages of a round with real devices, as GET /v1/jobs/{id}/participate
// reports them. Each protocol stage is a round of Bonawitz et al. 2017,
// Fig. 4; the server closes a stage when every expected device has
// answered or the stage's deadline passes, and goes on without the late.
const (
	// StageWaiting: no round is open (between rounds, or the job ended).
	StageWaiting = "waiting"
	// StageJoin: devices join (POST .../join) and advertise their keys.
	StageJoin = "join"
	// StageShareKeys: devices fetch their neighbours' keys and send
	// encrypted shares.
	StageShareKeys = "share_keys"
	// StageMaskedInput: devices fetch the shares sent to them and send
	// their masked input.
	StageMaskedInput = "masked_input"
	// StageUnmask: devices fetch the unmask request and send shares.
	StageUnmask = "unmask"
)

// ClientTokenHeader carries the per-round token that join returns; every
// later message of that device in that round presents it next to the
// device's credential, so one participant cannot speak for another's
// client ID. The token is bound to the device that joined: another
// enrolled device presenting it is refused (ErrForbidden).
const ClientTokenHeader = "X-DPFL-Client-Token"

// RoundStatus is what a participant polls.
type RoundStatus struct {
	JobID string           `json:"job_id"`
	State storage.JobState `json:"state"`
	// Round and Attempt identify the open protocol instance (0 when
	// waiting). Attempt > 1 after an abort below threshold.
	Round   int    `json:"round"`
	Attempt int    `json:"attempt"`
	Stage   string `json:"stage"`
	// Deadline is when the stage closes (the join stage may be extended
	// until secagg.min_clients devices are present).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Joined counts the devices that advertised keys in this attempt.
	Joined int `json:"joined"`
	// CohortSize is the most devices a round takes.
	CohortSize int `json:"cohort_size"`
}

// JoinInfo is what a device needs to take part in one round.
type JoinInfo struct {
	JobID string `json:"job_id"`
	// DeviceID is the enrolled device that joined.
	DeviceID string          `json:"device_id"`
	Round    int             `json:"round"`
	Attempt  int             `json:"attempt"`
	ClientID secagg.ClientID `json:"client_id"`
	// Token is the device's token for this round (ClientTokenHeader),
	// valid only together with the same device's credential.
	Token string `json:"token"`
	// Session binds the protocol instance (secagg.ServerConfig.Session).
	Session []byte `json:"session"`
	// Encoding is the fixed-point encoding of the update.
	Encoding secagg.Encoding `json:"encoding"`
	// ClipNorm is C: the device clips its delta before encoding
	// (fl.EncodeSecureInput).
	ClipNorm float64    `json:"clip_norm"`
	Client   ClientSpec `json:"client"`
	// ClientLR is this round's client learning rate (client.lr under its
	// schedule).
	ClientLR float64 `json:"client_lr"`
	Model    string  `json:"model"`
	// Params is the global model x_t the round starts from.
	Params []float32 `json:"params"`
}

// deviceRound is the live state of one protocol instance with devices.
// Its fields are guarded by mu; wake gets a token whenever a message is
// accepted, so the runner re-checks whether the stage can close.
type deviceRound struct {
	mu       sync.Mutex
	wake     chan struct{}
	round    int
	attempt  int
	stage    string
	deadline time.Time
	srv      *secagg.Server
	info     JoinInfo // the per-round part of every JoinInfo
	max      int
	tokens   map[string]secagg.ClientID
	answered map[string]int // stage → devices whose message was accepted
	// joined maps the ID of each device that joined this attempt to its
	// client ID, and owner maps each round token to the device it was
	// issued to. The first Join makes both.
	joined map[string]secagg.ClientID
	owner  map[string]string
}

func (m *Manager) liveRound(jobID string) *deviceRound {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[jobID]
}

func (m *Manager) setLiveRound(jobID string, dr *deviceRound) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if dr == nil {
		delete(m.live, jobID)
		return
	}
	m.live[jobID] = dr
}

// DeviceRound reports the job's open round for participants. An unknown
// job is storage.ErrNotFound; a simulated job is ErrConflict.
func (m *Manager) DeviceRound(jobID string) (RoundStatus, error) {
	j, spec, err := m.deviceJob(jobID)
	if err != nil {
		return RoundStatus{}, err
	}
	st := RoundStatus{JobID: jobID, State: j.State, Stage: StageWaiting, CohortSize: spec.Sampling.CohortSize}
	if dr := m.liveRound(jobID); dr != nil {
		dr.mu.Lock()
		defer dr.mu.Unlock()
		st.Round, st.Attempt, st.Stage, st.Joined = dr.round, dr.attempt, dr.stage, dr.answered[StageJoin]
		dl := dr.deadline
		st.Deadline = &dl
	}
	return st, nil
}

func (m *Manager) deviceJob(jobID string) (storage.Job, Spec, error) {
	s, err := m.get(jobID, false)
	if err != nil {
		return storage.Job{}, Spec{}, err
	}
	if s.Spec.Population.Source != "devices" {
		return storage.Job{}, Spec{}, fmt.Errorf("%w: job %s simulates its clients (population.source %q); devices cannot join it", ErrConflict, jobID, s.Spec.Population.Source)
	}
	return s.Job, s.Spec, nil
}

// Join admits enrolled device deviceID (see AuthenticateDevice) to the
// open round's join stage and gives it a client ID, a round token bound
// to the device, and the round's model. ErrConflict when no round is
// accepting devices, the cohort is full, or the device already joined
// this attempt of the round: a device contributes at most once to each
// attempt's sum.
func (m *Manager) Join(jobID, deviceID string) (JoinInfo, error) {
	if deviceID == "" {
		return JoinInfo{}, fmt.Errorf("%w: joining needs an enrolled device", ErrUnauthorized)
	}
	if _, _, err := m.deviceJob(jobID); err != nil {
		return JoinInfo{}, err
	}
	dr := m.liveRound(jobID)
	if dr == nil {
		return JoinInfo{}, fmt.Errorf("%w: job %s has no round open for joining; poll GET /v1/jobs/%s/participate", ErrConflict, jobID, jobID)
	}
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.stage != StageJoin {
		return JoinInfo{}, fmt.Errorf("%w: round %d (attempt %d) is past joining (stage %s)", ErrConflict, dr.round, dr.attempt, dr.stage)
	}
	if id, ok := dr.joined[deviceID]; ok {
		return JoinInfo{}, fmt.Errorf("%w: device %s already joined round %d (attempt %d) as client %d; a device joins each attempt of a round once", ErrConflict, deviceID, dr.round, dr.attempt, id)
	}
	if len(dr.tokens) >= dr.max {
		return JoinInfo{}, fmt.Errorf("%w: round %d is full (%d devices)", ErrConflict, dr.round, dr.max)
	}
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return JoinInfo{}, err
	}
	tok := hex.EncodeToString(b[:])
	id := secagg.ClientID(len(dr.tokens) + 1)
	if dr.joined == nil {
		dr.joined, dr.owner = map[string]secagg.ClientID{}, map[string]string{}
	}
	dr.tokens[tok] = id
	dr.joined[deviceID], dr.owner[tok] = id, deviceID
	info := dr.info
	info.DeviceID, info.ClientID, info.Token = deviceID, id, tok
	return info, nil
}

// DeviceClient returns the client ID that token holds for device
// deviceID in the job's open round (ok false if none, or if the token
// was issued to another device), so that a message refused before it
// reaches the protocol can still name its sender.
func (m *Manager) DeviceClient(jobID, deviceID, token string) (id secagg.ClientID, ok bool) {
	dr := m.liveRound(jobID)
	if dr == nil {
		return 0, false
	}
	dr.mu.Lock()
	defer dr.mu.Unlock()
	id, ok = dr.tokens[token]
	if !ok || dr.owner[token] != deviceID {
		return 0, false
	}
	return id, true
}

// device finds the round and client ID of device deviceID's round token
// and checks that the round is in stage want. A token issued to another
// device is ErrForbidden.
func (m *Manager) device(jobID, deviceID, token, want string) (*deviceRound, secagg.ClientID, error) {
	dr := m.liveRound(jobID)
	if dr == nil {
		return nil, 0, fmt.Errorf("%w: job %s has no open round", ErrConflict, jobID)
	}
	dr.mu.Lock()
	id, ok := dr.tokens[token]
	owner := dr.owner[token]
	stage := dr.stage
	dr.mu.Unlock()
	if !ok {
		return nil, 0, fmt.Errorf("%w: unknown client token for round %d attempt %d of job %s (join this round first)", ErrConflict, dr.round, dr.attempt, jobID)
	}
	if owner != deviceID {
		return nil, 0, fmt.Errorf("%w: the client token of round %d attempt %d was issued to another device, not %s", ErrForbidden, dr.round, dr.attempt, deviceID)
	}
	if stage != want {
		return nil, 0, fmt.Errorf("%w: round %d is in stage %s, not %s", ErrConflict, dr.round, stage, want)
	}
	return dr, id, nil
}

// accept runs one accepted-message step under the round's lock and wakes
// the runner.
func (dr *deviceRound) accept(stage string, from, id secagg.ClientID, step func() error) error {
	if from != id {
		return &secagg.PeerError{Client: id, Err: fmt.Errorf("message signed as client %d", from)}
	}
	if err := step(); err != nil {
		return err
	}
	dr.mu.Lock()
	dr.answered[stage]++
	dr.mu.Unlock()
	select {
	case dr.wake <- struct{}{}:
	default:
	}
	return nil
}

// Advertise takes a device's round-0 keys (join stage).
func (m *Manager) Advertise(jobID, deviceID, token string, msg secagg.AdvertiseMsg) error {
	dr, id, err := m.device(jobID, deviceID, token, StageJoin)
	if err != nil {
		return err
	}
	return dr.accept(StageJoin, msg.From, id, func() error { return dr.srv.Advertise(msg) })
}

// Keys is the device's round-1 input (share_keys stage).
func (m *Manager) Keys(jobID, deviceID, token string) (secagg.KeysMsg, error) {
	dr, id, err := m.device(jobID, deviceID, token, StageShareKeys)
	if err != nil {
		return secagg.KeysMsg{}, err
	}
	return dr.srv.Keys(id)
}

// ShareKeys takes a device's encrypted shares (share_keys stage).
func (m *Manager) ShareKeys(jobID, deviceID, token string, msg secagg.ShareKeysMsg) error {
	dr, id, err := m.device(jobID, deviceID, token, StageShareKeys)
	if err != nil {
		return err
	}
	return dr.accept(StageShareKeys, msg.From, id, func() error { return dr.srv.ShareKeys(msg) })
}

// Shares is the device's round-2 input (masked_input stage).
func (m *Manager) Shares(jobID, deviceID, token string) (secagg.SharesMsg, error) {
	dr, id, err := m.device(jobID, deviceID, token, StageMaskedInput)
	if err != nil {
		return secagg.SharesMsg{}, err
	}
	return dr.srv.Shares(id)
}

// MaskedInput takes a device's masked input (masked_input stage).
func (m *Manager) MaskedInput(jobID, deviceID, token string, msg secagg.MaskedInputMsg) error {
	dr, id, err := m.device(jobID, deviceID, token, StageMaskedInput)
	if err != nil {
		return err
	}
	return dr.accept(StageMaskedInput, msg.From, id, func() error { return dr.srv.MaskedInput(msg) })
}

// UnmaskRequest is the device's round-4 input (unmask stage).
func (m *Manager) UnmaskRequest(jobID, deviceID, token string) (secagg.UnmaskRequestMsg, error) {
	dr, id, err := m.device(jobID, deviceID, token, StageUnmask)
	if err != nil {
		return secagg.UnmaskRequestMsg{}, err
	}
	return dr.srv.UnmaskRequest(id)
}

// Unmask takes a device's unmasking shares (unmask stage).
func (m *Manager) Unmask(jobID, deviceID, token string, msg secagg.UnmaskMsg) error {
	dr, id, err := m.device(jobID, deviceID, token, StageUnmask)
	if err != nil {
		return err
	}
	return dr.accept(StageUnmask, msg.From, id, func() error { return dr.srv.Unmask(msg) })
}

// deviceRunner runs a devices job's rounds: each is one secure
// aggregation instance among the devices that join, then the DP release
// and the server step.
type deviceRunner struct {
	m      *Manager
	jobID  string
	spec   Spec
	server fl.ServerOptimizer
	noise  dp.Params
	secure *rand.Rand
	avg    []float32
	pseudo []float32
	dec    []float64
}

// round runs attempt of round r from params and applies the server step.
func (d *deviceRunner) round(ctx context.Context, r, attempt int, params []float32) (fl.RoundStats, error) {
	spec := d.spec
	enc, err := secagg.NewEncoding(spec.Sampling.CohortSize, spec.DP.ClipNorm)
	if err != nil {
		return fl.RoundStats{}, err
	}
	session := make([]byte, 16)
	if _, err := crand.Read(session); err != nil {
		return fl.RoundStats{}, err
	}
	session = fmt.Appendf(session, "|%s|%d|%d", d.jobID, r, attempt)
	srv, err := secagg.NewServer(secagg.ServerConfig{
		Session: session, Dim: len(params), MinClients: spec.SecAgg.MinClients, DropoutRate: spec.SecAgg.DropoutRate,
	})
	if err != nil {
		return fl.RoundStats{}, err
	}
	dr := &deviceRound{
		wake: make(chan struct{}, 1), round: r, attempt: attempt, srv: srv,
		max: spec.Sampling.CohortSize, tokens: map[string]secagg.ClientID{}, answered: map[string]int{},
		info: JoinInfo{
			JobID: d.jobID, Round: r, Attempt: attempt, Session: session, Encoding: enc, ClipNorm: spec.DP.ClipNorm,
			Client: spec.Client, ClientLR: spec.Client.LR * spec.Client.LRSchedule.Factor(r, spec.Rounds),
			Model: spec.Model, Params: slices.Clone(params),
		},
	}
	stageTimeout := time.Duration(spec.SecAgg.StageTimeoutSeconds * float64(time.Second))
	dr.open(StageJoin, time.Duration(spec.SecAgg.JoinTimeoutSeconds*float64(time.Second)))
	d.m.setLiveRound(d.jobID, dr)
	defer d.m.setLiveRound(d.jobID, nil)

	// Join: wait for a full cohort, or for the deadline with at least
	// MinClients; with fewer, keep the round open.
	err = dr.wait(ctx, func(up bool) bool {
		n := dr.answered[StageJoin]
		return n >= dr.max || (up && n >= spec.SecAgg.MinClients)
	})
	if err != nil {
		return fl.RoundStats{}, err
	}
	u1, err := dr.next(StageShareKeys, stageTimeout, srv.CloseAdvertise)
	if err != nil {
		return fl.RoundStats{}, err
	}
	if err := dr.wait(ctx, func(up bool) bool { return up || dr.answered[StageShareKeys] >= u1 }); err != nil {
		return fl.RoundStats{}, err
	}
	u2, err := dr.next(StageMaskedInput, stageTimeout, srv.CloseShareKeys)
	if err != nil {
		return fl.RoundStats{}, err
	}
	if err := dr.wait(ctx, func(up bool) bool { return up || dr.answered[StageMaskedInput] >= u2 }); err != nil {
		return fl.RoundStats{}, err
	}
	u3, err := dr.next(StageUnmask, stageTimeout, srv.CloseMaskedInput)
	if err != nil {
		return fl.RoundStats{}, err
	}
	if err := dr.wait(ctx, func(up bool) bool { return up || dr.answered[StageUnmask] >= u3 }); err != nil {
		return fl.RoundStats{}, err
	}
	dr.mu.Lock()
	dr.stage = StageWaiting
	dr.mu.Unlock()
	res, err := srv.Finish()
	if err != nil {
		return fl.RoundStats{}, err
	}
	sp := srv.Params()

	denom := float64(len(res.Survivors))
	if spec.DP.Enabled {
		denom = float64(spec.Sampling.CohortSize)
	}
	d.release(res.Sum, enc, denom)
	for i, v := range d.avg {
		d.pseudo[i] = -v
	}
	if k := spec.Server.LRSchedule.Kind; k != "" && k != "constant" {
		d.server.SetLR(float32(spec.Server.LR * spec.Server.LRSchedule.Factor(r, spec.Rounds)))
	}
	d.server.Step(params, d.pseudo)
	return fl.RoundStats{
		Cohort: u1,
		AggregateStats: fl.AggregateStats{
			Clients: len(res.Survivors),
			SecAgg: &fl.SecAggStats{
				Clients: u1, Survivors: len(res.Survivors), Dropped: len(res.Dropped),
				Neighbors: sp.Neighbors, Threshold: sp.Threshold, FracBits: enc.FracBits, Attempt: attempt,
			},
		},
	}, nil
}

func (d *deviceRunner) release(sum []uint32, enc secagg.Encoding, denom float64) {
	n := len(sum)
	if len(d.avg) != n {
		d.avg, d.pseudo, d.dec = make([]float32, n), make([]float32, n), make([]float64, n)
	}
	fl.ReleaseSecureSum(d.avg, d.dec, sum, enc, d.noise, denom, d.secure)
}

// open starts stage with the given time to its deadline (lock held by the
// caller or the round not yet shared).
func (dr *deviceRound) open(stage string, timeout time.Duration) {
	dr.stage = stage
	dr.deadline = time.Now().Add(timeout)
}

// next closes the current stage with closeFn and opens stage; it returns
// the number of devices that answered the closed stage, the ones expected
// in the next.
func (dr *deviceRound) next(stage string, timeout time.Duration, closeFn func() error) (int, error) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	n := dr.answered[dr.stage]
	if err := closeFn(); err != nil {
		dr.stage = StageWaiting
		return 0, err
	}
	dr.open(stage, timeout)
	return n, nil
}

// wait blocks until ready (called under the round's lock with whether the
// deadline has passed) holds, or ctx ends.
func (dr *deviceRound) wait(ctx context.Context, ready func(deadlinePassed bool) bool) error {
	for {
		dr.mu.Lock()
		left := time.Until(dr.deadline)
		ok := ready(left <= 0)
		dr.mu.Unlock()
		if ok {
			return nil
		}
		if left <= 0 || left > time.Second {
			left = time.Second
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-dr.wake:
			t.Stop()
		case <-t.C:
		}
	}
}
