package export_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dpfl/dpfl/export/onnxpb"
)

// A pure-Go reference evaluator of the ONNX graphs, in float64, that
// reads nothing but the ModelProto: the weights from its initializers,
// the operators and their attributes from its nodes. It implements the
// operators the exported graphs use, after the ONNX operator spec
// (https://onnx.ai/onnx/operators/, opset 13), and refuses anything
// else, so that a graph which needs more fails the test.

// value is a float64 tensor with its shape.
type value struct {
	shape []int
	data  []float64
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// initializerValue decodes a float32 initializer (raw_data or
// float_data).
func initializerValue(t *onnxpb.TensorProto) (value, error) {
	if t.GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
		return value{}, fmt.Errorf("initializer %s: data type %d, want FLOAT", t.GetName(), t.GetDataType())
	}
	shape := make([]int, len(t.GetDims()))
	for i, d := range t.GetDims() {
		shape[i] = int(d)
	}
	n := numel(shape)
	v := value{shape: shape, data: make([]float64, n)}
	switch {
	case len(t.GetRawData()) == 4*n:
		for i := range v.data {
			v.data[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.GetRawData()[4*i:])))
		}
	case len(t.GetFloatData()) == n:
		for i, f := range t.GetFloatData() {
			v.data[i] = float64(f)
		}
	default:
		return value{}, fmt.Errorf("initializer %s: %d raw bytes, %d floats for %d elements", t.GetName(), len(t.GetRawData()), len(t.GetFloatData()), n)
	}
	return v, nil
}

// attrs reads a node's INT and INTS attributes.
func attrs(n *onnxpb.NodeProto) (map[string]int64, map[string][]int64) {
	i, is := map[string]int64{}, map[string][]int64{}
	for _, a := range n.GetAttribute() {
		switch a.GetType() {
		case onnxpb.AttributeProto_INT:
			i[a.GetName()] = a.GetI()
		case onnxpb.AttributeProto_INTS:
			is[a.GetName()] = a.GetInts()
		}
	}
	return i, is
}

// evalONNX runs m's graph on input (its shape included) and returns the
// graph's single output.
func evalONNX(m *onnxpb.ModelProto, input value) (value, error) {
	g := m.GetGraph()
	env := map[string]value{}
	for _, t := range g.GetInitializer() {
		v, err := initializerValue(t)
		if err != nil {
			return value{}, err
		}
		env[t.GetName()] = v
	}
	if len(g.GetInput()) != 1 || len(g.GetOutput()) != 1 {
		return value{}, fmt.Errorf("graph has %d inputs and %d outputs, want 1 and 1", len(g.GetInput()), len(g.GetOutput()))
	}
	env[g.GetInput()[0].GetName()] = input
	for _, n := range g.GetNode() {
		in := make([]value, len(n.GetInput()))
		for i, name := range n.GetInput() {
			v, ok := env[name]
			if !ok {
				return value{}, fmt.Errorf("node %s: input %s not computed yet", n.GetName(), name)
			}
			in[i] = v
		}
		ia, isa := attrs(n)
		var out value
		var err error
		switch n.GetOpType() {
		case "Gemm":
			out, err = gemm(in, ia)
		case "Relu":
			out = value{shape: in[0].shape, data: make([]float64, len(in[0].data))}
			for i, x := range in[0].data {
				out.data[i] = max(x, 0)
			}
		case "Conv":
			out, err = conv(in, ia, isa)
		case "MaxPool":
			out, err = maxPool(in[0], ia, isa)
		case "Flatten":
			axis := int(ia["axis"])
			if _, ok := ia["axis"]; !ok {
				axis = 1
			}
			out = value{shape: []int{numel(in[0].shape[:axis]), numel(in[0].shape[axis:])}, data: in[0].data}
		default:
			err = fmt.Errorf("operator %s not implemented by the reference", n.GetOpType())
		}
		if err != nil {
			return value{}, fmt.Errorf("node %s (%s): %w", n.GetName(), n.GetOpType(), err)
		}
		if len(n.GetOutput()) != 1 {
			return value{}, fmt.Errorf("node %s: %d outputs", n.GetName(), len(n.GetOutput()))
		}
		env[n.GetOutput()[0]] = out
	}
	out, ok := env[g.GetOutput()[0].GetName()]
	if !ok {
		return value{}, fmt.Errorf("output %s never computed", g.GetOutput()[0].GetName())
	}
	return out, nil
}

