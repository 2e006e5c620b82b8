package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is the definition C = alpha·op(A)·op(B) + beta·C in float64,
// also returning Σ|alpha·a·b| per element for the error bound.
func refGemm(tA, tB bool, m, n, k int, alpha float64, a []float32, lda int, b []float32, ldb int, beta float64, c []float32, ldc int) (want, abs []float64) {
	at := func(i, l int) float64 {
		if tA {
			return float64(a[l*lda+i])
		}
		return float64(a[i*lda+l])
	}
	bt := func(l, j int) float64 {
		if tB {
			return float64(b[j*ldb+l])
		}
		return float64(b[l*ldb+j])
	}
	want, abs = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, sa float64
			for l := range k {
				p := at(i, l) * bt(l, j)
				s += p
				sa += math.Abs(p)
			}
			cij := 0.0
			if beta != 0 {
				cij = beta * float64(c[i*ldc+j])
			}
			want[i*n+j] = alpha*s + cij
			abs[i*n+j] = math.Abs(alpha)*sa + math.Abs(cij)
		}
	}
	return want, abs
}

func TestGemmMatchesReference(t *testing.T) {
	forEachPath(t, testGemmMatchesReference)
}

func testGemmMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	// Every remainder of the 4-row, 32- and 16-column and 16-deep blocks
	// (AVX-512) and of the 5-row, 16-column and 8-deep ones (AVX2).
	dims := []int{0, 1, 2, 3, 4, 5, 7, 10, 15, 16, 17, 20, 31, 32, 33, 47, 63, 64, 65, 193, 200}
	trial := 0
	for _, tA := range []bool{false, true} {
		for _, tB := range []bool{false, true} {
			for range 100 {
				trial++
				m, n, k := dims[rng.IntN(len(dims))], dims[rng.IntN(len(dims))], dims[rng.IntN(len(dims))]
				if trial%7 == 0 { // cross both tile edges (64 rows, 192 columns)
					m, n = 130, 400
				}
				alpha := []float32{1, -0.5, 2.25, 0}[rng.IntN(4)]
				beta := []float32{0, 1, -0.75}[rng.IntN(3)]
				checkGemm(t, rng, tA, tB, m, n, k, rng.IntN(3), alpha, beta)
			}
		}
	}
}

// TestGemmBlocking covers the blocking of the AVX2 kernels: the archsimd
// one (gemmAVX2: C of at most 20 rows with B read in place, k blocks of at
// most 96, a last strip of fewer than 16 columns, all of op(B) packed at
// once, k·n up to 96·1024, and packed in blocks of 96×1024) and the
// assembly one (sgemmAsm: k blocks of at most 256, so k = 291, 784, 1000,
// 4000 split into 2, 4, 4 and 16; blocks of 256 packed columns of Bᵀ, so n
// = 288, 1030, 2100 cross them; row strips of 5 and column strips of 16
// with partial ones at both edges), for every alpha/beta store mode, on
// every path.
func TestGemmBlocking(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for _, s := range []struct{ m, n, k int }{
			{20, 200, 784}, {19, 17, 97}, {20, 15, 193}, {1, 1, 1}, {6, 1, 300},
			{21, 200, 96}, {64, 288, 291}, {37, 9, 200}, {3, 1030, 95},
			{31, 1041, 97}, {23, 2100, 50}, {11, 130, 1000}, {7, 48, 4000},
		} {
			for _, tA := range []bool{false, true} {
				for _, tB := range []bool{false, true} {
					if tA && tB {
						continue
					}
					for _, ab := range [][2]float32{{1, 0}, {-0.5, 1}, {2.25, -0.75}} {
						checkGemm(t, rng, tA, tB, s.m, s.n, s.k, rng.IntN(3), ab[0], ab[1])
					}
				}
			}
		}
	})
}

