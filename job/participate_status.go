package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/singleflight"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/internal/leader"
	"github.com/dpfl/dpfl/secagg"
	"github.com/dpfl/dpfl/storage"
)

// Devices jobs over several replicas (issue 18, docs/ha.md). Devices poll
// GET /v1/jobs/{id}/participate several times a second, on whichever
// replica they reach; only the job's leader runs its rounds. So:
//
//   - The leader publishes the job's public round status (what DeviceRound
//     returns, plus its own replica ID, URL and term) to etcd whenever it
//     changes: a round opened or closed, a stage opened or closed, and the
//     count of joined devices (at most every joinedEvery). The record,
//     E "@participate/" <job> under the Elector's prefix E (job IDs never
//     begin with "@", so no election can hold it), is written with the
//     term's lease and only if the term's fence still holds
//     (leader.Fence.Cmp), in one Txn: a stale leader cannot publish, and
//     the record goes with the leader's lease.
//   - Every replica keeps, fed by one etcd watch on E (loaded once with a
//     Get, then watched from the next revision, and loaded again when the
//     watch breaks or is compacted), the records and the live election
//     keys. A record is shown only while its term lives: while the
//     election key it names exists with the term's revision. Each
//     devices job's spec (immutable) and state are read from the store
//     once; the state is read again whenever the job's election changes
//     (a leader resigns when the job ends, or loses its term), so that a
//     job's end reaches every replica without a read per poll.
//   - DeviceRound answers from that memory: on the leader from its live
//     round, elsewhere from the record. AuthenticateDevice answers from
//     memory too (devicecache.go). So a poll makes no etcd request.
//   - Joins and protocol messages need the live round: the API forwards
//     them to the URL in the record (DeviceLeader), and answers 503 when
//     no replica leads the job.
//   - A device round in flight when its leader fails is lost with it (its
//     keys and tokens were in the leader's memory). The next leader charges
//     the round again and runs it as a new attempt: the attempt number
//     devices see is recorded in etcd (E "@attempts/" <job>, fenced, with
//     no lease, so that it outlives the leader) before each attempt opens,
//     and a new leader continues from it. A device therefore sees a round
//     and attempt it has not joined, and joins it; its old round token is
//     unknown to the new leader, which refuses it (409), and the device
//     gives that round up.
//
// Without Leadership (one server, bbolt or etcd without elections) none of
// this runs: DeviceRound reads the store and the live round as before.

// Sub-prefixes of the Elector's prefix used here.
const (
	participateDir = "@participate/"
	attemptsDir    = "@attempts/"
)

// Timings of the participate status.
const (
	// joinedEvery is the least time between two records that differ only
	// in the count of joined devices.
	joinedEvery = 200 * time.Millisecond
	// watchProbe is how often a watch asks for a progress notification,
	// and watchSilence how long it may hear nothing before it is taken
	// for broken (watch).
	watchProbe   = time.Second
	watchSilence = 3 * time.Second
	// refreshDelay gathers the job state reads that election changes
	// call for (a replica's leaving deletes its keys of every job at
	// once).
	refreshDelay = 20 * time.Millisecond
)

// ErrNoLeader: no replica leads the job right now (under Leadership), so
// a device's join or protocol message cannot be handled; it may be retried
// shortly (HTTP 503 with Retry-After).
var ErrNoLeader = errors.New("no replica leads the job right now")

// participateRecord is a devices job's round status as its leader
// publishes it.
type participateRecord struct {
	Round    int        `json:"round"`
	Attempt  int        `json:"attempt"`
	Stage    string     `json:"stage"`
	Deadline *time.Time `json:"deadline,omitempty"`
	Joined   int        `json:"joined"`
	// Leader and URL are the leading replica's ID and address; Fence and
	// Epoch its term's election key and that key's CreateRevision.
	Leader string `json:"leader"`
	URL    string `json:"url"`
	Fence  string `json:"fence"`
	Epoch  int64  `json:"epoch"`
}

