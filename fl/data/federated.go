package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Options configure NewFederated.
type Options struct {
	// NumClients is the population size N, 1 ≤ N ≤ base.Len().
	NumClients int
	// Partitioner splits the examples among clients.
	Partitioner Partitioner
	// Seed makes the partition reproducible.
	Seed uint64
	// HeldOutFraction of each client's examples (rounded down) is kept out
	// of training for per-client evaluation; in [0, 1).
	HeldOutFraction float64
}

// Federated is a population of clients over a shared base dataset. Each
// client's examples are stored as index lists into Base, packed into one
// array so that a million clients cost a few bytes each.
type Federated struct {
	base  *Dataset
	idx   []int32 // client i's examples: idx[start[i]:start[i+1]], held-out ones first
	start []int32
	held  []int32 // number of held-out examples of client i
}

// NewFederated partitions base among opt.NumClients clients.
func NewFederated(base *Dataset, opt Options) (*Federated, error) {
	if opt.Partitioner == nil {
		return nil, fmt.Errorf("data: no partitioner")
	}
	if !(opt.HeldOutFraction >= 0 && opt.HeldOutFraction < 1) {
		return nil, fmt.Errorf("data: held-out fraction must be in [0, 1), got %v", opt.HeldOutFraction)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0xda7a))
	parts, err := opt.Partitioner.Partition(base.Y, base.Classes, opt.NumClients, rng)
	if err != nil {
		return nil, err
	}
	f := &Federated{
		base:  base,
		idx:   make([]int32, 0, base.Len()),
		start: make([]int32, len(parts)+1),
		held:  make([]int32, len(parts)),
	}
	for i, p := range parts {
		// Partitioners hand out examples grouped by class; shuffle so the
		// held-out share is a random subset.
		p = append([]int32(nil), p...)
		rng.Shuffle(len(p), func(a, b int) { p[a], p[b] = p[b], p[a] })
		f.idx = append(f.idx, p...)
		f.start[i+1] = int32(len(f.idx))
		f.held[i] = int32(math.Floor(opt.HeldOutFraction * float64(len(p))))
	}
	return f, nil
}

// Base is the dataset the clients index into.
func (f *Federated) Base() *Dataset { return f.base }

// NumClients is the population size N.
func (f *Federated) NumClients() int { return len(f.held) }

// ClientIDs lists the client IDs 0..N−1.
func (f *Federated) ClientIDs() []int {
	ids := make([]int, f.NumClients())
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// ClientSize is the number of training examples of client id.
func (f *Federated) ClientSize(id int) int {
	return int(f.start[id+1]-f.start[id]) - int(f.held[id])
}

// Client is one client's data: indices into the base dataset. The slices
// alias the population's storage and must not be modified.
type Client struct {
	ID      int
	Train   []int32
	HeldOut []int32
}

// Client returns client id's data; it panics if id is not in [0, N).
func (f *Federated) Client(id int) Client {
	all := f.idx[f.start[id]:f.start[id+1]:f.start[id+1]]
	h := f.held[id]
	return Client{ID: id, HeldOut: all[:h:h], Train: all[h:]}
}

// TotalExamples is the number of examples over all clients, held-out ones
// included.
func (f *Federated) TotalExamples() int { return len(f.idx) }
