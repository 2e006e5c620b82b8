package job

import (
	"sync"

	"github.com/dpfl/dpfl/fl/data"
)

// loaded is Fashion-MNIST's training and test splits.
type loaded struct {
	train, test *data.Dataset
}

// fashionSource gives the manager's jobs Fashion-MNIST: it calls load on
// first use and keeps the splits, so that the dataset (about 200 MB) is
// read once per manager and only if a job needs it. Synthetic and LEAF
// jobs never do; tests inject small data of the same shape through
// Options.FashionMNIST.
type fashionSource struct {
	load func() (train, test *data.Dataset, err error)

	// mu is held while loading (about half a second), so it is not the
	// manager's mu, which every read takes.
	mu   sync.Mutex
	data *loaded
}

// newFashionSource loads with load, or from the IDX files in dir when
// load is nil.
func newFashionSource(dir string, load func() (train, test *data.Dataset, err error)) *fashionSource {
	if load == nil {
		load = func() (*data.Dataset, *data.Dataset, error) { return data.LoadFashionMNIST(dir) }
	}
	return &fashionSource{load: load}
}

// get returns the splits, loading them on the first call that succeeds;
// a failed load is returned and tried again at the next call.
func (s *fashionSource) get() (*loaded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data != nil {
		return s.data, nil
	}
	train, test, err := s.load()
	if err != nil {
		return nil, err
	}
	s.data = &loaded{train: train, test: test}
	return s.data, nil
}

// dataset returns Fashion-MNIST (fashionSource.get).
func (m *Manager) dataset() (*loaded, error) { return m.fmnist.get() }
