package device

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/secagg"
)

// syntheticData is n examples of Fashion-MNIST's shape (784 features, 10
// classes), example i of class i mod 10.
func syntheticData(n int, seed uint64) *data.Dataset {
	rng := rand.New(rand.NewPCG(seed, 1))
	ds := &data.Dataset{Dim: 784, Classes: 10, X: make([]float32, n*784), Y: make([]uint8, n)}
	for i := range n {
		ds.Y[i] = uint8(i % 10)
		for j := range 784 {
			ds.X[i*784+j] = rng.Float32()
		}
	}
	return ds
}

// board is an in-memory instance's ServerTransport that other simulated
// clients (Memory) and the device under test share: Memory's clients
// answer as the stage opens, then the stage is published for the device,
// which answers when it notices (the driver waits for it).
type board struct {
	mem   *secagg.Memory
	mu    sync.Mutex
	stage secagg.Stage
	open  bool
}

func (b *board) Open(ctx context.Context, st secagg.Stage, dl time.Time) (<-chan struct{}, error) {
	if _, err := b.mem.Open(ctx, st, dl); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.stage, b.open = st, true
	b.mu.Unlock()
	return nil, nil // the device's message is still to come
}

func (b *board) Close() {
	b.mu.Lock()
	b.open = false
	b.mu.Unlock()
}

// conn is the device's fake ClientTransport: direct calls on the server,
// stages awaited on the board.
type conn struct {
	b   *board
	srv *secagg.Server
	id  secagg.ClientID
}

func (c conn) Await(ctx context.Context, st secagg.Stage) error {
	for ctx.Err() == nil {
		c.b.mu.Lock()
		cur, open := c.b.stage, c.b.open
		c.b.mu.Unlock()
		switch {
		case open && cur == st:
			return nil
		case cur > st:
			return errors.New("the instance went on without this device")
		}
		time.Sleep(time.Millisecond)
	}
	return ctx.Err()
}

func (c conn) AdvertiseKeys(_ context.Context, m secagg.AdvertiseKeysMsg) error {
	return c.srv.AdvertiseKeys(m)
}
func (c conn) ShareKeysRequest(context.Context) (secagg.ShareKeysRequest, error) {
	return c.srv.ShareKeysRequest(c.id)
}
func (c conn) ShareKeys(_ context.Context, m secagg.ShareKeysMsg) error { return c.srv.ShareKeys(m) }
func (c conn) MaskedInputRequest(context.Context) (secagg.MaskedInputRequest, error) {
	return c.srv.MaskedInputRequest(c.id)
}
func (c conn) MaskedInput(_ context.Context, m secagg.MaskedInputMsg) error {
	return c.srv.MaskedInput(m)
}
func (c conn) UnmaskRequest(context.Context) (secagg.UnmaskRequest, error) {
	return c.srv.UnmaskRequest(c.id)
}
func (c conn) Unmask(_ context.Context, m secagg.UnmaskMsg) error { return c.srv.Unmask(m) }

// fakeServer serves one round (round 1, attempt 1) for joining while
// joinable, then reports the job completed.
type fakeServer struct {
	mu       sync.Mutex
	joins    int
	joinable func() bool
	join     func() (types.JoinInfo, secagg.ClientTransport, error)
}

func (f *fakeServer) RoundStatus(context.Context, string) (types.RoundStatus, error) {
	if f.joinable() {
		return types.RoundStatus{State: types.StateRunning, Round: 1, Attempt: 1, Stage: types.StageJoin}, nil
	}
	return types.RoundStatus{State: types.StateCompleted, Stage: types.StageWaiting}, nil
}

func (f *fakeServer) Join(context.Context, string) (types.JoinInfo, secagg.ClientTransport, error) {
	f.mu.Lock()
	f.joins++
	f.mu.Unlock()
	return f.join()
}

// roundInfo is the JoinInfo of client id in a logreg round from zero.
func roundInfo(t *testing.T, id secagg.ClientID, session []byte, clients int) types.JoinInfo {
	enc, err := secagg.NewEncoding(clients, 1)
	if err != nil {
		t.Fatal(err)
	}
	return types.JoinInfo{Round: 1, Attempt: 1, ClientID: id, Session: session, Encoding: enc, ClipNorm: 1,
		Client: types.ClientSpec{Epochs: 1, BatchSize: 10, LR: 0.1}, ClientLR: 0.1, Model: "logreg", Params: make([]float32, 7850)}
}

