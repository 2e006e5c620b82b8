package export_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/export"
	"github.com/dpfl/dpfl/export/internal/fixture"
	"github.com/dpfl/dpfl/export/internal/forward"
	"github.com/dpfl/dpfl/export/onnxpb"
	"github.com/dpfl/dpfl/fl/model"
	"github.com/dpfl/dpfl/internal/datatest"
)

// tol is the largest |Δ| allowed between the exported graph's outputs
// and fl/model's (issue 17).
const tol = 1e-5

var archs = []export.Arch{export.FashionMNIST("logreg"), export.FashionMNIST("mlp"), export.FashionMNIST("cnn")}

// params returns jittered initial parameters of a (fixture.Params):
// logreg starts at zero, so its jitter is its weights.
func params(t *testing.T, a export.Arch) []float32 {
	t.Helper()
	m, err := model.New(a.Model, a.InputDim, a.Classes)
	if err != nil {
		t.Fatal(err)
	}
	jitter := 0.02
	if a.Model == "logreg" {
		jitter = 0.1
	}
	return fixture.Params(m, 17, jitter)
}

var testMeta = map[string]string{"dp": "true", "dp.epsilon": "1.5", "dpfl.job_id": "j1", "log.root": "abc="}

// decode parses an .onnx file back with protobuf.
func decode(t *testing.T, b []byte) *onnxpb.ModelProto {
	t.Helper()
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatalf("the written ONNX does not decode: %v", err)
	}
	return &m
}

// dims is a ValueInfo's shape: dim_value as a number, dim_param as -1.
func dims(v *onnxpb.ValueInfoProto) []int64 {
	var out []int64
	for _, d := range v.GetType().GetTensorType().GetShape().GetDim() {
		if d.GetDimParam() != "" {
			out = append(out, -1)
		} else {
			out = append(out, d.GetDimValue())
		}
	}
	return out
}

// The written ONNX decodes to the documented graph: versions, input and
// output, the node sequence, the initializers with their shapes and
// values (Arch.Tensors, little-endian raw_data) and the metadata.
func TestONNXStructure(t *testing.T) {
	wantOps := map[string][]string{
		"logreg": {"Gemm"},
		"mlp":    {"Gemm", "Relu", "Gemm", "Relu", "Gemm"},
		"cnn":    {"Conv", "Relu", "Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Relu", "Gemm"},
	}
	wantShapes := map[string]map[string][]int64{
		"logreg": {"fc.weight": {10, 784}, "fc.bias": {10}},
		"mlp": {"fc1.weight": {200, 784}, "fc1.bias": {200}, "fc2.weight": {200, 200}, "fc2.bias": {200},
			"fc3.weight": {10, 200}, "fc3.bias": {10}},
		"cnn": {"conv1.weight": {32, 1, 3, 3}, "conv1.bias": {32}, "conv2.weight": {64, 32, 3, 3}, "conv2.bias": {64},
			"fc1.weight": {128, 9216}, "fc1.bias": {128}, "fc2.weight": {10, 128}, "fc2.bias": {10}},
	}
	wantIn := map[string][]int64{"logreg": {-1, 784}, "mlp": {-1, 784}, "cnn": {-1, 1, 28, 28}}
	for _, a := range archs {
		p := params(t, a)
		b, err := export.ONNX(a, p, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, b)
		if m.GetIrVersion() != 8 || len(m.GetOpsetImport()) != 1 || m.GetOpsetImport()[0].GetVersion() != 13 || m.GetOpsetImport()[0].GetDomain() != "" {
			t.Errorf("%s: IR %d, opsets %v", a.Model, m.GetIrVersion(), m.GetOpsetImport())
		}
		g := m.GetGraph()
		var ops []string
		for _, n := range g.GetNode() {
			ops = append(ops, n.GetOpType())
		}
		if !slices.Equal(ops, wantOps[a.Model]) {
			t.Errorf("%s: nodes %v, want %v", a.Model, ops, wantOps[a.Model])
		}
		if len(g.GetInput()) != 1 || g.GetInput()[0].GetName() != "input" || !slices.Equal(dims(g.GetInput()[0]), wantIn[a.Model]) {
			t.Errorf("%s: input %v", a.Model, g.GetInput())
		}
		if len(g.GetOutput()) != 1 || g.GetOutput()[0].GetName() != "logits" || !slices.Equal(dims(g.GetOutput()[0]), []int64{-1, 10}) {
			t.Errorf("%s: output %v", a.Model, g.GetOutput())
		}
		if last := g.GetNode()[len(g.GetNode())-1]; last.GetOutput()[0] != "logits" {
			t.Errorf("%s: the last node writes %v", a.Model, last.GetOutput())
		}
		ts, err := a.Tensors(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.GetInitializer()) != len(ts) || len(ts) != len(wantShapes[a.Model]) {
			t.Fatalf("%s: %d initializers, %d tensors, want %d", a.Model, len(g.GetInitializer()), len(ts), len(wantShapes[a.Model]))
		}
		total := 0
		for i, init := range g.GetInitializer() {
			want := wantShapes[a.Model][init.GetName()]
			if init.GetName() != ts[i].Name || !slices.Equal(init.GetDims(), want) || init.GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
				t.Errorf("%s: initializer %d is %s %v (type %d), want %s %v", a.Model, i, init.GetName(), init.GetDims(), init.GetDataType(), ts[i].Name, want)
			}
			raw := init.GetRawData()
			if len(raw) != 4*len(ts[i].Data) {
				t.Fatalf("%s: %s holds %d bytes for %d values", a.Model, init.GetName(), len(raw), len(ts[i].Data))
			}
			for k, v := range ts[i].Data {
				if math.Float32frombits(binary.LittleEndian.Uint32(raw[4*k:])) != v {
					t.Fatalf("%s: %s[%d] differs", a.Model, init.GetName(), k)
				}
			}
			total += len(ts[i].Data)
		}
		if total != len(p) {
			t.Errorf("%s: initializers hold %d values, the model %d", a.Model, total, len(p))
		}
		var keys []string
		for _, kv := range m.GetMetadataProps() {
			keys = append(keys, kv.GetKey())
			if testMeta[kv.GetKey()] != kv.GetValue() {
				t.Errorf("%s: metadata %s = %q, want %q", a.Model, kv.GetKey(), kv.GetValue(), testMeta[kv.GetKey()])
			}
		}
		if len(keys) != len(testMeta) || !slices.IsSorted(keys) {
			t.Errorf("%s: metadata keys %v", a.Model, keys)
		}
	}
}

