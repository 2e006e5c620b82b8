package job

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/fl"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// deviceStages are the names devices see (RoundStatus.Stage) for the
// protocol's stages: devices join and advertise their keys in one stage,
// "join".
var deviceStages = map[secagg.Stage]string{
	secagg.StageAdvertiseKeys: types.StageJoin,
	secagg.StageShareKeys:     types.StageShareKeys,
	secagg.StageMaskedInput:   types.StageMaskedInput,
	secagg.StageUnmask:        types.StageUnmask,
}

// deviceRound is the live state of one protocol instance with devices,
// the server's end of the participate routes: as the instance's
// secagg.ServerTransport it publishes the open stage and its deadline to
// polling devices; it admits devices (join), and lets a message through
// to the instance's secagg.Server only from the device its round token
// was issued to, in the stage it belongs to. Its fields are guarded by mu.
type deviceRound struct {
	mu       sync.Mutex
	round    int
	attempt  int
	stage    string // published: a types.Stage name
	deadline time.Time
	srv      *secagg.Server
	info     types.JoinInfo // the per-round part of every JoinInfo
	max      int
	// tokens maps each round token to its client ID and owner to the
	// device it was issued to; joined maps the ID of each device that
	// joined this attempt to its client ID.
	tokens map[string]secagg.ClientID
	owner  map[string]string
	joined map[string]secagg.ClientID
	// changed, if set, is told (outside mu) that the published status
	// changed: a stage opened or closed, or a device advertised its keys
	// (publishRound, participate_status.go).
	changed func()
}

// notify tells changed, if set, that the status changed.
func (dr *deviceRound) notify() {
	if dr.changed != nil {
		dr.changed()
	}
}

// Open publishes stage and its deadline to the devices (ServerTransport);
// the devices' messages go to the server as they come, so there is no done
// channel.
func (dr *deviceRound) Open(_ context.Context, stage secagg.Stage, deadline time.Time) (<-chan struct{}, error) {
	dr.mu.Lock()
	dr.stage, dr.deadline = deviceStages[stage], deadline
	dr.mu.Unlock()
	dr.notify()
	return nil, nil
}

// Close publishes that no stage is open: the server unmasks the sum, or
// the instance ended.
func (dr *deviceRound) Close() {
	dr.mu.Lock()
	dr.stage = types.StageWaiting
	dr.mu.Unlock()
	dr.notify()
}

// join gives device deviceID a client ID and a round token bound to it.
func (dr *deviceRound) join(deviceID string) (types.JoinInfo, error) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.stage != types.StageJoin {
		return types.JoinInfo{}, fmt.Errorf("%w: round %d (attempt %d) is not open for joining (stage %s)", ErrConflict, dr.round, dr.attempt, dr.stage)
	}
	if id, ok := dr.joined[deviceID]; ok {
		return types.JoinInfo{}, fmt.Errorf("%w: device %s already joined round %d (attempt %d) as client %d; a device joins each attempt of a round once", ErrConflict, deviceID, dr.round, dr.attempt, id)
	}
	if len(dr.tokens) >= dr.max {
		return types.JoinInfo{}, fmt.Errorf("%w: round %d is full (%d devices)", ErrConflict, dr.round, dr.max)
	}
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return types.JoinInfo{}, err
	}
	tok := hex.EncodeToString(b[:])
	id := secagg.ClientID(len(dr.tokens) + 1)
	dr.tokens[tok], dr.owner[tok], dr.joined[deviceID] = id, deviceID, id
	info := dr.info
	info.DeviceID, info.ClientID, info.Token = deviceID, id, tok
	return info, nil
}

// client is the client ID of device deviceID's round token, if the round
// is in stage want. A token issued to another device is ErrForbidden.
func (dr *deviceRound) client(jobID, deviceID, token string, want secagg.Stage) (secagg.ClientID, error) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	id, ok := dr.tokens[token]
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: unknown client token for round %d attempt %d of job %s (join this round first)", ErrConflict, dr.round, dr.attempt, jobID)
	case dr.owner[token] != deviceID:
		return 0, fmt.Errorf("%w: the client token of round %d attempt %d was issued to another device, not %s", ErrForbidden, dr.round, dr.attempt, deviceID)
	case dr.stage != deviceStages[want]:
		return 0, fmt.Errorf("%w: round %d is in stage %s, not %s", ErrConflict, dr.round, dr.stage, deviceStages[want])
	}
	return id, nil
}

// moved turns the server's refusal of a message that came too late (the
// stage closed, or the instance aborted, while it was in flight) into
// ErrConflict, as if the stage check had caught it; other errors pass.
func (dr *deviceRound) moved(err error) error {
	if errors.Is(err, secagg.ErrWrongStage) || errors.Is(err, secagg.ErrTooFewSurvivors) {
		return fmt.Errorf("%w: round %d attempt %d has moved on: %v", ErrConflict, dr.round, dr.attempt, err)
	}
	return err
}