// A device takes part in an instance with two simulated clients through
// a fake transport: it trains, saves its encoded input privately, logs
// each step, and the unmasked sum is exactly the three inputs' sum. Then
// the job ends and Run returns.
func TestDeviceJoinsAnInstance(t *testing.T) {
	session := []byte("device test")
	const d = 7850
	srv, err := secagg.NewServer(secagg.ServerConfig{Session: session, Dim: d, MinClients: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	sim := map[secagg.ClientID][]uint32{}
	mem := &secagg.Memory{Server: srv, Workers: 1}
	for id := range secagg.ClientID(2) {
		x := make([]uint32, d)
		for j := range x {
			x[j] = rng.Uint32()
		}
		sim[id+1] = slices.Clone(x)
		mem.Clients = append(mem.Clients, &secagg.ClientDriver{ID: id + 1, Session: session, Workers: 1,
			Input: func(context.Context) ([]uint32, error) { return x, nil }})
	}
	b := &board{mem: mem, stage: -1}
	var joined sync.WaitGroup
	joined.Add(1)
	done := make(chan struct{})
	f := &fakeServer{
		joinable: func() bool {
			select {
			case <-done:
				return false
			default:
				return true
			}
		},
		join: func() (types.JoinInfo, secagg.ClientTransport, error) {
			defer joined.Done()
			return roundInfo(t, 3, session, 3), conn{b, srv, 3}, nil
		},
	}
	var out strings.Builder
	save := filepath.Join(t.TempDir(), "inputs")
	dev := &Device{Server: f, JobID: "job", Data: syntheticData(30, 1), Poll: time.Millisecond, SaveDir: save, Workers: 2, Out: &syncWriter{w: &out}}
	runErr := make(chan error, 1)
	go func() { runErr <- dev.Run(t.Context()) }()
	joined.Wait()
	res, err := (&secagg.ServerDriver{Server: srv, Transport: b, Clients: 3, StageTimeout: time.Minute}).Run(t.Context())
	close(done)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(save, SavedInputName(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var saved client.SavedInput
	if err := json.Unmarshal(raw, &saved); err != nil || saved.ClientID != 3 || len(saved.Input) != d {
		t.Fatalf("saved input: %v, client %d, %d values", err, saved.ClientID, len(saved.Input))
	}
	want := slices.Clone(saved.Input)
	for _, x := range sim {
		for j, v := range x {
			want[j] += v
		}
	}
	if !slices.Equal(res.Sum, want) || len(res.Survivors) != 3 {
		t.Fatalf("sum exact: %v, survivors %v", slices.Equal(res.Sum, want), res.Survivors)
	}
	for _, line := range []string{"joined as client 3", "shares sent to 2 neighbours", "masked input sent", "unmask shares sent (3 survivors, 0 dropped)", "took part in 1 rounds"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
	if f.joins != 1 {
		t.Errorf("joined %d times, want once", f.joins)
	}
}

// syncWriter serialises writes (the test reads what the device wrote).
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A round that goes on without the device is logged and skipped: the
// device joins each attempt once, however long its join stage stays open,
// and stops when the job ends.
func TestDeviceGivesUpARoundAndJoinsOnce(t *testing.T) {
	session := []byte("give up")
	srv, err := secagg.NewServer(secagg.ServerConfig{Session: session, Dim: 7850})
	if err != nil {
		t.Fatal(err)
	}
	b := &board{stage: secagg.StageMaskedInput, open: true} // past share_keys
	polls := 0
	f := &fakeServer{
		joinable: func() bool { polls++; return polls < 20 },
		join: func() (types.JoinInfo, secagg.ClientTransport, error) {
			return roundInfo(t, 1, session, 3), conn{b, srv, 1}, nil
		},
	}
	var out strings.Builder
	dev := &Device{Server: f, JobID: "job", Data: syntheticData(10, 2), Poll: time.Millisecond, Out: &out}
	if err := dev.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.joins != 1 || !strings.Contains(out.String(), "round 1: gave up: the instance went on without this device") || !strings.Contains(out.String(), "took part in 0 rounds") {
		t.Fatalf("%d joins, output:\n%s", f.joins, out.String())
	}
}

// --save-inputs keeps the device's unmasked update private: the directory
// 0700 (also one that existed open), the files 0600 (also over a file
// that existed open).
func TestSaveInputIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inputs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, SavedInputName(1, 1))
	if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := saveInput(dir, types.JoinInfo{Round: 1, Attempt: 1}, []uint32{1, 2}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("file %v, directory %v; want 0600 and 0700", fi.Mode().Perm(), di.Mode().Perm())
	}
	if b, _ := os.ReadFile(name); !strings.Contains(string(b), `"input":[1,2]`) {
		t.Fatalf("saved %s", b)
	}
}
