package data

import (
	"fmt"
	"math"
)

// Dataset is a set of labelled examples: Len() rows of Dim float32 features
// in X (row-major, Len()·Dim values) and one label per row in Y, each in
// [0, Classes). The features' range depends on the source: image pixels
// are in [0, 1] (IDX files: pixel/255; LEAF's FEMNIST stores them so);
// FedProx's synthetic features are unbounded Gaussian coordinates.
type Dataset struct {
	X       []float32
	Y       []uint8
	Dim     int
	Classes int
}

// Len is the number of examples, len(Y).
func (d *Dataset) Len() int { return len(d.Y) }

// Gather copies rows idx of d into dstX (len(idx)·Dim values, row-major)
// and dstY (len(idx) labels). It panics if dstX or dstY has the wrong
// length or an index is out of range; it allocates nothing, so training
// loops can reuse their minibatch buffers.
func (d *Dataset) Gather(dstX []float32, dstY []uint8, idx []int32) {
	if len(dstX) != len(idx)*d.Dim || len(dstY) != len(idx) {
		panic(fmt.Sprintf("data: Gather of %d rows of dim %d into %d values and %d labels", len(idx), d.Dim, len(dstX), len(dstY)))
	}
	dim := d.Dim
	for i, r := range idx {
		copy(dstX[i*dim:(i+1)*dim], d.X[int(r)*dim:(int(r)+1)*dim])
		dstY[i] = d.Y[r]
	}
}

// Validate checks the shapes of d: Dim ≥ 1, Classes in [1, 256], len(X) =
// Len()·Dim, at most math.MaxInt32 examples (clients index them with
// int32) and every label below Classes. It returns the first violation.
func (d *Dataset) Validate() error {
	switch {
	case d == nil:
		return fmt.Errorf("data: nil dataset")
	case d.Dim < 1:
		return fmt.Errorf("data: dataset dim must be ≥ 1, got %d", d.Dim)
	case d.Classes < 1 || d.Classes > 256:
		return fmt.Errorf("data: dataset classes must be in [1, 256], got %d", d.Classes)
	case d.Len() > math.MaxInt32:
		return fmt.Errorf("data: %d examples exceed the int32 index range", d.Len())
	case len(d.X) != d.Len()*d.Dim:
		return fmt.Errorf("data: dataset has %d feature values for %d examples of dim %d", len(d.X), d.Len(), d.Dim)
	}
	if err := checkLabels(d.Y, d.Classes); err != nil {
		return fmt.Errorf("data: dataset: %w", err)
	}
	return nil
}

// checkLabels reports the first label ≥ classes.
func checkLabels(labels []uint8, classes int) error {
	for i, l := range labels {
		if int(l) >= classes {
			return fmt.Errorf("label %d of example %d is not below %d classes", l, i, classes)
		}
	}
	return nil
}
