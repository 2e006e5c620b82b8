package model

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// separable returns perExample·C examples: class c is a fixed random
// binary "image" prototype with 5% of its pixels flipped, so classes are
// far apart and a linear model can fit every example.
func separable(rng *rand.Rand, D, C, per int) ([]float32, []uint8) {
	protos := make([]float32, C*D)
	for i := range protos {
		if rng.IntN(3) == 0 {
			protos[i] = 1
		}
	}
	x := make([]float32, 0, C*per*D)
	var y []uint8
	for k := range C * per {
		c := k % C
		for i := range D {
			v := protos[c*D+i]
			if rng.IntN(20) == 0 {
				v = 1 - v
			}
			x = append(x, v)
		}
		y = append(y, uint8(c))
	}
	return x, y
}

func TestSGDFitsSeparableData(t *testing.T) {
	const D, C, per, B = 784, 10, 10, 10
	for _, c := range []struct {
		name  string
		lr    float32
		steps int
	}{
		{"logreg", 0.1, 300},
		{"mlp", 0.05, 300},
	} {
		rng := rand.New(rand.NewPCG(9, 9))
		x, y := separable(rng, D, C, per)
		m := mustNew(t, c.name, D, C)
		params := make([]float32, m.NumParams())
		m.Init(params, rng)
		ws := m.NewWorkspace(B)
		grad := make([]float32, m.NumParams())
		n := len(y)
		startLoss, _ := ws.Evaluate(params, x, y)
		for step := range c.steps {
			s := (step * B) % n // deterministic sweep over the data
			l := ws.LossGrad(params, x[s*D:(s+B)*D], y[s:s+B], grad)
			if math.IsNaN(l) {
				t.Fatalf("%s: loss NaN at step %d", c.name, step)
			}
			for i := range params {
				params[i] -= c.lr * grad[i]
			}
		}
		loss, correct := ws.Evaluate(params, x, y)
		if correct != n {
			t.Errorf("%s: %d/%d training examples right after %d SGD steps", c.name, correct, n, c.steps)
		}
		if !(loss < 0.1*startLoss) {
			t.Errorf("%s: loss went from %v to %v", c.name, startLoss/float64(n), loss/float64(n))
		}
	}
}

func TestEvaluateMatchesNaiveLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	const D, C, N = 784, 10, 300
	x, y := randBatch(rng, N, D, C)
	for _, name := range Names() {
		if name == "cnn" {
			continue // refNet is dense; cnn_test.go has the cnn's own reference
		}
		m := mustNew(t, name, D, C)
		params := randParams(m, rng)
		ref := refNet{refSizes(name, D, C)}
		losses, right, margin := ref.loss(widen(params), x, y)
		var wantLoss float64
		var wantCorrect, nearTies int
		for k := range losses {
			wantLoss += losses[k]
			if right[k] {
				wantCorrect++
			}
			if margin[k] < 1e-4 {
				nearTies++ // float32 logits may order these differently
			}
		}
		// maxBatch 64 does not divide 300: exercises a short last chunk.
		for _, mb := range []int{64, N, 1} {
			loss, correct := m.NewWorkspace(mb).Evaluate(params, x, y)
			if math.Abs(loss-wantLoss) > 1e-5*wantLoss {
				t.Errorf("%s maxBatch %d: loss sum %v, naive %v", name, mb, loss, wantLoss)
			}
			if d := correct - wantCorrect; d > nearTies || -d > nearTies {
				t.Errorf("%s maxBatch %d: %d correct, naive %d (%d near-ties)", name, mb, correct, wantCorrect, nearTies)
			}
		}
		if wantCorrect == 0 || wantCorrect == N {
			t.Errorf("%s: degenerate check, naive correct = %d", name, wantCorrect)
		}
		if l, c := m.NewWorkspace(8).Evaluate(params, nil, nil); l != 0 || c != 0 {
			t.Errorf("%s: Evaluate on no examples = %v, %d", name, l, c)
		}
	}
}

