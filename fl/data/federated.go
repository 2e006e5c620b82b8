package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Options configure NewFederated.
type Options struct {
	// NumClients is the population size N, in [1, MaxClients]. N may
	// exceed the number of examples; the surplus clients are empty.
	NumClients int
	// Partitioner splits the examples among the clients.
	Partitioner Partitioner
	// Seed makes the population reproducible: the same base, options and
	// seed give the same clients with the same examples in the same order.
	Seed uint64
	// HeldOutFraction f in [0, 1) is each client's held-out share: of a
	// client's m examples, ⌊f·m⌋ chosen uniformly at random are held out
	// of training for per-client evaluation (so clients with m < 1/f hold
	// none out). 0 means none.
	HeldOutFraction float64
}

// pcgStream is the PCG stream (increment) of the partitioning RNG, fixed so
// that Seed alone determines the population.
const pcgStream = 0x6470666c64617461 // "dpfldata"

// Federated is a population of N clients over a shared base dataset
// (FedJAX's FederatedData: client id → client dataset). Each client holds
// index lists into Base; all clients' lists live in one packed array, so a
// client costs 4 bytes plus 4 per example and a million mostly empty
// clients are cheap. A Federated is immutable once built, so it is safe for
// concurrent use.
type Federated struct {
	base  *Dataset
	idx   []int32 // client i's examples: idx[start[i]:start[i+1]], held-out ones first
	start []int32 // len N+1
	held  float64 // HeldOutFraction
}

// NewFederated partitions base among opt.NumClients clients with
// opt.Partitioner, using a math/rand/v2 PCG generator seeded from opt.Seed
// (simulation randomness, reproducible), shuffles each client's examples
// and holds out the first ⌊HeldOutFraction·m⌋ of each client of m
// examples.
//
// Errors: an invalid base (see Dataset.Validate) or an empty one, N
// outside [1, MaxClients], no partitioner, HeldOutFraction outside [0, 1),
// the partitioner's own errors, and a partitioner result that is not an
// exact partition of the examples into N clients.
func NewFederated(base *Dataset, opt Options) (*Federated, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	switch {
	case base.Len() == 0:
		return nil, fmt.Errorf("data: empty base dataset")
	case opt.NumClients < 1 || opt.NumClients > MaxClients:
		return nil, fmt.Errorf("data: number of clients must be in [1, %d], got %d", MaxClients, opt.NumClients)
	case opt.Partitioner == nil:
		return nil, fmt.Errorf("data: no partitioner")
	case !(opt.HeldOutFraction >= 0 && opt.HeldOutFraction < 1):
		return nil, fmt.Errorf("data: held-out fraction must be in [0, 1), got %v", opt.HeldOutFraction)
	}
	rng := rand.New(rand.NewPCG(opt.Seed, pcgStream))
	parts, err := opt.Partitioner.Partition(base.Y, base.Classes, opt.NumClients, rng)
	if err != nil {
		return nil, err
	}
	if err := checkExactPartition(parts, base.Len(), opt.NumClients); err != nil {
		return nil, fmt.Errorf("data: partitioner %v: %w", opt.Partitioner, err)
	}
	return pack(base, parts, opt.HeldOutFraction, rng), nil
}

// NewFederatedFromClients builds the population of a naturally federated
// dataset, whose clients are given rather than drawn by a Partitioner
// (FedProx's synthetic devices, LEAF's users): client i holds the examples
// clients[i] of base, which must be an exact partition of [0, base.Len())
// into len(clients) lists (a list may be empty). As in NewFederated, each
// client's examples are shuffled by a math/rand/v2 PCG generator seeded
// from seed and the first ⌊heldOutFraction·m⌋ of a client of m examples
// are held out, so the held-out share is a uniform random subset. clients
// is not retained.
//
// Errors: an invalid or empty base, len(clients) outside [1, MaxClients],
// heldOutFraction outside [0, 1), and lists that are not an exact
// partition (an index out of range, repeated or missing), each naming the
// client or example.
func NewFederatedFromClients(base *Dataset, clients [][]int32, heldOutFraction float64, seed uint64) (*Federated, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	switch {
	case base.Len() == 0:
		return nil, fmt.Errorf("data: empty base dataset")
	case len(clients) < 1 || len(clients) > MaxClients:
		return nil, fmt.Errorf("data: number of clients must be in [1, %d], got %d", MaxClients, len(clients))
	case !(heldOutFraction >= 0 && heldOutFraction < 1):
		return nil, fmt.Errorf("data: held-out fraction must be in [0, 1), got %v", heldOutFraction)
	}
	if err := checkExactPartition(clients, base.Len(), len(clients)); err != nil {
		return nil, fmt.Errorf("data: clients: %w", err)
	}
	return pack(base, clients, heldOutFraction, rand.New(rand.NewPCG(seed, pcgStream))), nil
}

