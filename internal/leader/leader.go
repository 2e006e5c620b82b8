// Package leader elects one leader per federated-learning job among the
// replicas of the dpfl server and hands the leader a fence that makes every
// write of a stale leader fail inside etcd itself (issue 18).
//
// It is built on etcd's election recipe, package
// go.etcd.io/etcd/client/v3/concurrency (https://pkg.go.dev/go.etcd.io/etcd/client/v3/concurrency,
// source client/v3/concurrency/election.go and session.go in
// https://github.com/etcd-io/etcd). In that recipe every candidate writes a
// key "<election prefix>/<lease id in hex>" bound to its session's lease; the
// candidate whose key has the lowest CreateRevision under the prefix is the
// leader, and the others wait until every older key is deleted (because its
// owner resigned, or its lease expired or was revoked). The leader key's
// CreateRevision is therefore a strictly increasing epoch per job: a new
// leader's key is always created after the old one, so it has a larger
// revision.
//
// Model used here:
//
//   - One Elector per replica process owns one concurrency.Session (one
//     lease, TTL configurable, DefaultTTL = 5 s). All jobs this replica leads
//     hang off that lease, so a replica that stops renewing it (crash, pause,
//     partition) loses every job at once, within one TTL.
//   - Elector.Campaign blocks until this replica is the leader of a job and
//     returns a Term. A replica acts as leader only while its Term is live:
//     its session is alive and the election key is its own.
//   - Term.Fence gives the (Key, CreateRevision) pair. Every ledger append and
//     round commit must be one etcd transaction carrying the compare
//     CreateRevision(Key) == Rev (Fence.Cmp). If the leader key was deleted
//     (resign, lease expiry) or re-created, the compare fails and etcd
//     refuses the write, whatever the stale leader believes.
//
// Two traps found by the prototype are handled explicitly:
//
//  1. Winning concurrency.Election.Campaign is not proof of leadership.
//     Campaign writes the key, then waits (watches) for every older key to be
//     deleted, and returns success once they are, without re-reading its own
//     key. If the candidate's lease expired or was revoked while it waited
//     (partition, long GC or SIGSTOP pause, quorum loss and recovery), its
//     key is gone too, yet Campaign still returns nil: after quorum returned,
//     three replicas were told at once that they had won. Campaign here
//     therefore verifies with a linearizable read (see Term.Check) that the
//     key still exists with the revision held, that it is the oldest key
//     under the election prefix, and that the lease is still alive, and only
//     then returns a Term. A refused win is counted (Elector.Phantoms) and the
//     replica campaigns again.
//  2. A timed-out etcd request may have been applied: a timeout means
//     "unknown", never "not done". Nothing in this package treats a timeout
//     as a refusal: Check returns the error without ending the term (the
//     caller must not start a round on it, and may retry), and callers of
//     fenced writes must re-read to learn the outcome. The fence is what
//     makes such a retry safe.
//
// Term.Done is a liveness signal, not a safety one: the client notices an
// expired lease only when a keep-alive reply says so or when no reply came
// for one TTL (the client checks once a second), so Done may close up to
// about one second plus a round trip after etcd already expired the lease
// and another replica took over; a paused process notices nothing at all
// until it resumes. Correctness rests on the fence, checked by etcd.
package leader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// DefaultTTL is the lease TTL used when New is given ttl == 0: 5 seconds.
// A replica that stops renewing its lease loses leadership of all its jobs at
// most this long after its last successful renewal.
const DefaultTTL = 5 * time.Second

// MinTTL is the smallest lease TTL New accepts (smaller values are raised to
// it): 2 seconds. etcd reports a lease's remaining TTL in whole seconds,
// truncated, so a 1 s lease always reads 0 and the guard's liveness check
// could never pass; etcd itself raises TTLs below 1.5 × its election
// timeout, rounded up (2 s with etcd's default timing), anyway.
const MinTTL = 2 * time.Second

