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
// Conv1 runs as im2col followed by a GEMM (simd.Gemm); conv2, with 88%
// of the model's multiplications, as Winograd's F(4×4, 3×3), whose 4×4
// output tiles are four pooling windows (winograd.go): 36 GEMMs over
// tiles × channels, 4× fewer multiplications than im2col. Activations
// are stored position-major with channels last (HWC); conv1's output
// rows hold their even columns first, then their odd ones, so that
// Winograd's input transform reads whole rows (winoInput). Conv2's
// outputs are never stored, the pooling keeping which input of each
// window won.
//
// Parameter layout (flat, in this order): W1 (c1×9, row f holds filter f
// over the 3×3 window in row-major order), b1 (c1), W2 (c2×9·c1, window
// position-major then input channel), b2 (c2), W3 (h×q²·c2, input in HWC
// order), b3 (h), W4 (C×h), b4 (C). For s = 28, C = 10 that is 1,199,882
// parameters. (Checkpoints and devices exchange this flat vector without a
// layout version, so the order must not change.)
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
	// Conv2 is computed by tq × tq Winograd tiles of 4×4 outputs,
	// tq = ⌈q/2⌉, covering the 2q×2q positions the pooling reads, from
	// conv1's outputs at sp × sp positions, sp = 4·tq + 2 (s1, or one
	// less or one more; those beyond s1 are zero): p1 = sp² of them, a
	// row's ne = sp/2 even columns then its ne odd ones. It runs in
	// chunks of nb whole images (cr = tq) or of cr tile rows of one image
	// (nb = 1): nb·cr·tq tiles. pw words of pooling winners a pooled unit
	// (simd.WinoPoolWords(c2)).
	tq, sp, p1, ne, nb, cr, pw int
}

// cnnK1 is conv1's im2col row: the 3×3 window and a constant 1, so that
// one GEMM adds the bias in the forward pass and sums the bias gradient
// in the backward pass (the filters then sit in a c1×cnnK1 matrix whose
// last column is b1).
const cnnK1 = 10

// cnnChunkFloats bounds conv2's per-chunk Winograd matrices, 36·(c1 + c2)
// floats a tile: 256 Ki floats (1 MiB) hold two 28×28 images' 72 tiles,
// whose products ran ≈10% faster than one image's 36 (more rows per Gemm
// call; a training step ≈5% faster), and chunks of half an image or less
// were slower still, as with F(2×2, 3×3) before, although they stay in
// L2. The bound only matters for larger images.
var cnnChunkFloats = 256 << 10

// cnnEvalBatch caps the examples Evaluate runs through the dense layers at
// once, and the batch a workspace allocates training buffers for before
// its first LossGrad (see NewWorkspace).
const cnnEvalBatch = 32

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
	m.tq = (m.q + 1) / 2
	m.sp = 4*m.tq + 2
	m.p1 = m.sp * m.sp
	m.ne = m.sp / 2
	m.pw = simd.WinoPoolWords(c2)
	perRow := winoTile * (c1 + c2) * m.tq // Winograd floats per tile row
	m.nb, m.cr = max(1, cnnChunkFloats/(m.tq*perRow)), m.tq
	if m.nb == 1 {
		chunks := (m.tq*perRow + cnnChunkFloats - 1) / cnnChunkFloats
		m.cr = (m.tq + chunks - 1) / chunks // balanced chunks
	}
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

