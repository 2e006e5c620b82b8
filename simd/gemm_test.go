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
	// Every remainder of the 4-row, 32- and 16-column and 16-deep blocks.
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
				pad := rng.IntN(3) // leading dimensions larger than the rows
				rowsA, colsA := m, k
				if tA {
					rowsA, colsA = k, m
				}
				rowsB, colsB := k, n
				if tB {
					rowsB, colsB = n, k
				}
				lda, ldb, ldc := max(1, colsA+pad), max(1, colsB+pad), max(1, n+pad)
				// Unaligned subslices: offsets 0–3 floats into fresh
				// allocations.
				a := randVec(rng, max(0, rowsA*lda)+3)[rng.IntN(4):]
				b := randVec(rng, max(0, rowsB*ldb)+3)[rng.IntN(4):]
				c := randVec(rng, max(0, m*ldc)+3)[rng.IntN(4):]
				a, b = a[:max(0, rowsA*lda)], b[:max(0, rowsB*ldb)]
				c = c[:max(0, m*ldc)]
				alpha := []float32{1, -0.5, 2.25, 0}[rng.IntN(4)]
				beta := []float32{0, 1, -0.75}[rng.IntN(3)]
				if beta == 0 {
					for i := range c {
						c[i] = float32(math.NaN()) // must not be read
					}
				}
				want, abs := refGemm(tA, tB, m, n, k, float64(alpha), a, lda, b, ldb, float64(beta), c, ldc)
				orig := append([]float32(nil), c...)
				Gemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
				name := fmt.Sprintf("tA=%v tB=%v m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%v beta=%v", tA, tB, m, n, k, lda, ldb, ldc, alpha, beta)
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
