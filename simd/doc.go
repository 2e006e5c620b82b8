// Package simd holds the float32 vector and dense-matrix kernels behind
// client training and aggregation: the update algebra of FedAvg
// (McMahan et al. 2017, Algorithm 1), per-user clipping for DP-FedAvg
// (McMahan et al. 2018, Algorithm 1, π(Δ, S)) and the matrix products of
// the models' forward and backward passes.
//
// Conventions follow gonum/blas: the destination comes first, lengths that
// disagree are programmer errors and panic, and no kernel allocates.
//
// Layout: every exported kernel checks its arguments and calls an
// unexported one (axpy, dot, sumSquares, scale, add, sub, allFinite, relu,
// reluMask, gemm). These are defined twice, with opposite
// build constraints: kernels_generic.go (!(goexperiment.simd && amd64))
// forwards to the portable loops of generic.go (axpyGeneric, …) and to
// gemmGonum; kernels_amd64_simd.go (goexperiment.simd && amd64) dispatches
// at run time on hasAVX512 (archsimd.X86.AVX512()) and hasAVX2 to the
// archsimd kernels of vec_amd64_simd.go, gemm_amd64_simd.go and
// vec_avx2_amd64_simd.go, falling back to the same generic loops and gonum
// otherwise. So `go build` and `go test` work
// with and without GOEXPERIMENT=simd, and the simd build is the fast one
// (README, "Performance and the SIMD build"). Element-wise kernels are
// bit-identical on every path; reductions and Gemm stay within the error
// bounds their doc comments state. equiv_test.go checks both, and
// forEachPath re-runs tests with AVX-512 and then AVX2 switched off. CPUs
// with AVX2 and FMA but no AVX-512 get 256-bit level-1 and mask kernels
// (vec_avx2_amd64_simd.go) and gonum's Gemm.
//
// The portable loops advance slices rather than index them (the compiler
// then proves the unrolled accesses in range and drops bounds checks) and
// unroll 8 ways;
// reductions keep four independent accumulators, the most that fit in
// registers next to their operands.
package simd
