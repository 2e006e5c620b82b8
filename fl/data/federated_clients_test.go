package data

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestNewFederatedFromClients(t *testing.T) {
	ds := labelled([]int{3, 3}, 1) // 6 examples
	lists := [][]int32{{4, 0, 2}, {}, {5, 1, 3}}
	f, err := NewFederatedFromClients(ds, lists, 0.5, 7)
	if err != nil {
		t.Fatal(err)
	}
	if f.NumClients() != 3 || f.TotalExamples() != 6 || f.Base() != ds {
		t.Fatalf("%d clients, %d examples", f.NumClients(), f.TotalExamples())
	}
	for id, want := range lists {
		c := f.Client(id)
		got := allIdx(c)
		if len(c.HeldOut) != len(want)/2 {
			t.Errorf("client %d holds out %d of %d, want %d", id, len(c.HeldOut), len(want), len(want)/2)
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("client %d holds %v, want the examples %v", id, got, w)
		}
	}
	if !slices.Equal(lists[0], []int32{4, 0, 2}) {
		t.Errorf("caller's list modified: %v", lists[0])
	}
	g, _ := NewFederatedFromClients(ds, lists, 0.5, 7)
	for id := range lists {
		if !slices.Equal(allIdx(f.Client(id)), allIdx(g.Client(id))) {
			t.Fatalf("same seed, client %d differs", id)
		}
	}

	// Over many seeds, each of client 0's three examples is held out
	// (⌊0.5·3⌋ = 1 of them) with probability 1/3: 3000 seeds, sd ≈ 26.
	held := map[int32]int{}
	for seed := range uint64(3000) {
		f, err := NewFederatedFromClients(ds, lists, 0.5, seed)
		if err != nil {
			t.Fatal(err)
		}
		held[f.Client(0).HeldOut[0]]++
	}
	for _, i := range lists[0] {
		if math.Abs(float64(held[i])-1000) > 130 {
			t.Errorf("example %d held out %d times of 3000, want ≈ 1000", i, held[i])
		}
	}

	for _, c := range []struct {
		name    string
		base    *Dataset
		clients [][]int32
		frac    float64
		want    string
	}{
		{"no clients", ds, nil, 0, "number of clients"},
		{"held out 1", ds, lists, 1, "held-out"},
		{"held out NaN", ds, lists, math.NaN(), "held-out"},
		{"empty base", &Dataset{Dim: 1, Classes: 2}, [][]int32{{}}, 0, "empty"},
		{"nil base", nil, lists, 0, "nil dataset"},
		{"duplicate", ds, [][]int32{{0, 1, 2}, {2, 3, 4, 5}}, 0, "example 2 assigned twice (again to client 1)"},
		{"missing", ds, [][]int32{{0, 1, 2}, {3, 4}}, 0, "5 of 6"},
		{"out of range", ds, [][]int32{{0, 1, 2}, {3, 4, 5, 6}}, 0, "client 1 got example 6"},
	} {
		_, err := NewFederatedFromClients(c.base, c.clients, c.frac, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
