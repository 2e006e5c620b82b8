package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fixedPartitioner returns a canned (possibly broken) result.
type fixedPartitioner [][]int32

func (p fixedPartitioner) Partition([]uint8, int, int, *rand.Rand) ([][]int32, error) { return p, nil }
func (fixedPartitioner) String() string                                               { return "fixed" }

func TestNewFederatedErrors(t *testing.T) {
	ds := labelled(repeat(10, 10), 1) // 100 examples
	cases := []struct {
		name string
		base *Dataset
		opt  Options
		want string
	}{
		{"no clients", ds, Options{NumClients: 0, Partitioner: IID{}}, "clients"},
		{"too many clients", ds, Options{NumClients: MaxClients + 1, Partitioner: IID{}}, "clients"},
		{"no partitioner", ds, Options{NumClients: 10}, "partitioner"},
		{"held out 1", ds, Options{NumClients: 10, Partitioner: IID{}, HeldOutFraction: 1}, "held-out"},
		{"held out <0", ds, Options{NumClients: 10, Partitioner: IID{}, HeldOutFraction: -0.1}, "held-out"},
		{"held out NaN", ds, Options{NumClients: 10, Partitioner: IID{}, HeldOutFraction: math.NaN()}, "held-out"},
		{"alpha", ds, Options{NumClients: 10, Partitioner: Dirichlet{Alpha: 0}}, "dirichlet_alpha"},
		{"shards", ds, Options{NumClients: 10, Partitioner: Shards{PerClient: 11}}, "shards_per_client"},
		{"nil base", nil, Options{NumClients: 1, Partitioner: IID{}}, "nil dataset"},
		{"empty base", &Dataset{Dim: 1, Classes: 2}, Options{NumClients: 1, Partitioner: IID{}}, "empty"},
		{"X length", &Dataset{X: make([]float32, 3), Y: []uint8{0, 1}, Dim: 2, Classes: 2}, Options{NumClients: 1, Partitioner: IID{}}, "feature values"},
		{"label range", &Dataset{X: make([]float32, 2), Y: []uint8{0, 2}, Dim: 1, Classes: 2}, Options{NumClients: 1, Partitioner: IID{}}, "label 2"},
		{"dim", &Dataset{Y: []uint8{0}, Classes: 2}, Options{NumClients: 1, Partitioner: IID{}}, "dim"},
	}
	small := labelled([]int{2, 2}, 1) // 4 examples
	for _, p := range []struct {
		name string
		p    fixedPartitioner
		want string
	}{
		{"wrong count", fixedPartitioner{{0, 1, 2, 3}}, "returned 1 clients"},
		{"duplicate", fixedPartitioner{{0, 1}, {1, 2, 3}}, "twice"},
		{"missing", fixedPartitioner{{0, 1}, {3}}, "3 of 4"},
		{"out of range", fixedPartitioner{{0, 1}, {2, 3, 4}}, "outside"},
		{"negative", fixedPartitioner{{0, 1}, {2, 3, -1}}, "outside"},
	} {
		cases = append(cases, struct {
			name string
			base *Dataset
			opt  Options
			want string
		}{p.name, small, Options{NumClients: 2, Partitioner: p.p}, p.want})
	}
	for _, c := range cases {
		_, err := NewFederated(c.base, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := NewFederated(small, Options{NumClients: 2, Partitioner: fixedPartitioner{{3, 1}, {0, 2}}}); err != nil {
		t.Errorf("valid custom partition rejected: %v", err)
	}
}

func expectPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", name)
		}
	}()
	f()
}

func TestFederatedAccessors(t *testing.T) {
	ds := labelled(repeat(50, 4), 2)
	f := mustFederated(t, ds, Options{NumClients: 9, Partitioner: IID{}, Seed: 3, HeldOutFraction: 0.2})
	if ids := f.ClientIDs(); !slices.Equal(ids, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("ClientIDs %v", ids)
	}
	total := 0
	for id := range 9 {
		total += f.ClientSize(id) + len(f.Client(id).HeldOut)
	}
	if total != 200 || f.TotalExamples() != 200 {
		t.Fatalf("sizes sum to %d, TotalExamples %d", total, f.TotalExamples())
	}
	for _, id := range []int{-1, 9} {
		expectPanic(t, "Client", func() { f.Client(id) })
		expectPanic(t, "ClientSize", func() { f.ClientSize(id) })
	}
	if a := testing.AllocsPerRun(100, func() { f.Client(4) }); a != 0 {
		t.Errorf("Client allocates %v times", a)
	}
	// The slices are capped, so an append by a careless caller cannot
	// overwrite the next client's examples.
	c := f.Client(0)
	next := slices.Clone(f.Client(1).HeldOut)
	_ = append(c.Train, -1)
	_ = append(c.HeldOut, -1)
	if !slices.Equal(next, f.Client(1).HeldOut) || !slices.Equal(allIdx(f.Client(0))[:len(c.HeldOut)], c.HeldOut) {
		t.Error("append to a client's slice changed stored indices")
	}
}

// Shards hand out examples grouped by label; the held-out share must still
// be a random subset, not the client's first shard. With two one-label
// shards of 300 and half held out, each label's held-out count is
// hypergeometric: mean 150, sd ≈ 8.7.
func TestHeldOutIsRandomSubset(t *testing.T) {
	ds := labelled(repeat(6000, 10), 3)
	f := mustFederated(t, ds, Options{NumClients: 100, Partitioner: Shards{PerClient: 2}, Seed: 4, HeldOutFraction: 0.5})
	for _, id := range f.ClientIDs() {
		c := f.Client(id)
		all := classCounts(ds, allIdx(c))
		held := classCounts(ds, c.HeldOut)
		if distinct(all) != 2 {
			continue
		}
		for k, h := range held {
			if all[k] == 300 && math.Abs(float64(h)-150) > 50 {
				t.Fatalf("client %d holds out %d of 300 examples of class %d", id, h, k)
			}
		}
	}
}

func TestGather(t *testing.T) {
	ds := &Dataset{X: []float32{0, 1, 10, 11, 20, 21, 30, 31}, Y: []uint8{3, 1, 2, 0}, Dim: 2, Classes: 4}
	idx := []int32{2, 0, 2, 3}
	x, y := make([]float32, 8), make([]uint8, 4)
	ds.Gather(x, y, idx)
	if !slices.Equal(x, []float32{20, 21, 0, 1, 20, 21, 30, 31}) || !slices.Equal(y, []uint8{2, 3, 2, 0}) {
		t.Fatalf("Gather gave %v %v", x, y)
	}
	if a := testing.AllocsPerRun(100, func() { ds.Gather(x, y, idx) }); a != 0 {
		t.Errorf("Gather allocates %v times", a)
	}
	expectPanic(t, "Gather short X", func() { ds.Gather(x[:7], y, idx) })
	expectPanic(t, "Gather short Y", func() { ds.Gather(x, y[:3], idx) })
	expectPanic(t, "Gather bad index", func() { ds.Gather(x[:2], y[:1], []int32{4}) })
}
