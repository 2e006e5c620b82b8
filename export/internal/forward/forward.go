// Package forward reads the outputs of fl/model's own forward pass, for
// comparison with exported models. fl/model exposes no logits: its
// workspaces return only the cross-entropy Evaluate sums,
// ℓ_y(x) = logsumexp(z) − z_y in float64 from the float32 logits z. Two
// readings of it are exact up to float64 rounding:
//
//   - LogSoftmax: −ℓ_y(x) = log softmax(z)_y for each class y, from the
//     model itself;
//   - Logits: the model widened to C+1 classes whose extra class has zero
//     weights and bias, so that its logit is exactly 0 and
//     ℓ_C(x) − ℓ_y(x) = z_y − 0 = z_y. The C real classes' weights are
//     the model's, and every layer before the last is the same
//     computation, so these are the model's logits (up to the last
//     layer's float32 summation order, which the width may change; tests
//     compare them with LogSoftmax).
package forward

import (
	"fmt"

	"github.com/dpfl/dpfl/fl/model"
)

// LogSoftmax returns log softmax(z) (n×C, row-major) of fl/model's model
// name over inputDim features and classes classes with params, for the
// n = len(x)/inputDim examples x, each by its own Evaluate call per
// class.
func LogSoftmax(name string, inputDim, classes int, params, x []float32) ([]float64, error) {
	m, err := model.New(name, inputDim, classes)
	if err != nil {
		return nil, err
	}
	if len(params) != m.NumParams() || len(x)%inputDim != 0 {
		return nil, fmt.Errorf("forward: %d parameters (want %d) or %d features (not a multiple of %d)", len(params), m.NumParams(), len(x), inputDim)
	}
	n := len(x) / inputDim
	ws := m.NewWorkspace(1)
	out := make([]float64, n*classes)
	for i := range n {
		img := x[i*inputDim : (i+1)*inputDim]
		for y := range classes {
			l, _ := ws.Evaluate(params, img, []uint8{uint8(y)})
			out[i*classes+y] = -l
		}
	}
	return out, nil
}

// Logits returns the logits z (n×C) of the same model for x, read from
// the model widened by a zero class (package doc).
func Logits(name string, inputDim, classes int, params, x []float32) ([]float64, error) {
	m, err := model.New(name, inputDim, classes)
	if err != nil {
		return nil, err
	}
	if classes+1 > 256 {
		return nil, fmt.Errorf("forward: %d classes leave no room for the zero class (labels are uint8)", classes)
	}
	wide, err := model.New(name, inputDim, classes+1)
	if err != nil {
		return nil, err
	}
	P := m.NumParams()
	if len(params) != P || len(x)%inputDim != 0 {
		return nil, fmt.Errorf("forward: %d parameters (want %d) or %d features (not a multiple of %d)", len(params), P, len(x), inputDim)
	}
	// Every model of fl/model ends with its output layer, W (C×h) then b
	// (C): the wider one has one more row of W and one more bias, h+1
	// more parameters, all set to zero here.
	h := wide.NumParams() - P - 1
	pw := make([]float32, 0, wide.NumParams())
	pw = append(pw, params[:P-classes]...)
	pw = append(pw, make([]float32, h)...)
	pw = append(pw, params[P-classes:]...)
	pw = append(pw, 0)
	if len(pw) != wide.NumParams() {
		return nil, fmt.Errorf("forward: widened %s has %d parameters, built %d", name, wide.NumParams(), len(pw))
	}
	n := len(x) / inputDim
	ws := wide.NewWorkspace(1)
	out := make([]float64, n*classes)
	for i := range n {
		img := x[i*inputDim : (i+1)*inputDim]
		l0, _ := ws.Evaluate(pw, img, []uint8{uint8(classes)})
		for y := range classes {
			l, _ := ws.Evaluate(pw, img, []uint8{uint8(y)})
			out[i*classes+y] = l0 - l
		}
	}
	return out, nil
}