// pack copies the exact partition parts into a Federated, shuffling each
// client's examples with rng.
func pack(base *Dataset, parts [][]int32, held float64, rng *rand.Rand) *Federated {
	f := &Federated{
		base:  base,
		idx:   make([]int32, base.Len()),
		start: make([]int32, len(parts)+1),
		held:  held,
	}
	off := 0
	for i, p := range parts {
		seg := f.idx[off : off+len(p)]
		copy(seg, p)
		// Partitioners may hand out examples grouped by class (Shards); a
		// shuffle makes the held-out prefix a uniform random subset and
		// every client's examples come in random order.
		shuffle32(seg, rng)
		off += len(p)
		f.start[i+1] = int32(off)
	}
	return f
}

// checkExactPartition checks that parts has numClients lists that together
// hold every index in [0, n) exactly once.
func checkExactPartition(parts [][]int32, n, numClients int) error {
	if len(parts) != numClients {
		return fmt.Errorf("returned %d clients, want %d", len(parts), numClients)
	}
	seen := make([]uint64, (n+63)/64)
	total := 0
	for c, p := range parts {
		for _, i := range p {
			if i < 0 || int(i) >= n {
				return fmt.Errorf("client %d got example %d, outside [0, %d)", c, i, n)
			}
			if seen[i/64]&(1<<(i%64)) != 0 {
				return fmt.Errorf("example %d assigned twice (again to client %d)", i, c)
			}
			seen[i/64] |= 1 << (i % 64)
		}
		total += len(p)
	}
	if total != n {
		return fmt.Errorf("assigned %d of %d examples", total, n)
	}
	return nil
}

// Base is the dataset the clients' indices point into.
func (f *Federated) Base() *Dataset { return f.base }

// NumClients is the population size N.
func (f *Federated) NumClients() int { return len(f.start) - 1 }

// ClientIDs returns a new slice of the client IDs 0, …, N−1.
func (f *Federated) ClientIDs() []int {
	ids := make([]int, f.NumClients())
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// heldOut is ⌊HeldOutFraction·m⌋ for a client of m examples; the 1e-9
// absorbs float rounding (0.29·100 is 28.999999999999996 in float64).
func (f *Federated) heldOut(m int) int {
	return int(math.Floor(f.held*float64(m) + 1e-9))
}

func (f *Federated) checkID(id int) {
	if id < 0 || id >= f.NumClients() {
		panic(fmt.Sprintf("data: client ID %d outside [0, %d)", id, f.NumClients()))
	}
}

// ClientSize is the number of training examples of client id (held-out
// ones excluded); it may be 0. It panics if id is not in [0, N).
func (f *Federated) ClientSize(id int) int {
	f.checkID(id)
	m := int(f.start[id+1] - f.start[id])
	return m - f.heldOut(m)
}

// Client is one client's data: indices into the population's base dataset
// (Federated.Base) of its training and held-out examples, disjoint, either
// possibly empty. The slices alias the population's storage: callers must
// not modify them (copy first to reorder, e.g. to shuffle minibatches).
// OnDemand.Client returns fresh slices.
type Client struct {
	ID      int
	Train   []int32
	HeldOut []int32
}

// Client returns client id's data without allocating. It panics if id is
// not in [0, N) (a programmer error).
func (f *Federated) Client(id int) Client {
	f.checkID(id)
	lo, hi := f.start[id], f.start[id+1]
	h := lo + int32(f.heldOut(int(hi-lo)))
	return Client{ID: id, HeldOut: f.idx[lo:h:h], Train: f.idx[h:hi:hi]}
}

// TotalExamples is the number of examples over all clients, held-out ones
// included; it equals Base().Len() since partitions are exact.
func (f *Federated) TotalExamples() int { return len(f.idx) }