// The graph, evaluated by a pure-Go reference from nothing but the ONNX
// file (its initializers and nodes), gives fl/model's forward pass on
// Fashion-MNIST test images: the logits (read through the zero-class
// widening, package forward) and the log-softmax of the model itself,
// each within 1e-5.
func TestONNXMatchesForwardPass(t *testing.T) {
	const n = 8
	x, _, err := fixture.Images(datatest.FashionMNIST(t), n)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range archs {
		p := params(t, a)
		b, err := export.ONNX(a, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := decode(t, b)
		in := value{shape: append([]int{n}, a.InputShape()...), data: make([]float64, len(x))}
		for i, v := range x {
			in.data[i] = float64(v)
		}
		got, err := evalONNX(m, in)
		if err != nil {
			t.Fatalf("%s: %v", a.Model, err)
		}
		if !slices.Equal(got.shape, []int{n, 10}) {
			t.Fatalf("%s: output shape %v", a.Model, got.shape)
		}
		logits, err := forward.Logits(a.Model, a.InputDim, a.Classes, p, x)
		if err != nil {
			t.Fatal(err)
		}
		lsm, err := forward.LogSoftmax(a.Model, a.InputDim, a.Classes, p, x)
		if err != nil {
			t.Fatal(err)
		}
		dLogits, dLSM, spread := 0.0, 0.0, 0.0
		for i := range n {
			row := got.data[i*10 : (i+1)*10]
			ref := logSoftmax(row)
			for j := range 10 {
				dLogits = max(dLogits, math.Abs(row[j]-logits[i*10+j]))
				dLSM = max(dLSM, math.Abs(ref[j]-lsm[i*10+j]))
				spread = max(spread, math.Abs(row[j]))
			}
		}
		t.Logf("%s: max |Δ| logits %.3g, log-softmax %.3g (max |logit| %.3g, %d images)", a.Model, dLogits, dLSM, spread, n)
		if dLogits >= tol || dLSM >= tol || math.IsNaN(dLogits+dLSM) {
			t.Errorf("%s: max |Δ| logits %.3g, log-softmax %.3g, want < %g", a.Model, dLogits, dLSM, tol)
		}
		if spread < 0.5 {
			t.Errorf("%s: logits of at most %.3g: the comparison would not see a misplaced weight", a.Model, spread)
		}
	}
}

func logSoftmax(z []float64) []float64 {
	m := slices.Max(z)
	var s float64
	for _, v := range z {
		s += math.Exp(v - m)
	}
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = v - m - math.Log(s)
	}
	return out
}

