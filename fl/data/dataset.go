// Package data is dpfl's federated data: labelled examples (Dataset), the
// IDX file format of MNIST and Fashion-MNIST, and the partitioners that
// split a dataset into a simulated population of clients (Federated), in
// the spirit of FedJAX's federated datasets (client id → client data).
//
// All randomness here is simulation randomness: seeded and reproducible.
package data

import "fmt"

// Dataset is a set of labelled examples: Len() rows of Dim float32 features
// (pixels scaled to [0, 1]) in X, row-major, and labels in [0, Classes) in Y.
type Dataset struct {
	X       []float32
	Y       []uint8
	Dim     int
	Classes int
}

// Len is the number of examples.
func (d *Dataset) Len() int { return len(d.Y) }

// Gather copies rows idx of d into dstX (len(idx)·Dim values) and dstY
// (len(idx) labels). It panics if the lengths do not match; it allocates
// nothing.
func (d *Dataset) Gather(dstX []float32, dstY []uint8, idx []int32) {
	if len(dstX) != len(idx)*d.Dim || len(dstY) != len(idx) {
		panic(fmt.Sprintf("data: Gather of %d rows into %d values and %d labels", len(idx), len(dstX), len(dstY)))
	}
	for i, r := range idx {
		copy(dstX[i*d.Dim:(i+1)*d.Dim], d.X[int(r)*d.Dim:(int(r)+1)*d.Dim])
		dstY[i] = d.Y[r]
	}
}
