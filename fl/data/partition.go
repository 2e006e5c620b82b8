package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// MaxClients bounds the population size N of NewFederated and the
// partitioners (2^24 ≈ 16.8 million; a client costs about 30 bytes while
// partitioning), so that a mistyped population fails fast instead of
// allocating gigabytes.
const MaxClients = 1 << 24

// Partitioner splits the example indices 0..len(labels)−1 of a dataset with
// the given labels (each < classes) among numClients clients, using rng for
// all its randomness so that a seed reproduces the split.
//
// The result has numClients lists, and every index appears in exactly one
// of them (an exact partition). A client may receive no examples: a
// population larger than the dataset, or a skewed Dirichlet split. Errors
// report bad parameters (naming the field) and numClients outside
// [1, MaxClients].
type Partitioner interface {
	Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error)
	// String names the partitioner and its parameters, e.g. "dirichlet(alpha=0.1)".
	String() string
}

// checkPartitionArgs validates what all partitioners share.
func checkPartitionArgs(labels []uint8, classes, numClients int) error {
	switch {
	case numClients < 1 || numClients > MaxClients:
		return fmt.Errorf("data: number of clients must be in [1, %d], got %d", MaxClients, numClients)
	case classes < 1 || classes > 256:
		return fmt.Errorf("data: classes must be in [1, 256], got %d", classes)
	case len(labels) > math.MaxInt32:
		return fmt.Errorf("data: %d examples exceed the int32 index range", len(labels))
	}
	if err := checkLabels(labels, classes); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}

// shares deals n examples to k clients as evenly as possible: every client
// gets ⌊n/k⌋ and n mod k clients, chosen uniformly at random, get one more.
// (With k > n that is n random clients with one example and the rest with
// none; choosing them at random keeps empty clients from piling up at the
// high IDs.)
func shares(n, k int, rng *rand.Rand) []int32 {
	s := make([]int32, k)
	base, extra := int32(n/k), n%k
	for i := range s {
		s[i] = base
	}
	for i := range extra {
		s[i]++
	}
	if extra > 0 {
		// Shuffling all k slots (not just picking extra of them) keeps
		// this simple and exactly uniform; it is O(k), like the result.
		shuffle32(s, rng)
	}
	return s
}

// shuffle32 permutes p uniformly (Fisher–Yates) without allocating.
func shuffle32(p []int32, rng *rand.Rand) {
	for i := len(p) - 1; i > 0; i-- {
		j := rng.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}

// IID shuffles the examples uniformly and deals near-equal shares: each
// client gets ⌊n/N⌋ or ⌈n/N⌉ examples (see shares), a uniformly random
// subset, so every client's label mix matches the dataset's up to sampling
// noise. It is the i.i.d. baseline of McMahan et al. 2017, §3.
type IID struct{}

// String returns "iid".
func (IID) String() string { return "iid" }

// Partition implements Partitioner; it ignores classes except to validate
// the labels.
func (IID) Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error) {
	if err := checkPartitionArgs(labels, classes, numClients); err != nil {
		return nil, err
	}
	perm := make([]int32, len(labels))
	for i := range perm {
		perm[i] = int32(i)
	}
	shuffle32(perm, rng)
	out := make([][]int32, numClients)
	off := 0
	for i, s := range shares(len(labels), numClients, rng) {
		out[i] = perm[off : off+int(s) : off+int(s)]
		off += int(s)
	}
	return out, nil
}

// ParsePartitioner returns the partitioner called name: "iid", "dirichlet"
// (with concentration alpha, finite and > 0) or "shards" (with shards
// shards per client, ≥ 1). The parameter of the other partitioners is
// ignored. A bad parameter is an error naming its field (dirichlet_alpha,
// shards_per_client); an unknown name lists the known ones. It is
// ParsePartitionerParams with only those two parameters, so "labels",
// whose labels_per_client it cannot pass, is an error here: use
// ParsePartitionerParams for it.
func ParsePartitioner(name string, alpha float64, shards int) (Partitioner, error) {
	return ParsePartitionerParams(name, PartitionParams{DirichletAlpha: alpha, ShardsPerClient: shards})
}

// PartitionParams are the parameters of the named partitioners; each
// partitioner reads only its own (the field names are the job spec's).
type PartitionParams struct {
	// DirichletAlpha is Dirichlet's concentration α, finite and > 0.
	DirichletAlpha float64
	// ShardsPerClient is Shards' PerClient, ≥ 1.
	ShardsPerClient int
	// LabelsPerClient is LabelsPerClient's K, in [1, classes].
	LabelsPerClient int
	// LabelsSigma is LabelsPerClient's Sigma, finite and ≥ 0 (0: equal
	// shares; FedProx's MNIST: 2).
	LabelsSigma float64
}

// ParsePartitionerParams returns the partitioner called name: "iid",
// "dirichlet" (Dirichlet{Alpha: p.DirichletAlpha}), "shards"
// (Shards{PerClient: p.ShardsPerClient}) or "labels"
// (LabelsPerClient{K: p.LabelsPerClient, Sigma: p.LabelsSigma}). A bad
// parameter of the named partitioner is an error naming its field
// (dirichlet_alpha, shards_per_client, labels_per_client, labels_sigma);
// K > classes is only detected at Partition. An unknown name lists the
// known ones.
func ParsePartitionerParams(name string, p PartitionParams) (Partitioner, error) {
	switch name {
	case "iid":
		return IID{}, nil
	case "dirichlet":
		if err := checkAlpha(p.DirichletAlpha); err != nil {
			return nil, err
		}
		return Dirichlet{Alpha: p.DirichletAlpha}, nil
	case "shards":
		if p.ShardsPerClient < 1 {
			return nil, fmt.Errorf("shards_per_client must be ≥ 1, got %d", p.ShardsPerClient)
		}
		return Shards{PerClient: p.ShardsPerClient}, nil
	case "labels":
		if err := checkLabelsPerClient(p.LabelsPerClient, p.LabelsSigma); err != nil {
			return nil, err
		}
		return LabelsPerClient{K: p.LabelsPerClient, Sigma: p.LabelsSigma}, nil
	}
	return nil, fmt.Errorf("partition: unknown partitioner %q (known: iid, dirichlet, shards, labels)", name)
}

func checkAlpha(alpha float64) error {
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return fmt.Errorf("dirichlet_alpha must be a finite number > 0, got %v", alpha)
	}
	return nil
}
