package secagg

import (
	"crypto/rand"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
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

// harness runs one instance among in-memory clients, round by round, so
// that tests can inject messages between rounds.
type harness struct {
	tb      testing.TB
	srv     *Server
	cfg     ServerConfig
	ids     []ClientID
	clients map[ClientID]*Client
	inputs  map[ClientID][]uint32
	drop    map[ClientID]dropStage

	// fakeInput makes clients skip the masked-input computation and send
	// their plain input: only for benchmarks of the server's Finish, whose
	// cost does not depend on what the vectors hold.
	fakeInput bool

	// hook, if set, runs at the opening (open = true, before any client
	// acts) and closing (before the server's Close or Finish) of each
	// round 0, 1, 2, 4: tests inject messages there.
	hook func(round int, open bool)

	mu      sync.Mutex
	aborted map[ClientID]bool // clients that aborted with ErrTooFewSurvivors
	// The accepted messages, for replays.
	shareMsgs  map[ClientID]ShareKeysMsg
	unmaskMsgs map[ClientID]UnmaskMsg
}

func (h *harness) callHook(round int, open bool) {
	if h.hook != nil {
		h.hook(round, open)
	}
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
	h := &harness{tb: tb, srv: srv, cfg: cfg, clients: map[ClientID]*Client{}, inputs: inputs, drop: drop, aborted: map[ClientID]bool{},
		shareMsgs: map[ClientID]ShareKeysMsg{}, unmaskMsgs: map[ClientID]UnmaskMsg{}}
	for id := range inputs {
		h.ids = append(h.ids, id)
	}
	slices.Sort(h.ids)
	return h
}

// parallel runs f for each participating client (drop stage later than
// stage) on GOMAXPROCS goroutines and returns the first error.
func (h *harness) parallel(stage dropStage, f func(id ClientID) error) error {
	var ids []ClientID
	for _, id := range h.ids {
		if d := h.drop[id]; (d == stay || d > stage) && !h.aborted[id] {
			ids = append(ids, id)
		}
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = f(ids[i])
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (h *harness) advertise() error {
	h.callHook(0, true)
	err := h.parallel(dropBeforeAdv, func(id ClientID) error {
		c, m, err := NewClient(id, h.cfg.Session, rand.Reader)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.clients[id] = c
		h.mu.Unlock()
		return h.srv.Advertise(m)
	})
	if err != nil {
		h.tb.Fatal(err)
	}
	h.callHook(0, false)
	return h.srv.CloseAdvertise()
}

func (h *harness) shareKeys() error {
	h.callHook(1, true)
	err := h.parallel(dropBeforeShare, func(id ClientID) error {
		km, err := h.srv.Keys(id)
		if err != nil {
			return err
		}
		sm, err := h.clients[id].ShareKeys(km)
		if errors.Is(err, ErrTooFewSurvivors) {
			h.mu.Lock()
			h.aborted[id] = true
			h.mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.shareMsgs[id] = sm
		h.mu.Unlock()
		return h.srv.ShareKeys(sm)
	})
	if err != nil {
		h.tb.Fatal(err)
	}
	h.callHook(1, false)
	return h.srv.CloseShareKeys()
}

func (h *harness) maskedInput() error {
	h.callHook(2, true)
	err := h.parallel(dropBeforeMasked, func(id ClientID) error {
		sm, err := h.srv.Shares(id)
		if err != nil {
			return err
		}
		var mm MaskedInputMsg
		if h.fakeInput {
			c := h.clients[id]
			// Benchmarks replay round 2 with the same U2: decrypt once.
			if len(c.held) <= 1 {
				var held map[ClientID]heldShares
				if held, err = c.receiveShares(sm); err == nil {
					c.held = held
				}
			}
			c.stage = clientUnmask
			mm = MaskedInputMsg{From: id, Masked: h.inputs[id]}
		} else {
			mm, err = h.clients[id].MaskedInput(sm, h.inputs[id])
		}
		if errors.Is(err, ErrTooFewSurvivors) {
			h.mu.Lock()
			h.aborted[id] = true
			h.mu.Unlock()
			return nil
		}
		if err != nil {
			return err
		}
		return h.srv.MaskedInput(mm)
	})
	if err != nil {
		h.tb.Fatal(err)
	}
	h.callHook(2, false)
	return h.srv.CloseMaskedInput()
}

func (h *harness) unmask() {
	h.callHook(4, true)
	err := h.parallel(dropBeforeUnmask, func(id ClientID) error {
		req, err := h.srv.UnmaskRequest(id)
		if err != nil {
			return err
		}
		um, err := h.clients[id].Unmask(req)
		if err != nil {
			return err
		}
		h.mu.Lock()
		h.unmaskMsgs[id] = um
		h.mu.Unlock()
		return h.srv.Unmask(um)
	})
	if err != nil {
		h.tb.Fatal(err)
	}
	h.callHook(4, false)
}

// run drives the whole instance and returns Finish's result, or the first
// server error (which the test then checks).
func (h *harness) run() (Result, error) {
	if err := h.advertise(); err != nil {
		return Result{}, err
	}
	if err := h.shareKeys(); err != nil {
		return Result{}, err
	}
	if err := h.maskedInput(); err != nil {
		return Result{}, err
	}
	h.unmask()
	return h.srv.Finish()
}

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
