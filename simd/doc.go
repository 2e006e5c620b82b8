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
// the assembly SGEMMs or gemmGonum; kernels_amd64_simd.go
// (goexperiment.simd && amd64) dispatches at run time on hasAVX512 and
// hasAVX2 to the archsimd kernels: AVX-512 in vec_amd64_simd.go and
// gemm_amd64_simd.go, AVX2 + FMA (256-bit, for CPUs without AVX-512) in
// vec_avx2_amd64_simd.go and gemm_avx2_amd64_simd.go, falling back to the
// same generic loops and gonum otherwise. The SGEMMs are Go assembly
// where the CPU allows (chosen with golang.org/x/sys/cpu) and run in both
// builds: AVX-512 (sgemm512_amd64.go, sgemm512_kernel_amd64.s, generated
// by sgemm512_gen.go) and AVX2 + FMA (sgemm_amd64.go,
// sgemm_kernel_amd64.s). So `go build` and `go test` work with and
// without GOEXPERIMENT=simd, both builds run the same SGEMM (but for NT
// with ≤ 20 rows and k < 16 on the avx2 path), and the simd build is the fast one for
// the vector kernels (docs/performance.md, "Builds and kernel paths"). Element-wise kernels
// are bit-identical on every path; reductions and Gemm stay within the
// error bounds their doc comments state.
//
// Kernels by path (Path, DPFL_SIMD) and build:
//
//	path     Gemm, both builds                 vector kernels, simd build   plain build
//	avx512   sgemm512 (AVX-512F assembly)      archsimd 512-bit             generic loops
//	avx2     sgemmAsm (AVX2+FMA assembly;      archsimd 256-bit             generic loops
//	         NT with few rows as dot products,
//	         sgemmNT); simd build: NT with
//	         ≤ 20 rows and k < 16 on gemmAVX2
//	generic  gonum                             generic loops                generic loops
//
// TT products (not used in training) go to gonum on every path. In the
// plain build "avx512" is the AVX-512 SGEMM alone (CPUs with AVX-512F);
// in the simd build it needs archsimd's AVX-512 set (F, CD, BW, DQ, VL).
//
// Choosing a path: by default the fastest the CPU supports (Path reports
// it). The environment variable DPFL_SIMD, read once when the package is
// initialised, forces one: "avx512", "avx2" or "generic" ("auto" or unset:
// the default). A path the CPU or the build lacks falls back to the next
// slower one that is available (avx512 → avx2 → generic) with a one-line
// warning on standard error at start-up, as does an unknown value; so any
// machine can measure the AVX2 or the generic path (DPFL_SIMD=generic
// go test -bench Gemm ./simd).
//
// Testing: equiv_test.go, gemm_test.go and clip_test.go check every kernel
// against the generic loops and float64 references through forEachPath
// (path_test.go), which runs the test once
// per path the CPU and build have, whatever DPFL_SIMD says: on an AVX-512
// machine avx512, avx2 and generic, on an AVX2 one avx2 and generic. One
// `go test` (and one `GOEXPERIMENT=simd go test`) thus covers every path
// the machine can run, and CI needs no extra invocation.
// sgemm512_amd64_test.go also tests the AVX-512 SGEMM directly, at every
// tile edge of both its kernels, whatever gemm dispatches.
//
// The AVX2 kernels end with VZEROUPPER (avx2Exit): Go's scalar float code
// is legacy SSE, and on the Zen 3 machine they were tuned on the first SSE
// instruction after 256-bit code cost ≈125 ns without it
// (BenchmarkAVXTransition), more than Add of 200 floats takes. The
// AVX-512 SGEMM's kernels end with VZEROUPPER too (on the Zen 5 machine an
// SSE instruction after them cost nothing extra, even with Z16–Z31
// in use), and so do the AVX-512 level-1 kernels and gemmAVX512, once,
// after their last 512-bit instruction: on the Zen 5 machine there is no
// one-off transition cost, but while the upper halves are dirty each SSE
// write merges into the full register and waits for its old value, which
// chains independent scalar iterations; 200 scalar updates after a
// 200-float AVX-512 kernel ran ≈3× faster with it (BenchmarkKernelThenScalar).
//
// The portable loops advance slices rather than index them (the compiler
// then proves the unrolled accesses in range and drops bounds checks) and
// unroll 8 ways;
// reductions keep four independent accumulators, the most that fit in
// registers next to their operands.
package simd