// Errors returned by this package. Wrapped errors carry detail; test with
// errors.Is.
var (
	// ErrNotLeader means etcd definitively says this replica does not lead
	// the job: the leader key is gone or was re-created, another key is
	// older, the lease has expired or been revoked, or the session ended.
	// A Term that returns it (from Check) has ended.
	ErrNotLeader = errors.New("leader: not the leader")

	// ErrNoLeader is returned by Elector.Leader when no replica currently
	// holds the job's election.
	ErrNoLeader = errors.New("leader: no leader elected")

	// ErrClosed is returned by Campaign after Elector.Close.
	ErrClosed = errors.New("leader: elector closed")

	// ErrBusy is returned by Campaign when this Elector already has a
	// Campaign in progress or a live Term for the same job: all of one
	// replica's candidacies for a job share one election key (it is named
	// after the session's lease), so two at once would share one term.
	ErrBusy = errors.New("leader: job already has a campaign or a term on this elector")

	// ErrResigned is the cause of a Term that ended through Term.Resign.
	ErrResigned = errors.New("leader: term resigned")

	// errSessionEnded is the cause of Terms ended by session loss.
	errSessionEnded = fmt.Errorf("%w: session ended (lease expired, revoked or no longer renewed)", ErrNotLeader)
)

// Fence identifies one leadership term of one job in etcd: Key is the
// election's leader key and Rev its CreateRevision (the epoch). It maps
// field-for-field to storage.Fence{Key string; Rev int64}; the storage layer
// adds clientv3.Compare(clientv3.CreateRevision(Key), "=", Rev) to every
// fenced write, so a write carrying the fence of a term that ended (its key
// was deleted by resignation or lease expiry, or replaced) is refused by
// etcd. A zero Fence fences nothing and must not be used.
type Fence struct {
	// Key is the full etcd key of the leader's election entry,
	// "<prefix><jobID>/<lease id in hex>".
	Key string
	// Rev is Key's CreateRevision (an etcd store revision), strictly
	// increasing from one term of a job to the next.
	Rev int64
}

// Cmp returns the etcd compare that holds exactly while this term's leader
// key exists with this CreateRevision: CreateRevision(Key) == Rev. A
// transaction with it in its If clause is applied only while the key still
// exists as this term created it, i.e. until the term's leader resigns or
// its lease expires or is revoked; no later term of the job can start before
// that. (The compare is false for a missing key, whose CreateRevision reads
// as 0.)
func (f Fence) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)
}

// Elector runs this replica's candidacies, one concurrency.Session (one
// etcd lease) for the whole process. Create it with New; it is safe for
// concurrent use by multiple goroutines.
//
// Session loss is handled automatically: when the session ends (lease expired
// or revoked, or not renewed for one TTL), every Term on it ends (Done
// closes) and the next Campaign grants a new lease and opens a new session.
// Only Close is final.
type Elector struct {
	cli    *clientv3.Client
	prefix string
	id     string
	ttl    int // seconds

	sessMu sync.Mutex // serialises session creation; guards sess
	sess   *concurrency.Session

	mu     sync.Mutex // guards closed and jobs
	closed bool
	jobs   map[string]struct{} // jobs with a Campaign in progress or a live Term

	phantoms atomic.Uint64

	// afterCampaign, when set (tests only), runs after concurrency's
	// Campaign returned success and before the guard verifies it.
	afterCampaign func(key string, rev int64, lease clientv3.LeaseID)
}

