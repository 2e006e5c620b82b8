package model

import "github.com/dpfl/dpfl/simd"

// workspace holds, for layer l, act[l] = its output for the current batch
// (post-ReLU for hidden layers, logits for the last) and delta[l] = ∂L/∂
// its pre-activation, both n×out row-major within maxBatch×out buffers,
// and gb, the bias gradient of the layer LossStep is updating.
type workspace struct {
	m        *denseNet
	maxBatch int
	act      [][]float32
	delta    [][]float32
	gb       []float32
}

func (ws *workspace) checkParams(params []float32) {
	if len(params) != ws.m.params {
		panic("model: len(params) != NumParams")
	}
}

// check panics unless params, x and the n = len(labels) labels fit.
func (ws *workspace) check(params, x []float32, n int) {
	ws.checkParams(params)
	if n < 1 || n > ws.maxBatch {
		panic("model: LossGrad needs 1 ≤ len(labels) ≤ maxBatch")
	}
	if len(x) != n*ws.m.sizes[0] {
		panic("model: len(x) != len(labels)·InputDim")
	}
}

// forward fills act for the n rows of x and returns the logits (n×C).
func (ws *workspace) forward(params, x []float32, n int) []float32 {
	in := x
	last := len(ws.m.layers) - 1
	for l, ly := range ws.m.layers {
		out := ws.act[l][:n*ly.out]
		// out = 1·bᵀ + in·Wᵀ: the bias rows first, then the product added
		// by the GEMM's store (beta = 1), which saves a pass over out (NT:
		// the weights are stored out×in).
		fillRows(out, ly.bias(params))
		simd.Gemm(false, true, n, ly.out, ly.in, 1, in, ly.in, ly.weights(params), ly.in, 1, out, ly.out)
		if l != last {
			simd.ReLU(out)
		}
		in = out
	}
	return in
}

// fillRows copies row into every len(row)-long row of dst, doubling the
// filled prefix each time, so that a batch of rows takes log₂(rows)
// copies rather than one call per row.
func fillRows(dst, row []float32) {
	w := copy(dst, row)
	for w < len(dst) {
		w += copy(dst[w:], dst[:w])
	}
}

// LossGrad implements Workspace: forward, softmax cross-entropy, then the
// backward pass of each dense layer, last to first:
//
//	∂L/∂W_l = δ_lᵀ·a_{l−1},  ∂L/∂b_l = Σ_rows δ_l,
//	δ_{l−1} = (δ_l·W_l) ⊙ 1[a_{l−1} > 0],
//
// with δ_L = (softmax(z) − onehot(y))/n and a_0 = x. The ReLU derivative
// at 0 is taken as 0.
func (ws *workspace) LossGrad(params, x []float32, labels []uint8, grad []float32) float64 {
	if len(grad) != ws.m.params {
		panic("model: len(grad) != NumParams")
	}
	return ws.lossBackward(params, x, labels, grad, 0)
}

// LossStep implements Stepper: LossGrad's backward pass, with each
// layer's gradient applied to params as soon as δ_{l−1} no longer needs
// W_l. The weight update W_l ← W_l − lr·δ_lᵀ·a_{l−1} is the weight
// gradient's GEMM itself (alpha = −lr, beta = 1), so the gradient is never
// stored, read back and added.
func (ws *workspace) LossStep(params, x []float32, labels []uint8, lr float32) float64 {
	return ws.lossBackward(params, x, labels, nil, lr)
}

// lossBackward runs the forward and backward passes; with grad ≠ nil it
// overwrites grad with ∇L, otherwise it steps params by −lr·∇L.
func (ws *workspace) lossBackward(params, x []float32, labels []uint8, grad []float32, lr float32) float64 {
	m := ws.m
	n := len(labels)
	ws.check(params, x, n)
	logits := ws.forward(params, x, n)
	L := len(m.layers) - 1
	C := m.layers[L].out
	lossSum, _ := softmaxCrossEntropy(ws.delta[L][:n*C], logits, labels, C, 1/float64(n))

	for l := L; l >= 0; l-- {
		ly := m.layers[l]
		d := ws.delta[l][:n*ly.out]
		in := x
		if l > 0 {
			in = ws.act[l-1][:n*ly.in]
		}
		if l > 0 {
			// δ_{l−1} = δ·W: (n×out)·(out×in), before a step changes W.
			prev := ws.delta[l-1][:n*ly.in]
			simd.Gemm(false, false, n, ly.in, ly.out, 1, d, ly.out, ly.weights(params), ly.in, 0, prev, ly.in)
			simd.ReLUMask(prev, in)
		}
		if grad != nil {
			// ∂W = δᵀ·in: (out×n)·(n×in).
			simd.Gemm(true, false, ly.out, ly.in, n, 1, d, ly.out, in, ly.in, 0, ly.weights(grad), ly.in)
			sumRows(ly.bias(grad), d)
			continue
		}
		simd.Gemm(true, false, ly.out, ly.in, n, -lr, d, ly.out, in, ly.in, 1, ly.weights(params), ly.in)
		gb := ws.gb[:ly.out]
		sumRows(gb, d)
		simd.Axpy(ly.bias(params), -lr, gb)
	}
	return lossSum / float64(n)
}

// sumRows overwrites dst with the sum of the len(dst)-long rows of d (a
// bias gradient Σ_rows δ).
func sumRows(dst, d []float32) {
	w := copy(dst, d)
	for r := w; r < len(d); r += w {
		simd.Add(dst, d[r:r+w])
	}
}

// Evaluate implements Workspace.
func (ws *workspace) Evaluate(params, x []float32, labels []uint8) (lossSum float64, correct int) {
	m := ws.m
	D, C := m.sizes[0], m.NumClasses()
	ws.checkParams(params)
	if len(x) != len(labels)*D {
		panic("model: len(x) != len(labels)·InputDim")
	}
	for s := 0; s < len(labels); s += ws.maxBatch {
		n := min(ws.maxBatch, len(labels)-s)
		logits := ws.forward(params, x[s*D:(s+n)*D], n)
		l, c := softmaxCrossEntropy(nil, logits, labels[s:s+n], C, 0)
		lossSum += l
		correct += c
	}
	return lossSum, correct
}
