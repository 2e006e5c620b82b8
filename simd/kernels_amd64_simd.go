//go:build goexperiment.simd && amd64

package simd

import "simd/archsimd"

// Dispatch for GOEXPERIMENT=simd on amd64: the AVX-512 kernels of
// vec_amd64_simd.go and gemm_amd64_simd.go where the CPU has AVX-512, the
// AVX2 + FMA kernels of vec_avx2_amd64_simd.go and gemm_avx2_amd64_simd.go
// where it has AVX2 and FMA, otherwise the generic loops and gonum (as in
// kernels_generic.go). DPFL_SIMD can force a slower path (choosePath).

// cpuAVX512 and cpuAVX2 say which kernels this CPU can run: AVX-512F and
// the VL/BW/DQ extensions archsimd's 512-bit operations use, and AVX2 with
// FMA.
var (
	cpuAVX512 = archsimd.X86.AVX512()
	cpuAVX2   = archsimd.X86.AVX2() && archsimd.X86.FMA()
)

// hasAVX512 and hasAVX2 select the kernels: the CPU's best unless
// DPFL_SIMD says otherwise. hasAVX2 matters only where hasAVX512 is false.
// Tests set them to run every path the CPU has (forEachPath).
var hasAVX512, hasAVX2 = choosePath(cpuAVX512, cpuAVX2)

func axpy(dst []float32, alpha float32, x []float32) {
	if hasAVX512 {
		axpyAVX512(dst, alpha, x)
		return
	} else if hasAVX2 {
		axpyAVX2(dst, alpha, x)
		return
	}
	axpyGeneric(dst, alpha, x)
}

func dot(x, y []float32) float32 {
	if hasAVX512 {
		return dotAVX512(x, y)
	} else if hasAVX2 {
		return dotAVX2(x, y)
	}
	return dotGeneric(x, y)
}

func sumSquares(x []float32) float64 {
	if hasAVX512 {
		return sumSquaresAVX512(x)
	} else if hasAVX2 {
		return sumSquaresAVX2(x)
	}
	return sumSquaresGeneric(x)
}

func scale(dst []float32, alpha float32) {
	if hasAVX512 {
		scaleAVX512(dst, alpha)
		return
	} else if hasAVX2 {
		scaleAVX2(dst, alpha)
		return
	}
	scaleGeneric(dst, alpha)
}

func add(dst, x []float32) {
	if hasAVX512 {
		addAVX512(dst, x)
		return
	} else if hasAVX2 {
		addAVX2(dst, x)
		return
	}
	addGeneric(dst, x)
}

func sub(dst, x, y []float32) {
	if hasAVX512 {
		subAVX512(dst, x, y)
		return
	} else if hasAVX2 {
		subAVX2(dst, x, y)
		return
	}
	subGeneric(dst, x, y)
}

func allFinite(x []float32) bool {
	if hasAVX512 {
		return allFiniteAVX512(x)
	} else if hasAVX2 {
		return allFiniteAVX2(x)
	}
	return allFiniteGeneric(x)
}

func relu(v []float32) {
	if hasAVX512 {
		reluAVX512(v)
		return
	} else if hasAVX2 {
		reluAVX2(v)
		return
	}
	reluGeneric(v)
}

func reluMask(d, a []float32) {
	if hasAVX512 {
		reluMaskAVX512(d, a)
		return
	} else if hasAVX2 {
		reluMaskAVX2(d, a)
		return
	}
	reluMaskGeneric(d, a)
}

func gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if hasAVX512 {
		if transA && transB {
			gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else if cpuAsm512 {
			// The AVX-512 assembly SGEMM (10×32 tiles in 20 of the 32 ZMM
			// registers; NT with few rows as dot products) measured
			// 1.6–4× gemmAVX512 and 1.4–4× the AVX2 assembly kernel at
			// every shape of BenchmarkGemm on a Zen 5 core
			// (docs/performance.md, "AVX-512 machines (EPYC-26)").
			sgemm512(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else {
			gemmAVX512(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}
		return
	}
	if hasAVX2 {
		if transB && !transA && m <= 4*sgemmMR && n > sgemmNR {
			// NT with few rows (the dense layers' forward pass at batch
			// 20): gemmAVX2 hands those with enough k steps to the
			// assembly dot-product kernel (sgemmNT, B read in place);
			// the rest (k < 16) it packs with archsimd's 8×8
			// transposes, faster than the assembly kernel's panels
			// (docs/performance.md).
			gemmAVX2(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else if transA && transB {
			gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		} else {
			sgemmAsm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}
		return
	}
	gemmGonum(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