func (m *Manager) liveRound(jobID string) *deviceRound {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[jobID]
}

// setLiveRound makes dr the job's open round (nil: none), and has the
// change published to the other replicas (publishRound).
func (m *Manager) setLiveRound(jobID string, dr *deviceRound) {
	m.mu.Lock()
	if dr == nil {
		delete(m.live, jobID)
	} else {
		m.live[jobID] = dr
	}
	m.mu.Unlock()
	m.publishRound(jobID)
}

// DeviceRound reports the job's open round for participants. An unknown
// job is storage.ErrNotFound; a simulated job is ErrConflict. Under
// Leadership it answers from memory, with no store request: the job's
// spec and state as last read, and its round as its leader last published
// it, or this replica's own live round when it leads the job
// (participate_status.go).
func (m *Manager) DeviceRound(jobID string) (types.RoundStatus, error) {
	if ps := m.participation(); ps != nil {
		if st, ok, err := ps.round(jobID); ok {
			return st, err
		}
	}
	state, spec, err := m.deviceJob(jobID)
	if err != nil {
		return types.RoundStatus{}, err
	}
	if m.lead != nil && !state.Terminal() && m.term(jobID) == nil {
		// The status feed is (re)loading and this replica does not run
		// the job: "waiting" would tell a device in a round that the
		// round went on without it.
		return types.RoundStatus{}, fmt.Errorf("%w: this replica is loading the devices jobs' round status; retry shortly", storage.ErrUnavailable)
	}
	st := types.RoundStatus{JobID: jobID, State: state, Stage: types.StageWaiting, CohortSize: spec.Sampling.CohortSize}
	m.liveStatus(jobID, &st)
	return st, nil
}

func (m *Manager) deviceJob(jobID string) (types.JobState, types.Spec, error) {
	s, err := m.get(jobID, false)
	if err != nil {
		return "", types.Spec{}, err
	}
	if s.Spec.Population.Source != "devices" {
		return "", types.Spec{}, notDevices(jobID, s.Spec.Population.Source)
	}
	return s.State, s.Spec, nil
}

// checkDevicesJob checks that jobID is a devices job: from memory under
// Leadership (read once), else from the store.
func (m *Manager) checkDevicesJob(jobID string) error {
	if ps := m.participation(); ps != nil {
		j, err := ps.job(jobID)
		if err == nil && j.source != "devices" {
			err = notDevices(jobID, j.source)
		}
		return err
	}
	_, _, err := m.deviceJob(jobID)
	return err
}

