// Package model holds the client models of the federated experiments with
// their parameters in one flat []float32 vector, so that the FedAvg update
// Δ = x_i − x_t, its clipping and its aggregation are plain vector
// operations (McMahan et al. 2017, Algorithm 1; McMahan et al. 2018,
// Algorithm 1). Forward and backward passes are written out explicitly on
// top of the simd kernels and minimise the mean softmax cross-entropy.
//
// Both models are stacks of dense layers y = x·Wᵀ + b, with W stored
// out×in row-major (W[o·in + i], the PyTorch nn.Linear convention) and the
// layers laid out back to back in the flat vector, each as W then b:
//
//	"logreg"  multinomial logistic regression, in → classes
//	          [0, C·D)            W  C×D
//	          [C·D, C·D+C)        b  C
//	          784 → 10: 7,850 parameters
//
//	"mlp"     the "2NN" of McMahan et al. 2017, §3: two hidden layers of
//	          200 ReLU units, in-200-200-classes
//	          [0, 200·D)                  W1 200×D
//	          next 200                    b1 200
//	          next 200·200                W2 200×200
//	          next 200                    b2 200
//	          next C·200                  W3 C×200
//	          next C                      b3 C
//	          784-200-200-10: 199,210 parameters
//
// where D is the input dimension and C the number of classes. Inputs are
// n×D row-major batches of float32 features and labels are class indices
// in [0, C) stored as uint8.
//
// A Model is immutable and safe for concurrent use; each goroutine trains
// or evaluates through its own Workspace, which owns every buffer the
// passes need, so LossGrad and Evaluate never allocate. Every workspace
// here is also a Stepper, whose LossStep applies plain SGD inside the
// backward pass instead of returning the gradient.
package model