func (r participateRecord) equal(o participateRecord) bool {
	d1, d2 := r.Deadline, o.Deadline
	r.Deadline, o.Deadline = nil, nil
	if r != o || (d1 == nil) != (d2 == nil) {
		return false
	}
	return d1 == nil || d1.Equal(*d2)
}

// onlyJoined reports whether r and o differ at most in Joined.
func (r participateRecord) onlyJoined(o participateRecord) bool {
	o.Joined = r.Joined
	return r.equal(o)
}

// cachedJob is what DeviceRound needs of a job: its spec's population
// source and cohort size (immutable) and its state.
type cachedJob struct {
	source string
	cohort int
	state  types.JobState
}

// participateState is a replica's participate state under Leadership: the
// watch-fed records, the jobs, the device credentials, and the publishers
// of the jobs it leads. Its methods are safe for concurrent use.
type participateState struct {
	m      *Manager
	cli    *clientv3.Client
	prefix string // the Elector's prefix
	ctx    context.Context

	devices *deviceCache

	mu      sync.RWMutex
	ready   bool                         // loaded at least once
	records map[string]participateRecord // job → its last record
	fences  map[string]int64             // live election key → CreateRevision
	jobs    map[string]*cachedJob
	touched map[string]uint64 // job → seq of its last election or record event
	seq     uint64
	loaded  uint64 // how many times load replaced everything

	loads singleflight.Group

	pubMu sync.Mutex
	pubs  map[string]*publisher

	refreshMu sync.Mutex
	pending   map[string]bool
	kick      chan struct{}
}

// participation is m's participate state, started on first use; nil
// without Leadership, without an etcd client, or after Shutdown.
func (m *Manager) participation() *participateState {
	l := m.lead
	if l == nil {
		return nil
	}
	l.participateOnce.Do(func() {
		cli := m.db.EtcdClient()
		if cli == nil || l.ctx.Err() != nil {
			return
		}
		ps := &participateState{
			m: m, cli: cli, prefix: l.Elector.Prefix(), ctx: l.ctx, devices: newDeviceCache(),
			records: map[string]participateRecord{}, fences: map[string]int64{}, jobs: map[string]*cachedJob{}, touched: map[string]uint64{},
			pubs: map[string]*publisher{}, pending: map[string]bool{}, kick: make(chan struct{}, 1),
		}
		l.participate = ps
		go ps.follow()
		go ps.refresher()
	})
	if l.ctx.Err() != nil {
		return nil
	}
	return l.participate
}

// ReplicaID is this replica's ID in the jobs' elections ("" without
// Leadership).
func (m *Manager) ReplicaID() string {
	if m.lead == nil {
		return ""
	}
	return m.lead.Elector.ID()
}