// Join admits enrolled device deviceID (see AuthenticateDevice) to the
// open round's join stage and gives it a client ID, a round token bound
// to the device, and the round's model. ErrConflict when no round is
// accepting devices, the cohort is full, or the device already joined
// this attempt of the round: a device contributes at most once to each
// attempt's sum.
func (m *Manager) Join(jobID, deviceID string) (types.JoinInfo, error) {
	if deviceID == "" {
		return types.JoinInfo{}, fmt.Errorf("%w: joining needs an enrolled device", ErrUnauthorized)
	}
	if err := m.checkDevicesJob(jobID); err != nil {
		return types.JoinInfo{}, err
	}
	dr := m.liveRound(jobID)
	if dr == nil {
		return types.JoinInfo{}, fmt.Errorf("%w: job %s has no round open for joining; poll GET /v1/jobs/%s/participate", ErrConflict, jobID, jobID)
	}
	return dr.join(deviceID)
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

// device finds the open round and the client ID of device deviceID's
// round token, in stage want.
func (m *Manager) device(jobID, deviceID, token string, want secagg.Stage) (*deviceRound, secagg.ClientID, error) {
	dr := m.liveRound(jobID)
	if dr == nil {
		return nil, 0, fmt.Errorf("%w: job %s has no open round", ErrConflict, jobID)
	}
	id, err := dr.client(jobID, deviceID, token, want)
	return dr, id, err
}

// deviceRequest is the server's request of stage want to the device.
func deviceRequest[M any](m *Manager, jobID, deviceID, token string, want secagg.Stage, get func(*secagg.Server, secagg.ClientID) (M, error)) (M, error) {
	var zero M
	dr, id, err := m.device(jobID, deviceID, token, want)
	if err != nil {
		return zero, err
	}
	msg, err := get(dr.srv, id)
	if err != nil {
		return zero, dr.moved(err)
	}
	return msg, nil
}

// deviceMessage hands the device's message of stage want, signed as
// from, to the server.
func (m *Manager) deviceMessage(jobID, deviceID, token string, want secagg.Stage, from secagg.ClientID, send func(*secagg.Server) error) error {
	dr, id, err := m.device(jobID, deviceID, token, want)
	if err != nil {
		return err
	}
	if from != id {
		return &secagg.PeerError{Client: id, Err: fmt.Errorf("message signed as client %d", from)}
	}
	return dr.moved(send(dr.srv))
}

// AdvertiseKeys takes a device's keys (stage advertise_keys, which
// devices see as join).
func (m *Manager) AdvertiseKeys(jobID, deviceID, token string, msg secagg.AdvertiseKeysMsg) error {
	err := m.deviceMessage(jobID, deviceID, token, secagg.StageAdvertiseKeys, msg.From, func(s *secagg.Server) error { return s.AdvertiseKeys(msg) })
	if err == nil {
		m.publishRound(jobID) // one more joined
	}
	return err
}

// ShareKeysRequest is the device's request of stage share_keys: its
// neighbours' keys.
func (m *Manager) ShareKeysRequest(jobID, deviceID, token string) (secagg.ShareKeysRequest, error) {
	return deviceRequest(m, jobID, deviceID, token, secagg.StageShareKeys, (*secagg.Server).ShareKeysRequest)
}

// ShareKeys takes a device's encrypted shares (stage share_keys).
func (m *Manager) ShareKeys(jobID, deviceID, token string, msg secagg.ShareKeysMsg) error {
	return m.deviceMessage(jobID, deviceID, token, secagg.StageShareKeys, msg.From, func(s *secagg.Server) error { return s.ShareKeys(msg) })
}

// MaskedInputRequest is the device's request of stage masked_input: the
// shares sent to it.
func (m *Manager) MaskedInputRequest(jobID, deviceID, token string) (secagg.MaskedInputRequest, error) {
	return deviceRequest(m, jobID, deviceID, token, secagg.StageMaskedInput, (*secagg.Server).MaskedInputRequest)
}

// MaskedInput takes a device's masked input (stage masked_input).
func (m *Manager) MaskedInput(jobID, deviceID, token string, msg secagg.MaskedInputMsg) error {
	return m.deviceMessage(jobID, deviceID, token, secagg.StageMaskedInput, msg.From, func(s *secagg.Server) error { return s.MaskedInput(msg) })
}

// UnmaskRequest is the device's request of stage unmask.
func (m *Manager) UnmaskRequest(jobID, deviceID, token string) (secagg.UnmaskRequest, error) {
	return deviceRequest(m, jobID, deviceID, token, secagg.StageUnmask, (*secagg.Server).UnmaskRequest)
}

// Unmask takes a device's unmasking shares (stage unmask).
func (m *Manager) Unmask(jobID, deviceID, token string, msg secagg.UnmaskMsg) error {
	return m.deviceMessage(jobID, deviceID, token, secagg.StageUnmask, msg.From, func(s *secagg.Server) error { return s.Unmask(msg) })
}

// deviceRunner runs a devices job's rounds: each is one secure
// aggregation instance among the devices that join, driven by
// secagg.ServerDriver over the deviceRound, then the DP release and the
// server step (fl.ServerUpdate, the same as for simulated clients).
type deviceRunner struct {
	m      *Manager
	jobID  string
	spec   types.Spec
	server fl.ServerOptimizer
	noise  dp.Params
	// ddg, under the distributed discrete Gaussian, is the job's plan:
	// each round publishes it with a fresh rotation seed (JoinInfo's
	// Distributed), the devices add the noise, and the server only
	// decodes (fl.ReleaseDDGSum).
	ddg    *fl.DDGParams
	secure *rand.Rand
	update *fl.ServerUpdate // from server, made by the first round
	avg    []float32
	dec    []float64
	// attempts numbers the attempts devices see (Manager.deviceAttempt).
	attempts attemptBase
}

// round runs attempt of round r from params and applies the server step.
func (d *deviceRunner) round(ctx context.Context, r, attempt int, params []float32) (fl.RoundStats, error) {
	spec := d.spec
	enc, err := secagg.NewEncoding(spec.Sampling.CohortSize, spec.DP.ClipNorm)
	if err != nil {
		return fl.RoundStats{}, err
	}
	var ddg *fl.DDGRound
	if d.ddg != nil {
		rd, err := fl.NewDDGRound(*d.ddg)
		if err != nil {
			return fl.RoundStats{}, err
		}
		ddg = &rd
	}
	// Under Leadership a round that an earlier leader opened is a new
	// attempt to the devices (participate_status.go); the statistics
	// count this run's attempts.
	shown, err := d.m.deviceAttempt(d.jobID, r, attempt, &d.attempts)
	if err != nil {
		return fl.RoundStats{}, err
	}
	dr, err := d.newRound(r, shown, params, enc, ddg)
	if err != nil {
		return fl.RoundStats{}, err
	}
	jobID := d.jobID
	dr.changed = func() { d.m.publishRound(jobID) }
	d.m.setLiveRound(d.jobID, dr)
	defer d.m.setLiveRound(d.jobID, nil)
	driver := &secagg.ServerDriver{
		Server: dr.srv, Transport: dr, Clients: spec.Sampling.CohortSize,
		AdvertiseTimeout: seconds(spec.SecAgg.JoinTimeoutSeconds), StageTimeout: seconds(spec.SecAgg.StageTimeoutSeconds),
	}
	res, err := d.runInstance(ctx, driver) // driver.Run, stages timed (metrics.go)
	if err != nil {
		return fl.RoundStats{}, err
	}
	denom := float64(len(res.Survivors))
	if spec.DP.Enabled {
		denom = float64(spec.Sampling.CohortSize)
	}
	if err := d.release(res.Sum, enc, ddg, denom); err != nil {
		return fl.RoundStats{}, err
	}
	if d.update == nil {
		d.update = &fl.ServerUpdate{Optimizer: d.server, LR: spec.Server.LR, Schedule: fl.Schedule(spec.Server.LRSchedule), Rounds: spec.Rounds}
	}
	d.update.Apply(params, d.avg, r)
	return fl.RoundStats{
		Cohort:         len(res.Survivors) + len(res.Dropped),
		AggregateStats: fl.AggregateStats{Clients: len(res.Survivors), SecAgg: fl.NewSecAggStats(res, enc, attempt)},
	}, nil
}

// newRound makes attempt of round r's instance, its session bound to the
// job, round and attempt, waiting for its first stage to open. Under the
// distributed discrete Gaussian (ddg set) the devices' inputs are the
// rotated vectors of ddg.Params.PaddedDim values, and the round's
// parameters and seed go to every device that joins.
func (d *deviceRunner) newRound(r, attempt int, params []float32, enc secagg.Encoding, ddg *fl.DDGRound) (*deviceRound, error) {
	spec := d.spec
	session := make([]byte, 16)
	if _, err := crand.Read(session); err != nil {
		return nil, err
	}
	session = fmt.Appendf(session, "|%s|%d|%d", d.jobID, r, attempt)
	dim := len(params)
	if ddg != nil {
		dim = ddg.Params.PaddedDim
	}
	srv, err := secagg.NewServer(secagg.ServerConfig{
		Session: session, Dim: dim, MinClients: spec.SecAgg.MinClients, DropoutRate: spec.SecAgg.DropoutRate, Workers: d.m.workers,
	})
	if err != nil {
		return nil, err
	}
	dr := &deviceRound{
		round: r, attempt: attempt, stage: types.StageWaiting, srv: srv, max: spec.Sampling.CohortSize,
		tokens: map[string]secagg.ClientID{}, owner: map[string]string{}, joined: map[string]secagg.ClientID{},
		info: types.JoinInfo{
			JobID: d.jobID, Round: r, Attempt: attempt, Session: session, Encoding: enc, ClipNorm: spec.DP.ClipNorm,
			Client: spec.Client, ClientLR: spec.Client.LR * fl.Schedule(spec.Client.LRSchedule).Factor(r, spec.Rounds),
			Model: spec.Model, Params: slices.Clone(params),
		},
	}
	if ddg != nil {
		dr.info.Distributed = distributedRound(ddg)
	}
	return dr, nil
}

// distributedRound is the wire form of a round of the distributed
// discrete Gaussian (fl.NewDDGParams reads it back on the device).
func distributedRound(r *fl.DDGRound) *types.DistributedRound {
	p := r.Params
	return &types.DistributedRound{
		ClipNorm: p.Clip, Dimension: p.Dim, PaddedDimension: p.PaddedDim, ModulusBits: p.Bits,
		Gamma: p.Gamma, Beta: p.Beta, Sigma2: p.Sigma2.RatString(), Clients: p.Clients, RotationSeed: r.Seed[:],
	}
}

// seconds converts a spec's timeout in seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// release decodes the unmasked sum into d.avg, the round's mean update:
// with the server's noise added in the ring (fl.ReleaseSecureSum), or,
// under the distributed discrete Gaussian, with only the devices'
// (fl.ReleaseDDGSum).
func (d *deviceRunner) release(sum []uint32, enc secagg.Encoding, ddg *fl.DDGRound, denom float64) error {
	n := len(sum)
	if ddg != nil {
		n = ddg.Params.Dim
	}
	if len(d.avg) != n {
		d.avg = make([]float32, n)
	}
	if ddg != nil {
		return fl.ReleaseDDGSum(d.avg, sum, *ddg, ddg.Rotation(), denom)
	}
	if len(d.dec) != n { // the central mechanism's decode buffer only
		d.dec = make([]float64, n)
	}
	fl.ReleaseSecureSum(d.avg, d.dec, sum, enc, d.noise, denom, d.secure)
	return nil
}
