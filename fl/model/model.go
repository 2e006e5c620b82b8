package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Model is a classifier with a flat parameter vector (layouts in the
// package doc).
type Model interface {
	// Name is the registry name: "logreg", "mlp" or "cnn".
	Name() string
	// NumParams is the length d of the flat parameter vector.
	NumParams() int
	// InputDim is the number D of features per example (784 for MNIST).
	InputDim() int
	// NumClasses is the number C of classes (10 for MNIST).
	NumClasses() int
	// Init writes the initial parameters x_0 into params (len NumParams;
	// panics otherwise), drawing from rng in layout order so that a seed
	// reproduces them. logreg starts at zero; mlp uses He-uniform weights
	// for the layers feeding a ReLU, Glorot-uniform for the output layer,
	// and zero biases (see mlpInit).
	Init(params []float32, rng *rand.Rand)
	// NewWorkspace allocates every buffer needed for batches of up to
	// maxBatch ≥ 1 examples (panics otherwise). The exception is the
	// cnn's workspace for maxBatch > 32, which allocates its training
	// buffers at the first LossGrad or LossStep, so that one used only
	// for evaluation stays small. Every workspace of this package is a
	// Stepper and the cnn's is a Seeder.
	NewWorkspace(maxBatch int) Workspace
}

// Seeder is a Workspace whose training draws randomness of its own (the
// CNN's dropout masks). Seed restarts that stream at (a, b), so that a
// trainer can make each client's update depend only on that client's own
// seed, never on what the workspace trained before: otherwise adding a
// user would change every later user's update on the same worker, and the
// sum would move by more than one clipped update.
type Seeder interface {
	Seed(a, b uint64)
}

// Stepper is a Workspace that can fuse a plain SGD step into its backward
// pass. LossStep(params, x, labels, lr) is LossGrad into a gradient g
// followed by params ← params − lr·g (ClientUpdate's step, McMahan et al.
// 2017, Algorithm 1), except that each layer's update is applied by the
// GEMM that computes its weight gradient (alpha = −lr, beta = 1) once the
// backward pass no longer needs that layer's old weights. The gradient is
// thus never written out, read back and added: for the MLP at batch 20
// that is 0.8 MB less memory traffic a step. It returns the loss at the
// old params, allocates nothing and panics like LossGrad. Results equal
// LossGrad's step up to float32 rounding (the update's product is rounded
// once instead of twice). Terms added to the gradient (FedProx's
// proximal term, SCAFFOLD's correction) can be applied around it, as
// fl's client trainer does; momentum, which keeps the gradient itself,
// needs LossGrad.
type Stepper interface {
	LossStep(params, x []float32, labels []uint8, lr float32) float64
}

// Workspace runs the forward and backward passes of one Model with buffers
// it owns. It is not safe for concurrent use.
type Workspace interface {
	// LossGrad computes the mean softmax cross-entropy
	// L = (1/n)·Σ_k −log softmax(f(x_k))_{y_k} over the n = len(labels)
	// examples of x (n×InputDim row-major, 1 ≤ n ≤ maxBatch), OVERWRITES
	// grad (len NumParams) with ∇L w.r.t. params (len NumParams), and
	// returns L in nats. It does not allocate (but see NewWorkspace on
	// the cnn's first call). It panics on any length
	// mismatch, on n outside [1, maxBatch] and on a label ≥ NumClasses:
	// datasets are validated when loaded, so these are programmer errors.
	LossGrad(params, x []float32, labels []uint8, grad []float32) float64
	// Evaluate returns the summed cross-entropy (nats) and the number of
	// examples whose argmax prediction equals the label (ties go to the
	// lowest class index) over any number n = len(labels) ≥ 0 of examples
	// x (n×InputDim), processed in chunks of maxBatch (the cnn's of at
	// most 32). It does not allocate and panics like LossGrad.
	Evaluate(params, x []float32, labels []uint8) (lossSum float64, correct int)
}

// mlpHidden are the hidden widths of the 2NN of McMahan et al. 2017, §3.
var mlpHidden = []int{200, 200}

// Names returns the known model names, sorted.
func Names() []string { return []string{"cnn", "logreg", "mlp"} }

// New returns the model called name for inputs of inputDim ≥ 1 features
// and classes ∈ [2, 256] classes (labels are uint8). An unknown name or
// bad dimensions give an error, since both come from a job spec.
func New(name string, inputDim, classes int) (Model, error) {
	if inputDim < 1 {
		return nil, fmt.Errorf("model: input dimension must be ≥ 1, got %d", inputDim)
	}
	if classes < 2 || classes > 256 {
		return nil, fmt.Errorf("model: classes must be in [2, 256], got %d", classes)
	}
	switch name {
	case "logreg":
		return newDense(name, []int{inputDim, classes}), nil
	case "mlp":
		sizes := append([]int{inputDim}, mlpHidden...)
		return newDense(name, append(sizes, classes)), nil
	case "cnn":
		side, err := cnnSide(inputDim)
		if err != nil {
			return nil, err
		}
		return newCNN(side, 32, 64, 128, classes, 0.25, 0.5), nil
	}
	return nil, fmt.Errorf("model: unknown model %q (known: %s)", name, strings.Join(Names(), ", "))
}
