package secagg

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// lateTransport is a network-like ServerTransport: when a stage opens,
// each client answers on its own goroutine after its delay for that stage
// (negative: never), and the transport never knows that no more messages
// will come, so the driver's deadlines decide.
type lateTransport struct {
	srv     *Server
	clients []*ClientDriver
	delay   func(i int, st Stage) time.Duration

	mu     sync.Mutex
	out    []bool       // stopped
	busy   []sync.Mutex // a client takes its steps one at a time
	errs   []error
	wg     sync.WaitGroup
	closed bool
}

func (lt *lateTransport) Open(ctx context.Context, st Stage, _ time.Time) (<-chan struct{}, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.out == nil {
		lt.out, lt.busy = make([]bool, len(lt.clients)), make([]sync.Mutex, len(lt.clients))
	}
	for i, c := range lt.clients {
		if lt.out[i] {
			continue
		}
		d := lt.delay(i, st)
		if d < 0 {
			lt.out[i] = true
			continue
		}
		lt.wg.Go(func() {
			lt.busy[i].Lock()
			defer lt.busy[i].Unlock()
			time.Sleep(d)
			if err := c.Step(ctx, st, memoryConn{lt.srv, c.ID}); err != nil && !errors.Is(err, ErrWrongStage) {
				lt.mu.Lock()
				lt.errs = append(lt.errs, err)
				lt.mu.Unlock()
			}
		})
	}
	return nil, nil
}

func (lt *lateTransport) Close() {
	lt.mu.Lock()
	lt.closed = true
	lt.mu.Unlock()
}

func lateClients(n, d int, session []byte, rng *rand.Rand) ([]*ClientDriver, map[ClientID][]uint32) {
	in := testInputs(rng, n, d)
	var cs []*ClientDriver
	for id := range ClientID(n) {
		x := in[id+1]
		cs = append(cs, &ClientDriver{ID: id + 1, Session: session, Workers: 1,
			Input: func(context.Context) ([]uint32, error) { return slices.Clone(x), nil }})
	}
	return cs, in
}

// The driver's timing rules over a network-like transport. Patience:
// advertise_keys stays open past its deadline until MinClients have
// advertised (a late third client is waited for rather than the instance
// aborted) and closes without the cohort's last client, who never comes.
// Deadline: a later stage closes at its deadline without a client that
// never answers, which then counts as dropped. Either way the sum is
// exactly the survivors'.
func TestServerDriverDeadlines(t *testing.T) {
	for _, c := range []struct {
		name               string
		n, min             int
		late, never, dies  int // client indices (−1: none)
		survivors, dropped []ClientID
	}{
		{"patience", 4, 3, 2, 3, -1, []ClientID{1, 2, 3}, []ClientID{}},
		{"deadline", 4, 2, -1, -1, 2, []ClientID{1, 2, 4}, []ClientID{3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			session := []byte("deadlines")
			srv, err := NewServer(ServerConfig{Session: session, Dim: 9, MinClients: c.min})
			if err != nil {
				t.Fatal(err)
			}
			cs, in := lateClients(c.n, 9, session, rand.New(rand.NewPCG(31, 32)))
			lt := &lateTransport{srv: srv, clients: cs, delay: func(i int, st Stage) time.Duration {
				switch {
				case i == c.never, i == c.dies && st == StageMaskedInput:
					return -1
				case i == c.late && st == StageAdvertiseKeys:
					return 150 * time.Millisecond // after the advertise deadline
				}
				return 0
			}}
			drv := &ServerDriver{Server: srv, Transport: lt, Clients: c.n, AdvertiseTimeout: 30 * time.Millisecond, StageTimeout: 200 * time.Millisecond}
			res, err := drv.Run(t.Context())
			lt.wg.Wait()
			if err != nil || len(lt.errs) > 0 {
				t.Fatalf("run: %v; clients: %v", err, lt.errs)
			}
			if !slices.Equal(res.Survivors, c.survivors) || !slices.Equal(res.Dropped, c.dropped) || !lt.closed {
				t.Fatalf("survivors %v dropped %v, transport closed %v; want %v, %v, true", res.Survivors, res.Dropped, lt.closed, c.survivors, c.dropped)
			}
			want := make([]uint32, 9)
			for _, id := range res.Survivors {
				for j, v := range in[id] {
					want[j] += v
				}
			}
			if !slices.Equal(res.Sum, want) {
				t.Fatal("sum differs from the survivors' plaintext sum")
			}
		})
	}
}

// A stage whose clients never answer, with no deadline, waits until the
// context ends; the driver then returns the context's error and closes
// the transport.
func TestServerDriverContext(t *testing.T) {
	session := []byte("ctx")
	srv, err := NewServer(ServerConfig{Session: session, Dim: 3})
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := lateClients(3, 3, session, rand.New(rand.NewPCG(33, 34)))
	lt := &lateTransport{srv: srv, clients: cs, delay: func(i int, st Stage) time.Duration {
		if st == StageShareKeys && i == 0 {
			return -1
		}
		return 0
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = (&ServerDriver{Server: srv, Transport: lt, Clients: 3}).Run(ctx)
	lt.wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) || !lt.closed {
		t.Fatalf("got %v, transport closed %v; want the context's deadline and a closed transport", err, lt.closed)
	}
}

// The workers settings change how the work is split, never the sum: the
// server's and the clients' key agreements and mask expansions on 1, 3
// and 8 goroutines give the exact sum of the survivors, with dropouts at
// every stage.
func TestWorkersKeepTheSumExact(t *testing.T) {
	const n, d = 12, 1001
	rng := rand.New(rand.NewPCG(35, 36))
	drop := map[ClientID]dropStage{3: dropBeforeShare, 5: dropBeforeMasked, 8: dropBeforeUnmask}
	for _, w := range []int{1, 3, 8} {
		h := newHarness(t, ServerConfig{Dim: d, Workers: w, Params: Params{Neighbors: 6, Threshold: 3}}, testInputs(rng, n, d), drop)
		h.mem.Workers = w
		for _, c := range h.mem.Clients {
			c.Workers = w
		}
		res, err := h.run()
		if err != nil {
			t.Fatalf("workers %d: %v", w, err)
		}
		if len(res.Survivors) != n-2 || !slices.Equal(res.Sum, h.plainSum(res.Survivors)) {
			t.Fatalf("workers %d: %d survivors, sum exact %v", w, len(res.Survivors), slices.Equal(res.Sum, h.plainSum(res.Survivors)))
		}
		if w > 1 && h.clients[1].workers != w {
			t.Fatalf("client driver gave its client %d workers, want %d", h.clients[1].workers, w)
		}
	}
}
