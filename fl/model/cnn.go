package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dpfl/dpfl/simd"
)

// cnn is the EMNIST CNN of Reddi et al. 2021, "Adaptive Federated
// Optimization", Table 4 (after McMahan et al. 2017's MNIST CNN):
//
//	input s×s×1
//	conv 3×3, c1 = 32 filters, stride 1, valid, ReLU   → (s−2)×(s−2)×32
//	conv 3×3, c2 = 64 filters, stride 1, valid, ReLU   → (s−4)×(s−4)×64
//	max-pool 2×2, stride 2                             → q×q×64, q = ⌊(s−4)/2⌋
//	dropout 0.25
//	dense 128, ReLU
//	dropout 0.5
//	dense C (softmax)
//
// Convolutions run as im2col followed by one GEMM over the whole batch
// (simd.Gemm), so training spends its time in the matrix kernels.
// Activations are stored position-major with channels last (HWC).
//
// Parameter layout (flat, in this order): W1 (c1×9, row f holds filter f
// over the 3×3 window in row-major order), b1 (c1), W2 (c2×9·c1, window
// position-major then input channel), b2 (c2), W3 (h×q²·c2, input in HWC
// order), b3 (h), W4 (C×h), b4 (C). For s = 28, C = 10 that is 1,199,882
// parameters.
//
// Dropout (Srivastava et al. 2014) is inverted: kept units are scaled by
// 1/(1−p) in training so Evaluate needs no rescaling. Its masks come from
// the workspace's own PCG stream (simulation randomness), which trainers
// reseed per client through Seeder.
type cnn struct {
	side, c1, c2, hidden, classes int
	drop1, drop2                  float64
	// derived sizes
	s1, s2, q    int // conv1 and conv2 output sides, pooled side
	w1, b1       int
	w2, b2       int
	w3, b3       int
	w4, b4       int
	params       int
	flat, k1, k2 int // q²·c2, 9, 9·c1
}

// cnnSide returns the image side s for inputDim = s² (single-channel
// square images), or an error.
func cnnSide(inputDim int) (int, error) {
	s := int(math.Round(math.Sqrt(float64(inputDim))))
	if s*s != inputDim || s < 6 {
		return 0, fmt.Errorf("model: cnn needs square single-channel images of side ≥ 6 (input dimension s²), got %d features", inputDim)
	}
	return s, nil
}

func newCNN(side, c1, c2, hidden, classes int, drop1, drop2 float64) *cnn {
	m := &cnn{side: side, c1: c1, c2: c2, hidden: hidden, classes: classes, drop1: drop1, drop2: drop2}
	m.s1, m.s2 = side-2, side-4
	m.q = m.s2 / 2
	m.k1, m.k2 = 9, 9*c1
	m.flat = m.q * m.q * c2
	off := 0
	next := func(n int) int { o := off; off += n; return o }
	m.w1, m.b1 = next(c1*m.k1), next(c1)
	m.w2, m.b2 = next(c2*m.k2), next(c2)
	m.w3, m.b3 = next(hidden*m.flat), next(hidden)
	m.w4, m.b4 = next(classes*hidden), next(classes)
	m.params = off
	return m
}

func (m *cnn) Name() string    { return "cnn" }
func (m *cnn) NumParams() int  { return m.params }
func (m *cnn) InputDim() int   { return m.side * m.side }
func (m *cnn) NumClasses() int { return m.classes }

// Init draws He-uniform weights, a = √(6/fan_in), for the layers feeding
// a ReLU (fan_in 9, 9·c1, q²·c2) and Glorot-uniform for the output layer,
// with zero biases, as mlpInit does for the dense layers.
func (m *cnn) Init(params []float32, rng *rand.Rand) {
	if len(params) != m.params {
		panic("model: Init: len(params) != NumParams")
	}
	clear(params)
	fill := func(w []float32, a float64) {
		for i := range w {
			w[i] = float32(a * (2*rng.Float64() - 1))
		}
	}
	fill(params[m.w1:m.b1], math.Sqrt(6/float64(m.k1)))
	fill(params[m.w2:m.b2], math.Sqrt(6/float64(m.k2)))
	fill(params[m.w3:m.b3], math.Sqrt(6/float64(m.flat)))
	fill(params[m.w4:m.b4], math.Sqrt(6/float64(m.hidden+m.classes)))
}

