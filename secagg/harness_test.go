package secagg

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// dropStage is when a client of the test harness stops participating.
type dropStage int

const (
	stay             dropStage = iota // completes every round
	dropBeforeAdv                     // never advertises (not in U1)
	dropBeforeShare                   // advertises only (U1 \ U2)
	dropBeforeMasked                  // shares keys, sends no input (U2 \ U3)
	dropBeforeUnmask                  // sends its input, not its unmask shares
)

// dropsBefore reports whether a client scheduled to drop at d sends
// nothing in stage st.
func (d dropStage) dropsBefore(st Stage) bool {
	return d != stay && int(st) >= int(d)-1
}

// harness runs one instance among in-memory clients with the package's
// drivers (ServerDriver over Memory, a ClientDriver per client), stage by
// stage, so that tests can inject messages between stages. It is itself
// the ServerTransport: it calls hook around Memory's Open.
type harness struct {
	tb     testing.TB
	srv    *Server
	cfg    ServerConfig
	ids    []ClientID
	inputs map[ClientID][]uint32
	drop   map[ClientID]dropStage
	mem    *Memory
	driver *ServerDriver

	// hook, if set, runs at the opening (open = true, before any client
	// acts) and closing (before the server's Close or Finish) of each
	// round 0, 1, 2, 4: tests inject messages there.
	hook func(round int, open bool)

	mu      sync.Mutex
	clients map[ClientID]*Client // after advertise_keys
	// The accepted messages, for replays.
	shareMsgs  map[ClientID]ShareKeysMsg
	unmaskMsgs map[ClientID]UnmaskMsg
}

func newHarness(tb testing.TB, cfg ServerConfig, inputs map[ClientID][]uint32, drop map[ClientID]dropStage) *harness {
	tb.Helper()
	if cfg.Session == nil {
		cfg.Session = []byte("test session")
	}
	srv, err := NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{tb: tb, srv: srv, cfg: cfg, clients: map[ClientID]*Client{}, inputs: inputs, drop: drop,
		shareMsgs: map[ClientID]ShareKeysMsg{}, unmaskMsgs: map[ClientID]UnmaskMsg{}}
	for id := range inputs {
		h.ids = append(h.ids, id)
	}
	slices.Sort(h.ids)
	h.mem = &Memory{Server: srv, Drop: func(i int, st Stage) bool { return h.drop[h.ids[i]].dropsBefore(st) }, Wrap: h.record}
	for _, id := range h.ids {
		h.mem.Clients = append(h.mem.Clients, &ClientDriver{ID: id, Session: cfg.Session, Workers: 1, Input: func(context.Context) ([]uint32, error) {
			return slices.Clone(h.inputs[id]), nil
		}})
	}
	h.driver = &ServerDriver{Server: srv, Transport: h}
	return h
}

// Open is the harness's ServerTransport: the hook, Memory's clients, the
// hook again.
func (h *harness) Open(ctx context.Context, st Stage, deadline time.Time) (<-chan struct{}, error) {
	round := []int{0, 1, 2, 4}[st]
	if h.hook != nil {
		h.hook(round, true)
	}
	done, err := h.mem.Open(ctx, st, deadline)
	if err != nil {
		h.tb.Fatal(err)
	}
	if st == StageAdvertiseKeys {
		for _, c := range h.mem.Clients {
			if c.Client() != nil {
				h.clients[c.ID] = c.Client()
			}
		}
	}
	if h.hook != nil {
		h.hook(round, false)
	}
	return done, nil
}

func (h *harness) Close() {}

// aborted reports whether client id aborted with ErrTooFewSurvivors.
func (h *harness) aborted(id ClientID) bool {
	i, ok := slices.BinarySearch(h.ids, id)
	return ok && h.mem.aborted != nil && h.mem.aborted[i]
}

// record wraps a client's transport to keep its accepted messages.
func (h *harness) record(_ int, t ClientTransport) ClientTransport { return recorder{t, h} }

type recorder struct {
	ClientTransport
	h *harness
}

func (r recorder) ShareKeys(ctx context.Context, m ShareKeysMsg) error {
	err := r.ClientTransport.ShareKeys(ctx, m)
	if err == nil {
		r.h.mu.Lock()
		r.h.shareMsgs[m.From] = m
		r.h.mu.Unlock()
	}
	return err
}

func (r recorder) Unmask(ctx context.Context, m UnmaskMsg) error {
	err := r.ClientTransport.Unmask(ctx, m)
	if err == nil {
		r.h.mu.Lock()
		r.h.unmaskMsgs[m.From] = m
		r.h.mu.Unlock()
	}
	return err
}

// stage runs one stage through the driver: open, clients, close.
func (h *harness) stage(st Stage) error { return h.driver.runStage(context.Background(), st) }

func (h *harness) advertise() error   { return h.stage(StageAdvertiseKeys) }
func (h *harness) shareKeys() error   { return h.stage(StageShareKeys) }
func (h *harness) maskedInput() error { return h.stage(StageMaskedInput) }
func (h *harness) unmask()            { h.stage(StageUnmask) }

// run drives the whole instance and returns the driver's result, or the
// first server error (which the test then checks).
func (h *harness) run() (Result, error) { return h.driver.Run(context.Background()) }

// plainSum is the mod-2^32 sum of the given clients' inputs: the truth the
// unmasked result must equal.
func (h *harness) plainSum(ids []ClientID) []uint32 {
	sum := make([]uint32, h.cfg.Dim)
	for _, id := range ids {
		for i, x := range h.inputs[id] {
			sum[i] += x
		}
	}
	return sum
}
