package model

import (
	"math"
	"math/rand/v2"
)

// denseNet is a stack of fully connected layers, ReLU between them and
// none after the last: logreg is the one-layer case, mlp the three-layer
// one, so both share a single, tested forward/backward pass.
type denseNet struct {
	name   string
	sizes  []int   // sizes[0] = input dim, sizes[L] = classes
	layers []layer // L layers
	params int
}

// layer l maps sizes[l] → sizes[l+1]; its W (out×in) and b (out) sit at
// these offsets in the flat vector.
type layer struct {
	in, out int
	w, b    int
}

func newDense(name string, sizes []int) *denseNet {
	m := &denseNet{name: name, sizes: sizes}
	for l := range len(sizes) - 1 {
		ly := layer{in: sizes[l], out: sizes[l+1], w: m.params}
		ly.b = ly.w + ly.out*ly.in
		m.params = ly.b + ly.out
		m.layers = append(m.layers, ly)
	}
	return m
}

func (m *denseNet) Name() string    { return m.name }
func (m *denseNet) NumParams() int  { return m.params }
func (m *denseNet) InputDim() int   { return m.sizes[0] }
func (m *denseNet) NumClasses() int { return m.sizes[len(m.sizes)-1] }

// weights and bias return layer l's W (out×in) and b inside p.
func (ly layer) weights(p []float32) []float32 { return p[ly.w:ly.b:ly.b] }
func (ly layer) bias(p []float32) []float32    { return p[ly.b : ly.b+ly.out : ly.b+ly.out] }

// Init sets logreg to zero (the convex problem needs no symmetry breaking,
// and the loss at zero is exactly log C) and the mlp as in mlpInit.
func (m *denseNet) Init(params []float32, rng *rand.Rand) {
	if len(params) != m.params {
		panic("model: Init: len(params) != NumParams")
	}
	clear(params)
	if m.name == "logreg" {
		return
	}
	mlpInit(m.layers, params, rng)
}

// mlpInit draws every weight matrix uniformly on [−a, a], layer by layer
// in row-major order, with biases zero:
//   - layers followed by a ReLU: He-uniform, a = √(6/fan_in), i.e.
//     Var = 2/fan_in (He et al. 2015, "Delving Deep into Rectifiers", §2.2,
//     eq. 10), which keeps activations' scale through ReLUs;
//   - the output layer (feeding softmax): Glorot-uniform,
//     a = √(6/(fan_in+fan_out)) (Glorot & Bengio 2010, eq. 16).
func mlpInit(layers []layer, params []float32, rng *rand.Rand) {
	for l, ly := range layers {
		a := math.Sqrt(6 / float64(ly.in))
		if l == len(layers)-1 {
			a = math.Sqrt(6 / float64(ly.in+ly.out))
		}
		w := ly.weights(params)
		for i := range w {
			w[i] = float32(a * (2*rng.Float64() - 1))
		}
	}
}

// NewWorkspace allocates, for up to maxBatch rows, each layer's output
// (activations; the last one holds logits) and each layer's output
// gradient, and one bias gradient for LossStep.
func (m *denseNet) NewWorkspace(maxBatch int) Workspace {
	if maxBatch < 1 {
		panic("model: NewWorkspace needs maxBatch ≥ 1")
	}
	ws := &workspace{m: m, maxBatch: maxBatch}
	widest := 0
	for _, ly := range m.layers {
		ws.act = append(ws.act, make([]float32, maxBatch*ly.out))
		ws.delta = append(ws.delta, make([]float32, maxBatch*ly.out))
		widest = max(widest, ly.out)
	}
	ws.gb = make([]float32, widest)
	return ws
}
