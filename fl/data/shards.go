package data

import (
	"fmt"
	"math/rand/v2"
)

// Shards is the "pathological non-IID" partition of McMahan, Moore, Ramage,
// Hampson, Agüera y Arcas 2017 ("Communication-Efficient Learning of Deep
// Networks from Decentralized Data", §3: sort MNIST by digit label, divide
// it into 200 shards of size 300, and assign each of 100 clients 2 shards).
//
// Procedure: shuffle the examples, stably sort them by label (so examples
// are random within a label), cut that order into N·PerClient contiguous
// shards of near-equal size (⌊n/(N·PerClient)⌋ or one more), and give
// client i the shards π[i·PerClient … (i+1)·PerClient−1] of a uniformly
// random permutation π. Every client gets exactly PerClient shards, so at
// most PerClient classes when shards do not straddle a label boundary and
// at most 2·PerClient when they are smaller than every class.
type Shards struct {
	// PerClient is the number of shards per client, ≥ 1 (2 in the paper);
	// N·PerClient must not exceed the number of examples.
	PerClient int
}

// String returns e.g. "shards(per_client=2)".
func (s Shards) String() string { return fmt.Sprintf("shards(per_client=%d)", s.PerClient) }

// Partition implements Partitioner.
func (s Shards) Partition(labels []uint8, classes, numClients int, rng *rand.Rand) ([][]int32, error) {
	if s.PerClient < 1 {
		return nil, fmt.Errorf("shards_per_client must be ≥ 1, got %d", s.PerClient)
	}
	if err := checkPartitionArgs(labels, classes, numClients); err != nil {
		return nil, err
	}
	n := len(labels)
	if s.PerClient > n/numClients {
		return nil, fmt.Errorf("shards_per_client: %d clients × %d shards exceed the %d examples (every shard needs one)", numClients, s.PerClient, n)
	}
	sorted := sortByLabel(labels, classes, rng)
	ns := numClients * s.PerClient
	shardLen := make([]int32, ns) // deterministic near-equal cut of the sorted order
	shardOff := make([]int, ns)
	off := 0
	for j := range shardLen {
		shardLen[j] = int32(n / ns)
		if j < n%ns {
			shardLen[j]++
		}
		shardOff[j] = off
		off += int(shardLen[j])
	}
	perm := rng.Perm(ns)
	flat := make([]int32, 0, n)
	out := make([][]int32, numClients)
	for i := range out {
		start := len(flat)
		for _, j := range perm[i*s.PerClient : (i+1)*s.PerClient] {
			flat = append(flat, sorted[shardOff[j]:shardOff[j]+int(shardLen[j])]...)
		}
		out[i] = flat[start:len(flat):len(flat)]
	}
	return out, nil
}

// sortByLabel returns the indices 0..len(labels)−1 ordered by label, in
// uniformly random order within a label (shuffle, then a stable counting
// sort).
func sortByLabel(labels []uint8, classes int, rng *rand.Rand) []int32 {
	perm := make([]int32, len(labels))
	for i := range perm {
		perm[i] = int32(i)
	}
	shuffle32(perm, rng)
	next := make([]int, classes+1)
	for _, l := range labels {
		next[int(l)+1]++
	}
	for c := range classes {
		next[c+1] += next[c]
	}
	sorted := make([]int32, len(labels))
	for _, i := range perm {
		l := labels[i]
		sorted[next[l]] = i
		next[l]++
	}
	return sorted
}
