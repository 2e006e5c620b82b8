// Package export writes a dpfl model (fl/model's flat float32 parameter
// vector) in formats other frameworks load: ONNX (a graph that runs in
// ONNX Runtime, PyTorch's and TensorFlow's importers, …) and safetensors
// (named weight tensors), each carrying the model's privacy certificate.
//
// # Architectures and tensors
//
// An Arch names the architecture (fl/model's "logreg", "mlp" or "cnn")
// and its dimensions: D input features and C classes (784 and 10 for
// Fashion-MNIST). Arch.Tensors cuts the flat vector, whose layout the
// fl/model package documents (model/doc.go for the dense models,
// model/cnn.go for the CNN), into named tensors in the layout that ONNX's
// operators and PyTorch's modules use, all float32 and row-major:
//
//	logreg   fc.weight   [C, D]         y = x·Wᵀ + b (nn.Linear)
//	         fc.bias     [C]
//	mlp      fc1.weight  [200, D]       ReLU after fc1 and fc2
//	         fc1.bias    [200]
//	         fc2.weight  [200, 200]
//	         fc2.bias    [200]
//	         fc3.weight  [C, 200]
//	         fc3.bias    [C]
//	cnn      conv1.weight [32, 1, 3, 3]  OIHW (nn.Conv2d), valid, stride 1
//	         conv1.bias   [32]
//	         conv2.weight [64, 32, 3, 3] OIHW
//	         conv2.bias   [64]
//	         fc1.weight   [128, 64·q·q]  input in CHW order (torch.flatten
//	         fc1.bias     [128]          of the N×64×q×q pooled maps)
//	         fc2.weight   [C, 128]
//	         fc2.bias     [C]
//
// where the CNN's input is an s×s single-channel image (D = s²) and
// q = ⌊(s−4)/2⌋ (12 for 28×28). The dense models' tensors are fl/model's
// own, in its order: cutting the flat vector is all it takes. The CNN's
// are permuted: fl/model stores conv2's filters window-position-major
// (W2[o, (3·ky+kx)·32 + c]) and feeds its first dense layer the pooled
// maps in HWC order (W3[h, (q·i+j)·64 + c]), where ONNX's Conv wants
// [o, c, ky, kx] and its Flatten yields CHW order (c·q² + q·i + j).
//
// # Graphs
//
// ONNX builds the inference graph of each architecture (ONNX operator
// set 13, IR version 8; https://onnx.ai/onnx/operators/): Gemm with
// transB = 1 for each dense layer, Relu, and for the CNN Conv (3×3, no
// padding, stride 1), MaxPool (2×2, stride 2, floor) and Flatten. The
// input "input" is float32 [N, D] for the dense models and [N, 1, s, s]
// (NCHW) for the CNN, N free; pixels as dpfl's datasets hold them
// (Fashion-MNIST: byte/255 in [0, 1], no other normalisation). The output
// "logits" is float32 [N, C]: the logits z, with no softmax applied;
// softmax(z) are the class probabilities that dpfl's cross-entropy uses,
// and argmax z its prediction. The CNN's dropout (0.25 and 0.5) is a
// training-only layer and has no node: at inference dropout is the
// identity, as in fl/model's Evaluate.
//
// # Certificate
//
// Certificate is what the server states about the model's privacy: the
// (ε, δ) guarantee, its adjacency, the accountant, the DP-FedAvg
// parameters it was computed from (rounds, clip norm C, noise multiplier
// z, sampling), the job, and the transparency log's checkpoint in which
// the model's release is logged. Certificate.Metadata flattens it to
// string key/value pairs, which ONNX stores in ModelProto.metadata_props
// and safetensors in the header's "__metadata__".
//
// # Sources
//
//   - ONNX IR and operators: https://onnx.ai/onnx/repo-docs/IR.html and
//     https://onnx.ai/onnx/operators/ (Gemm, Conv, MaxPool, Relu, Flatten
//     of opset 13); the schema is package onnxpb.
//   - safetensors: https://github.com/huggingface/safetensors, "Format".
//   - The architectures: fl/model (McMahan et al. 2017's 2NN; Reddi et
//     al. 2021, Table 4, for the CNN).
package export