// cnnWorkspace holds the buffers of one chunk's convolutions and of a
// batch's pooled features, dense layers and their gradients. Conv2's
// outputs are never stored for the batch: the pooling keeps, per pooled
// unit, which of its four inputs won and whether the ReLU passed it,
// which is all the backward pass needs.
type cnnWorkspace struct {
	m        *cnn
	maxBatch int
	pcg      *rand.PCG // dropout's stream, reseeded per client (Seed)

	// One image at a time.
	col1  []float32 // p1 × cnnK1 im2col of the image (window, 1)
	w1    []float32 // c1 × cnnK1: [W1 | b1]
	a1one []float32 // nb × p1 × c1 conv1 outputs of the images being evaluated (a1's layout), or a copy of a1's in the backward pass
	// Winograd (winograd.go): the transformed filters, and one chunk's
	// transformed inputs V (∂V in the backward pass) and products M (∂M).
	ut, u  []float32 // 36 × c1 × c2, 36 × c2 × c1
	wv, wm []float32 // 36 × tiles × c1, 36 × tiles × c2

	// The batch, for up to cap examples (min(maxBatch, cnnEvalBatch),
	// or maxBatch once trained).
	cap    int
	pool   []float32 // cap × flat (post-ReLU, post-dropout)
	win    []uint32  // cap × tq² × 4 × pw: which window input won where the ReLU passed it (simd.WinoOutputPool)
	h      []float32 // cap × hidden (post-ReLU, post-dropout)
	logits []float32 // cap × C

	// Training only, for maxBatch examples (nil until needed).
	a1           []float32 // maxBatch × p1 × c1 (post-ReLU; positions row by row, even columns first)
	mask1, dPool []float32 // maxBatch × flat: dropout scale (0 or 1/(1−p)), ∂L/∂pool
	mask2, dH    []float32 // maxBatch × hidden
	dLogits      []float32 // maxBatch × C
	dA1          []float32 // nb × p1 × c1 gradient w.r.t. a chunk's conv1 outputs
	gW1, gW2, gb []float32 // see below
	gu           []float32 // 36 × c2 × c1: ∂L/∂u summed over the batch
	// gW1, gW2 and gb sum the gradients of conv1 ([W1 | b1]ᵀ: cnnK1 × c1,
	// row t < 9 is ∂W1[·, t], row 9 is ∂b1), of W2 (c2 × k2) and of b2
	// over the batch's images: every image's backward pass reads W2, so
	// LossStep applies them at the end. gb also holds a dense layer's
	// bias gradient (max(c2, hidden, C)).
}

// NewWorkspace allocates the buffers for batches of up to maxBatch. For
// maxBatch > cnnEvalBatch it allocates only what Evaluate needs, for
// cnnEvalBatch examples, and the first LossGrad or LossStep allocates the
// rest: an evaluator's workspace then holds ≈2 MB instead of ≈50 MB at
// fl.NewEvaluator's 256, of which Evaluate would use none.
func (m *cnn) NewWorkspace(maxBatch int) Workspace {
	if maxBatch < 1 {
		panic("model: NewWorkspace needs maxBatch ≥ 1")
	}
	pcg := rand.NewPCG(0xc44, uint64(maxBatch))
	ws := &cnnWorkspace{
		m: m, maxBatch: maxBatch, pcg: pcg,
		col1: make([]float32, m.p1*cnnK1), w1: make([]float32, m.c1*cnnK1),
		a1one: make([]float32, m.nb*m.p1*m.c1),
		ut:    make([]float32, winoTile*m.c1*m.c2), u: make([]float32, winoTile*m.c1*m.c2),
		wv: make([]float32, winoTile*winoPad(m.nb*m.cr*m.tq)*m.c1), wm: make([]float32, winoTile*winoPad(m.nb*m.cr*m.tq)*m.c2),
	}
	ws.batchBuffers(min(maxBatch, cnnEvalBatch))
	if maxBatch <= cnnEvalBatch {
		ws.trainBuffers()
	}
	return ws
}

// batchBuffers (re)allocates the buffers Evaluate needs for n examples.
func (ws *cnnWorkspace) batchBuffers(n int) {
	m := ws.m
	ws.cap = n
	ws.pool, ws.win = make([]float32, n*m.flat), make([]uint32, n*m.winFlat())
	ws.h, ws.logits = make([]float32, n*m.hidden), make([]float32, n*m.classes)
}