// follow keeps the records and election keys: load, watch, and load
// again whenever the watch ends, until the manager shuts down.
func (ps *participateState) follow() {
	backoff := 50 * time.Millisecond
	for ps.ctx.Err() == nil {
		rev, err := ps.load()
		if err != nil {
			if ps.ctx.Err() == nil {
				ps.m.log.Warn("loading the participate status of the devices jobs", "err", err)
			}
			sleepCtx(ps.ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		ps.watch(rev)
	}
}

// load reads every record and election key at one revision, replacing
// what was known, and has every cached job's state read again (events may
// have been missed). It returns the revision read.
func (ps *participateState) load() (int64, error) {
	ctx, cancel := context.WithTimeout(ps.ctx, leaderCall)
	defer cancel()
	resp, err := ps.cli.Get(ctx, ps.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	records, fences := map[string]participateRecord{}, map[string]int64{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), ps.prefix)
		if id, ok := strings.CutPrefix(rest, participateDir); ok {
			var rec participateRecord
			if json.Unmarshal(kv.Value, &rec) == nil {
				records[id] = rec
			}
		} else if electionJob(rest) != "" {
			fences[string(kv.Key)] = kv.CreateRevision
		}
	}
	ps.mu.Lock()
	again := ps.ready
	ps.records, ps.fences, ps.ready = records, fences, true
	ps.loaded++
	var stale []string
	if again {
		for id, j := range ps.jobs {
			if !j.state.Terminal() {
				stale = append(stale, id)
			}
		}
	}
	ps.mu.Unlock()
	ps.refresh(stale...)
	return resp.Header.Revision, nil
}

// electionJob is the job of a key below the Elector's prefix that is an
// election key ("<job>/<lease>"), or "".
func electionJob(rest string) string {
	if strings.HasPrefix(rest, "@") {
		return ""
	}
	id, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return id
}

// watch applies the changes after revision rev until the watch ends,
// then marks the records not loaded: until load succeeds again, polls
// read the store (and answer 503 while it cannot be read) instead of
// showing what may be stale.
//
// A watch whose connection broke without an error (a link that drops
// bytes garbles the HTTP/2 stream, and nothing arrives any more) would
// stall silently, so every watchProbe the replica asks etcd for a
// progress notification (one request a second, whatever the polls), and
// a watch that heard nothing, event or progress, for watchSilence is
// ended and loaded again.
func (ps *participateState) watch(rev int64) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ps.ctx))
	defer func() {
		cancel()
		ps.mu.Lock()
		ps.ready = false
		ps.mu.Unlock()
	}()
	var heard atomic.Int64
	heard.Store(time.Now().UnixNano())
	go func() {
		t := time.NewTicker(watchProbe)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if time.Since(time.Unix(0, heard.Load())) > watchSilence {
				ps.m.log.Warn("the participate status watch went silent; loading again")
				cancel()
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, watchProbe)
			_ = ps.cli.RequestProgress(pctx) // the answer comes on the watch
			pcancel()
		}
	}()
	for wr := range ps.cli.Watch(ctx, ps.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if wr.Err() != nil || wr.Canceled {
			return // compacted, no etcd leader, closed: load again
		}
		heard.Store(time.Now().UnixNano())
		ps.apply(wr.Events)
	}
}

// apply takes in one watch response's events.
func (ps *participateState) apply(evs []*clientv3.Event) {
	var stale []string
	ps.mu.Lock()
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		rest := strings.TrimPrefix(key, ps.prefix)
		if id, ok := strings.CutPrefix(rest, participateDir); ok {
			ps.seq++
			ps.touched[id] = ps.seq
			if ev.Type == mvccpb.DELETE {
				delete(ps.records, id)
				continue
			}
			var rec participateRecord
			if json.Unmarshal(ev.Kv.Value, &rec) != nil {
				delete(ps.records, id)
				continue
			}
			ps.records[id] = rec
			continue
		}
		id := electionJob(rest)
		if id == "" {
			continue
		}
		ps.seq++
		ps.touched[id] = ps.seq
		if ev.Type == mvccpb.PUT {
			ps.fences[key] = ev.Kv.CreateRevision
			continue
		}
		delete(ps.fences, key)
		// A leader resigns when its job ends: read the job's state.
		if j := ps.jobs[id]; j != nil && !j.state.Terminal() {
			stale = append(stale, id)
		}
	}
	ps.mu.Unlock()
	ps.refresh(stale...)
}

// isReady reports whether the records have been loaded.
func (ps *participateState) isReady() bool {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.ready
}

// record is job id's record if its term lives.
func (ps *participateState) record(id string) (participateRecord, bool) {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	rec, ok := ps.records[id]
	if !ok || rec.Epoch == 0 || ps.fences[rec.Fence] != rec.Epoch {
		return participateRecord{}, false
	}
	return rec, true
}

