package export

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/dpfl/dpfl/export/onnxpb"
)

// The ONNX versions the graphs are written for: IR version 8 (ONNX
// 1.10–1.12; onnxpb's schema is 1.12's) and the default domain's
// operator set 13, whose Gemm, Conv, MaxPool, Relu and Flatten every
// runtime since ONNX 1.8 supports. Debian 12's python3-onnx 1.12 checks
// them (scripts/check-onnx.sh).
const (
	IRVersion = 8
	Opset     = 13
)

// Graph names: the input, the output, and N, the batch dimension left
// free.
const (
	InputName  = "input"
	OutputName = "logits"
	BatchDim   = "N"
)

// ONNX returns the ONNX model of a with the parameters params (fl/model's
// flat vector) and the metadata meta (Certificate.Metadata) as the bytes
// of a serialized ModelProto: an .onnx file. BuildONNX documents the
// graph.
func ONNX(a Arch, params []float32, meta map[string]string) ([]byte, error) {
	m, err := BuildONNX(a, params, meta)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// BuildONNX returns the ONNX ModelProto of a with the parameters params:
// a graph from the float32 input "input" [N, D] (dense models) or
// [N, 1, s, s] (the CNN, NCHW) to the float32 output "logits" [N, C]
// (no softmax), whose initializers are a.Tensors(params) under their
// names, stored as little-endian raw_data. The nodes (ONNX opset 13):
//
//	logreg  Gemm(input, fc.weight, fc.bias; transB=1) → logits
//	mlp     Gemm(fc1) → Relu → Gemm(fc2) → Relu → Gemm(fc3) → logits
//	cnn     Conv(conv1; 3×3, pads 0, strides 1) → Relu → Conv(conv2) → Relu
//	        → MaxPool(2×2, strides 2) → Flatten(axis=1)
//	        → Gemm(fc1; transB=1) → Relu → Gemm(fc2; transB=1) → logits
//
// Gemm computes Y = X·Bᵀ + C with B = W [out, in], which is fl/model's
// dense layer y = x·Wᵀ + b; Conv is a cross-correlation, as fl/model's
// convolutions are. meta goes to metadata_props, sorted by key. It
// refuses an unknown architecture and a wrong number of parameters.
func BuildONNX(a Arch, params []float32, meta map[string]string) (*onnxpb.ModelProto, error) {
	ts, err := a.Tensors(params)
	if err != nil {
		return nil, err
	}
	g := &graphBuilder{g: &onnxpb.GraphProto{
		Name: proto.String("dpfl_" + a.Model),
		DocString: proto.String(fmt.Sprintf("dpfl %s: %v float32 input (N free) to %d logits (no softmax); fl/model's forward pass at inference (no dropout)",
			a.Model, a.InputShape(), a.Classes)),
	}}
	for _, t := range ts {
		g.g.Initializer = append(g.g.Initializer, tensorProto(t))
	}
	in := InputName
	switch a.Model {
	case "logreg":
		g.gemm("fc", in, OutputName)
	case "mlp":
		h := g.gemm("fc1", in, "")
		h = g.relu("relu1", h)
		h = g.gemm("fc2", h, "")
		h = g.relu("relu2", h)
		g.gemm("fc3", h, OutputName)
	case "cnn":
		h := g.conv("conv1", in)
		h = g.relu("relu1", h)
		h = g.conv("conv2", h)
		h = g.relu("relu2", h)
		h = g.node("MaxPool", "pool", []string{h}, ints("kernel_shape", 2, 2), ints("strides", 2, 2))
		h = g.node("Flatten", "flatten", []string{h}, intAttr("axis", 1))
		h = g.gemm("fc1", h, "")
		h = g.relu("relu3", h)
		g.gemm("fc2", h, OutputName)
	}
	batch := []any{BatchDim}
	for _, d := range a.InputShape() {
		batch = append(batch, d)
	}
	g.g.Input = []*onnxpb.ValueInfoProto{valueInfo(InputName, "images or feature vectors as dpfl's datasets hold them", batch...)}
	g.g.Output = []*onnxpb.ValueInfoProto{valueInfo(OutputName, "logits z (softmax not applied)", BatchDim, a.Classes)}

	m := &onnxpb.ModelProto{
		IrVersion:       proto.Int64(IRVersion),
		OpsetImport:     []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(Opset)}},
		ProducerName:    proto.String("dpfl"),
		ProducerVersion: proto.String("export/1"),
		Domain:          proto.String("org.dpfl"),
		ModelVersion:    proto.Int64(1),
		DocString:       proto.String("A dpfl federated model; metadata_props hold its privacy certificate (package export, Certificate.Metadata)."),
		Graph:           g.g,
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: proto.String(k), Value: proto.String(meta[k])})
	}
	return m, nil
}

// graphBuilder appends nodes to a graph.
type graphBuilder struct{ g *onnxpb.GraphProto }

// node appends an op named name with inputs and attributes; its single
// output is name+".out" and is returned.
func (b *graphBuilder) node(op, name string, inputs []string, attrs ...*onnxpb.AttributeProto) string {
	return b.nodeTo(op, name, inputs, name+".out", attrs...)
}

func (b *graphBuilder) nodeTo(op, name string, inputs []string, out string, attrs ...*onnxpb.AttributeProto) string {
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{
		OpType: proto.String(op), Name: proto.String(name), Input: inputs, Output: []string{out}, Attribute: attrs,
	})
	return out
}

// gemm is the dense layer layer: Gemm(x, layer.weight, layer.bias) with
// transB = 1, into out (or layer.out if empty).
func (b *graphBuilder) gemm(layer, x, out string) string {
	if out == "" {
		out = layer + ".out"
	}
	return b.nodeTo("Gemm", layer, []string{x, layer + ".weight", layer + ".bias"}, out, intAttr("transB", 1))
}

func (b *graphBuilder) relu(name, x string) string { return b.node("Relu", name, []string{x}) }

// conv is a 3×3 valid convolution of stride 1 with layer's weight and bias.
func (b *graphBuilder) conv(layer, x string) string {
	return b.node("Conv", layer, []string{x, layer + ".weight", layer + ".bias"},
		ints("kernel_shape", 3, 3), ints("strides", 1, 1), ints("pads", 0, 0, 0, 0), ints("dilations", 1, 1), intAttr("group", 1))
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func ints(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

// tensorProto is t as a float32 initializer with little-endian raw_data.
func tensorProto(t Tensor) *onnxpb.TensorProto {
	raw := make([]byte, 4*len(t.Data))
	for i, v := range t.Data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	dims := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = int64(d)
	}
	return &onnxpb.TensorProto{
		Name: proto.String(t.Name), Dims: dims,
		DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), RawData: raw,
	}
}

// valueInfo is a float32 tensor value of the given dimensions: ints are
// fixed sizes, strings named free ones.
func valueInfo(name, doc string, dims ...any) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		dim := &onnxpb.TensorShapeProto_Dimension{}
		switch d := d.(type) {
		case int:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}
		case string:
			dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: d}
		}
		shape.Dim = append(shape.Dim, dim)
	}
	return &onnxpb.ValueInfoProto{
		Name: proto.String(name), DocString: proto.String(doc),
		Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
			ElemType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Shape: shape,
		}}},
	}
}
