// Command onnxcheck writes the inputs of the ONNX check
// (scripts/check-onnx.sh, scripts/check_onnx.py): for each of fl/model's
// logreg, mlp and cnn over Fashion-MNIST, parameters trained briefly
// with SGD, exported as MODEL.onnx and MODEL.safetensors with a sample
// certificate, and cases.json holding Fashion-MNIST test images and
// fl/model's own forward outputs on them (package forward: the logits,
// and the log-softmax of the model itself), which the Python check
// compares with the graph it evaluates from the ONNX weights.
//
//	go run ./export/internal/onnxcheck -out DIR [-data DIR] [-images N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/export"
	"github.com/dpfl/dpfl/export/internal/fixture"
	"github.com/dpfl/dpfl/export/internal/forward"
	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// modelCase is one model's expected outputs in cases.json.
type modelCase struct {
	Name        string            `json:"name"`
	ONNX        string            `json:"onnx"`
	Safetensors string            `json:"safetensors"`
	NumParams   int               `json:"num_params"`
	InputShape  []int             `json:"input_shape"`
	Steps       int               `json:"train_steps"`
	TrainLoss   float64           `json:"train_loss"`
	Logits      [][]float64       `json:"logits"`
	LogSoftmax  [][]float64       `json:"log_softmax"`
	Metadata    map[string]string `json:"metadata"`
}

type cases struct {
	Tolerance float64     `json:"tolerance"`
	Images    [][]float32 `json:"images"` // n × 784, pixels in [0, 1]
	Labels    []int       `json:"labels"` // not []uint8, which JSON writes as base64
	Models    []modelCase `json:"models"`
}

// training is each model's brief SGD: steps of batches of 32.
var training = map[string]struct {
	steps int
	lr    float32
}{"logreg": {300, 0.1}, "mlp": {300, 0.05}, "cnn": {60, 0.05}}

func main() {
	out := flag.String("out", "", "directory to write MODEL.onnx, MODEL.safetensors and cases.json into (required)")
	dir := flag.String("data", data.DefaultFashionMNISTDir, "Fashion-MNIST directory")
	n := flag.Int("images", 16, "test images to compare on")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "onnxcheck: -out DIR is required")
		os.Exit(2)
	}
	if err := run(*out, *dir, *n); err != nil {
		fmt.Fprintln(os.Stderr, "onnxcheck:", err)
		os.Exit(1)
	}
}

func run(out, dir string, n int) error {
	x, y, err := fixture.Images(dir, n)
	if err != nil {
		return err
	}
	train, err := fixture.TrainSet(dir)
	if err != nil {
		return err
	}
	c := cases{Tolerance: 1e-5}
	for i := range n {
		c.Labels = append(c.Labels, int(y[i]))
		c.Images = append(c.Images, x[i*784:(i+1)*784])
	}
	for k, name := range []string{"logreg", "mlp", "cnn"} {
		a := export.FashionMNIST(name)
		m, err := model.New(a.Model, a.InputDim, a.Classes)
		if err != nil {
			return err
		}
		tr := training[name]
		p := fixture.Params(m, uint64(k+1), 0)
		t0 := time.Now()
		loss, err := fixture.Train(m, p, train, tr.steps, 32, tr.lr, uint64(k+1))
		if err != nil {
			return err
		}
		meta, err := sampleMetadata(a, p)
		if err != nil {
			return err
		}
		onnxBytes, err := export.ONNX(a, p, meta)
		if err != nil {
			return err
		}
		stBytes, err := export.Safetensors(a, p, meta)
		if err != nil {
			return err
		}
		mc := modelCase{Name: name, ONNX: name + ".onnx", Safetensors: name + ".safetensors", NumParams: len(p),
			InputShape: append([]int{n}, a.InputShape()...), Steps: tr.steps, TrainLoss: loss, Metadata: meta}
		if err := os.WriteFile(filepath.Join(out, mc.ONNX), onnxBytes, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, mc.Safetensors), stBytes, 0o644); err != nil {
			return err
		}
		logits, err := forward.Logits(a.Model, a.InputDim, a.Classes, p, x)
		if err != nil {
			return err
		}
		lsm, err := forward.LogSoftmax(a.Model, a.InputDim, a.Classes, p, x)
		if err != nil {
			return err
		}
		for i := range n {
			mc.Logits = append(mc.Logits, logits[i*10:(i+1)*10])
			mc.LogSoftmax = append(mc.LogSoftmax, lsm[i*10:(i+1)*10])
		}
		c.Models = append(c.Models, mc)
		fmt.Printf("onnxcheck: %-6s %9d parameters, %d SGD steps (last batch loss %.3f, %.1fs), wrote %s (%d bytes) and %s\n",
			name, len(p), tr.steps, loss, time.Since(t0).Seconds(), mc.ONNX, len(onnxBytes), mc.Safetensors)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "cases.json"), b, 0o644)
}

// sampleMetadata is the certificate of a made-up DP job over the model
// (no server: no log fields), as dpfl-client would stamp it.
func sampleMetadata(a export.Arch, p []float32) (map[string]string, error) {
	eps := 1.8734
	me := types.ModelExport{JobID: "onnx-check-" + a.Model, Model: a.Model, Round: 50, NumParams: len(p), Params: p}
	spec := types.Spec{Model: a.Model, Dataset: "fashion-mnist", Population: types.PopulationSpec{Size: 6000},
		Sampling: types.SamplingSpec{Scheme: "poisson", Rate: 0.02},
		DP:       types.DPSpec{Enabled: true, ClipNorm: 0.5, NoiseMultiplier: 1.1, Delta: 1e-6}}
	rep := types.PrivacyReport{JobID: me.JobID, Private: true, Delta: 1e-6, Adjacency: "add_remove", Epsilon: &eps,
		Accountant: "pld", Accounting: &types.AccountingReport{PLDMethod: "pld/2"}, Rounds: 50}
	c, err := export.NewCertificate(me, spec, &rep)
	if err != nil {
		return nil, err
	}
	return c.Metadata(), nil
}