// gemm is Y = alpha·A'·B' + beta·C, A' = A or Aᵀ (transA), B' likewise,
// with C broadcast to [M, N] (unidirectionally: [N], [1, N], [M, N]).
func gemm(in []value, ia map[string]int64) (value, error) {
	if len(in) < 2 || len(in[0].shape) != 2 || len(in[1].shape) != 2 {
		return value{}, fmt.Errorf("want 2-D A and B")
	}
	if _, ok := ia["alpha"]; ok {
		return value{}, fmt.Errorf("alpha is a float attribute; the reference expects the default 1")
	}
	a, b := in[0], in[1]
	ta, tb := ia["transA"] == 1, ia["transB"] == 1
	M, K := a.shape[0], a.shape[1]
	if ta {
		M, K = K, M
	}
	K2, N := b.shape[0], b.shape[1]
	if tb {
		K2, N = N, K2
	}
	if K != K2 {
		return value{}, fmt.Errorf("A' is %d×%d, B' %d×%d", M, K, K2, N)
	}
	at := func(i, k int) float64 {
		if ta {
			return a.data[k*M+i]
		}
		return a.data[i*K+k]
	}
	bt := func(k, j int) float64 {
		if tb {
			return b.data[j*K+k]
		}
		return b.data[k*N+j]
	}
	out := value{shape: []int{M, N}, data: make([]float64, M*N)}
	for i := range M {
		for j := range N {
			var s float64
			for k := range K {
				s += at(i, k) * bt(k, j)
			}
			if len(in) > 2 {
				c := in[2]
				switch numel(c.shape) {
				case N:
					s += c.data[j]
				case M * N:
					s += c.data[i*N+j]
				case 1:
					s += c.data[0]
				default:
					return value{}, fmt.Errorf("C of shape %v does not broadcast to %d×%d", c.shape, M, N)
				}
			}
			out.data[i*N+j] = s
		}
	}
	return out, nil
}

// conv is a 2-D Conv of X [N, Ci, H, W] with W [Co, Ci, kh, kw] and bias
// B [Co]: group 1, dilations 1, explicit pads, any strides.
func conv(in []value, ia map[string]int64, isa map[string][]int64) (value, error) {
	x, w := in[0], in[1]
	if len(x.shape) != 4 || len(w.shape) != 4 || x.shape[1] != w.shape[1] {
		return value{}, fmt.Errorf("X %v and W %v are not a 2-D convolution's", x.shape, w.shape)
	}
	if g, ok := ia["group"]; ok && g != 1 {
		return value{}, fmt.Errorf("group %d", g)
	}
	for _, d := range isa["dilations"] {
		if d != 1 {
			return value{}, fmt.Errorf("dilations %v", isa["dilations"])
		}
	}
	if ks := isa["kernel_shape"]; ks != nil && (int(ks[0]) != w.shape[2] || int(ks[1]) != w.shape[3]) {
		return value{}, fmt.Errorf("kernel_shape %v, W %v", ks, w.shape)
	}
	pads, strides := []int64{0, 0, 0, 0}, []int64{1, 1}
	if p := isa["pads"]; p != nil {
		pads = p
	}
	if s := isa["strides"]; s != nil {
		strides = s
	}
	n, ci, h, wd := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	co, kh, kw := w.shape[0], w.shape[2], w.shape[3]
	sh, sw := int(strides[0]), int(strides[1])
	ph, pw := int(pads[0]), int(pads[1])
	oh := (h+int(pads[0])+int(pads[2])-kh)/sh + 1
	ow := (wd+int(pads[1])+int(pads[3])-kw)/sw + 1
	out := value{shape: []int{n, co, oh, ow}, data: make([]float64, n*co*oh*ow)}
	for b := range n {
		for o := range co {
			bias := 0.0
			if len(in) > 2 {
				bias = in[2].data[o]
			}
			for y := range oh {
				for xx := range ow {
					s := bias
					for c := range ci {
						for ky := range kh {
							iy := y*sh + ky - ph
							if iy < 0 || iy >= h {
								continue
							}
							for kx := range kw {
								ix := xx*sw + kx - pw
								if ix < 0 || ix >= wd {
									continue
								}
								s += x.data[((b*ci+c)*h+iy)*wd+ix] * w.data[((o*ci+c)*kh+ky)*kw+kx]
							}
						}
					}
					out.data[((b*co+o)*oh+y)*ow+xx] = s
				}
			}
		}
	}
	return out, nil
}

// maxPool is MaxPool over X [N, C, H, W]: no padding, floor (ceil_mode 0).
func maxPool(x value, ia map[string]int64, isa map[string][]int64) (value, error) {
	ks, st := isa["kernel_shape"], isa["strides"]
	if len(x.shape) != 4 || len(ks) != 2 {
		return value{}, fmt.Errorf("X %v, kernel_shape %v", x.shape, ks)
	}
	if st == nil {
		st = []int64{1, 1}
	}
	if p := isa["pads"]; p != nil {
		for _, v := range p {
			if v != 0 {
				return value{}, fmt.Errorf("pads %v", p)
			}
		}
	}
	if ia["ceil_mode"] != 0 {
		return value{}, fmt.Errorf("ceil_mode")
	}
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	kh, kw, sh, sw := int(ks[0]), int(ks[1]), int(st[0]), int(st[1])
	oh, ow := (h-kh)/sh+1, (w-kw)/sw+1
	out := value{shape: []int{n, c, oh, ow}, data: make([]float64, n*c*oh*ow)}
	for p := range n * c {
		for y := range oh {
			for xx := range ow {
				m := math.Inf(-1)
				for ky := range kh {
					for kx := range kw {
						m = max(m, x.data[(p*h+y*sh+ky)*w+xx*sw+kx])
					}
				}
				out.data[(p*oh+y)*ow+xx] = m
			}
		}
	}
	return out, nil
}
