//go:build amd64

package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmNT checks sgemmNT, the AVX2 NT kernel for few rows, directly
// (whatever gemm dispatches) against the float64 reference: m, n, k in
// 1–9, 17, 20, 33, 40, 41 (every remainder of its 2-row and 4-column
// tiles and of its 8-step k loop), leading dimensions longer than the
// rows, every alpha/beta store mode (beta = 0 over a C of NaNs, which must
// not be read), within its own bound γ_{min(k,⌈kc/8⌉+3)+nb+1} (k ≤ 41
// here, one k block). The padding of A and B past k is NaN, so a step
// past k that were read or counted would show; the padding of C must stay
// untouched.
func TestSgemmNT(t *testing.T) {
	if !cpuAsmGemm {
		t.Skip("no AVX2+FMA")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	dims := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 20, 33, 40, 41}
	for _, m := range dims {
		for _, n := range dims {
			for _, k := range dims {
				ab := [][2]float32{{1, 0}, {-0.5, 1}, {2.25, -0.75}, {0.5, 0}}[rng.IntN(4)]
				checkSgemmNT(t, rng, m, n, k, 1+rng.IntN(9), ab[0], ab[1])
			}
		}
	}
}

// TestSgemmNTBlocks covers sgemmNT's k blocks (at most sgemmNTKC steps,
// a multiple of 8 but for the last) and its longest rows, for each store
// mode.
func TestSgemmNTBlocks(t *testing.T) {
	if !cpuAsmGemm {
		t.Skip("no AVX2+FMA")
	}
	rng := rand.New(rand.NewPCG(33, 34))
	for _, s := range []struct{ m, n, k int }{
		{20, 200, 784}, {3, 5, 513}, {40, 13, 1031}, {19, 130, 2000}, {1, 1, 4099},
	} {
		for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}, {2.25, -0.75}} {
			checkSgemmNT(t, rng, s.m, s.n, s.k, 3, ab[0], ab[1])
		}
	}
}

// checkSgemmNT runs sgemmNT (checkPadded) on m×k A and n×k B with pad
// NaNs past each row and C with pad extra elements per row, within the
// kernel's bound γ_{min(kc,⌈kc/8⌉+3)+nb+1}.
func checkSgemmNT(t *testing.T, rng *rand.Rand, m, n, k, pad int, alpha, beta float32) {
	t.Helper()
	lda, ldb, ldc := k+pad, k+pad, n+pad
	nb := (k + sgemmNTKC - 1) / sgemmNTKC
	kc := (k + nb - 1) / nb
	checkPadded(t, rng, "sgemmNT", false, true, m, n, k, lda, ldb, ldc, alpha, beta, gamma(min(kc, (kc+7)/8+3)+nb+1), func(a, b, c []float32) {
		sgemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
}

// TestSgemmNTNonFinite checks that an infinity in A or B gives an
// infinity of the right sign, not a NaN (no step is multiplied by a
// masked zero), and that a NaN anywhere in a row propagates to its
// elements of C, at a k with a masked tail.
func TestSgemmNTNonFinite(t *testing.T) {
	if !cpuAsmGemm {
		t.Skip("no AVX2+FMA")
	}
	const m, n, k = 3, 5, 13
	inf := float32(math.Inf(1))
	for _, p := range []int{0, 7, 8, 12} {
		a, b := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = 1
		}
		for i := range b {
			b[i] = 0.5
		}
		b[1*k+p] = inf                 // column 1: +Inf for every row
		a[2*k+p] = float32(math.NaN()) // row 2: NaN everywhere
		c := make([]float32, m*n)
		sgemmNT(m, n, k, -1, a, k, b, k, 0, c, n)
		for i := range m {
			for j := range n {
				got := c[i*n+j]
				switch {
				case i == 2:
					if !math.IsNaN(float64(got)) {
						t.Fatalf("p=%d: C[%d,%d] = %v, want NaN", p, i, j, got)
					}
				case j == 1:
					if !math.IsInf(float64(got), -1) {
						t.Fatalf("p=%d: C[%d,%d] = %v, want -Inf", p, i, j, got)
					}
				case got != -0.5*k:
					t.Fatalf("p=%d: C[%d,%d] = %v, want %v", p, i, j, got, -0.5*k)
				}
			}
		}
	}
}

// BenchmarkSgemmNT compares the two AVX2 assembly kernels for NT products
// at the rows where sgemmAsm switches from dot products (sgemmNT) to
// packing Bᵀ (sgemmPacked): k = 784 and 200 with 200 columns, and 10
// columns (the output layer). Metric GFLOP/s; BenchmarkFMAPeakAVX2 (simd
// build) gives the peak.
func BenchmarkSgemmNT(b *testing.B) {
	if !cpuAsmGemm {
		b.Skip("no AVX2+FMA")
	}
	for _, s := range []struct{ m, n, k int }{
		{20, 200, 784}, {32, 200, 784}, {40, 200, 784}, {48, 200, 784}, {64, 200, 784},
		{20, 200, 200}, {40, 200, 200}, {64, 200, 200}, {20, 10, 200}, {64, 10, 200},
	} {
		for _, kern := range []struct {
			name string
			f    func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
		}{
			{"dot", func(_, _ bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
				sgemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			}},
			{"packed", sgemmPacked},
		} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", s.m, s.n, s.k, kern.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				a, bb, c := randVec(rng, s.m*s.k), randVec(rng, s.n*s.k), make([]float32, s.m*s.n)
				flop := 2 * s.m * s.n * s.k
				for b.Loop() {
					kern.f(false, true, s.m, s.n, s.k, 1, a, s.k, bb, s.k, 0, c, s.n)
				}
				b.ReportMetric(float64(flop)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