// job is job id's cached spec and state, read from the store the first
// time (concurrent first reads share one).
func (ps *participateState) job(id string) (cachedJob, error) {
	ps.mu.RLock()
	j, ok := ps.jobs[id]
	var cached cachedJob
	if ok {
		cached = *j
	}
	ps.mu.RUnlock()
	if ok {
		return cached, nil
	}
	v, err, _ := ps.loads.Do(id, func() (any, error) {
		ps.mu.RLock()
		before, loads := ps.touched[id], ps.loaded
		ps.mu.RUnlock()
		s, err := ps.m.get(id, false)
		if err != nil {
			return nil, err
		}
		j := &cachedJob{source: s.Spec.Population.Source, cohort: s.Spec.Sampling.CohortSize, state: s.State}
		ps.mu.Lock()
		if old := ps.jobs[id]; old != nil {
			j = old
		} else {
			ps.jobs[id] = j
		}
		changed := ps.touched[id] != before || ps.loaded != loads
		out := *j
		ps.mu.Unlock()
		if changed && !out.state.Terminal() {
			ps.refresh(id) // its election changed, or events were missed, while it was read
		}
		return out, nil
	})
	if err != nil {
		return cachedJob{}, err
	}
	return v.(cachedJob), nil
}

// refresh has the state of jobs ids read again, in the background.
func (ps *participateState) refresh(ids ...string) {
	if len(ids) == 0 {
		return
	}
	ps.refreshMu.Lock()
	for _, id := range ids {
		ps.pending[id] = true
	}
	ps.refreshMu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// refresher reads the states that refresh asked for, retrying those that
// could not be read, until the manager shuts down.
func (ps *participateState) refresher() {
	backoff := leaderRetry
	for {
		select {
		case <-ps.ctx.Done():
			return
		case <-ps.kick:
		}
		sleepCtx(ps.ctx, refreshDelay)
		ps.refreshMu.Lock()
		ids := make([]string, 0, len(ps.pending))
		for id := range ps.pending {
			ids = append(ids, id)
		}
		clear(ps.pending)
		ps.refreshMu.Unlock()
		var failed []string
		for _, id := range ids {
			s, err := ps.m.get(id, false)
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				failed = append(failed, id)
				continue
			}
			ps.mu.Lock()
			if j := ps.jobs[id]; j != nil && err == nil {
				j.state = s.State
			}
			ps.mu.Unlock()
		}
		if len(failed) > 0 && ps.ctx.Err() == nil {
			sleepCtx(ps.ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			ps.refresh(failed...)
			continue
		}
		backoff = leaderRetry
	}
}

// notDevices refuses a device's request for a simulated job.
func notDevices(jobID, source string) error {
	return fmt.Errorf("%w: job %s simulates its clients (population.source %q); devices cannot join it", ErrConflict, jobID, source)
}

// round is DeviceRound from memory; ok is false while nothing is loaded
// yet (DeviceRound then reads the store).
func (ps *participateState) round(jobID string) (st types.RoundStatus, ok bool, err error) {
	if !ps.isReady() {
		return st, false, nil
	}
	j, err := ps.job(jobID)
	if err != nil {
		return st, true, err
	}
	if j.source != "devices" {
		return st, true, notDevices(jobID, j.source)
	}
	st = types.RoundStatus{JobID: jobID, State: j.state, Stage: types.StageWaiting, CohortSize: j.cohort}
	if j.state.Terminal() {
		return st, true, nil
	}
	if ps.m.term(jobID) != nil {
		// This replica leads the job: its live round is the freshest.
		ps.m.liveStatus(jobID, &st)
		return st, true, nil
	}
	if rec, ok := ps.record(jobID); ok && rec.Round > 0 {
		st.Round, st.Attempt, st.Stage, st.Joined = rec.Round, rec.Attempt, rec.Stage, rec.Joined
		if rec.Deadline != nil {
			dl := *rec.Deadline
			st.Deadline = &dl
		}
	}
	return st, true, nil
}

// DeviceLeader says where job jobID's joins and protocol messages are
// handled: "" here (this replica runs the job's rounds, or it is the only
// server), otherwise the URL of the replica that leads the job, for the
// API to forward them to. It fails with ErrNoLeader when no replica leads
// the job now (or none has opened a round of it yet).
func (m *Manager) DeviceLeader(jobID string) (string, error) {
	if m.lead == nil || m.term(jobID) != nil {
		return "", nil
	}
	self := m.lead.Elector.ID()
	ps := m.participation()
	if ps != nil && ps.isReady() {
		rec, ok := ps.record(jobID)
		if !ok || rec.URL == "" || rec.Leader == self {
			return "", fmt.Errorf("%w: job %s; retry shortly", ErrNoLeader, jobID)
		}
		return rec.URL, nil
	}
	// Nothing loaded yet: ask etcd (a join, not a poll).
	l := m.jobLeader(jobID)
	if l == nil || l.URL == "" || l.Replica == self {
		return "", fmt.Errorf("%w: job %s; retry shortly", ErrNoLeader, jobID)
	}
	return l.URL, nil
}

// liveStatus fills st's round from the job's live round on this replica,
// if it has one.
func (m *Manager) liveStatus(jobID string, st *types.RoundStatus) {
	dr := m.liveRound(jobID)
	if dr == nil {
		return
	}
	dr.mu.Lock()
	defer dr.mu.Unlock()
	st.Round, st.Attempt, st.Stage = dr.round, dr.attempt, dr.stage
	st.Joined = dr.srv.Accepted(secagg.StageAdvertiseKeys)
	dl := dr.deadline
	st.Deadline = &dl
}

// publishRound has job jobID's round status published, if this replica
// leads the job (a no-op otherwise, and without Leadership).
func (m *Manager) publishRound(jobID string) {
	if m.lead == nil {
		return
	}
	t := m.term(jobID)
	if t == nil {
		return
	}
	if ps := m.participation(); ps != nil {
		ps.publisher(jobID, t).poke()
	}
}

// publisher is the writer of one job's record during one term: one write
// at a time, of the latest status, so that changes made while a write is
// in flight go out together in the next.
type publisher struct {
	ps    *participateState
	jobID string
	term  *leader.Term
	key   string
	kick  chan struct{}

	last    participateRecord
	lastAt  time.Time
	lastRev int64 // revision of the last write (0: none)
}

// publisher returns job jobID's publisher for term t, starting it if
// needed.
func (ps *participateState) publisher(jobID string, t *leader.Term) *publisher {
	ps.pubMu.Lock()
	defer ps.pubMu.Unlock()
	if p := ps.pubs[jobID]; p != nil && p.term == t {
		return p
	}
	p := &publisher{ps: ps, jobID: jobID, term: t, key: ps.prefix + participateDir + jobID, kick: make(chan struct{}, 1)}
	ps.pubs[jobID] = p
	go p.run()
	return p
}

func (p *publisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// snapshot is the job's status now.
func (p *publisher) snapshot() participateRecord {
	m, f := p.ps.m, p.term.Fence()
	rec := participateRecord{Stage: types.StageWaiting, Leader: m.lead.Elector.ID(), URL: m.lead.URL, Fence: f.Key, Epoch: f.Rev}
	var st types.RoundStatus
	m.liveStatus(p.jobID, &st)
	rec.Round, rec.Attempt, rec.Joined, rec.Deadline = st.Round, st.Attempt, st.Joined, st.Deadline
	if st.Stage != "" {
		rec.Stage = st.Stage
	}
	return rec
}

// run publishes each change until the term ends, then removes the last
// record written if no later leader has replaced it.
func (p *publisher) run() {
	defer p.retire()
	done := p.term.Done()
	for {
		select {
		case <-done:
			return
		case <-p.kick:
		}
		backoff := 50 * time.Millisecond
		for {
			rec := p.snapshot()
			if p.lastRev > 0 && rec.equal(p.last) {
				break
			}
			if p.lastRev > 0 && rec.onlyJoined(p.last) {
				if wait := joinedEvery - time.Since(p.lastAt); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-done:
						t.Stop()
						return
					case <-t.C:
					case <-p.kick: // perhaps a stage change: look again now
						t.Stop()
					}
					continue
				}
			}
			err := p.write(rec)
			if errors.Is(err, storage.ErrFenced) {
				return
			}
			if err != nil {
				if p.term.Err() == nil {
					p.ps.m.log.Warn("publishing a devices job's round status", "job", p.jobID, "err", err)
				}
				sleepCtx(p.term.Context(), backoff)
				if p.term.Err() != nil {
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
		}
	}
}

// write puts rec with the term's lease if the term's fence holds.
func (p *publisher) write(rec participateRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.term.Context(), leaderCall)
	defer cancel()
	resp, err := p.ps.cli.Txn(ctx).If(p.term.Fence().Cmp()).
		Then(clientv3.OpPut(p.key, string(b), clientv3.WithLease(p.term.Lease()))).Commit()
	switch {
	case err != nil:
		return err
	case !resp.Succeeded:
		return fmt.Errorf("publishing job %s's round status: %w", p.jobID, storage.ErrFenced)
	}
	p.last, p.lastAt, p.lastRev = rec, time.Now(), resp.Header.Revision
	return nil
}

// retire forgets the publisher and deletes its last record unless a later
// write (the next leader's) replaced it: a record outlives its term only
// until its lease ends, and is never shown after the term (record).
func (p *publisher) retire() {
	p.ps.pubMu.Lock()
	if p.ps.pubs[p.jobID] == p {
		delete(p.ps.pubs, p.jobID)
	}
	p.ps.pubMu.Unlock()
	if p.lastRev == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(p.ps.cli.Ctx(), leaderCall)
	defer cancel()
	_, _ = p.ps.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p.key), "=", p.lastRev)).
		Then(clientv3.OpDelete(p.key)).Commit()
}

