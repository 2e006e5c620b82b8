package simd

import (
	"fmt"
	"os"
)

// Kernel paths, as named by the DPFL_SIMD environment variable and Path.
const (
	pathAVX512  = "avx512"
	pathAVX2    = "avx2"
	pathGeneric = "generic"
)

// Path reports which kernels this process uses: "avx512" (the archsimd
// 512-bit kernels, GOEXPERIMENT=simd build on a CPU with AVX-512), "avx2"
// (on a CPU with AVX2 + FMA, without AVX-512 or with DPFL_SIMD=avx2: the
// assembly SGEMM in both builds, and in the GOEXPERIMENT=simd build the
// 256-bit archsimd vector kernels too) or "generic" (the portable loops
// and gonum: a CPU without AVX2 and FMA, or DPFL_SIMD=generic).
func Path() string {
	switch {
	case hasAVX512:
		return pathAVX512
	case hasAVX2:
		return pathAVX2
	}
	return pathGeneric
}

// choosePath returns the settings of hasAVX512 and hasAVX2 for a CPU (and
// build) that supports the AVX-512 kernels iff cpu512 and the AVX2 kernels
// iff cpu2, after the environment variable DPFL_SIMD, read once at package
// initialisation:
//
//	unset, "" or "auto"  the fastest path the CPU supports
//	"avx512"             the AVX-512 kernels
//	"avx2"               the AVX2 + FMA kernels, even on an AVX-512 CPU
//	"generic"            the portable loops and gonum
//
// A path the CPU or the build lacks is not an error: Gemm and the vector
// kernels fall back to the fastest path that is available below it
// (avx512 → avx2 → generic), and a warning naming the path taken goes to
// standard error once, at initialisation; so does one for an unknown value,
// which selects the default.
func choosePath(cpu512, cpu2 bool) (use512, use2 bool) {
	use512, use2, warn := parsePath(os.Getenv("DPFL_SIMD"), cpu512, cpu2)
	if warn != "" {
		fmt.Fprintln(os.Stderr, warn)
	}
	return use512, use2
}

// parsePath is choosePath for a given value of DPFL_SIMD, returning the
// warning to print (empty if none).
func parsePath(env string, cpu512, cpu2 bool) (use512, use2 bool, warn string) {
	best := func() string {
		switch {
		case cpu512:
			return pathAVX512
		case cpu2:
			return pathAVX2
		}
		return pathGeneric
	}
	switch env {
	case "", "auto":
		return cpu512, cpu2, ""
	case pathAVX512:
		if cpu512 {
			return true, cpu2, ""
		}
		return false, cpu2, fmt.Sprintf("simd: DPFL_SIMD=%s, but this CPU or build has no AVX-512 kernels; using %s", env, best())
	case pathAVX2:
		if cpu2 {
			return false, true, ""
		}
		return false, false, fmt.Sprintf("simd: DPFL_SIMD=%s, but this CPU or build has no AVX2+FMA kernels; using %s", env, pathGeneric)
	case pathGeneric:
		return false, false, ""
	}
	return cpu512, cpu2, fmt.Sprintf("simd: DPFL_SIMD=%q is not one of avx512, avx2, generic, auto; using %s", env, best())
}