// cnnWorkspace holds every buffer of a batch of up to maxBatch examples.
type cnnWorkspace struct {
	m        *cnn
	maxBatch int
	pcg      *rand.PCG // rng's source, reseeded per client (Seed)
	rng      *rand.Rand
	col1     []float32 // n·s1² × 9
	a1       []float32 // n·s1² × c1 (post-ReLU)
	col2     []float32 // n·s2² × 9·c1
	a2       []float32 // n·s2² × c2 (post-ReLU)
	pool     []float32 // n × flat (post-dropout)
	arg      []int32   // n × flat: index into a2 of each pooled max
	mask1    []float32 // n × flat dropout scale (0 or 1/(1−p))
	h        []float32 // n × hidden (post-ReLU, post-dropout)
	mask2    []float32 // n × hidden
	logits   []float32 // n × C
	// gradients w.r.t. the same quantities
	dLogits, dH, dPool, dA2, dCol2, dA1 []float32
}

// NewWorkspace allocates the buffers for batches of up to maxBatch.
func (m *cnn) NewWorkspace(maxBatch int) Workspace {
	if maxBatch < 1 {
		panic("model: NewWorkspace needs maxBatch ≥ 1")
	}
	n := maxBatch
	p1, p2 := m.s1*m.s1, m.s2*m.s2
	pcg := rand.NewPCG(0xc44, uint64(n))
	return &cnnWorkspace{
		m: m, maxBatch: n, pcg: pcg, rng: rand.New(pcg),
		col1: make([]float32, n*p1*m.k1), a1: make([]float32, n*p1*m.c1),
		col2: make([]float32, n*p2*m.k2), a2: make([]float32, n*p2*m.c2),
		pool: make([]float32, n*m.flat), arg: make([]int32, n*m.flat), mask1: make([]float32, n*m.flat),
		h: make([]float32, n*m.hidden), mask2: make([]float32, n*m.hidden), logits: make([]float32, n*m.classes),
		dLogits: make([]float32, n*m.classes), dH: make([]float32, n*m.hidden), dPool: make([]float32, n*m.flat),
		dA2: make([]float32, n*p2*m.c2), dCol2: make([]float32, n*p2*m.k2), dA1: make([]float32, n*p1*m.c1),
	}
}

// im2col writes, for each of n images of side s with ch channels (HWC),
// the 3×3 window at every valid output position as one row of 9·ch values
// (window position-major, then channel).
func im2col(col, img []float32, n, s, ch int) {
	o := s - 2
	k := 9 * ch
	r := 0
	for b := range n {
		im := img[b*s*s*ch : (b+1)*s*s*ch]
		for y := range o {
			for x := range o {
				row := col[r*k : (r+1)*k]
				for dy := range 3 {
					src := im[((y+dy)*s+x)*ch : ((y+dy)*s+x+3)*ch]
					copy(row[dy*3*ch:(dy+1)*3*ch], src)
				}
				r++
			}
		}
	}
}

// col2im adds each row of dcol back onto the window it came from: the
// adjoint of im2col, summing overlaps.
func col2im(dimg, dcol []float32, n, s, ch int) {
	clear(dimg[:n*s*s*ch])
	o := s - 2
	k := 9 * ch
	r := 0
	for b := range n {
		im := dimg[b*s*s*ch : (b+1)*s*s*ch]
		for y := range o {
			for x := range o {
				row := dcol[r*k : (r+1)*k]
				for dy := range 3 {
					simd.Add(im[((y+dy)*s+x)*ch:((y+dy)*s+x+3)*ch], row[dy*3*ch:(dy+1)*3*ch])
				}
				r++
			}
		}
	}
}

// conv runs out = col·Wᵀ + b with ReLU: rows×f outputs from rows×k
// windows and the f×k filters.
func conv(out, col, w, b []float32, rows, f, k int) {
	simd.Gemm(false, true, rows, f, k, 1, col, k, w, k, 0, out, f)
	for r := 0; r < rows*f; r += f {
		row := out[r : r+f]
		simd.Add(row, b)
		simd.ReLU(row)
	}
}

