package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// wantLabels is client i's label set by LabelsPerClient's definition,
// computed by brute force: {(i + j) mod C : j < K}.
func wantLabels(i, k, classes int) []bool {
	s := make([]bool, classes)
	for j := range k {
		s[(i+j)%classes] = true
	}
	return s
}

// Exact partition (NewFederated checks it), each client's labels within
// its K assigned labels, exactly K of them when every class has at least
// as many examples as holders, and with Sigma = 0 every (client, label)
// share within one of n_c/h.
func TestLabelsPerClientPartition(t *testing.T) {
	counts := []int{400, 250, 150, 100, 50, 30, 10, 7, 2, 1} // n = 1000
	ds := labelled(counts, 1)
	for _, k := range []int{1, 2, 3, 10} {
		for _, n := range []int{9, 10, 17, 100, 1000, 3000} {
			for _, sigma := range []float64{0, 2} {
				p := LabelsPerClient{K: k, Sigma: sigma}
				f, err := NewFederated(ds, Options{NumClients: n, Partitioner: p, Seed: 3, HeldOutFraction: 0.3})
				if n+k-1 < len(counts) {
					if err == nil || !strings.Contains(err.Error(), "has no client") {
						t.Fatalf("%v, %d clients: error %v, want one about a class with no client", p, n, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v, %d clients: %v", p, n, err)
				}
				holders := make([]int, len(counts))
				for i := range n {
					for c, ok := range wantLabels(i, k, len(counts)) {
						if ok {
							holders[c]++
						}
					}
				}
				for _, id := range f.ClientIDs() {
					h := classCounts(ds, allIdx(f.Client(id)))
					want := wantLabels(id, k, len(counts))
					complete := true
					for c, m := range h {
						if m > 0 && !want[c] {
							t.Fatalf("%v, %d clients: client %d has label %d, not among its %d labels", p, n, id, c, k)
						}
						if want[c] && counts[c] < holders[c] {
							complete = false
						}
						if want[c] && counts[c] >= holders[c] && m == 0 {
							t.Fatalf("%v, %d clients: client %d lacks label %d (%d examples, %d holders)", p, n, id, c, counts[c], holders[c])
						}
						if want[c] && sigma == 0 && (m < counts[c]/holders[c] || m > (counts[c]+holders[c]-1)/holders[c]) {
							t.Fatalf("%v, %d clients: client %d has %d of label %d's %d examples, %d holders", p, n, id, m, c, counts[c], holders[c])
						}
					}
					if d := distinct(h); d > k || (complete && d != k) {
						t.Fatalf("%v, %d clients: client %d has %d labels %v, want %d", p, n, id, d, h, k)
					}
				}
			}
		}
	}
}

// A class with fewer examples than holders goes to that many distinct,
// random holders; the rest lack it.
func TestLabelsPerClientScarceClass(t *testing.T) {
	labels := []uint8{0, 0, 0, 0, 0, 0, 1, 1} // class 1: 2 examples, 6 holders (K = 2, C = 2)
	hit := make([]int, 6)
	for seed := range uint64(600) {
		parts, err := LabelsPerClient{K: 2, Sigma: 1}.Partition(labels, 2, 6, rand.New(rand.NewPCG(seed, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkExactPartition(parts, len(labels), 6); err != nil {
			t.Fatal(err)
		}
		ones := 0
		for i, p := range parts {
			m := 0
			for _, e := range p {
				if labels[e] == 1 {
					m++
				}
			}
			if m > 1 || len(p) < 1 {
				t.Fatalf("client %d: %d examples of class 1, %d in all", i, m, len(p))
			}
			ones += m
			hit[i] += m
		}
		if ones != 2 {
			t.Fatalf("class 1 dealt %d times", ones)
		}
	}
	for i, h := range hit { // binomial(600, 1/3): 200 ± 11.5
		if math.Abs(float64(h)-200) > 5*11.5 {
			t.Errorf("client %d got class 1 in %d of 600 splits, want ≈ 200", i, h)
		}
	}
}

// With Sigma = σ, a label's shares beyond the first example are
// proportional to lognormal(0, σ) weights: over 1000 holders of a class of
// 500,000 examples, log(size − 1) has variance σ² (rounding adds < 0.1%),
// within 5 standard errors; with σ = 0 the sizes differ by at most 1.
func TestLabelsPerClientSizes(t *testing.T) {
	labels := make([]uint8, 500_000)
	for _, sigma := range []float64{0, 0.5, 1.5} {
		parts, err := LabelsPerClient{K: 1, Sigma: sigma}.Partition(labels, 1, 1000, rand.New(rand.NewPCG(4, 1)))
		if err != nil {
			t.Fatal(err)
		}
		var m moments
		lo, hi := len(labels), 0
		for _, p := range parts {
			m.add(math.Log(float64(len(p) - 1)))
			lo, hi = min(lo, len(p)), max(hi, len(p))
		}
		_, v, _, seV := m.stats()
		if sigma == 0 && hi-lo > 1 || sigma > 0 && math.Abs(v-sigma*sigma) > 5*seV {
			t.Errorf("σ = %v: Var log(size−1) = %.4f ± %.4f, sizes in [%d, %d]", sigma, v, seV, lo, hi)
		}
	}
}

// apportion: the shares sum to m and each is within 1 of m·w_k/Σw.
func TestApportion(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	for range 200 {
		w := make([]float64, 1+rng.IntN(20))
		var total float64
		for k := range w {
			w[k] = math.Exp(3 * rng.NormFloat64())
			total += w[k]
		}
		m := rng.IntN(1000)
		out := apportion(m, w)
		sum := 0
		for k, o := range out {
			sum += int(o)
			if q := float64(m) * w[k] / total; math.Abs(float64(o)-q) >= 1 {
				t.Fatalf("apportion(%d, %v): share %d = %d, quota %.3f", m, w, k, o, q)
			}
		}
		if sum != m {
			t.Fatalf("apportion(%d, %v) = %v sums to %d", m, w, out, sum)
		}
	}
}

func TestLabelsPerClientReproducible(t *testing.T) {
	ds := labelled(repeat(300, 10), 2)
	mk := func(seed uint64) [][]int32 {
		f := mustFederated(t, ds, Options{NumClients: 50, Partitioner: LabelsPerClient{K: 2, Sigma: 2}, Seed: seed})
		out := make([][]int32, f.NumClients())
		for i := range out {
			out[i] = allIdx(f.Client(i))
		}
		return out
	}
	a, b, c := mk(1), mk(1), mk(2)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Error("same seed, different clients")
	}
	if slices.EqualFunc(a, c, slices.Equal) {
		t.Error("seeds 1 and 2 give the same clients")
	}
}

func TestLabelsPerClientErrors(t *testing.T) {
	labels := []uint8{0, 1, 2, 1}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		p    LabelsPerClient
		n    int
		want string
	}{
		{LabelsPerClient{K: 0}, 3, "labels_per_client must be ≥ 1"},
		{LabelsPerClient{K: -1}, 3, "labels_per_client must be ≥ 1"},
		{LabelsPerClient{K: 4}, 3, "labels_per_client must be at most the 3 classes"},
		{LabelsPerClient{K: 1, Sigma: -1}, 3, "labels_sigma"},
		{LabelsPerClient{K: 1, Sigma: math.NaN()}, 3, "labels_sigma"},
		{LabelsPerClient{K: 1, Sigma: math.Inf(1)}, 3, "labels_sigma"},
		{LabelsPerClient{K: 1}, 2, "class 2 has no client"},
		{LabelsPerClient{K: 3}, MaxClients, "slots"},
	} {
		if _, err := c.p.Partition(labels, 3, c.n, rng); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, %d clients: error %v, want one mentioning %q", c.p, c.n, err, c.want)
		}
	}
	// K = classes gives every client every label.
	parts, err := LabelsPerClient{K: 3}.Partition(labels, 3, 1, rng)
	if err != nil || len(parts) != 1 || len(parts[0]) != 4 {
		t.Errorf("K = classes, one client: %v, %v", parts, err)
	}
}

func TestParsePartitionerParams(t *testing.T) {
	p, err := ParsePartitionerParams("labels", PartitionParams{LabelsPerClient: 2, LabelsSigma: 2})
	if err != nil || p != (LabelsPerClient{K: 2, Sigma: 2}) || p.String() != "labels(per_client=2,sigma=2)" {
		t.Errorf("labels: %v, %v", p, err)
	}
	if p, err := ParsePartitionerParams("shards", PartitionParams{ShardsPerClient: 2}); err != nil || p != (Shards{PerClient: 2}) {
		t.Errorf("shards: %v, %v", p, err)
	}
	for _, c := range []struct {
		p    PartitionParams
		want string
	}{
		{PartitionParams{}, "labels_per_client must be ≥ 1, got 0"},
		{PartitionParams{LabelsPerClient: 2, LabelsSigma: -1}, "labels_sigma"},
	} {
		if _, err := ParsePartitionerParams("labels", c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("labels %+v: error %v, want %q", c.p, err, c.want)
		}
	}
	if _, err := ParsePartitioner("labels", 1, 2); err == nil || !strings.Contains(err.Error(), "labels_per_client") {
		t.Errorf("ParsePartitioner(labels) without labels_per_client: %v", err)
	}
	if _, err := ParsePartitionerParams("zipf", PartitionParams{}); err == nil || !strings.Contains(err.Error(), "known: iid, dirichlet, shards, labels") {
		t.Errorf("unknown name: %v", err)
	}
}