// A safetensors file decodes to the ONNX initializers' tensors and the
// metadata, with an 8-byte-aligned buffer after a JSON header that
// starts with '{'.
func TestSafetensors(t *testing.T) {
	for _, a := range archs {
		p := params(t, a)
		b, err := export.Safetensors(a, p, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(b)
		if (8+n)%8 != 0 || b[8] != '{' {
			t.Errorf("%s: header of %d bytes starting %q", a.Model, n, b[8])
		}
		var header map[string]json.RawMessage
		if err := json.Unmarshal(b[8:8+n], &header); err != nil {
			t.Fatalf("%s: header is not JSON: %v", a.Model, err)
		}
		if uint64(len(b))-8-n != 4*uint64(len(p)) {
			t.Errorf("%s: buffer of %d bytes for %d parameters", a.Model, uint64(len(b))-8-n, len(p))
		}
		ts, meta, err := export.ReadSafetensors(b)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := a.Tensors(p)
		m := decode(t, must(export.ONNX(a, p, nil)))
		if len(ts) != len(want) {
			t.Fatalf("%s: %d tensors, want %d", a.Model, len(ts), len(want))
		}
		for i := range ts {
			if ts[i].Name != want[i].Name || !slices.Equal(ts[i].Shape, want[i].Shape) || !slices.Equal(ts[i].Data, want[i].Data) {
				t.Errorf("%s: tensor %d is %s %v, want %s %v (or other values)", a.Model, i, ts[i].Name, ts[i].Shape, want[i].Name, want[i].Shape)
			}
			if init := m.GetGraph().GetInitializer()[i]; init.GetName() != ts[i].Name {
				t.Errorf("%s: safetensors' %s is ONNX's %s", a.Model, ts[i].Name, init.GetName())
			}
		}
		if len(meta) != len(testMeta) {
			t.Errorf("%s: metadata %v", a.Model, meta)
		}
		for k, v := range testMeta {
			if meta[k] != v {
				t.Errorf("%s: metadata %s = %q, want %q", a.Model, k, meta[k], v)
			}
		}
		// A truncated or corrupted file is refused.
		if _, _, err := export.ReadSafetensors(b[:len(b)-4]); err == nil {
			t.Errorf("%s: a truncated file was read", a.Model)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// The CNN's permuted tensors put each of fl/model's weights where ONNX's
// layout wants it: conv2 W2[o, (3ky+kx)·32 + c] at [o, c, ky, kx], fc1
// W3[h, (12i+j)·64 + c] at [h, 144c + 12i + j].
func TestCNNLayout(t *testing.T) {
	a := export.FashionMNIST("cnn")
	p := make([]float32, 1199882)
	for i := range p {
		p[i] = float32(i)
	}
	ts, err := a.Tensors(p)
	if err != nil {
		t.Fatal(err)
	}
	const w2, w3 = 32*9 + 32, 32*9 + 32 + 64*288 + 64
	if got, want := ts[2].Data[((5*32+7)*3+2)*3+1], float32(w2+5*288+(3*2+1)*32+7); got != want {
		t.Errorf("conv2.weight[5,7,2,1] = %v, want fl/model's parameter %v", got, want)
	}
	if got, want := ts[4].Data[3*9216+11*144+4*12+9], float32(w3+3*9216+(4*12+9)*64+11); got != want {
		t.Errorf("fc1.weight[3, 11·144+4·12+9] = %v, want fl/model's parameter %v", got, want)
	}
	if ts[0].Data[0] != 0 || ts[7].Data[9] != float32(len(p)-1) {
		t.Errorf("conv1.weight starts at %v, fc2.bias ends at %v", ts[0].Data[0], ts[7].Data[9])
	}
}

// Unknown models, wrong parameter counts and non-square CNN inputs are
// refused with errors that say so.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		a    export.Arch
		n    int
		says string
	}{
		{export.FashionMNIST("resnet"), 10, "unknown model"},
		{export.FashionMNIST("logreg"), 7849, "has 7850 parameters, got 7849"},
		{export.FashionMNIST("cnn"), 7850, "has 1199882 parameters, got 7850"},
		{export.Arch{Model: "cnn", InputDim: 60, Classes: 10}, 10, "square"},
	} {
		p := make([]float32, c.n)
		for _, f := range []func() error{
			func() error { _, err := export.ONNX(c.a, p, nil); return err },
			func() error { _, err := export.Safetensors(c.a, p, nil); return err },
		} {
			if err := f(); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%+v with %d parameters: %v, want an error saying %q", c.a, c.n, err, c.says)
			}
		}
	}
}

// InferArch finds the input dimension of the dense models from their
// parameter count, and JobArch a job's architecture from its spec.
func TestInferArch(t *testing.T) {
	for _, d := range []int{784, 60, 3} {
		for _, name := range []string{"logreg", "mlp"} {
			m, _ := model.New(name, d, 62)
			a, err := export.InferArch(name, m.NumParams(), 62)
			if err != nil || a != (export.Arch{Model: name, InputDim: d, Classes: 62}) {
				t.Errorf("%s %d→62: %+v, %v", name, d, a, err)
			}
		}
	}
	if _, err := export.InferArch("cnn", 1199882, 10); err == nil {
		t.Error("InferArch told a CNN's side from its parameter count")
	}
	if _, err := export.InferArch("mlp", 7850, 10); err == nil {
		t.Error("InferArch accepted 7850 parameters as an mlp")
	}
	for _, c := range []struct {
		spec types.Spec
		n    int
		want export.Arch
	}{
		{types.Spec{Model: "cnn", Dataset: "fashion-mnist"}, 1199882, export.FashionMNIST("cnn")},
		{types.Spec{Model: "mlp", Dataset: "synthetic"}, 200*60 + 201*10 + 40400, export.Arch{Model: "mlp", InputDim: 60, Classes: 10}},
		{types.Spec{Model: "logreg", Dataset: "leaf", LEAF: types.LEAFSpec{Classes: 62}}, 62 * 785, export.Arch{Model: "logreg", InputDim: 784, Classes: 62}},
	} {
		if a, err := export.JobArch(c.spec, c.n); err != nil || a != c.want {
			t.Errorf("%+v: %+v, %v; want %+v", c.spec, a, err, c.want)
		}
	}
	if _, err := export.JobArch(types.Spec{Model: "cnn", Dataset: "fashion-mnist"}, 7850); err == nil || !strings.Contains(err.Error(), "1199882") {
		t.Errorf("a wrong count for the job: %v", err)
	}
	if _, err := export.JobArch(types.Spec{Model: "logreg", Dataset: "leaf"}, 7850); err == nil || !strings.Contains(err.Error(), "leaf.classes") {
		t.Errorf("a LEAF job without classes: %v", err)
	}
}

// A certificate built without the server's model certificate (a server
// that does not sign its log) takes ε from the privacy report and the
// DP parameters from the spec; a non-DP job says dp=false and nothing
// about ε.
func TestCertificateMetadata(t *testing.T) {
	eps := 2.25
	me := types.ModelExport{JobID: "j7", Model: "logreg", Round: 30, NumParams: 3, Params: []float32{1, 2, 3}}
	spec := types.Spec{Model: "logreg", Dataset: "fashion-mnist", Population: types.PopulationSpec{Size: 600},
		Sampling: types.SamplingSpec{Scheme: "poisson", Rate: 0.1},
		DP:       types.DPSpec{Enabled: true, ClipNorm: 0.5, NoiseMultiplier: 1.1, Delta: 1e-5}}
	rep := types.PrivacyReport{JobID: "j7", Private: true, Delta: 1e-5, Adjacency: "add_remove", Epsilon: &eps, Accountant: "pld",
		Accounting: &types.AccountingReport{PLDMethod: "pld/2"}, Rounds: 30}
	c, err := export.NewCertificate(me, spec, &rep)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"dpfl.job_id": "j7", "dpfl.model": "logreg", "dpfl.dataset": "fashion-mnist", "dpfl.round": "30", "dpfl.num_params": "3",
		"dp": "true", "dp.epsilon": "2.25", "dp.epsilon_source": "privacy_report", "dp.delta": "1e-05", "dp.adjacency": "add_remove",
		"dp.accountant": "pld", "dp.pld_method": "pld/2", "dp.rounds": "30", "dp.clip_norm": "0.5", "dp.noise_multiplier": "1.1",
		"dp.sampling": "poisson", "dp.sampling_rate": "0.1", "dp.population_size": "600",
	}
	got := c.Metadata()
	want["dpfl.model_sha256"] = got["dpfl.model_sha256"]
	if len(got["dpfl.model_sha256"]) != 64 {
		t.Errorf("model hash %q", got["dpfl.model_sha256"])
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	spec.DP.Enabled, rep.Private, rep.Epsilon, rep.Note = false, false, nil, "trained without DP"
	c, err = export.NewCertificate(me, spec, &rep)
	if err != nil {
		t.Fatal(err)
	}
	got = c.Metadata()
	if got["dp"] != "false" || got["dp.note"] != "trained without DP" || got["dp.epsilon"] != "" || got["dp.clip_norm"] != "" {
		t.Errorf("non-DP metadata %v", got)
	}
	// A certificate that does not decode, or is of another job, is refused.
	me.Certificate = json.RawMessage(`{"job":"other","round":30}`)
	if _, err := export.NewCertificate(me, spec, &rep); err == nil || !strings.Contains(err.Error(), "other") {
		t.Errorf("a certificate of another job: %v", err)
	}
}