// trainBuffers allocates what training adds, for maxBatch examples.
func (ws *cnnWorkspace) trainBuffers() {
	m, n := ws.m, ws.maxBatch
	if ws.cap < n {
		ws.batchBuffers(n)
	}
	ws.a1 = make([]float32, n*m.p1*m.c1)
	ws.mask1, ws.dPool = make([]float32, n*m.flat), make([]float32, n*m.flat)
	ws.mask2, ws.dH = make([]float32, n*m.hidden), make([]float32, n*m.hidden)
	ws.dLogits = make([]float32, n*m.classes)
	ws.dA1 = make([]float32, m.nb*m.p1*m.c1)
	ws.gW1, ws.gW2 = make([]float32, cnnK1*m.c1), make([]float32, m.c2*m.k2)
	ws.gb = make([]float32, max(m.c2, m.hidden, m.classes))
	ws.gu = make([]float32, winoTile*m.c1*m.c2)
}

// winFlat is the number of pooling-winner words of an image: 4 pooled
// units of pw words a tile.
func (m *cnn) winFlat() int { return m.tq * m.tq * 4 * m.pw }

// Seed implements Seeder: the dropout masks restart from stream (a, b).
func (ws *cnnWorkspace) Seed(a, b uint64) { ws.pcg.Seed(a, b) }

// dropout draws a mask of scale 1/(1−p) with probability 1−p, else 0,
// into mask and multiplies v by it. Each unit takes 16 bits of the PCG
// stream and is dropped when they are below p·2¹⁶, so p is rounded to a
// multiple of 2⁻¹⁶ (exact for the model's 0.25 and 0.5): a Float64 per
// unit took 4% of a training step, 32 bits per unit 3%.
func (ws *cnnWorkspace) dropout(v, mask []float32, p float64) {
	keep := float32(1 / (1 - p))
	thr := uint64(math.Round(p * (1 << 16)))
	mask = mask[:len(v)]
	// Four units a draw, unrolled (the per-unit loop with a branch every
	// fourth unit took ≈1.65× as long on a batch's pooled units); no
	// branch on the draw itself: a random one mispredicts.
	for len(v) >= 4 && len(mask) >= 4 {
		r := ws.pcg.Uint64()
		k0 := keep * float32(b2u(r&(1<<16-1) >= thr))
		k1 := keep * float32(b2u(r>>16&(1<<16-1) >= thr))
		k2 := keep * float32(b2u(r>>32&(1<<16-1) >= thr))
		k3 := keep * float32(b2u(r>>48 >= thr))
		mask[0], mask[1], mask[2], mask[3] = k0, k1, k2, k3
		v[0], v[1], v[2], v[3] = v[0]*k0, v[1]*k1, v[2]*k2, v[3]*k3
		v, mask = v[4:], mask[4:]
	}
	if len(v) > 0 {
		r := ws.pcg.Uint64()
		for i := range v {
			k := keep * float32(b2u(r&(1<<16-1) >= thr))
			mask[i] = k
			v[i] *= k
			r >>= 16
		}
	}
}

// im2col1 writes the sp² rows of conv1's im2col matrix of one s×s image:
// the 3×3 window at each of the sp × sp positions, then a 1, in a1's
// order (row by row, each row's even columns first, then its odd ones),
// so that the GEMM writes conv1's output in that order. Positions beyond
// the s−2 valid ones (sp = s−1 or s) get all-zero rows, hence outputs of
// 0 and no gradient.
func im2col1(col, img []float32, s, sp int) {
	o := s - 2
	r := 0
	for y := range sp {
		for _, x0 := range [2]int{0, 1} {
			for x := x0; x < sp; x += 2 {
				row := col[r*cnnK1 : (r+1)*cnnK1 : (r+1)*cnnK1]
				r++
				if y >= o || x >= o {
					clear(row)
					continue
				}
				w0 := img[y*s+x : y*s+x+3]
				w1 := img[(y+1)*s+x : (y+1)*s+x+3]
				w2 := img[(y+2)*s+x : (y+2)*s+x+3]
				row[0], row[1], row[2] = w0[0], w0[1], w0[2]
				row[3], row[4], row[5] = w1[0], w1[1], w1[2]
				row[6], row[7], row[8] = w2[0], w2[1], w2[2]
				row[9] = 1
			}
		}
	}
}

