#!/usr/bin/python3
"""Check dpfl's ONNX exports with the ONNX reference tools (issue 17).

Usage: check_onnx.py DIR

DIR holds what export/internal/onnxcheck writes: MODEL.onnx and
MODEL.safetensors for logreg, mlp and cnn, and cases.json with
Fashion-MNIST test images and dpfl's own forward outputs on them
(fl/model: the logits, and the log-softmax of the model itself). For
each model this script

  1. runs onnx.checker.check_model (full check, with shape inference);
  2. checks the opset, the input and output, and the privacy certificate
     in metadata_props (it must equal the one onnxcheck stamped);
  3. evaluates the graph with numpy, in float64, from the ONNX weights
     (onnx.numpy_helper.to_array of the initializers), implementing the
     operators it uses after the ONNX operator spec: Gemm, MatMul, Add,
     Relu, Conv, MaxPool, Reshape, Flatten (anything else fails);
  4. compares the outputs with dpfl's: max |logits - dpfl logits| and
     max |log_softmax(logits) - dpfl log-softmax| must be below the
     tolerance (1e-5);
  5. reads MODEL.safetensors (json + struct, per the safetensors format)
     and checks that its tensors and metadata are the ONNX file's.

It prints the figures and exits non-zero on any failure. It needs only
Python's standard library, numpy and onnx (Debian's python3-numpy and
python3-onnx).
"""

