package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dpfl/dpfl/api/client"
	"github.com/dpfl/dpfl/api/types"
	"github.com/dpfl/dpfl/export"
)

// modelUsage is 'dpfl-client model -h'.
const modelUsage = `usage: dpfl-client model JOB [--format json|onnx|safetensors] [--out FILE]

Downloads job JOB's latest global model (GET /v1/jobs/JOB/model).

  --format json          (default) the server's model file: the flat float32
                         parameter vector (fl/model's layout) and, when the
                         server signs its log, the model certificate that
                         'dpfl-client verify' checks; to stdout without --out
  --format onnx          an ONNX graph (IR 8, opset 13) from "input" [N,784]
                         ([N,1,28,28] for the cnn) to "logits" [N,10], no
                         softmax; the privacy certificate in metadata_props
  --format safetensors   the weights as named tensors in ONNX/PyTorch layout,
                         the privacy certificate in __metadata__

onnx and safetensors need --out FILE (--out - writes to stdout). Their
certificate (ε, δ, adjacency, accountant, rounds, clip norm, noise
multiplier, sampling, job, and the transparency log's root and size that
record the model's release) comes from the server's model certificate,
checked against the parameters first, else from the privacy report;
docs/model-export.md lists the keys.

`

// modelFormats are the values of model --format.
var modelFormats = []string{"json", "onnx", "safetensors"}

func modelCmd(ctx context.Context, c *command, args []string, out io.Writer) error {
	path := c.fs.String("out", "", "write the model to this file; '-' is stdout (default: stdout for json; required for onnx and safetensors)")
	format := c.fs.String("format", "json", "json, onnx or safetensors")
	c.fs.Usage = func() {
		fmt.Fprint(c.fs.Output(), modelUsage)
		c.fs.PrintDefaults()
	}
	id, err := c.jobArg(args)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
	case "onnx", "safetensors":
		if *path == "" {
			return fmt.Errorf("model: --format %s writes a binary file: give --out FILE (or --out - for stdout)", *format)
		}
	default:
		return fmt.Errorf("model: unknown --format %q (known: %s)", *format, strings.Join(modelFormats, ", "))
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	m, err := cl.Model(ctx, id)
	if err != nil {
		return err
	}
	if *format == "json" {
		if *path == "" || *path == "-" {
			return printJSON(out, m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*path, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s: %s, %d parameters, round %d\n", *path, m.Model, m.NumParams, m.Round)
		return nil
	}
	b, cert, err := exportModel(ctx, cl, m, *format)
	if err != nil {
		return err
	}
	report := out
	if *path == "-" {
		if _, err := out.Write(b); err != nil {
			return err
		}
		report = c.stderr
	} else if err := os.WriteFile(*path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(report, "wrote %s: %s, %s of job %s, %d parameters, round %d\n", *path, *format, m.Model, m.JobID, m.NumParams, m.Round)
	fmt.Fprintf(report, "  certificate: %s\n", certificateLine(cert))
	return nil
}

// exportModel converts m to format ("onnx" or "safetensors") with its
// certificate, from the job's spec and privacy report.
func exportModel(ctx context.Context, cl *client.Client, m types.ModelExport, format string) ([]byte, export.Certificate, error) {
	st, err := cl.Job(ctx, m.JobID)
	if err != nil {
		return nil, export.Certificate{}, err
	}
	if st.Spec.Model != m.Model {
		return nil, export.Certificate{}, fmt.Errorf("model: the job's spec names model %q, its model export %q", st.Spec.Model, m.Model)
	}
	rep, err := cl.Privacy(ctx, m.JobID)
	if err != nil {
		return nil, export.Certificate{}, err
	}
	arch, err := export.JobArch(st.Spec, len(m.Params))
	if err != nil {
		return nil, export.Certificate{}, err
	}
	cert, err := export.NewCertificate(m, st.Spec, &rep)
	if err != nil {
		return nil, export.Certificate{}, err
	}
	var b []byte
	if format == "onnx" {
		b, err = export.ONNX(arch, m.Params, cert.Metadata())
	} else {
		b, err = export.Safetensors(arch, m.Params, cert.Metadata())
	}
	return b, cert, err
}

// certificateLine summarises a certificate in one line.
func certificateLine(c export.Certificate) string {
	var s string
	switch {
	case !c.Private:
		s = "dp=false: trained without differential privacy, no (ε, δ) guarantee"
	case c.Epsilon == nil:
		s = fmt.Sprintf("dp=true, no ε stated yet, δ = %g", c.Delta)
	default:
		s = fmt.Sprintf("ε = %.4g at δ = %g (%s adjacency, %s accountant, from the %s) after %d rounds, C = %g, z = %g",
			*c.Epsilon, c.Delta, c.Adjacency, c.Accountant, strings.ReplaceAll(c.EpsilonSource, "_", " "), c.Round, c.ClipNorm, c.NoiseMultiplier)
	}
	if c.LogRoot != "" {
		s += fmt.Sprintf("; log root %s (size %d, release leaf %d)", c.LogRoot, c.LogSize, c.LogLeafIndex)
	} else {
		s += "; no log root (the server does not sign its transparency log)"
	}
	return s
}