// a1Even and a1Odd are row y's even and odd columns (ne positions of c1
// values each) in a conv1 output laid out as a1 is.
func (m *cnn) a1Even(a1 []float32, y int) []float32 {
	return a1[y*m.sp*m.c1 : (y*m.sp+m.ne)*m.c1]
}

func (m *cnn) a1Odd(a1 []float32, y int) []float32 {
	return a1[(y*m.sp+m.ne)*m.c1 : (y+1)*m.sp*m.c1]
}

// conv1 computes one image's conv1 output a (p1×c1, before the ReLU) from
// img, with ws.w1 holding [W1 | b1].
func (ws *cnnWorkspace) conv1(a, img []float32) {
	m := ws.m
	im2col1(ws.col1, img, m.side, m.sp)
	simd.Gemm(false, true, m.p1, m.c1, cnnK1, 1, ws.col1, cnnK1, ws.w1, cnnK1, 0, a, m.c1)
}

// forwardConv runs the convolutions and the pooling of the n images x into
// pool and win, chunk by chunk (nb images, or cr tile rows of one); with
// a1 ≠ nil it keeps each image's conv1 output there (n × p1 × c1) for
// the backward pass.
func (ws *cnnWorkspace) forwardConv(params, x []float32, n int, a1 []float32) {
	m := ws.m
	D := m.InputDim()
	for f := range m.c1 {
		copy(ws.w1[f*cnnK1:f*cnnK1+9], params[m.w1+f*9:m.w1+f*9+9])
		ws.w1[f*cnnK1+9] = params[m.b1+f]
	}
	b2 := params[m.b2:m.w3]
	filters := false // winoFilters done
	pc := m.p1 * m.c1
	for b0 := 0; b0 < n; b0 += m.nb {
		nb := min(m.nb, n-b0)
		a := ws.a1one[:nb*pc]
		if a1 != nil {
			a = a1[b0*pc : (b0+nb)*pc]
		}
		for k := range nb {
			ws.conv1(a[k*pc:(k+1)*pc], x[(b0+k)*D:(b0+k+1)*D])
		}
		// The ReLU after all of the chunk's products: im2col1's scalar
		// code ran slower right after it (see winoFilters' call).
		simd.ReLU(a)
		for i0 := 0; i0 < m.tq; i0 += m.cr {
			i1 := min(i0+m.cr, m.tq)
			per := (i1 - i0) * m.tq
			T := nb * per
			Tp := winoPad(T)
			v, mm := ws.wv[:winoTile*Tp*m.c1], ws.wm[:winoTile*Tp*m.c2]
			for k := range nb {
				m.winoInput(v, a[k*pc:(k+1)*pc], Tp, k*per, i0, i1)
			}
			if !filters {
				// Here rather than first: scalar float code (here ut's
				// transposition) ran up to ≈2× slower after a kernel that
				// leaves the upper halves of the vector registers dirty, as
				// the avx512 path's ReLU and Axpy do (Go's scalar float
				// code is legacy SSE, whose writes then merge into the full
				// register); simd.WinoInput ends with VZEROUPPER.
				m.winoFilters(ws.ut, ws.u, params[m.w2:m.b2])
				filters = true
			}
			for xi := range winoTile {
				clear(v[(xi*Tp+T)*m.c1 : (xi+1)*Tp*m.c1]) // padding
				// M_ξ = V_ξ·U_ξᵀ (Tp × c2), both read in place.
				simd.Gemm(false, false, Tp, m.c2, m.c1, 1, v[xi*Tp*m.c1:], m.c1, ws.ut[xi*m.c1*m.c2:], m.c2, 0, mm[xi*Tp*m.c2:], m.c2)
			}
			wf := m.winFlat()
			for k := range nb {
				b := b0 + k
				m.winoOutputPool(ws.pool[b*m.flat:(b+1)*m.flat], ws.win[b*wf:(b+1)*wf], mm, b2, Tp, k*per, i0, i1)
			}
		}
	}
}

