package model

import "github.com/dpfl/dpfl/simd"

// workspace holds, for layer l, act[l] = its output for the current batch
// (post-ReLU for hidden layers, logits for the last) and delta[l] = ∂L/∂
// its pre-activation, both n×out row-major within maxBatch×out buffers.
type workspace struct {
	m        *denseNet
	maxBatch int
	act      [][]float32
	delta    [][]float32
}

func (ws *workspace) checkParams(params []float32) {
	if len(params) != ws.m.params {
		panic("model: len(params) != NumParams")
	}
}

// forward fills act for the n rows of x and returns the logits (n×C).
func (ws *workspace) forward(params, x []float32, n int) []float32 {
	in := x
	last := len(ws.m.layers) - 1
	for l, ly := range ws.m.layers {
		out := ws.act[l][:n*ly.out]
		// out = in·Wᵀ (NT: the weights are stored out×in).
		simd.Gemm(false, true, n, ly.out, ly.in, 1, in, ly.in, ly.weights(params), ly.in, 0, out, ly.out)
		b := ly.bias(params)
		for r := 0; r < len(out); r += ly.out {
			row := out[r : r+ly.out]
			simd.Add(row, b)
			if l != last {
				simd.ReLU(row)
			}
		}
		in = out
	}
	return in
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
	m := ws.m
	n := len(labels)
	ws.checkParams(params)
	if len(grad) != m.params {
		panic("model: len(grad) != NumParams")
	}
	if n < 1 || n > ws.maxBatch {
		panic("model: LossGrad needs 1 ≤ len(labels) ≤ maxBatch")
	}
	if len(x) != n*m.sizes[0] {
		panic("model: len(x) != len(labels)·InputDim")
	}
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
		// ∂W = δᵀ·in: (out×n)·(n×in). Zero δ entries (inactive ReLUs)
		// are skipped inside Gemm.
		simd.Gemm(true, false, ly.out, ly.in, n, 1, d, ly.out, in, ly.in, 0, ly.weights(grad), ly.in)
		gb := ly.bias(grad)
		clear(gb)
		for r := 0; r < len(d); r += ly.out {
			simd.Add(gb, d[r:r+ly.out])
		}
		if l > 0 {
			prev := ws.delta[l-1][:n*ly.in]
			// δ_{l−1} = δ·W: (n×out)·(out×in).
			simd.Gemm(false, false, n, ly.in, ly.out, 1, d, ly.out, ly.weights(params), ly.in, 0, prev, ly.in)
			simd.ReLUMask(prev, in)
		}
	}
	return lossSum / float64(n)
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