import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def gemm(a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    if transA:
        a = a.T
    if transB:
        b = b.T
    y = alpha * (a @ b)
    if c is not None:
        y = y + beta * c
    return y


def conv(x, w, b=None, kernel_shape=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1, auto_pad=b"NOTSET"):
    if group != 1 or tuple(dilations) != (1, 1) or auto_pad not in (b"NOTSET", "NOTSET"):
        raise ValueError("Conv: only group 1, dilations 1 and explicit pads are implemented")
    co, ci, kh, kw = w.shape
    if kernel_shape is not None and tuple(kernel_shape) != (kh, kw):
        raise ValueError("Conv: kernel_shape %s does not match W %s" % (kernel_shape, w.shape))
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, _, h, wd = x.shape
    sh, sw = strides
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    y = np.zeros((n, co, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            patch = x[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    if b is not None:
        y += b.reshape(1, co, 1, 1)
    return y


def maxpool(x, kernel_shape, strides=None, pads=(0, 0, 0, 0), ceil_mode=0, dilations=(1, 1), auto_pad=b"NOTSET", storage_order=0):
    if any(pads) or ceil_mode or tuple(dilations) != (1, 1) or auto_pad not in (b"NOTSET", "NOTSET"):
        raise ValueError("MaxPool: only unpadded, floor-mode pooling is implemented")
    kh, kw = kernel_shape
    sh, sw = strides or (1, 1)
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    y = np.full((n, c, oh, ow), -np.inf)
    for ky in range(kh):
        for kx in range(kw):
            y = np.maximum(y, x[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw])
    return y


def run_graph(model, x):
    """Evaluates model's graph on x in float64 from its initializers."""
    g = model.graph
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    env[g.input[0].name] = x.astype(np.float64)
    for node in g.node:
        ins = [env[i] for i in node.input if i]
        a = attrs(node)
        op = node.op_type
        if op == "Gemm":
            y = gemm(*ins, **a)
        elif op == "MatMul":
            y = ins[0] @ ins[1]
        elif op == "Add":
            y = ins[0] + ins[1]
        elif op == "Relu":
            y = np.maximum(ins[0], 0)
        elif op == "Conv":
            y = conv(*ins, **a)
        elif op == "MaxPool":
            y = maxpool(ins[0], **a)
        elif op == "Reshape":
            y = ins[0].reshape([int(d) for d in ins[1]])
        elif op == "Flatten":
            axis = a.get("axis", 1)
            y = ins[0].reshape(int(np.prod(ins[0].shape[:axis])), -1)
        else:
            raise ValueError("operator %s is not implemented by this check" % op)
        env[node.output[0]] = y
    return env[g.output[0].name]


def log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    buf = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e_ = e["data_offsets"]
        if e["dtype"] != "F32" or b != end:
            raise ValueError("safetensors %s: tensor %s is %s at %d, want F32 at %d" % (path, name, e["dtype"], b, end))
        tensors[name] = np.frombuffer(buf[b:e_], dtype="<f4").reshape(e["shape"])
        end = e_
    if end != len(buf):
        raise ValueError("safetensors %s: tensors cover %d of %d bytes" % (path, end, len(buf)))
    return tensors, meta


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    with open(os.path.join(d, "cases.json")) as f:
        cases = json.load(f)
    tol = cases["tolerance"]
    images = np.array(cases["images"], dtype=np.float32)
    labels = np.array(cases["labels"])
    n = len(images)
    print("onnx %s, numpy %s; %d Fashion-MNIST test images; tolerance %g" % (onnx.__version__, np.__version__, n, tol))
    failures = []
    rows = []
    for c in cases["models"]:
        name = c["name"]
        path = os.path.join(d, c["onnx"])
        model = onnx.load(path)
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:  # the checker's errors have several types
            failures.append("%s: onnx.checker: %s" % (name, e))
            continue
        g = model.graph
        opset = {o.domain: o.version for o in model.opset_import}
        ops = [nd.op_type for nd in g.node]
        params = sum(int(np.prod(t.dims)) for t in g.initializer)
        print("%s: onnx.checker.check_model(full_check=True): OK; IR %d, opset %s; input %s %s, output %s %s; %d initializers, %d parameters; nodes %s"
              % (name, model.ir_version, opset.get("", "?"), g.input[0].name, dims(g.input[0]), g.output[0].name,
                 dims(g.output[0]), len(g.initializer), params, " ".join(ops)))
        if params != c["num_params"]:
            failures.append("%s: %d parameters in the initializers, dpfl's model has %d" % (name, params, c["num_params"]))
        meta = {p.key: p.value for p in model.metadata_props}
        if meta != c["metadata"]:
            failures.append("%s: metadata_props %s, want %s" % (name, meta, c["metadata"]))
        if meta.get("dp") not in ("true", "false") or (meta.get("dp") == "true" and "dp.epsilon" not in meta):
            failures.append("%s: metadata_props lack the privacy certificate (dp, dp.epsilon)" % name)
        print("%s: certificate: dp=%s epsilon=%s delta=%s adjacency=%s accountant=%s (%s) rounds=%s C=%s z=%s q=%s job=%s"
              % (name, meta.get("dp"), meta.get("dp.epsilon"), meta.get("dp.delta"), meta.get("dp.adjacency"),
                 meta.get("dp.accountant"), meta.get("dp.pld_method"), meta.get("dp.rounds"), meta.get("dp.clip_norm"),
                 meta.get("dp.noise_multiplier"), meta.get("dp.sampling_rate"), meta.get("dpfl.job_id")))

        x = images.reshape(c["input_shape"])
        try:
            z = run_graph(model, x)
        except Exception as e:
            failures.append("%s: evaluating the graph: %s" % (name, e))
            continue
        want = np.array(c["logits"])
        want_lsm = np.array(c["log_softmax"])
        if z.shape != want.shape:
            failures.append("%s: output shape %s, dpfl's %s" % (name, z.shape, want.shape))
            continue
        d_logits = float(np.abs(z - want).max())
        d_lsm = float(np.abs(log_softmax(z) - want_lsm).max())
        agree = int((z.argmax(axis=1) == want.argmax(axis=1)).sum())
        correct = int((z.argmax(axis=1) == labels).sum())
        rows.append((name, d_logits, d_lsm, float(np.abs(z).max()), agree, correct))
        for what, delta in (("logits", d_logits), ("log-softmax", d_lsm)):
            if not delta < tol:
                failures.append("%s: max |Δ| of the %s is %.3g, not below %g" % (name, what, delta, tol))

        tensors, st_meta = read_safetensors(os.path.join(d, c["safetensors"]))
        inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        if st_meta != meta:
            failures.append("%s: the safetensors metadata differs from the ONNX metadata_props" % name)
        if list(tensors) != [t.name for t in g.initializer] or any(
                tensors[k].shape != v.shape or not np.array_equal(tensors[k], v) for k, v in inits.items()):
            failures.append("%s: the safetensors tensors are not the ONNX initializers" % name)
        else:
            print("%s: %s: %d tensors and metadata equal to the ONNX file's" % (name, c["safetensors"], len(tensors)))

    if rows:
        print()
        print("ONNX graph (numpy, float64, from the ONNX weights) against dpfl's forward pass (fl/model), %d images:" % n)
        print("%-7s %16s %20s %12s %14s %12s" % ("model", "max |Δ| logits", "max |Δ| log-softmax", "max |logit|", "same argmax", "correct"))
        for name, dl, dlsm, zmax, agree, correct in rows:
            print("%-7s %16.3g %20.3g %12.3g %11d/%d %9d/%d" % (name, dl, dlsm, zmax, agree, n, correct, n))
    if failures:
        print()
        for f in failures:
            print("FAIL:", f)
        return 1
    print()
    print("OK: %d models pass onnx.checker and match dpfl's forward pass within %g" % (len(rows), tol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