// forward computes logits for the n rows of x (n ≤ ws.cap); train applies
// dropout and keeps conv1's outputs for the backward pass.
func (ws *cnnWorkspace) forward(params, x []float32, n int, train bool) []float32 {
	m := ws.m
	var a1 []float32
	if train {
		a1 = ws.a1
	}
	ws.forwardConv(params, x, n, a1)
	pool := ws.pool[:n*m.flat]
	if train && m.drop1 > 0 {
		ws.dropout(pool, ws.mask1[:n*m.flat], m.drop1)
	}
	h := ws.h[:n*m.hidden]
	fillRows(h, params[m.b3:m.w4])
	simd.Gemm(false, true, n, m.hidden, m.flat, 1, pool, m.flat, params[m.w3:m.b3], m.flat, 1, h, m.hidden)
	simd.ReLU(h)
	if train && m.drop2 > 0 {
		ws.dropout(h, ws.mask2[:n*m.hidden], m.drop2)
	}
	logits := ws.logits[:n*m.classes]
	fillRows(logits, params[m.b4:m.params])
	simd.Gemm(false, true, n, m.classes, m.hidden, 1, h, m.hidden, params[m.w4:m.b4], m.hidden, 1, logits, m.classes)
	return logits
}

// LossGrad implements Workspace: the forward pass with dropout, softmax
// cross-entropy, and the backward pass through every layer (dense layers
// as in the MLP; max-pool routes each gradient to its window's maximum;
// conv2's gradients are Winograd's products transposed (winograd.go);
// conv1's weight gradient is colᵀ·δ).
func (ws *cnnWorkspace) LossGrad(params, x []float32, labels []uint8, grad []float32) float64 {
	if len(grad) != ws.m.params {
		panic("model: len(grad) != NumParams")
	}
	return ws.lossBackward(params, x, labels, grad, 0)
}

// LossStep implements Stepper. The dense layers' weights are stepped by
// their weight-gradient GEMMs (alpha = −lr, beta = 1) once their input
// gradient is computed; the convolutions' gradients are summed over the
// batch's images first (every image's backward pass reads W2) and then
// applied.
func (ws *cnnWorkspace) LossStep(params, x []float32, labels []uint8, lr float32) float64 {
	return ws.lossBackward(params, x, labels, nil, lr)
}

