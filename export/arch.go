package export

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// Arch is a model architecture of fl/model with its dimensions: what it
// takes to read a flat parameter vector as named tensors and a graph.
type Arch struct {
	// Model is fl/model's name: "logreg", "mlp" or "cnn".
	Model string
	// InputDim is the number D of input features (for the CNN D = s², an
	// s×s single-channel image).
	InputDim int
	// Classes is the number C of classes, the width of the logits.
	Classes int
}

// FashionMNIST is the architecture model over Fashion-MNIST: D = 784
// (28×28 pixels), C = 10.
func FashionMNIST(modelName string) Arch {
	return Arch{Model: modelName, InputDim: 28 * 28, Classes: 10}
}

// mlpHidden is the MLP's hidden width (fl/model, the "2NN" of McMahan et
// al. 2017: in-200-200-C).
const mlpHidden = 200

// The CNN's widths (fl/model/cnn.go: Reddi et al. 2021, Table 4).
const (
	cnnC1     = 32  // conv1 filters
	cnnC2     = 64  // conv2 filters
	cnnHidden = 128 // dense layer
)

// Check returns an error unless fl/model knows the architecture and
// params has exactly its number of parameters.
func (a Arch) Check(params []float32) error {
	m, err := model.New(a.Model, a.InputDim, a.Classes)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if len(params) != m.NumParams() {
		return fmt.Errorf("export: %s with %d inputs and %d classes has %d parameters, got %d", a.Model, a.InputDim, a.Classes, m.NumParams(), len(params))
	}
	return nil
}

// side is the CNN's image side s (InputDim = s²).
func (a Arch) side() int { return int(math.Round(math.Sqrt(float64(a.InputDim)))) }

// InputShape is the shape of one example as the ONNX graph takes it: [D]
// for the dense models, [1, s, s] (CHW) for the CNN.
func (a Arch) InputShape() []int {
	if a.Model == "cnn" {
		s := a.side()
		return []int{1, s, s}
	}
	return []int{a.InputDim}
}

// Tensor is one named parameter tensor: Data holds the product of Shape
// float32 values in row-major (C) order.
type Tensor struct {
	Name  string
	Shape []int
	Data  []float32
}

// Tensors cuts params, fl/model's flat vector for a, into a's named
// tensors in ONNX's (and PyTorch's) layout, in the order of the package
// doc's table. The dense models' tensors share params' memory; the CNN's
// conv2.weight and fc1.weight are permuted copies. It refuses an unknown
// architecture and a wrong number of parameters.
func (a Arch) Tensors(params []float32) ([]Tensor, error) {
	if err := a.Check(params); err != nil {
		return nil, err
	}
	D, C := a.InputDim, a.Classes
	off := 0
	next := func(name string, shape ...int) Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t := Tensor{Name: name, Shape: shape, Data: params[off : off+n : off+n]}
		off += n
		return t
	}
	var ts []Tensor
	switch a.Model {
	case "logreg":
		ts = []Tensor{next("fc.weight", C, D), next("fc.bias", C)}
	case "mlp":
		h := mlpHidden
		ts = []Tensor{
			next("fc1.weight", h, D), next("fc1.bias", h),
			next("fc2.weight", h, h), next("fc2.bias", h),
			next("fc3.weight", C, h), next("fc3.bias", C),
		}
	case "cnn":
		q := (a.side() - 4) / 2
		ts = []Tensor{
			next("conv1.weight", cnnC1, 1, 3, 3), next("conv1.bias", cnnC1),
			next("conv2.weight", cnnC2, cnnC1, 3, 3), next("conv2.bias", cnnC2),
			next("fc1.weight", cnnHidden, cnnC2*q*q), next("fc1.bias", cnnHidden),
			next("fc2.weight", C, cnnHidden), next("fc2.bias", C),
		}
		// conv2: fl/model's W2[o, (3·ky+kx)·c1 + c] → [o, c, ky, kx].
		w2 := make([]float32, len(ts[2].Data))
		for o := range cnnC2 {
			for c := range cnnC1 {
				for t := range 9 {
					w2[(o*cnnC1+c)*9+t] = ts[2].Data[o*9*cnnC1+t*cnnC1+c]
				}
			}
		}
		ts[2].Data = w2
		// fc1: fl/model's W3[h, (q·i+j)·c2 + c] (HWC) → [h, c·q² + q·i + j] (CHW).
		w3 := make([]float32, len(ts[4].Data))
		flat := cnnC2 * q * q
		for h := range cnnHidden {
			src, dst := ts[4].Data[h*flat:(h+1)*flat], w3[h*flat:(h+1)*flat]
			for p := range q * q {
				for c := range cnnC2 {
					dst[c*q*q+p] = src[p*cnnC2+c]
				}
			}
		}
		ts[4].Data = w3
	default: // Check accepted a model this package does not know
		return nil, fmt.Errorf("export: no tensor layout for model %q (known: logreg, mlp, cnn)", a.Model)
	}
	if off != len(params) {
		return nil, fmt.Errorf("export: %s's tensors cover %d of its %d parameters: fl/model's layout has changed", a.Model, off, len(params))
	}
	return ts, nil
}