// Seed implements Seeder: the dropout masks restart from stream (a, b).
func (ws *cnnWorkspace) Seed(a, b uint64) { ws.pcg.Seed(a, b) }

// dropout draws a mask of scale 1/(1−p) with probability 1−p, else 0,
// into mask and multiplies v by it; p = 0 (or evaluation) leaves v.
func (ws *cnnWorkspace) dropout(v, mask []float32, p float64) {
	keep := float32(1 / (1 - p))
	for i := range v {
		if ws.rng.Float64() < p {
			mask[i] = 0
		} else {
			mask[i] = keep
		}
		v[i] *= mask[i]
	}
}

// forward computes logits for the n rows of x; train applies dropout.
func (ws *cnnWorkspace) forward(params, x []float32, n int, train bool) []float32 {
	m := ws.m
	p1, p2 := m.s1*m.s1, m.s2*m.s2
	im2col(ws.col1, x, n, m.side, 1)
	conv(ws.a1[:n*p1*m.c1], ws.col1[:n*p1*m.k1], params[m.w1:m.b1], params[m.b1:m.w2], n*p1, m.c1, m.k1)
	im2col(ws.col2, ws.a1, n, m.s1, m.c1)
	conv(ws.a2[:n*p2*m.c2], ws.col2[:n*p2*m.k2], params[m.w2:m.b2], params[m.b2:m.w3], n*p2, m.c2, m.k2)
	ws.maxPool(n)
	pool := ws.pool[:n*m.flat]
	if train && m.drop1 > 0 {
		ws.dropout(pool, ws.mask1[:n*m.flat], m.drop1)
	}
	h := ws.h[:n*m.hidden]
	conv(h, pool, params[m.w3:m.b3], params[m.b3:m.w4], n, m.hidden, m.flat)
	if train && m.drop2 > 0 {
		ws.dropout(h, ws.mask2[:n*m.hidden], m.drop2)
	}
	logits := ws.logits[:n*m.classes]
	simd.Gemm(false, true, n, m.classes, m.hidden, 1, h, m.hidden, params[m.w4:m.b4], m.hidden, 0, logits, m.classes)
	b4 := params[m.b4:m.params]
	for r := 0; r < len(logits); r += m.classes {
		simd.Add(logits[r:r+m.classes], b4)
	}
	return logits
}

// maxPool takes 2×2 maxima of a2 (HWC) into pool (HWC), remembering each
// winner's index in a2 (the first maximum in window order).
func (ws *cnnWorkspace) maxPool(n int) {
	m := ws.m
	s, q, c := m.s2, m.q, m.c2
	for b := range n {
		a := ws.a2[b*s*s*c:]
		base := int32(b * s * s * c)
		out := ws.pool[b*m.flat : (b+1)*m.flat]
		arg := ws.arg[b*m.flat : (b+1)*m.flat]
		for y := range q {
			for x := range q {
				o := (y*q + x) * c
				i00 := ((2*y)*s + 2*x) * c
				for ch := range c {
					best, at := a[i00+ch], i00+ch
					for _, d := range [3]int{c, s * c, s*c + c} {
						if v := a[i00+d+ch]; v > best {
							best, at = v, i00+d+ch
						}
					}
					out[o+ch], arg[o+ch] = best, base+int32(at)
				}
			}
		}
	}
}