// lossBackward runs the forward and backward passes; with grad ≠ nil it
// overwrites grad with ∇L, otherwise it steps params by −lr·∇L.
func (ws *cnnWorkspace) lossBackward(params, x []float32, labels []uint8, grad []float32, lr float32) float64 {
	m := ws.m
	n := len(labels)
	ws.check(params, x, n)
	if n < 1 || n > ws.maxBatch {
		panic("model: LossGrad needs 1 ≤ len(labels) ≤ maxBatch")
	}
	if ws.a1 == nil {
		ws.trainBuffers() // once per workspace: see NewWorkspace
	}
	logits := ws.forward(params, x, n, true)
	dl := ws.dLogits[:n*m.classes]
	lossSum, _ := softmaxCrossEntropy(dl, logits, labels, m.classes, 1/float64(n))

	h := ws.h[:n*m.hidden]
	dh := ws.dH[:n*m.hidden]
	simd.Gemm(false, false, n, m.hidden, m.classes, 1, dl, m.classes, params[m.w4:m.b4], m.hidden, 0, dh, m.hidden)
	ws.denseStep(params, grad, m.w4, m.b4, m.params, dl, h, n, m.classes, m.hidden, lr)
	if m.drop2 > 0 {
		mask := ws.mask2[:n*m.hidden]
		for i, v := range h { // h = mask·relu(z) is 0 wherever z ≤ 0 or the unit was dropped
			if v > 0 {
				dh[i] *= mask[i]
			} else {
				dh[i] = 0
			}
		}
	} else {
		simd.ReLUMask(dh, h)
	}

	pool := ws.pool[:n*m.flat]
	dp := ws.dPool[:n*m.flat]
	simd.Gemm(false, false, n, m.flat, m.hidden, 1, dh, m.hidden, params[m.w3:m.b3], m.flat, 0, dp, m.flat)
	ws.denseStep(params, grad, m.w3, m.b3, m.w4, dh, pool, n, m.hidden, m.flat, lr)
	ws.backwardConv(x, n)

	// Conv1 and conv2: the sums over the batch, in gW1 ([W1 | b1]ᵀ), gW2
	// and gb (b2).
	if grad != nil {
		for f := range m.c1 {
			for t := range 9 {
				grad[m.w1+f*9+t] = ws.gW1[t*m.c1+f]
			}
		}
		copy(grad[m.b1:m.w2], ws.gW1[9*m.c1:])
		copy(grad[m.w2:m.b2], ws.gW2)
		copy(grad[m.b2:m.w3], ws.gb[:m.c2])
		return lossSum / float64(n)
	}
	for f := range m.c1 {
		for t := range 9 {
			params[m.w1+f*9+t] -= lr * ws.gW1[t*m.c1+f]
		}
	}
	simd.Axpy(params[m.b1:m.w2], -lr, ws.gW1[9*m.c1:])
	simd.Axpy(params[m.w2:m.b2], -lr, ws.gW2)
	simd.Axpy(params[m.b2:m.w3], -lr, ws.gb[:m.c2])
	return lossSum / float64(n)
}

// denseStep takes a dense layer's gradients from δ (n×out) and its input
// in (n×k): with grad ≠ nil it writes ∂W = δᵀ·in (out×k, at w) and
// ∂b = Σ_rows δ (at b, ending at e) into grad; otherwise it steps params
// by −lr times them, the weights inside the GEMM (beta = 1).
func (ws *cnnWorkspace) denseStep(params, grad []float32, w, b, e int, d, in []float32, n, out, k int, lr float32) {
	if grad != nil {
		simd.Gemm(true, false, out, k, n, 1, d, out, in, k, 0, grad[w:b], k)
		sumRows(grad[b:e], d)
		return
	}
	simd.Gemm(true, false, out, k, n, -lr, d, out, in, k, 1, params[w:b], k)
	gb := ws.gb[:out]
	sumRows(gb, d)
	simd.Axpy(params[b:e], -lr, gb)
}

