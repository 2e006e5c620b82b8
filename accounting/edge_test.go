package accounting

import (
	"encoding/json"
	"math"
	"testing"
)

// After a NonPrivate event no order gives a finite bound: ε = +Inf, δ = 1,
// and the reported order is 0, not NaN, so a privacy report that carries
// it still encodes as JSON (encoding/json refuses NaN).
func TestNonPrivateReportEncodes(t *testing.T) {
	a := NewRDPAccountant(nil)
	if err := a.Compose(Composed{Events: []Event{PoissonSampled{SamplingProbability: 0.1, Event: Gaussian{NoiseMultiplier: 1}}, NonPrivate{}}}, 1); err != nil {
		t.Fatal(err)
	}
	eps, order, err := a.Epsilon(1e-5)
	if err != nil || !math.IsInf(eps, 1) || order != 0 {
		t.Fatalf("ε = %v at order %v (%v), want +Inf at 0", eps, order, err)
	}
	delta, order, err := a.Delta(10)
	if err != nil || delta != 1 || order != 0 {
		t.Fatalf("δ = %v at order %v (%v), want 1 at 0", delta, order, err)
	}
	rep, err := Account([]Event{NonPrivate{}}, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report after a non-private release does not encode: %v", err)
	}
	// SelfComposed(NonPrivate, 0) released nothing: no change.
	b := NewRDPAccountant(nil)
	if err := b.Compose(SelfComposed{Event: NonPrivate{}, Count: 0}, 3); err != nil {
		t.Fatal(err)
	}
	if eps, _, _ := b.Epsilon(1e-5); eps != 0 {
		t.Fatalf("zero non-private releases: ε = %v", eps)
	}
}
