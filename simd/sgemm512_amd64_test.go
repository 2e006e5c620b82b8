//go:build amd64

package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// The AVX-512 assembly SGEMM is tested here directly (sgemm512, whatever
// the dispatch in gemm picks for a shape) and through Gemm by the tests of
// gemm_test.go on the avx512 path (forEachPath).

func skipNoAsm512(t testing.TB) {
	if !cpuAsm512 {
		t.Skip("no AVX-512F")
	}
}

// checkSgemm512 is checkGemm (gemm_test.go) for sgemm512 called directly:
// m, n, k > 0 and alpha ≠ 0.
func checkSgemm512(t *testing.T, rng *rand.Rand, tA, tB bool, m, n, k, pad int, alpha, beta float32) {
	t.Helper()
	rowsA, colsA := m, k
	if tA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB {
		rowsB, colsB = n, k
	}
	lda, ldb, ldc := colsA+pad, colsB+pad, n+pad
	// Exactly as long as Gemm requires (no padding after the last row), at
	// offsets 0–3 floats into fresh allocations.
	a := randVec(rng, rowsA*lda+3)[rng.IntN(4):][:(rowsA-1)*lda+colsA]
	b := randVec(rng, rowsB*ldb+3)[rng.IntN(4):][:(rowsB-1)*ldb+colsB]
	c := randVec(rng, m*ldc+3)[rng.IntN(4):][:m*ldc]
	if beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN()) // must not be read
		}
	}
	want, abs := refGemm(tA, tB, m, n, k, float64(alpha), a, lda, b, ldb, float64(beta), c, ldc)
	orig := append([]float32(nil), c...)
	sgemm512(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c[:(m-1)*ldc+n], ldc)
	name := fmt.Sprintf("sgemm512: tA=%v tB=%v m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%v beta=%v", tA, tB, m, n, k, lda, ldb, ldc, alpha, beta)
	nb := (k + sgemm512KC - 1) / sgemm512KC
	for i := range m {
		for j := range ldc {
			got := c[i*ldc+j]
			if j >= n {
				if math.Float32bits(got) != math.Float32bits(orig[i*ldc+j]) {
					t.Fatalf("%s: padding C[%d,%d] changed", name, i, j)
				}
				continue
			}
			w, e := want[i*n+j], abs[i*n+j]
			// The bound of the file comment of sgemm512_amd64.go, with
			// γ_{k+nb+1} covering both terms.
			tol := gamma(k+nb+1)*e + 1e-30
			if !(math.Abs(float64(got)-w) <= tol) {
				t.Fatalf("%s: C[%d,%d] = %v want %v (tol %g)", name, i, j, got, w, tol)
			}
		}
	}
}

// TestSgemm512Edges runs the AVX-512 SGEMM directly on every tile height
// (m = 1…24: sgemm512Kernel's 1–10 rows and strips of unequal height,
// sgemm512Dot4's groups of 4 and partial groups), every column remainder
// of the 16- and 32-column masks and of sgemm512Dot4's 4 columns, columns
// across the 128-column blocks of packed Bᵀ, k across the 16-step
// transposes, the 4-step packing of sgemm512Dot4 (k divisible by 4 or
// not: NT takes either kernel) and the 512-step k blocks, rows past the
// 40 that sgemm512Dot4 takes, padded leading dimensions, and every
// alpha/beta store mode.
func TestSgemm512Edges(t *testing.T) {
	skipNoAsm512(t)
	rng := rand.New(rand.NewPCG(51, 52))
	ms := []int{1, 2, 3, 4, 5, 7, 9, 10, 11, 19, 20, 21, 32, 40, 41, 64, 73}
	ns := []int{1, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33, 48, 63, 200, 257, 300}
	ks := []int{1, 2, 4, 9, 15, 16, 17, 28, 31, 32, 33, 200, 513, 1028, 1100}
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			if tA && tB {
				continue
			}
			for range 150 {
				m, n, k := ms[rng.IntN(len(ms))], ns[rng.IntN(len(ns))], ks[rng.IntN(len(ks))]
				ab := [][2]float32{{1, 0}, {-0.5, 1}, {2.25, -0.75}}[rng.IntN(3)]
				checkSgemm512(t, rng, tA, tB, m, n, k, rng.IntN(3)*5, ab[0], ab[1])
			}
			for m := 1; m <= 24; m++ {
				for _, n := range []int{1, 3, 4, 5, 16, 17, 32, 47} {
					for _, k := range []int{16, 17} {
						checkSgemm512(t, rng, tA, tB, m, n, k, 1, 1, 0.5)
						checkSgemm512(t, rng, tA, tB, m, n, k, 0, -2, 0)
					}
				}
			}
		}
	}
}