// A workspace used with n < maxBatch, after a full batch left stale data in
// its buffers, must give bit-identical results to one sized exactly n; and
// LossGrad must overwrite, not accumulate into, grad.
func TestLossGradPartialBatchAndOverwrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	const D, C = 784, 10
	for _, name := range Names() {
		m := mustNew(t, name, D, C)
		if c, ok := m.(*cnn); ok {
			c.drop1, c.drop2 = 0, 0 // dropout masks depend on the call history
		}
		params := randParams(m, rng)
		xBig, yBig := randBatch(rng, 32, D, C)
		x, y := randBatch(rng, 5, D, C)

		exact := make([]float32, m.NumParams())
		lossExact := m.NewWorkspace(5).LossGrad(params, x, y, exact)

		big := m.NewWorkspace(32)
		got := make([]float32, m.NumParams())
		big.LossGrad(params, xBig, yBig, got)
		for i := range got {
			got[i] = float32(math.NaN())
		}
		loss := big.LossGrad(params, x, y, got)
		if loss != lossExact {
			t.Errorf("%s: loss with n=5 < maxBatch=32: %v, want %v", name, loss, lossExact)
		}
		if !slices.Equal(got, exact) {
			t.Errorf("%s: gradient with n=5 < maxBatch=32 differs from maxBatch=5", name)
		}
	}
}

// LossGrad, LossStep and Evaluate do not allocate, at a batch within
// cnnEvalBatch and (after the first call, which grows the CNN's batch
// buffers) at a larger one.
func TestNoAllocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	x, y := randBatch(rng, 50, 784, 10)
	for _, name := range Names() {
		m := mustNew(t, name, 784, 10)
		params := randParams(m, rng)
		grad := make([]float32, m.NumParams())
		for _, B := range []int{20, 40} {
			ws := m.NewWorkspace(B)
			if a := testing.AllocsPerRun(2, func() { ws.LossGrad(params, x[:B*784], y[:B], grad) }); a != 0 {
				t.Errorf("%s batch %d: LossGrad allocates %v times", name, B, a)
			}
			if a := testing.AllocsPerRun(2, func() { ws.(Stepper).LossStep(params, x[:B*784], y[:B], 1e-9) }); a != 0 {
				t.Errorf("%s batch %d: LossStep allocates %v times", name, B, a)
			}
			if a := testing.AllocsPerRun(2, func() { ws.Evaluate(params, x, y) }); a != 0 {
				t.Errorf("%s batch %d: Evaluate allocates %v times", name, B, a)
			}
		}
	}
}