// attemptMark is the last device attempt a leader of a job opened.
type attemptMark struct {
	Round   int `json:"round"`
	Attempt int `json:"attempt"`
}

// attemptBase is a run's offset of the attempt numbers of its rounds
// (deviceAttempt).
type attemptBase struct {
	read  bool // the first round's has been read from etcd
	round int
	prior int // attempts of round that earlier leaders opened
}

// deviceAttempt is the attempt number devices see for attempt (from 1)
// of round r in this run of the job: attempt itself with one server; under
// Leadership, attempt after the last attempt that an earlier leader opened
// of round r, recorded in etcd (fenced) before the attempt opens, so that
// a round restarted by a new leader is a new attempt to the devices. Only
// the run's first round can have been opened before (a leader opens round
// r after round r-1 committed), so base is read from etcd once per run.
// An error wraps storage.ErrFenced (no longer leading) or
// storage.ErrUnavailable.
func (m *Manager) deviceAttempt(jobID string, r, attempt int, base *attemptBase) (int, error) {
	if m.lead == nil {
		return attempt, nil
	}
	t, ps := m.term(jobID), m.participation()
	if t == nil || ps == nil {
		return 0, fmt.Errorf("round %d of job %s: %w: this replica no longer leads it", r, jobID, storage.ErrFenced)
	}
	key := ps.prefix + attemptsDir + jobID
	ctx, cancel := context.WithTimeout(t.Context(), leaderCall)
	defer cancel()
	switch {
	case !base.read:
		resp, err := ps.cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("reading the last attempt of job %s: %v: %w", jobID, err, storage.ErrUnavailable)
		}
		*base = attemptBase{read: true, round: r}
		var mark attemptMark
		if len(resp.Kvs) == 1 && json.Unmarshal(resp.Kvs[0].Value, &mark) == nil && mark.Round == r {
			base.prior = mark.Attempt
		}
	case base.round != r:
		base.round, base.prior = r, 0
	}
	n := base.prior + attempt
	b, _ := json.Marshal(attemptMark{Round: r, Attempt: n})
	resp, err := ps.cli.Txn(ctx).If(t.Fence().Cmp()).Then(clientv3.OpPut(key, string(b))).Commit()
	switch {
	case err != nil:
		return 0, fmt.Errorf("recording attempt %d of round %d of job %s: %v: %w", n, r, jobID, err, storage.ErrUnavailable)
	case !resp.Succeeded:
		return 0, fmt.Errorf("recording attempt %d of round %d of job %s: %w", n, r, jobID, storage.ErrFenced)
	}
	return n, nil
}