// backwardConv runs the backward pass of the pooling and both
// convolutions, chunk by chunk as forwardConv ran them, from the pooled
// gradient ws.dPool (before dropout) and W2's transformed filters that
// forwardConv left in ws.u, summing the weight gradients over the batch
// into ws.gW1 ([W1 | b1]ᵀ layout), ws.gW2 and ws.gb (b2).
func (ws *cnnWorkspace) backwardConv(x []float32, n int) {
	m := ws.m
	D := m.InputDim()
	gb := ws.gb[:m.c2]
	clear(gb)
	var beta float32 // 0 for the batch's first product, then accumulate
	pc := m.p1 * m.c1
	for b0 := 0; b0 < n; b0 += m.nb {
		nb := min(m.nb, n-b0)
		da := ws.dA1[:nb*pc]
		clear(da)
		// The chunk's conv1 outputs, staged in a1one (Evaluate's buffer):
		// the forward pass left them in memory, and one sequential copy
		// then reads from cache ran faster than the transforms' 12
		// interleaved row streams reading them there (BenchmarkStep/cnn:
		// the input transform took 2.6× longer in the backward pass than
		// in the forward pass).
		a := ws.a1one[:nb*pc]
		copy(a, ws.a1[b0*pc:(b0+nb)*pc])
		for i0 := 0; i0 < m.tq; i0 += m.cr {
			i1 := min(i0+m.cr, m.tq)
			per := (i1 - i0) * m.tq
			T := nb * per
			Tp := winoPad(T)
			v, dm := ws.wv[:winoTile*Tp*m.c1], ws.wm[:winoTile*Tp*m.c2]
			wf := m.winFlat()
			for k := range nb {
				b := b0 + k
				var mask []float32 // nil: no dropout
				if m.drop1 > 0 {
					mask = ws.mask1[b*m.flat : (b+1)*m.flat]
				}
				m.winoUnpool(dm, ws.dPool[b*m.flat:(b+1)*m.flat], mask, ws.win[b*wf:(b+1)*wf], gb, Tp, k*per, i0, i1)
			}
			for xi := range winoTile {
				clear(dm[(xi*Tp+T)*m.c2 : (xi+1)*Tp*m.c2]) // padding (winoPad's doc)
			}
			for k := range nb {
				m.winoInput(v, a[k*pc:(k+1)*pc], Tp, k*per, i0, i1)
			}
			for xi := range winoTile {
				clear(v[(xi*Tp+T)*m.c1 : (xi+1)*Tp*m.c1]) // padding
				// ∂U_ξ += ∂M_ξᵀ·V_ξ (c2 × c1, the padding adds 0·0: c2
				// rows fill the Gemm's 5-row tiles better than c1), then
				// ∂V_ξ = ∂M_ξ·U_ξ overwrites V_ξ.
				simd.Gemm(true, false, m.c2, m.c1, Tp, 1, dm[xi*Tp*m.c2:], m.c2, v[xi*Tp*m.c1:], m.c1, beta, ws.gu[xi*m.c2*m.c1:], m.c1)
				simd.Gemm(false, false, Tp, m.c1, m.c2, 1, dm[xi*Tp*m.c2:], m.c2, ws.u[xi*m.c2*m.c1:], m.c1, 0, v[xi*Tp*m.c1:], m.c1)
			}
			for k := range nb {
				m.winoInputAdjoint(da[k*pc:(k+1)*pc], v, Tp, k*per, i0, i1)
			}
			beta = 1
		}
		for k := range nb {
			b, a1, da1 := b0+k, a[k*pc:(k+1)*pc], da[k*pc:(k+1)*pc]
			// im2col1 first: scalar code right after a kernel that leaves
			// the vector registers' upper halves dirty (ReLUMask on the
			// avx512 path) runs slower (see winoFilters' call).
			im2col1(ws.col1, x[b*D:(b+1)*D], m.side, m.sp)
			simd.ReLUMask(da1, a1)
			// [∂W1 | ∂b1]ᵀ += [col | 1]ᵀ·δ (10 × c1: δ's 32 columns fill
			// two column tiles), rather than δᵀ·[col | 1] (c1 × 10, whose
			// one column tile would be 10 of 16 wide): ≈3× faster.
			simd.Gemm(true, false, cnnK1, m.c1, m.p1, 1, ws.col1, cnnK1, da1, m.c1, float32(min(b, 1)), ws.gW1, m.c1)
		}
	}
	m.winoFilterGrad(ws.gW2, ws.gu)
}

// Evaluate implements Workspace, without dropout, in chunks of at most
// cnnEvalBatch examples.
func (ws *cnnWorkspace) Evaluate(params, x []float32, labels []uint8) (lossSum float64, correct int) {
	m := ws.m
	D := m.InputDim()
	ws.check(params, x, len(labels))
	chunk := min(ws.maxBatch, ws.cap)
	for s := 0; s < len(labels); s += chunk {
		n := min(chunk, len(labels)-s)
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