// checkGemm runs Gemm on random matrices of the given shape, stored with
// pad extra elements per row and at offsets 0–3 floats into their
// allocations, and checks every element of C against refGemm within
// γ_{k+3}·Σ|terms| and the padding of C for changes.
func checkGemm(t *testing.T, rng *rand.Rand, tA, tB bool, m, n, k, pad int, alpha, beta float32) {
	t.Helper()
	rowsA, colsA := m, k
	if tA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB {
		rowsB, colsB = n, k
	}
	lda, ldb, ldc := max(1, colsA+pad), max(1, colsB+pad), max(1, n+pad)
	// Unaligned subslices: offsets 0–3 floats into fresh allocations.
	a := randVec(rng, max(0, rowsA*lda)+3)[rng.IntN(4):]
	b := randVec(rng, max(0, rowsB*ldb)+3)[rng.IntN(4):]
	c := randVec(rng, max(0, m*ldc)+3)[rng.IntN(4):]
	a, b = a[:max(0, rowsA*lda)], b[:max(0, rowsB*ldb)]
	c = c[:max(0, m*ldc)]
	if beta == 0 {
		for i := range c {
			c[i] = float32(math.NaN()) // must not be read
		}
	}
	want, abs := refGemm(tA, tB, m, n, k, float64(alpha), a, lda, b, ldb, float64(beta), c, ldc)
	orig := append([]float32(nil), c...)
	Gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	name := fmt.Sprintf("%s: tA=%v tB=%v m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%v beta=%v", Path(), tA, tB, m, n, k, lda, ldb, ldc, alpha, beta)
	for i := range m {
		for j := range ldc {
			got := c[i*ldc+j]
			if j >= n { // padding must be untouched
				if math.Float32bits(got) != math.Float32bits(orig[i*ldc+j]) {
					t.Fatalf("%s: padding C[%d,%d] changed", name, i, j)
				}
				continue
			}
			w, e := want[i*n+j], abs[i*n+j]
			tol := gamma(k+3)*e + 1e-30
			if !(math.Abs(float64(got)-w) <= tol) {
				t.Fatalf("%s: C[%d,%d] = %v want %v (tol %g)", name, i, j, got, w, tol)
			}
		}
	}
}

func TestGemmAlphaZeroDoesNotReadAB(t *testing.T) {
	nan := float32(math.NaN())
	a := []float32{nan, nan, nan, nan}
	c := []float32{1, 2, 3, 4}
	Gemm(false, true, 2, 2, 2, 0, a, 2, a, 2, 3, c, 2)
	for i, v := range c {
		if v != 3*float32(i+1) {
			t.Fatalf("alpha=0: C = %v, want 3·C", c)
		}
	}
}

func TestGemmBadArgumentsPanic(t *testing.T) {
	s := make([]float32, 100)
	mustPanic(t, "negative m", func() { Gemm(false, false, -1, 2, 2, 1, s, 2, s, 2, 0, s, 2) })
	mustPanic(t, "negative k", func() { Gemm(false, false, 2, 2, -2, 1, s, 2, s, 2, 0, s, 2) })
	mustPanic(t, "lda < k", func() { Gemm(false, false, 2, 2, 3, 1, s, 2, s, 2, 0, s, 2) })
	mustPanic(t, "lda < m (transA)", func() { Gemm(true, false, 3, 2, 2, 1, s, 2, s, 2, 0, s, 2) })
	mustPanic(t, "ldb < n", func() { Gemm(false, false, 2, 3, 2, 1, s, 2, s, 2, 0, s, 3) })
	mustPanic(t, "ldb < k (transB)", func() { Gemm(false, true, 2, 2, 3, 1, s, 3, s, 2, 0, s, 2) })
	mustPanic(t, "ldc < n", func() { Gemm(false, false, 2, 3, 2, 1, s, 2, s, 3, 0, s, 2) })
	mustPanic(t, "short A", func() { Gemm(false, false, 4, 2, 3, 1, s[:11], 3, s, 2, 0, s, 2) })
	mustPanic(t, "short B", func() { Gemm(false, true, 2, 4, 3, 1, s, 3, s[:11], 3, 0, s, 4) })
	mustPanic(t, "short C", func() { Gemm(false, false, 3, 3, 1, 1, s, 1, s, 3, 0, s[:8], 3) })
}
