package data

import (
	"math"
	"math/rand/v2"
	"testing"
)

// labelled returns a dataset with counts[c] examples of class c, in a
// seeded random order, feature x_i = i (Dim 1) so rows are identifiable.
func labelled(counts []int, seed uint64) *Dataset {
	var y []uint8
	for c, m := range counts {
		for range m {
			y = append(y, uint8(c))
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	rng.Shuffle(len(y), func(i, j int) { y[i], y[j] = y[j], y[i] })
	x := make([]float32, len(y))
	for i := range x {
		x[i] = float32(i)
	}
	return &Dataset{X: x, Y: y, Dim: 1, Classes: len(counts)}
}

func repeat(m, classes int) []int {
	c := make([]int, classes)
	for i := range c {
		c[i] = m
	}
	return c
}

// classCounts is the label histogram of the examples idx.
func classCounts(ds *Dataset, idx []int32) []int {
	h := make([]int, ds.Classes)
	for _, i := range idx {
		h[ds.Y[i]]++
	}
	return h
}

func distinct(h []int) int {
	n := 0
	for _, x := range h {
		if x > 0 {
			n++
		}
	}
	return n
}

func mustFederated(t testing.TB, ds *Dataset, opt Options) *Federated {
	t.Helper()
	f, err := NewFederated(ds, opt)
	if err != nil {
		t.Fatalf("NewFederated(%v, %d clients): %v", opt.Partitioner, opt.NumClients, err)
	}
	return f
}

// allIdx is a client's examples, training and held-out.
func allIdx(c Client) []int32 { return append(append([]int32{}, c.HeldOut...), c.Train...) }

// moments accumulates the sample mean and variance of a statistic and the
// standard errors of both, estimated from the sample itself (the variance's
// from the fourth central moment), so tolerances need no distributional
// assumption.
type moments struct{ xs []float64 }

func (m *moments) add(x float64) { m.xs = append(m.xs, x) }

func (m *moments) stats() (mean, variance, seMean, seVar float64) {
	n := float64(len(m.xs))
	for _, x := range m.xs {
		mean += x
	}
	mean /= n
	var m4 float64
	for _, x := range m.xs {
		d := (x - mean) * (x - mean)
		variance += d
		m4 += d * d
	}
	variance /= n
	m4 /= n
	return mean, variance, math.Sqrt(variance / n), math.Sqrt(max(m4-variance*variance, 0) / n)
}
