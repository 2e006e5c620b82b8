// Package simd holds the float32 vector and dense-matrix kernels behind
// client training and aggregation: the update algebra of FedAvg
// (McMahan et al. 2017, Algorithm 1), per-user clipping for DP-FedAvg
// (McMahan et al. 2018, Algorithm 1, π(Δ, S)) and the matrix products of
// the models' forward and backward passes.
//
// Conventions follow gonum/blas: the destination comes first, lengths that
// disagree are programmer errors and panic, and no kernel allocates.
//
// Layout for vector implementations: every exported kernel checks its
// arguments and calls an unexported one (axpy, dot, sumSquares, scale, add,
// sub, allFinite, gemm). These are defined twice, in kernels_generic.go
// (build constraint !(goexperiment.simd && amd64)) and in
// kernels_amd64_simd.go (goexperiment.simd && amd64); both currently
// forward to the portable loops of generic.go (axpyGeneric, …) and to
// gemmGonum, so the package builds either way. archsimd versions replace
// the bodies in kernels_amd64_simd.go and can still call the generic loops
// for tails.
//
// The portable loops advance slices rather than index them (the compiler
// then proves the unrolled accesses in range and drops bounds checks) and
// unroll 8 ways;
// reductions keep four independent accumulators, the most that fit in
// registers next to their operands.
package simd