// New returns an Elector using cli. prefix is the etcd key prefix of all
// elections (for example "/dpfl/leader/"; a trailing "/" is added when
// missing); the election of job J lives under prefix+J+"/". id identifies
// this replica (for example its advertised address); it is the election
// value, returned by Leader so followers can redirect to the leader. ttl is
// the session lease TTL, rounded up to whole seconds (etcd leases have
// one-second granularity) and raised to MinTTL; 0 means DefaultTTL. New
// makes no request to etcd:
// the session is created by the first Campaign. It fails if cli is nil,
// prefix or id is empty, or ttl is negative.
func New(cli *clientv3.Client, prefix, id string, ttl time.Duration) (*Elector, error) {
	if cli == nil {
		return nil, errors.New("leader: nil etcd client")
	}
	if prefix == "" {
		return nil, errors.New("leader: empty key prefix")
	}
	if id == "" {
		return nil, errors.New("leader: empty replica id")
	}
	if ttl < 0 {
		return nil, fmt.Errorf("leader: negative ttl %v", ttl)
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < MinTTL {
		ttl = MinTTL
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	secs := int(math.Ceil(ttl.Seconds()))
	return &Elector{cli: cli, prefix: prefix, id: id, ttl: secs, jobs: map[string]struct{}{}}, nil
}

// ID returns the replica id this Elector campaigns with.
func (e *Elector) ID() string { return e.id }

// Prefix returns the key prefix of the elections, with its trailing "/".
// Keys under Prefix()+"@" belong to no job's election (job IDs cannot
// begin with "@"): the replicas' addresses live there (Advertise), and
// callers may keep other per-job records there too.
func (e *Elector) Prefix() string { return e.prefix }

// TTL returns the session lease TTL requested from etcd, in whole seconds.
func (e *Elector) TTL() time.Duration { return time.Duration(e.ttl) * time.Second }

// Phantoms returns how many times concurrency's Campaign reported a win that
// the leadership guard refused because etcd disagreed (trap 1 of issue 18).
// It is a counter for metrics and tests.
func (e *Elector) Phantoms() uint64 { return e.phantoms.Load() }

// electionPrefix is the concurrency.NewElection prefix of a job; the
// election appends "/" itself.
func (e *Elector) electionPrefix(jobID string) string { return e.prefix + jobID }

func validJobID(jobID string) error {
	if jobID == "" {
		return errors.New("leader: empty job id")
	}
	// A "/" would let job "a"'s range ("<prefix>a/") cover job "a/b"'s keys.
	if strings.Contains(jobID, "/") {
		return fmt.Errorf("leader: job id %q contains '/'", jobID)
	}
	// "@…" names are the Elector's own (registryDir).
	if strings.HasPrefix(jobID, "@") {
		return fmt.Errorf("leader: job id %q begins with '@'", jobID)
	}
	return nil
}

// registryDir holds, under the Elector's prefix, each replica's advertised
// URL (Advertise); job IDs cannot begin with "@", so it is no election.
const registryDir = "@replicas/"

// Advertise records url as the address at which this replica serves
// (dpfl-server's --advertise-url), for URL. The record outlives the
// process (a later start of the same replica ID overwrites it): a
// replica's liveness is its election keys, not this record.
func (e *Elector) Advertise(ctx context.Context, url string) error {
	if _, err := e.cli.Put(ctx, e.prefix+registryDir+e.id, url); err != nil {
		return fmt.Errorf("leader: advertise %q: %w", url, err)
	}
	return nil
}

// URL returns the address replica advertised (Advertise), "" if none.
func (e *Elector) URL(ctx context.Context, replica string) (string, error) {
	resp, err := e.cli.Get(ctx, e.prefix+registryDir+replica)
	if err != nil {
		return "", fmt.Errorf("leader: read the address of replica %q: %w", replica, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// session returns the live session, creating one (a new lease) when there is
// none or the last one ended. The grant is bounded by ctx; the session itself
// lives until it ends or Close.
func (e *Elector) session(ctx context.Context) (*concurrency.Session, error) {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	if e.isClosed() {
		return nil, ErrClosed
	}
	if e.sess != nil {
		select {
		case <-e.sess.Done():
			e.retire(e.sess)
		default:
			return e.sess, nil
		}
	}
	resp, err := e.cli.Grant(ctx, int64(e.ttl))
	if err != nil {
		return nil, fmt.Errorf("leader: grant session lease: %w", err)
	}
	s, err := concurrency.NewSession(e.cli, concurrency.WithLease(resp.ID), concurrency.WithTTL(e.ttl))
	if err != nil {
		e.revokeAsync(resp.ID)
		return nil, fmt.Errorf("leader: open session: %w", err)
	}
	if e.isClosed() { // Close ran while the lease was being granted
		go func() { _ = s.Close() }()
		return nil, ErrClosed
	}
	e.sess = s
	return s, nil
}

func (e *Elector) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// dropSession retires s if it is still the current session (its lease is
// known to be gone), so the next session call opens a new one. Terms on s
// end when s.Done closes.
func (e *Elector) dropSession(s *concurrency.Session) {
	e.sessMu.Lock()
	defer e.sessMu.Unlock()
	if e.sess == s {
		e.retire(s)
	}
}

// retire forgets s, stops its keep-alive and revokes its lease in the
// background (best effort: a lease that cannot be revoked expires within one
// TTL anyway). e.sessMu must be held.
func (e *Elector) retire(s *concurrency.Session) {
	e.sess = nil
	go func() { _ = s.Close() }()
}

func (e *Elector) revokeAsync(id clientv3.LeaseID) {
	go func() {
		ctx, cancel := context.WithTimeout(e.cli.Ctx(), time.Duration(e.ttl)*time.Second)
		defer cancel()
		_, _ = e.cli.Revoke(ctx, id)
	}()
}

func (e *Elector) reserve(jobID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if _, ok := e.jobs[jobID]; ok {
		return fmt.Errorf("%w: %q", ErrBusy, jobID)
	}
	e.jobs[jobID] = struct{}{}
	return nil
}

func (e *Elector) release(jobID string) {
	e.mu.Lock()
	delete(e.jobs, jobID)
	e.mu.Unlock()
}

// Campaign blocks until this replica is the verified leader of jobID and
// returns the Term, or until ctx ends (ctx.Err() is returned and the
// candidacy key is withdrawn), or Close (ErrClosed).
//
// It runs concurrency.Election.Campaign on the Elector's session and then
// the leadership guard (see Term.Check): a linearizable read must show that
// the leader key still exists with the CreateRevision Campaign reported,
// that it is the key with the lowest CreateRevision under the job's election
// prefix, and that the session lease still has TTL > 0. Campaign can report
// success to a replica whose lease expired while it waited or during a
// partition (trap 1 of issue 18), so a win the guard refuses is withdrawn,
// counted in Phantoms, and the replica campaigns again (on a new session if
// the lease is gone). A session that ends while waiting is replaced the same
// way. Other etcd errors are returned wrapped; a request that timed out is
// an unknown outcome (its write may have been applied). Whenever Campaign
// returns an error it withdraws this replica's candidacy key for the job
// (named after the session lease, so it is this Campaign's alone), because a
// key left behind would make etcd regard as leader a replica that does not
// act; if that delete fails, it is retried in the background until it
// succeeds or the session ends, and the job stays reserved (ErrBusy)
// meanwhile. At most one Campaign or live Term per job per Elector:
// otherwise ErrBusy. jobID must be non-empty and must not contain "/".
func (e *Elector) Campaign(ctx context.Context, jobID string) (*Term, error) {
	if err := validJobID(jobID); err != nil {
		return nil, err
	}
	if err := e.reserve(jobID); err != nil {
		return nil, err
	}
	t, s, err := e.campaign(ctx, jobID)
	if err != nil {
		if s == nil {
			e.release(jobID)
		} else {
			e.abandon(ctx, jobID, s)
		}
		return nil, err
	}
	return t, nil
}

// campaign runs the election loop. On error it returns the session whose
// candidacy key may exist (nil if none can).
func (e *Elector) campaign(ctx context.Context, jobID string) (*Term, *concurrency.Session, error) {
	backoff := 10 * time.Millisecond
	pause := func() error {
		timer := time.NewTimer(backoff)
		defer timer.Stop()
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		}
	}
	// pending is the session of an earlier attempt whose key may still
	// exist (its fenced withdrawal failed); nil when there is none.
	var pending *concurrency.Session
	for {
		if err := ctx.Err(); err != nil {
			return nil, pending, err
		}
		s, err := e.session(ctx)
		if err != nil {
			return nil, pending, err
		}
		if s != pending {
			// That key goes with the earlier session's lease (revoked by
			// retire, or expiring unrenewed).
			pending = nil
		}
		el := concurrency.NewElection(s, e.electionPrefix(jobID))

		// Stop waiting as soon as the session ends: a candidate whose lease
		// is gone cannot win, and its key is gone with the lease.
		cctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(s.Ctx(), cancel)
		err = el.Campaign(cctx, e.id)
		stop()
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, s, ctx.Err()
			}
			if sessionEnded(s) {
				continue
			}
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				e.dropSession(s)
				continue
			}
			return nil, s, fmt.Errorf("leader: campaign for job %q: %w", jobID, err)
		}
		if e.afterCampaign != nil {
			e.afterCampaign(el.Key(), el.Rev(), s.Lease())
		}

		t := newTerm(e, jobID, s, el.Key(), el.Rev())
		rev, err := t.verify(ctx)
		if err == nil {
			t.start(rev)
			return t, nil, nil
		}
		t.cancel(err)
		if !errors.Is(err, ErrNotLeader) {
			if ctx.Err() != nil {
				return nil, s, ctx.Err()
			}
			return nil, s, fmt.Errorf("leader: verify leadership of job %q: %w", jobID, err)
		}
		// A phantom win. Withdraw the key if it is still there (fenced on
		// the revision Campaign reported), then campaign again.
		e.phantoms.Add(1)
		if errors.Is(err, errLeaseGone) {
			e.dropSession(s)
		} else {
			wctx, wcancel := context.WithTimeout(ctx, e.TTL())
			if t.withdraw(wctx) != nil {
				pending = s
			}
			wcancel()
		}
		if err := pause(); err != nil {
			return nil, s, err
		}
	}
}

// candidateKey is the election key concurrency.Election.Campaign writes
// for jobID on session s: "<prefix><jobID>/<lease id in hex>".
func (e *Elector) candidateKey(jobID string, s *concurrency.Session) string {
	return fmt.Sprintf("%s/%x", e.electionPrefix(jobID), s.Lease())
}

// abandon deletes this replica's candidacy key for jobID on session s after
// a failed Campaign, then frees the job. It tries once, bounded by one TTL
// (detached from ctx, which may be done), and otherwise retries in the
// background until the delete succeeds, the session ends (the key then dies
// with the lease) or the client closes; the job stays reserved until then.
// The delete is unconditional: the key's name is unique to this lease and
// job, and the reservation keeps every other Campaign of this Elector off
// it.
func (e *Elector) abandon(ctx context.Context, jobID string, s *concurrency.Session) {
	key := e.candidateKey(jobID, s)
	del := func(ctx context.Context) error {
		_, err := e.cli.Delete(ctx, key)
		return err
	}
	if sessionEnded(s) {
		e.release(jobID)
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.TTL())
	err := del(dctx)
	cancel()
	if err == nil {
		e.release(jobID)
		return
	}
	go func() {
		defer e.release(jobID)
		retryUntil(e, s, del)
	}()
}

// retryUntil runs op, each try bounded by one TTL, with backoff, until it
// succeeds, session s ends or the client closes.
func retryUntil(e *Elector, s *concurrency.Session, op func(context.Context) error) {
	backoff := 100 * time.Millisecond
	for !sessionEnded(s) && e.cli.Ctx().Err() == nil {
		ctx, cancel := context.WithTimeout(e.cli.Ctx(), e.TTL())
		err := op(ctx)
		cancel()
		if err == nil {
			return
		}
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
		case <-s.Done():
		}
		timer.Stop()
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// Leader returns who leads jobID according to a linearizable read: the
// election value (the leader's replica id) and the leader key's
// CreateRevision (the epoch of its term). It returns ErrNoLeader when the
// election is empty and wrapped etcd errors otherwise. The answer is
// already possibly stale when it arrives; it is meant for redirecting
// clients, never for fencing. It needs no session.
func (e *Elector) Leader(ctx context.Context, jobID string) (id string, rev int64, err error) {
	if err := validJobID(jobID); err != nil {
		return "", 0, err
	}
	resp, err := e.cli.Get(ctx, e.electionPrefix(jobID)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, fmt.Errorf("leader: read leader of job %q: %w", jobID, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, ErrNoLeader
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, nil
}

// Close ends the Elector: it stops renewing the session lease and revokes it
// (bounded by the TTL), which deletes every election key of this replica, so
// all its Terms end and other replicas take over at once rather than after
// lease expiry. Campaigns in progress return ErrClosed or ctx errors.
// Close returns the revoke error, if any (the lease then expires within one
// TTL by itself). Calling Close again returns nil.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.sessMu.Lock()
	s := e.sess
	e.sess = nil
	e.sessMu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("leader: revoke session lease: %w", err)
	}
	return nil
}

func sessionEnded(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// errLeaseGone and errLeaseExpiring mark verification failures caused by
// the lease itself: gone for good (the session must be replaced), or in its
// last second (it may yet be renewed; the session is kept).
var (
	errLeaseGone     = fmt.Errorf("%w: session lease expired or revoked", ErrNotLeader)
	errLeaseExpiring = fmt.Errorf("%w: session lease has under a second left (renewals stalled, or expired awaiting revocation)", ErrNotLeader)
)

// Term is one leadership term of one job held by this replica, returned by
// Elector.Campaign. It is live from Campaign's return until Done closes;
// the replica may act as the job's leader only while it is live, and must
// put Fence in every write. It is safe for concurrent use.
type Term struct {
	e      *Elector
	jobID  string
	sess   *concurrency.Session
	prefix string // election prefix including the trailing "/"
	key    string
	rev    int64
	lease  clientv3.LeaseID

	ctx         context.Context
	cancel      context.CancelCauseFunc
	releaseOnce sync.Once
}

func newTerm(e *Elector, jobID string, s *concurrency.Session, key string, rev int64) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Term{
		e:      e,
		jobID:  jobID,
		sess:   s,
		prefix: e.electionPrefix(jobID) + "/",
		key:    key,
		rev:    rev,
		lease:  s.Lease(),
		ctx:    ctx,
		cancel: cancel,
	}
}

// JobID returns the job this term leads.
func (t *Term) JobID() string { return t.jobID }

// Fence returns the term's fence: Key is the election's leader key, Rev its
// CreateRevision (the epoch). See Fence.
func (t *Term) Fence() Fence { return Fence{Key: t.key, Rev: t.rev} }

// Epoch returns the leader key's CreateRevision, an etcd store revision that
// is strictly larger for every later term of the same job.
func (t *Term) Epoch() int64 { return t.rev }

// Lease returns the etcd lease of the session the term was won on. Keys
// written with clientv3.WithLease(Lease()) vanish when the term's replica
// loses its session.
func (t *Term) Lease() clientv3.LeaseID { return t.lease }

// Done returns a channel closed when the term has ended: the session ended
// (lease expired or revoked, keep-alive lost for one TTL, Elector.Close),
// the leader key was deleted or re-created, another key became the oldest
// under the election prefix, Check found etcd disagreeing, or Resign. It is
// a prompt signal, not a guarantee: see the package comment.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Context returns a context cancelled when Done closes; context.Cause gives
// Err's value. Use it as the parent of the leader's per-job work.
func (t *Term) Context() context.Context { return t.ctx }

// Err returns nil while the term is live and the reason it ended afterwards
// (wrapping ErrNotLeader, or ErrResigned).
func (t *Term) Err() error {
	if t.ctx.Err() == nil {
		return nil
	}
	return context.Cause(t.ctx)
}

// Check re-verifies leadership with linearizable reads (the same guard
// Campaign runs before returning a Term); call it before starting a round.
// It returns nil only if (a) the leader key exists with the term's
// CreateRevision and lease, (b) it has the lowest CreateRevision under the
// job's election prefix (both read in one transaction, at one revision),
// and (c) etcd reports the session lease's remaining TTL as > 0 (whole
// seconds, truncated: at least one second left), read after (a) and (b);
// the session must also still be alive locally. Reads are linearizable. If etcd disagrees, Check ends the term and returns an
// error wrapping ErrNotLeader; on an ended term it returns Err(). Any other
// error (timeout, unavailable) is an unknown outcome: the term is not
// ended, but the caller must not act as leader on it. A term ended because
// its lease had under a second left still holds its key until etcd revokes
// the lease, so its fence stays valid that long; no other replica can lead
// meanwhile. Check only narrows the window for a stale leader; the fence on
// each write closes it.
func (t *Term) Check(ctx context.Context) error {
	if err := t.Err(); err != nil {
		return err
	}
	_, err := t.verify(ctx)
	if errors.Is(err, ErrNotLeader) {
		t.end(err)
		return t.Err()
	}
	return err
}

// verify is the leadership guard. It returns the etcd revision at which the
// key checks were read.
func (t *Term) verify(ctx context.Context) (int64, error) {
	if sessionEnded(t.sess) {
		return 0, errSessionEnded
	}
	// (a) and (b) in one read-only transaction, hence at one revision;
	// transactions are linearizable.
	resp, err := t.e.cli.Txn(ctx).Then(
		clientv3.OpGet(t.key),
		clientv3.OpGet(t.prefix, clientv3.WithFirstCreate()...),
	).Commit()
	if err != nil {
		return 0, err
	}
	own := resp.Responses[0].GetResponseRange().GetKvs()
	switch {
	case len(own) == 0:
		return 0, fmt.Errorf("%w: leader key %s is gone", ErrNotLeader, t.key)
	case own[0].CreateRevision != t.rev:
		return 0, fmt.Errorf("%w: leader key %s was re-created (create revision %d, term %d)", ErrNotLeader, t.key, own[0].CreateRevision, t.rev)
	case own[0].Lease != int64(t.lease):
		return 0, fmt.Errorf("%w: leader key %s has lease %x, session has %x", ErrNotLeader, t.key, own[0].Lease, t.lease)
	}
	first := resp.Responses[1].GetResponseRange().GetKvs()
	if len(first) == 0 || string(first[0].Key) != t.key {
		return 0, fmt.Errorf("%w: leader key %s is not the oldest under %s", ErrNotLeader, t.key, t.prefix)
	}
	// (c) The lease, read after the keys: still granted now, with at least
	// one whole second left. etcd answers TTL -1 for a lease it no longer
	// has, and truncates the remaining time to whole seconds, so 0 means
	// under a second left: renewals have stalled (the client renews every
	// TTL/3), or the lease has expired and awaits revocation.
	ttl, err := t.e.cli.TimeToLive(ctx, t.lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, errLeaseGone
		}
		return 0, err
	}
	switch {
	case ttl.TTL < 0:
		return 0, errLeaseGone
	case ttl.TTL == 0:
		return 0, errLeaseExpiring
	}
	return resp.Header.Revision, nil
}

// start launches the monitor that ends the term when leadership is lost.
func (t *Term) start(fromRev int64) { go t.monitor(fromRev) }

// end ends the term with cause and frees the job on the Elector.
func (t *Term) end(cause error) {
	t.cancel(cause)
	t.releaseOnce.Do(func() { t.e.release(t.jobID) })
}

// monitor watches the election prefix from the verified revision and the
// session, ending the term on the first sign of loss. When the watch breaks
// (compaction, lost etcd leader, connection trouble) it re-verifies from
// scratch before watching again, so no event can be missed.
func (t *Term) monitor(fromRev int64) {
	backoff := 50 * time.Millisecond
	for {
		lost := t.watch(fromRev)
		if lost != nil {
			t.end(lost)
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		if sessionEnded(t.sess) {
			t.end(errSessionEnded)
			return
		}
		ctx, cancel := context.WithTimeout(t.ctx, time.Duration(t.e.ttl)*time.Second)
		rev, err := t.verify(ctx)
		cancel()
		if errors.Is(err, ErrNotLeader) {
			t.end(err)
			return
		}
		if err == nil {
			fromRev = rev
			backoff = 50 * time.Millisecond
			continue
		}
		timer := time.NewTimer(backoff)
		select {
		case <-timer.C:
		case <-t.sess.Done():
		case <-t.ctx.Done():
		}
		timer.Stop()
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// watch returns a non-nil cause when leadership is lost, nil when the watch
// ended otherwise (term ended, session ended, watch broken).
func (t *Term) watch(fromRev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(t.ctx))
	defer cancel()
	wch := t.e.cli.Watch(wctx, t.prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRev+1))
	for {
		select {
		case <-t.ctx.Done():
			return nil
		case <-t.sess.Done():
			return errSessionEnded
		case wr, ok := <-wch:
			if !ok || wr.Canceled || wr.Err() != nil {
				return nil
			}
			for _, ev := range wr.Events {
				if cause := t.lostBy(ev); cause != nil {
					return cause
				}
			}
		}
	}
}

func (t *Term) lostBy(ev *clientv3.Event) error {
	if string(ev.Kv.Key) == t.key {
		if ev.Type == mvccpb.DELETE {
			return fmt.Errorf("%w: leader key %s deleted at revision %d", ErrNotLeader, t.key, ev.Kv.ModRevision)
		}
		if ev.Kv.CreateRevision != t.rev {
			return fmt.Errorf("%w: leader key %s re-created at revision %d", ErrNotLeader, t.key, ev.Kv.CreateRevision)
		}
		return nil
	}
	if ev.Type == mvccpb.PUT && ev.Kv.CreateRevision < t.rev {
		return fmt.Errorf("%w: key %s (create revision %d) is older than leader key %s", ErrNotLeader, ev.Kv.Key, ev.Kv.CreateRevision, t.key)
	}
	return nil
}

// withdraw deletes the term's key if it is still this term's: a
// transaction fenced on the key's CreateRevision, as in
// concurrency.Election.Resign.
func (t *Term) withdraw(ctx context.Context) error {
	_, err := t.e.cli.Txn(ctx).If(t.Fence().Cmp()).Then(clientv3.OpDelete(t.key)).Commit()
	return err
}

// Resign ends the term and gives up the job's leadership: Done closes first,
// then the leader key is deleted with a transaction fenced on the term's
// CreateRevision (as concurrency.Election.Resign does), which lets the next
// candidate win at once. If the delete fails (its outcome is then unknown)
// the error is returned and the Elector keeps the job reserved (Campaign
// for it returns ErrBusy) while it retries in the background until the
// delete succeeds or the session ends, so a resigned key can never be
// mistaken for a new term. Resign on an ended term returns nil and does
// nothing.
func (t *Term) Resign(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return nil
	}
	t.cancel(ErrResigned)
	err := t.withdraw(ctx)
	if err == nil {
		t.releaseOnce.Do(func() { t.e.release(t.jobID) })
		return nil
	}
	go func() {
		defer t.releaseOnce.Do(func() { t.e.release(t.jobID) })
		retryUntil(t.e, t.sess, t.withdraw)
	}()
	return fmt.Errorf("leader: resign job %q: %w", t.jobID, err)
}
