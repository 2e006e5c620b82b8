package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var testPartitioners = []Partitioner{
	IID{}, Dirichlet{Alpha: 1e-4}, Dirichlet{Alpha: 0.1}, Dirichlet{Alpha: 1}, Dirichlet{Alpha: 1e6},
	Shards{PerClient: 1}, Shards{PerClient: 2}, Shards{PerClient: 3},
}

// Every index lands in exactly one client (train ∪ held-out), held-out
// shares are ⌊f·m⌋, and IID/Dirichlet sizes are ⌊n/N⌋ or ⌈n/N⌉.
func TestPartitionsAreExact(t *testing.T) {
	counts := []int{400, 250, 150, 100, 50, 30, 10, 7, 2, 1} // n = 1000, skewed prior
	ds := labelled(counts, 1)
	n := ds.Len()
	for _, p := range testPartitioners {
		for _, k := range []int{1, 7, 100, 999, 1000, 5000} {
			for _, frac := range []float64{0, 0.3} {
				f, err := NewFederated(ds, Options{NumClients: k, Partitioner: p, Seed: 3, HeldOutFraction: frac})
				if s, ok := p.(Shards); ok && k*s.PerClient > n {
					if err == nil || !strings.Contains(err.Error(), "shards_per_client") {
						t.Fatalf("%v with %d clients: error %v, want one naming shards_per_client", p, k, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v, %d clients: %v", p, k, err)
				}
				if f.NumClients() != k || f.TotalExamples() != n || f.Base() != ds {
					t.Fatalf("%v: %d clients, %d examples", p, f.NumClients(), f.TotalExamples())
				}
				seen := make([]int, n)
				nonEmpty, highNonEmpty := 0, false
				for _, id := range f.ClientIDs() {
					c := f.Client(id)
					m := len(c.Train) + len(c.HeldOut)
					if c.ID != id || f.ClientSize(id) != len(c.Train) {
						t.Fatalf("%v: client %d: ID %d, ClientSize %d, %d train", p, id, c.ID, f.ClientSize(id), len(c.Train))
					}
					if want := int(math.Floor(frac*float64(m) + 1e-9)); len(c.HeldOut) != want {
						t.Fatalf("%v: client %d holds out %d of %d, want %d", p, id, len(c.HeldOut), m, want)
					}
					if _, shards := p.(Shards); !shards && (m < n/k || m > (n+k-1)/k) {
						t.Fatalf("%v: client %d has %d examples, want %d or %d", p, id, m, n/k, (n+k-1)/k)
					}
					for _, i := range allIdx(c) {
						seen[i]++
					}
					if m > 0 {
						nonEmpty++
						highNonEmpty = highNonEmpty || id >= n
					}
				}
				for i, s := range seen {
					if s != 1 {
						t.Fatalf("%v, %d clients: example %d assigned %d times", p, k, i, s)
					}
				}
				if k > n && (nonEmpty != n || !highNonEmpty) {
					t.Fatalf("%v, %d clients over %d examples: %d non-empty clients (any with ID ≥ n: %v); want n, spread over all IDs", p, k, n, nonEmpty, highNonEmpty)
				}
			}
		}
	}
}

func TestPartitionReproducible(t *testing.T) {
	ds := labelled(repeat(300, 10), 2)
	for _, p := range testPartitioners {
		mk := func(seed uint64) [][]int32 {
			f := mustFederated(t, ds, Options{NumClients: 50, Partitioner: p, Seed: seed, HeldOutFraction: 0.2})
			out := make([][]int32, f.NumClients())
			for i := range out {
				out[i] = allIdx(f.Client(i))
			}
			return out
		}
		a, b, c := mk(1), mk(1), mk(2)
		eq := func(x, y [][]int32) bool { return slices.EqualFunc(x, y, slices.Equal) }
		if !eq(a, b) {
			t.Errorf("%v: seed 1 twice gave different populations", p)
		}
		if eq(a, c) {
			t.Errorf("%v: seeds 1 and 2 gave the same population", p)
		}
	}
}

// Under IID each client's class counts are hypergeometric: a uniformly
// random m-subset of n examples has mean m·p_c and variance
// m·p_c(1−p_c)(n−m)/(n−1) examples of class c.
func TestIIDClassProportions(t *testing.T) {
	counts := make([]int, 10)
	for c := range counts {
		counts[c] = 400 * (c + 1) // p_c = (c+1)/55, n = 22000
	}
	ds := labelled(counts, 4)
	n := float64(ds.Len())
	f := mustFederated(t, ds, Options{NumClients: 11, Partitioner: IID{}, Seed: 5})
	for _, id := range f.ClientIDs() {
		tr := f.Client(id).Train
		m := float64(len(tr))
		for c, got := range classCounts(ds, tr) {
			p := float64(counts[c]) / n
			mean, sd := m*p, math.Sqrt(m*p*(1-p)*(n-m)/(n-1))
			if math.Abs(float64(got)-mean) > 5*sd {
				t.Errorf("client %d class %d: %d examples, want %.0f ± %.1f", id, c, got, mean, sd)
			}
		}
	}
}

// McMahan et al. 2017, §3: 60,000 examples sorted by label into 200 shards
// of 300, 2 per client for 100 clients. With 6,000 per class no shard
// straddles two labels, so every client holds 600 examples of at most 2
// classes, in counts of 300 or 600.
func TestShardsPaperSetup(t *testing.T) {
	ds := labelled(repeat(6000, 10), 6)
	f := mustFederated(t, ds, Options{NumClients: 100, Partitioner: Shards{PerClient: 2}, Seed: 7})
	twoClass := 0
	for _, id := range f.ClientIDs() {
		h := classCounts(ds, f.Client(id).Train)
		for c, x := range h {
			if x != 0 && x != 300 && x != 600 {
				t.Fatalf("client %d has %d examples of class %d, want 0, 300 or 600", id, x, c)
			}
		}
		if f.ClientSize(id) != 600 || distinct(h) > 2 {
			t.Fatalf("client %d: %d examples, %d classes", id, f.ClientSize(id), distinct(h))
		}
		if distinct(h) == 2 {
			twoClass++
		}
	}
	// A client's two shards share a class with probability 19/199 (each
	// class has 20 shards), so about 90 of 100 clients have two classes.
	if twoClass < 75 {
		t.Errorf("%d of 100 clients have two classes, want about 90", twoClass)
	}
}

// With shards that straddle labels, each client's class histogram must be
// the sum of PerClient shard histograms, where the shard histograms follow
// from cutting the label-sorted order (computed here independently), and
// the multiset of shards used must be exactly all shards.
func TestShardsStructure(t *testing.T) {
	counts := []int{500, 900, 130, 470, 1000}
	ds := labelled(counts, 8)
	const k, per = 7, 3
	ns := k * per
	// Label-sorted order is counts[0] zeros, then counts[1] ones, …; shard j
	// covers positions [Σ_{i<j} len_i, …) with len_j = ⌊n/ns⌋ (+1 for j < n mod ns).
	var sortedLabels []int
	for c, m := range counts {
		for range m {
			sortedLabels = append(sortedLabels, c)
		}
	}
	n := len(sortedLabels)
	shardHist := make([][]int, ns)
	pos := 0
	for j := range shardHist {
		l := n / ns
		if j < n%ns {
			l++
		}
		shardHist[j] = make([]int, len(counts))
		for _, c := range sortedLabels[pos : pos+l] {
			shardHist[j][c]++
		}
		pos += l
	}
	f := mustFederated(t, ds, Options{NumClients: k, Partitioner: Shards{PerClient: per}, Seed: 9})
	var used [][]int
	for _, id := range f.ClientIDs() {
		h := classCounts(ds, f.Client(id).Train)
		if distinct(h) > 2*per {
			t.Errorf("client %d has %d classes, want ≤ %d", id, distinct(h), 2*per)
		}
		found := false
		for a := 0; a < ns && !found; a++ {
			for b := a + 1; b < ns && !found; b++ {
				for c := b + 1; c < ns && !found; c++ {
					sum := make([]int, len(counts))
					for i := range sum {
						sum[i] = shardHist[a][i] + shardHist[b][i] + shardHist[c][i]
					}
					if slices.Equal(sum, h) {
						found = true
						used = append(used, shardHist[a], shardHist[b], shardHist[c])
					}
				}
			}
		}
		if !found {
			t.Fatalf("client %d histogram %v is not a sum of %d shards", id, h, per)
		}
	}
	cmp := func(x, y []int) int { return slices.Compare(x, y) }
	all := slices.Clone(shardHist)
	slices.SortFunc(all, cmp)
	slices.SortFunc(used, cmp)
	if !slices.EqualFunc(all, used, slices.Equal) {
		t.Error("clients' shards are not exactly the set of shards")
	}
}

func TestParsePartitioner(t *testing.T) {
	good := []struct {
		name   string
		alpha  float64
		shards int
		want   string
	}{
		{"iid", 0, 0, "iid"},
		{"dirichlet", 0.3, 0, "dirichlet(alpha=0.3)"},
		{"shards", 0, 2, "shards(per_client=2)"},
	}
	for _, g := range good {
		p, err := ParsePartitioner(g.name, g.alpha, g.shards)
		if err != nil || p.String() != g.want {
			t.Errorf("ParsePartitioner(%q): %v, %v; want %s", g.name, p, err, g.want)
		}
	}
	bad := []struct {
		name   string
		alpha  float64
		shards int
		field  string
	}{
		{"dirichlet", 0, 0, "dirichlet_alpha"},
		{"dirichlet", -1, 0, "dirichlet_alpha"},
		{"dirichlet", math.NaN(), 0, "dirichlet_alpha"},
		{"dirichlet", math.Inf(1), 0, "dirichlet_alpha"},
		{"shards", 0, 0, "shards_per_client"},
		{"zipf", 1, 1, "unknown partitioner"},
	}
	for _, b := range bad {
		if _, err := ParsePartitioner(b.name, b.alpha, b.shards); err == nil || !strings.Contains(err.Error(), b.field) {
			t.Errorf("ParsePartitioner(%q, %v, %d): error %v, want one naming %s", b.name, b.alpha, b.shards, err, b.field)
		}
	}
}

// Partitioners validate their arguments when called directly.
func TestPartitionerArgs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	labels := []uint8{0, 1, 2, 1}
	for _, p := range []Partitioner{IID{}, Dirichlet{Alpha: 1}, Shards{PerClient: 1}, LabelsPerClient{K: 1}} {
		for _, c := range []struct {
			classes, k int
			want       string
		}{{3, 0, "clients"}, {3, MaxClients + 1, "clients"}, {2, 2, "label 2"}, {0, 2, "classes"}, {257, 2, "classes"}} {
			if _, err := p.Partition(labels, c.classes, c.k, rng); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %d classes, %d clients: error %v, want one mentioning %q", p, c.classes, c.k, err, c.want)
			}
		}
	}
}