// InferArch returns the architecture of model with classes classes that
// has numParams parameters, solving for the input dimension D from
// fl/model's layouts: numParams = C·(D+1) for logreg and
// 200·D + 201·C + 40,400 for the MLP. The CNN's count fixes only
// q = ⌊(s−4)/2⌋, which two image sides s share, so InferArch refuses it:
// name its input dimension instead.
func InferArch(modelName string, numParams, classes int) (Arch, error) {
	if classes < 2 {
		return Arch{}, fmt.Errorf("export: classes must be ≥ 2, got %d", classes)
	}
	var d int
	switch modelName {
	case "logreg":
		if numParams%classes != 0 {
			return Arch{}, fmt.Errorf("export: %d parameters are no logreg with %d classes (C·(D+1))", numParams, classes)
		}
		d = numParams/classes - 1
	case "mlp":
		r := numParams - (mlpHidden+1)*classes - mlpHidden*mlpHidden - 2*mlpHidden
		if r%mlpHidden != 0 {
			return Arch{}, fmt.Errorf("export: %d parameters are no mlp with %d classes (200·D + 201·C + 40,400)", numParams, classes)
		}
		d = r / mlpHidden
	case "cnn":
		return Arch{}, errors.New("export: a CNN's image side cannot be told from its parameter count (sides 2q+4 and 2q+5 give the same model); give the input dimension")
	default:
		return Arch{}, fmt.Errorf("export: unknown model %q (known: %s)", modelName, strings.Join(model.Names(), ", "))
	}
	if d < 1 {
		return Arch{}, fmt.Errorf("export: %d parameters are too few for a %s with %d classes", numParams, modelName, classes)
	}
	return Arch{Model: modelName, InputDim: d, Classes: classes}, nil
}

// JobArch is the architecture of a job's model from the job's spec (GET
// /v1/jobs/{id}) and the model's parameter count: Fashion-MNIST (the
// default dataset) is 784 → 10, the synthetic dataset
// data.SyntheticDim → data.SyntheticClasses; a LEAF dataset's
// dimensions live in its files, so its classes come from leaf.classes
// and its input dimension from InferArch (refused without leaf.classes,
// and for the CNN). The count is checked against the result.
func JobArch(spec types.Spec, numParams int) (Arch, error) {
	var a Arch
	switch spec.Dataset {
	case "synthetic":
		a = Arch{Model: spec.Model, InputDim: data.SyntheticDim, Classes: data.SyntheticClasses}
	case "leaf":
		if spec.LEAF.Classes == 0 {
			return Arch{}, errors.New("export: a LEAF job's number of classes is in its data files, and its spec does not state it (leaf.classes); export it with --format json")
		}
		var err error
		if a, err = InferArch(spec.Model, numParams, spec.LEAF.Classes); err != nil {
			return Arch{}, err
		}
	case "", "fashion-mnist":
		a = FashionMNIST(spec.Model)
	default:
		return Arch{}, fmt.Errorf("export: unknown dataset %q: its input dimension and classes are not known", spec.Dataset)
	}
	m, err := model.New(a.Model, a.InputDim, a.Classes)
	if err != nil {
		return Arch{}, fmt.Errorf("export: %w", err)
	}
	if m.NumParams() != numParams {
		return Arch{}, fmt.Errorf("export: a %s over %s (%d inputs, %d classes) has %d parameters, the job's model %d", a.Model, spec.Dataset, a.InputDim, a.Classes, m.NumParams(), numParams)
	}
	return a, nil
}