// TestSgemm512NaN checks that the AVX-512 SGEMM does not skip zeros of A:
// 0·NaN and 0·Inf in op(A)·op(B) give NaN, in every transposition case
// (NT with k divisible by 4 on sgemm512Dot4, and not), at a masked edge
// column.
func TestSgemm512NaN(t *testing.T) {
	skipNoAsm512(t)
	const m, n = 12, 40
	for _, k := range []int{20, 21} {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				if tA && tB {
					continue
				}
				for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
					a := make([]float32, m*k) // all zero
					b := make([]float32, k*n)
					// op(B)(5, 37) = bad: column 37 is in the masked
					// second half of the last 32-column tile and the
					// second column of sgemm512Dot4's last tile.
					if tB {
						b[37*k+5] = bad
					} else {
						b[5*n+37] = bad
					}
					lda, ldb := k, n
					if tA {
						lda = m
					}
					if tB {
						ldb = k
					}
					c := make([]float32, m*n)
					sgemm512(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, n)
					for i := range m {
						for j := range n {
							v := c[i*n+j]
							if j == 37 && !math.IsNaN(float64(v)) {
								t.Fatalf("k=%d tA=%v tB=%v: C[%d,%d] = %v with 0·%v, want NaN", k, tA, tB, i, j, v, bad)
							}
							if j != 37 && v != 0 {
								t.Fatalf("k=%d tA=%v tB=%v: C[%d,%d] = %v, want 0", k, tA, tB, i, j, v)
							}
						}
					}
				}
			}
		}
	}
}

// TestSgemm512PackBT checks the 16×16 register transposes against the
// definition for every k remainder, with rows at unrelated addresses.
func TestSgemm512PackBT(t *testing.T) {
	skipNoAsm512(t)
	rng := rand.New(rand.NewPCG(53, 54))
	for kc := 0; kc <= 50; kc++ {
		var rows [16][]float32
		var ptrs [16]unsafe.Pointer
		for r := range rows {
			rows[r] = randVec(rng, kc+2+rng.IntN(3))[rng.IntN(2):][:max(kc, 1)]
			ptrs[r] = unsafe.Pointer(&rows[r][0])
		}
		const stride = 24 // floats: more than 16, to see that nothing lands between rows
		dst := make([]float32, kc*stride+16)
		for i := range dst {
			dst[i] = -1
		}
		sgemm512PackBT(unsafe.Pointer(&dst[0]), stride*4, &ptrs, kc)
		for p := range kc {
			for r := range 16 {
				if got, want := dst[p*stride+r], rows[r][p]; got != want {
					t.Fatalf("kc=%d: dst[%d][%d] = %v, want %v", kc, p, r, got, want)
				}
			}
			for j := 16; j < stride; j++ {
				if dst[p*stride+j] != -1 {
					t.Fatalf("kc=%d: dst[%d][%d] written", kc, p, j)
				}
			}
		}
		for i := kc * stride; i < len(dst); i++ {
			if dst[i] != -1 {
				t.Fatalf("kc=%d: dst[%d] past the last row written", kc, i)
			}
		}
	}
}

// BenchmarkFMAPeakAVX512 measures the core's FP32 peak with 512-bit FMAs
// in Go assembly: 24 independent VFMADD231PS chains on registers (Zen 5
// needs 2 pipes × 4 cycles = 8 in flight; archsimd's BenchmarkFMAPeak is
// limited to 8 chains by Go's register allocation). MB/s is MFLOP/s, the
// denominator of the AVX-512 SGEMM efficiency.
func BenchmarkFMAPeakAVX512(b *testing.B) {
	skipNoAsm512(b)
	const iters = 4096
	b.SetBytes(iters * 24 * 16 * 2)
	for b.Loop() {
		sgemm512FMAPeak(iters)
	}
	b.ReportMetric(float64(iters*24*16*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSgemm512 is BenchmarkGemm's shapes on the AVX-512 assembly
// SGEMM called directly, whatever the dispatch picks (NT, NN, TN).
func BenchmarkSgemm512(b *testing.B) {
	skipNoAsm512(b)
	for _, s := range gemmBenchShapes {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			a, bb, c := randVec(rng, s.m*s.k), randVec(rng, s.k*s.n), make([]float32, s.m*s.n)
			lda, ldb := s.k, s.n
			if s.tA {
				lda = s.m
			}
			if s.tB {
				ldb = s.k
			}
			flop := 2 * s.m * s.n * s.k
			b.SetBytes(int64(flop))
			b.ReportAllocs()
			for b.Loop() {
				sgemm512(s.tA, s.tB, s.m, s.n, s.k, 1, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(float64(flop)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
