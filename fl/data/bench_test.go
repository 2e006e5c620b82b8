package data

import (
	"strconv"
	"testing"

	"github.com/dpfl/dpfl/internal/datatest"
)

func BenchmarkLoadFashionMNIST(b *testing.B) {
	dir := datatest.FashionMNIST(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := LoadFashionMNIST(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// NewFederated over 60,000 examples in 10 balanced classes (Fashion-MNIST's
// training set shape).
func BenchmarkNewFederated(b *testing.B) {
	ds := labelled(repeat(6000, 10), 1)
	for _, c := range []struct {
		p Partitioner
		k int
	}{
		{Dirichlet{Alpha: 0.5}, 6000}, {Dirichlet{Alpha: 0.5}, 1_000_000},
		{IID{}, 6000}, {IID{}, 1_000_000}, {Shards{PerClient: 2}, 6000},
		{LabelsPerClient{K: 2, Sigma: 2}, 1000}, {LabelsPerClient{K: 2, Sigma: 2}, 1_000_000},
	} {
		b.Run(c.p.String()+"/clients="+strconv.Itoa(c.k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewFederated(ds, Options{NumClients: c.k, Partitioner: c.p, Seed: 1, HeldOutFraction: 0.2}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGather(b *testing.B) {
	ds := &Dataset{X: make([]float32, 60000*784), Y: make([]uint8, 60000), Dim: 784, Classes: 10}
	idx := make([]int32, 64)
	for i := range idx {
		idx[i] = int32(i * 937 % 60000)
	}
	x, y := make([]float32, 64*784), make([]uint8, 64)
	b.SetBytes(64 * 784 * 4)
	for b.Loop() {
		ds.Gather(x, y, idx)
	}
}

// FedProx's Synthetic(1, 1) with seed 0: 30 devices of lognormal(4, 2) + 50
// examples of dim 60.
func BenchmarkSynthetic(b *testing.B) {
	cfg := FedProxSynthetic(1, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Synthetic(cfg); err != nil {
			b.Fatal(err)
		}
	}
}
