package secagg

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"slices"
)

// graph is the sharing/masking graph over U1: the complete graph
// (Bonawitz et al. 2017) or a random Harary graph H(n, k) (Bell et al.
// 2020, §3): the clients sit on a ring in uniformly random order and each is
// joined to the k/2 nearest on either side.
type graph struct {
	ids   []ClientID       // U1, sorted; a client's index is its position here
	index map[ClientID]int // inverse of ids
	k     int
	ring  []int // ring[i] is the ring position of index i (nil: complete)
	at    []int // at[p] is the index at ring position p
}

// newGraph builds the graph over the sorted, distinct ids with k neighbours
// each (k = len(ids)−1: complete; otherwise k even and ≤ len(ids)−2).
func newGraph(ids []ClientID, k int) *graph {
	g := &graph{ids: ids, index: make(map[ClientID]int, len(ids)), k: k}
	for i, id := range ids {
		g.index[id] = i
	}
	n := len(ids)
	if k == n-1 {
		return g
	}
	// The placement must be unpredictable to the colluders (the privacy
	// bound of ChooseParams averages over it): ChaCha8 keyed from
	// crypto/rand.
	var seed [32]byte
	rand.Read(seed[:])
	g.at = mrand.New(mrand.NewChaCha8(seed)).Perm(n)
	g.ring = make([]int, n)
	for p, i := range g.at {
		g.ring[i] = p
	}
	return g
}

// complete reports whether every client neighbours every other.
func (g *graph) complete() bool { return g.ring == nil }

// adjacent reports whether the clients at indices i ≠ j are neighbours.
func (g *graph) adjacent(i, j int) bool {
	if i == j {
		return false
	}
	if g.complete() {
		return true
	}
	d := g.ring[i] - g.ring[j]
	if d < 0 {
		d = -d
	}
	return min(d, len(g.ids)-d) <= g.k/2
}

// neighbors returns the IDs of index i's k neighbours, sorted.
func (g *graph) neighbors(i int) []ClientID {
	out := make([]ClientID, 0, g.k)
	if g.complete() {
		out = append(out, g.ids[:i]...)
		return append(out, g.ids[i+1:]...)
	}
	n, p := len(g.ids), g.ring[i]
	for off := 1; off <= g.k/2; off++ {
		out = append(out, g.ids[g.at[(p+off)%n]], g.ids[g.at[(p-off+n)%n]])
	}
	slices.Sort(out)
	return out
}