// An evaluator's CNN workspace (fl.NewEvaluator asks for 256 examples)
// holds its convolutions' buffers for one image and its dense layers' for
// cnnEvalBatch examples, and no training buffers: about 2 MB, where one
// sized for the whole batch took ~500 MB. Evaluate allocates nothing more
// (but Gemm's packing buffer).
func TestCNNEvaluatorWorkspaceIsSmall(t *testing.T) {
	m := mustNew(t, "cnn", 784, 10)
	params := randParams(m, rand.New(rand.NewPCG(18, 19)))
	x, y := randBatch(rand.New(rand.NewPCG(20, 21)), 40, 784, 10) // two chunks
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ws := m.NewWorkspace(256)
	ws.Evaluate(params, x, y)
	runtime.ReadMemStats(&after)
	b := after.TotalAlloc - before.TotalAlloc
	t.Logf("NewWorkspace(256) and Evaluate of 40 examples allocated %.1f MB", float64(b)/(1<<20))
	if b > 4<<20 {
		t.Error("that is more than 4 MB")
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestProgrammerErrorsPanic(t *testing.T) {
	m := mustNew(t, "mlp", 4, 3)
	ws := m.NewWorkspace(2)
	p, g := make([]float32, m.NumParams()), make([]float32, m.NumParams())
	x := make([]float32, 3*4)
	mustPanic(t, "label ≥ classes", func() { ws.LossGrad(p, x[:4], []uint8{3}, g) })
	mustPanic(t, "Evaluate label ≥ classes", func() { ws.Evaluate(p, x[:4], []uint8{7}) })
	mustPanic(t, "n > maxBatch", func() { ws.LossGrad(p, x, []uint8{0, 1, 2}, g) })
	mustPanic(t, "n = 0", func() { ws.LossGrad(p, nil, nil, g) })
	mustPanic(t, "short x", func() { ws.LossGrad(p, x[:7], []uint8{0, 1}, g) })
	mustPanic(t, "short grad", func() { ws.LossGrad(p, x[:4], []uint8{0}, g[1:]) })
	mustPanic(t, "short params", func() { ws.Evaluate(p[1:], x[:4], []uint8{0}) })
	mustPanic(t, "Init length", func() { m.Init(p[1:], nil) })
	mustPanic(t, "maxBatch 0", func() { m.NewWorkspace(0) })
}

// Softmax must stay finite and exact for logits far outside exp's range.
func TestSoftmaxCrossEntropyStable(t *testing.T) {
	logits := []float32{1000, 0, -1000, 88.8, 90, 89}
	d := make([]float32, 6)
	loss, correct := softmaxCrossEntropy(d, logits, []uint8{1, 1}, 3, 1)
	// Row 1: log(e^1000+1+e^-1000) − 0 = 1000 (to float64 precision).
	// Row 2: logsumexp(88.8, 90, 89) − 90, computed in float64.
	z := []float64{float64(float32(88.8)), 90, 89}
	want2 := math.Log(math.Exp(z[0])+math.Exp(z[1])+math.Exp(z[2])) - 90
	if math.Abs(loss-(1000+want2)) > 1e-9 {
		t.Errorf("loss %v, want %v", loss, 1000+want2)
	}
	if correct != 1 {
		t.Errorf("correct = %d, want 1 (row 2 predicts class 1)", correct)
	}
	// Row 1 gradient: p = (1, 0, 0), label 1 → (1, −1, 0).
	if d[0] != 1 || d[1] != -1 || d[2] != 0 {
		t.Errorf("gradient row 1 = %v, want [1 -1 0]", d[:3])
	}
	var s float32
	for _, v := range d[3:] {
		s += v
	}
	if math.Abs(float64(s)) > 1e-7 {
		t.Errorf("gradient row 2 sums to %v, want 0", s)
	}
}

// LossStep is LossGrad followed by the SGD step params −= lr·grad, up to
// float32 rounding of the fused update: the same loss, bit for bit (the
// forward pass is shared), and the same new parameters to within a few
// ulps of the parameter plus 1e-4 of the step. With dropout the CNN draws
// the same masks for both, as both are seeded alike.
func TestLossStepMatchesLossGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	const D, C, n, lr = 784, 10, 7, 0.05
	for _, name := range Names() {
		m := mustNew(t, name, D, C)
		params := randParams(m, rng)
		x, y := randBatch(rng, n, D, C)
		gws, sws := m.NewWorkspace(n), m.NewWorkspace(n)
		if s, ok := gws.(Seeder); ok {
			s.Seed(5, 6)
			sws.(Seeder).Seed(5, 6)
		}
		grad := make([]float32, m.NumParams())
		wantLoss := gws.LossGrad(params, x, y, grad)
		stepped := slices.Clone(params)
		loss := sws.(Stepper).LossStep(stepped, x, y, lr)
		if loss != wantLoss {
			t.Errorf("%s: LossStep's loss %v, LossGrad's %v", name, loss, wantLoss)
		}
		var gmax float64
		for _, g := range grad {
			gmax = max(gmax, math.Abs(float64(g)))
		}
		var worst float64 // in units of the tolerance
		moved := 0
		for i, p := range params {
			want := float64(p) - lr*float64(grad[i])
			tol := 1e-6*math.Abs(want) + lr*(1e-4*math.Abs(float64(grad[i]))+1e-6*gmax)
			worst = max(worst, math.Abs(float64(stepped[i])-want)/tol)
			if stepped[i] != p {
				moved++
			}
		}
		if worst > 1 {
			t.Errorf("%s: LossStep's parameters differ from LossGrad's step by %.3g tolerances", name, worst)
		}
		if moved < m.NumParams()/4 {
			t.Errorf("%s: only %d of %d parameters moved", name, moved, m.NumParams())
		}
	}
}

// WorkspaceBytes is what NewWorkspace (and the first LossStep, for a
// trained workspace) allocates, measured with the runtime's allocation
// counter: never less, and more by at most what it leaves out (headers,
// simd.Gemm's pooled packing buffers, and for the cnn at maxBatch 40 the
// evaluation-sized batch buffers that training replaced: 2 MB covers
// them).
func TestWorkspaceBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	x, y := randBatch(rng, 40, 784, 10)
	for _, name := range Names() {
		m := mustNew(t, name, 784, 10)
		params := randParams(m, rng)
		for _, c := range []struct {
			maxBatch int
			train    bool
		}{{20, true}, {40, true}, {256, false}} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ws := m.NewWorkspace(c.maxBatch)
			if c.train {
				ws.(Stepper).LossStep(params, x[:c.maxBatch*784], y[:c.maxBatch], 0)
			} else {
				ws.Evaluate(params, x[:784], y[:1])
			}
			runtime.ReadMemStats(&after)
			got, want := int64(after.TotalAlloc-before.TotalAlloc), WorkspaceBytes(m, c.maxBatch, c.train)
			if got < want || got > want+2<<20 {
				t.Errorf("%s maxBatch %d train %v: allocated %d bytes, WorkspaceBytes %d", name, c.maxBatch, c.train, got, want)
			}
		}
	}
}
