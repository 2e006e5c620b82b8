package job

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/internal/datatest"
	"github.com/dpfl/dpfl/storage"
)

// The job tests run on injected data (Options.FashionMNIST): a small
// dataset shaped like Fashion-MNIST, generated once per test binary,
// for the tests of the job machinery (ledger, resume, cancel, budgets,
// recovery, transparency, secure aggregation's retries); the few tests
// whose thresholds were measured on the real dataset use it through
// realManager, which fails without it.

// Sizes of the fake training split: smallTrain gives small()'s 300 users
// 20 examples each; fullTrain is Fashion-MNIST's own size, for the
// admission checks that count users against the training split
// (managerOn).
const (
	smallTrain = 6000
	fullTrain  = 60000
)

var fakes sync.Map // training size → *fakeData

type fakeData struct {
	once        sync.Once
	train, test *data.Dataset
}

// fakeFashionMNIST is a source of train examples (and train/6 test
// examples) shaped like Fashion-MNIST: 784 features in [0, 1] and 10
// balanced classes. Each class is a fixed pattern of bright pixels under
// uniform noise, so that logistic regression separates the classes in a
// few rounds. The data depends on train only, so a restarted manager
// resumes its jobs on the same data.
func fakeFashionMNIST(train int) func() (*data.Dataset, *data.Dataset, error) {
	v, _ := fakes.LoadOrStore(train, &fakeData{})
	f := v.(*fakeData)
	return func() (*data.Dataset, *data.Dataset, error) {
		f.once.Do(func() {
			rng := rand.New(rand.NewPCG(uint64(train), 0xfa5e))
			var protos [10][784]float32
			for c := range protos {
				for j := range protos[c] {
					if rng.IntN(4) == 0 {
						protos[c][j] = 0.7
					}
				}
			}
			f.train, f.test = fakeSplit(rng, &protos, train), fakeSplit(rng, &protos, train/6)
		})
		return f.train, f.test, nil
	}
}

// fakeSplit draws n examples, example i of class i mod 10, its noise
// uniform on [0, 0.3) in steps of 0.3/256.
func fakeSplit(rng *rand.Rand, protos *[10][784]float32, n int) *data.Dataset {
	d := &data.Dataset{Dim: 784, Classes: 10, X: make([]float32, n*784), Y: make([]uint8, n)}
	for i := range n {
		c := i % 10
		d.Y[i] = uint8(c)
		x := d.X[i*784 : (i+1)*784]
		for j := 0; j < len(x); j += 8 { // 784 = 98·8 noise bytes
			bits := rng.Uint64()
			for k := range 8 {
				x[j+k] = protos[c][j+k] + 0.3/256*float32(uint8(bits>>(8*k)))
			}
		}
	}
	return d
}

var realFMNIST struct {
	once        sync.Once
	train, test *data.Dataset
	err         error
}

// realFashionMNIST is a source of the real Fashion-MNIST, read once per
// test binary; tb fails (never skips) without it.
func realFashionMNIST(tb testing.TB) func() (*data.Dataset, *data.Dataset, error) {
	dir := datatest.FashionMNIST(tb)
	return func() (*data.Dataset, *data.Dataset, error) {
		realFMNIST.once.Do(func() { realFMNIST.train, realFMNIST.test, realFMNIST.err = data.LoadFashionMNIST(dir) })
		return realFMNIST.train, realFMNIST.test, realFMNIST.err
	}
}

// openDB opens a fresh database for a test, closed when it ends.
func openDB(tb testing.TB) *storage.DB {
	tb.Helper()
	db, err := storage.Open(filepath.Join(tb.TempDir(), "dpfl.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// managerOn is a manager over db with options opt, by default two
// workers, a silent log and the fake Fashion-MNIST of fullTrain
// examples. Its jobs are stopped when the test ends, before db closes.
func managerOn(tb testing.TB, db *storage.DB, opt Options) *Manager {
	tb.Helper()
	if opt.Workers == 0 {
		opt.Workers = 2
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.FashionMNIST == nil {
		opt.FashionMNIST = fakeFashionMNIST(fullTrain)
	}
	m := NewManager(db, opt)
	tb.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// manager is a manager over a fresh database, with two workers, no data
// root and the fake Fashion-MNIST of smallTrain examples.
func manager(tb testing.TB) *Manager {
	tb.Helper()
	return managerOn(tb, openDB(tb), Options{FashionMNIST: fakeFashionMNIST(smallTrain)})
}

// managerWithDataRoot is manager(t) on a server started with
// --data-root root.
func managerWithDataRoot(tb testing.TB, root string) *Manager {
	tb.Helper()
	return managerOn(tb, openDB(tb), Options{DataRoot: root, FashionMNIST: fakeFashionMNIST(smallTrain)})
}

// realManager is manager(t) on the real Fashion-MNIST, for the tests
// whose thresholds were measured on it; it fails without the dataset.
func realManager(tb testing.TB) *Manager {
	tb.Helper()
	return managerOn(tb, openDB(tb), Options{FashionMNIST: realFashionMNIST(tb)})
}

// restarted is a new manager over m's database with m's options: the
// same server after a restart.
func restarted(tb testing.TB, m *Manager) *Manager {
	tb.Helper()
	return managerOn(tb, m.db, m.limits)
}

// Only a job on Fashion-MNIST loads it: synthetic and LEAF jobs run on a
// server whose dataset cannot be read, a fashion-mnist job is refused
// with the loading error, and a failed load is tried again at the next
// job that needs it, then kept.
func TestOnlyFashionMNISTJobsLoadIt(t *testing.T) {
	var calls int
	var mu sync.Mutex
	missing := errors.New("no Fashion-MNIST here")
	fail := true
	m := managerOn(t, openDB(t), Options{FashionMNIST: func() (*data.Dataset, *data.Dataset, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return nil, nil, missing
		}
		return fakeFashionMNIST(smallTrain)()
	}})
	st := runToEnd(t, m, small(t, func(s *types.Spec) {
		s.Dataset, s.Population.Size, s.DP.Enabled, s.Rounds = "synthetic", 30, false, 2
	}))
	if st.State != types.StateCompleted || calls != 0 {
		t.Fatalf("synthetic job: %s (%s) after %d loads of Fashion-MNIST", st.State, st.Message, calls)
	}
	if _, err := m.Submit(small(t, func(s *types.Spec) {})); !errors.Is(err, missing) || calls != 1 {
		t.Fatalf("fashion-mnist job without the dataset: %v after %d loads", err, calls)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	for range 2 {
		st = runToEnd(t, m, small(t, func(s *types.Spec) { s.Rounds = 1 }))
		if st.State != types.StateCompleted {
			t.Fatalf("fashion-mnist job: %s: %s", st.State, st.Message)
		}
	}
	if calls != 2 {
		t.Fatalf("%d loads for a failed and two successful jobs, want 2", calls)
	}
}