// LossGrad implements Workspace: the forward pass with dropout, softmax
// cross-entropy, and the backward pass through every layer (dense layers
// as in the MLP; max-pool routes each gradient to its window's maximum;
// a convolution's weight gradient is δᵀ·col and its input gradient is
// col2im(δ·W)).
func (ws *cnnWorkspace) LossGrad(params, x []float32, labels []uint8, grad []float32) float64 {
	m := ws.m
	n := len(labels)
	ws.check(params, x, n)
	if len(grad) != m.params {
		panic("model: len(grad) != NumParams")
	}
	if n < 1 || n > ws.maxBatch {
		panic("model: LossGrad needs 1 ≤ len(labels) ≤ maxBatch")
	}
	logits := ws.forward(params, x, n, true)
	dl := ws.dLogits[:n*m.classes]
	lossSum, _ := softmaxCrossEntropy(dl, logits, labels, m.classes, 1/float64(n))
	p1, p2 := m.s1*m.s1, m.s2*m.s2

	h := ws.h[:n*m.hidden]
	denseBackward(grad[m.w4:m.b4], grad[m.b4:m.params], dl, h, n, m.classes, m.hidden)
	dh := ws.dH[:n*m.hidden]
	simd.Gemm(false, false, n, m.hidden, m.classes, 1, dl, m.classes, params[m.w4:m.b4], m.hidden, 0, dh, m.hidden)
	if m.drop2 > 0 {
		mask := ws.mask2[:n*m.hidden]
		for i := range dh {
			dh[i] *= mask[i]
		}
	}
	simd.ReLUMask(dh, h) // h = mask·relu(z) is 0 wherever z ≤ 0

	pool := ws.pool[:n*m.flat]
	denseBackward(grad[m.w3:m.b3], grad[m.b3:m.w4], dh, pool, n, m.hidden, m.flat)
	dp := ws.dPool[:n*m.flat]
	simd.Gemm(false, false, n, m.flat, m.hidden, 1, dh, m.hidden, params[m.w3:m.b3], m.flat, 0, dp, m.flat)
	if m.drop1 > 0 {
		mask := ws.mask1[:n*m.flat]
		for i := range dp {
			dp[i] *= mask[i]
		}
	}
	da2 := ws.dA2[:n*p2*m.c2]
	clear(da2)
	for i, at := range ws.arg[:n*m.flat] {
		da2[at] += dp[i]
	}
	simd.ReLUMask(da2, ws.a2[:n*p2*m.c2])

	col2 := ws.col2[:n*p2*m.k2]
	denseBackward(grad[m.w2:m.b2], grad[m.b2:m.w3], da2, col2, n*p2, m.c2, m.k2)
	dcol2 := ws.dCol2[:n*p2*m.k2]
	simd.Gemm(false, false, n*p2, m.k2, m.c2, 1, da2, m.c2, params[m.w2:m.b2], m.k2, 0, dcol2, m.k2)
	da1 := ws.dA1[:n*p1*m.c1]
	col2im(da1, dcol2, n, m.s1, m.c1)
	simd.ReLUMask(da1, ws.a1[:n*p1*m.c1])

	denseBackward(grad[m.w1:m.b1], grad[m.b1:m.w2], da1, ws.col1[:n*p1*m.k1], n*p1, m.c1, m.k1)
	return lossSum / float64(n)
}

// denseBackward writes a layer's gradients from δ (rows×out) and its
// input in (rows×k): ∂W = δᵀ·in (out×k), ∂b = Σ_rows δ.
func denseBackward(gw, gb, d, in []float32, rows, out, k int) {
	simd.Gemm(true, false, out, k, rows, 1, d, out, in, k, 0, gw, k)
	clear(gb)
	for r := 0; r < rows*out; r += out {
		simd.Add(gb, d[r:r+out])
	}
}

// Evaluate implements Workspace, without dropout.
func (ws *cnnWorkspace) Evaluate(params, x []float32, labels []uint8) (lossSum float64, correct int) {
	m := ws.m
	D := m.InputDim()
	ws.check(params, x, len(labels))
	for s := 0; s < len(labels); s += ws.maxBatch {
		n := min(ws.maxBatch, len(labels)-s)
		logits := ws.forward(params, x[s*D:(s+n)*D], n, false)
		l, c := softmaxCrossEntropy(nil, logits, labels[s:s+n], m.classes, 0)
		lossSum += l
		correct += c
	}
	return lossSum, correct
}

func (ws *cnnWorkspace) check(params, x []float32, n int) {
	if len(params) != ws.m.params {
		panic("model: len(params) != NumParams")
	}
	if len(x) != n*ws.m.InputDim() {
		panic("model: len(x) != len(labels)·InputDim")
	}
}
