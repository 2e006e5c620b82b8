//go:build amd64

package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemmPacked checks sgemmPacked, the AVX2 5×16 kernel's loops,
// directly (whatever gemm dispatches) against the float64 reference, for
// NN, TN and NT, in each of its ways of reading op(B) = B (sgemmPackB): in
// place, column tile by column tile with the strip copied by the kernel
// (sgemm.columns: ldb a multiple of 1024 floats, whose rows all fall in
// one L1 set), and packed block by block (the same with m·kc above
// sgemmColsMaxA). m runs over every remainder of the 5-row strips around
// the cut-offs (m ≤ 5 stays in place), n over every remainder of the
// 16-column tiles, k across one and several k blocks, with every store
// mode (alpha = 1 skips the kernel's multiplication; beta = 0 over a C of
// NaNs, which must not be read). The padding past each row of A and B is
// NaN, so any element read outside the matrices shows; the padding of C
// and a guard row after it must stay untouched.
func TestSgemmPacked(t *testing.T) {
	if !cpuAsmGemm {
		t.Skip("no AVX2+FMA")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	modes := [][2]float32{{1, 0}, {0.5, 0}, {-0.5, 1}, {1, 1}, {2.25, -0.75}, {1, 0.5}}
	seen := map[[2]bool]bool{}
	for _, tc := range []struct {
		tA, tB bool
		ldb    int // 0: n + 3
	}{
		{false, false, 0}, {true, false, 0}, {false, true, 0},
		{false, false, 1024}, {true, false, 1024}, {false, false, 2048}, {true, false, 3072},
	} {
		for _, m := range []int{1, 4, 5, 6, 9, 10, 11, 14, 20, 21, 24, 33} {
			for _, n := range []int{1, 7, 16, 17, 32, 47} {
				for _, k := range []int{1, 9, 20, 64, 300} {
					ab := modes[rng.IntN(len(modes))]
					seen[checkSgemmPacked(t, rng, tc.tA, tc.tB, m, n, k, tc.ldb, ab[0], ab[1])] = true
				}
			}
		}
	}
	// The CNN's fc1 gradients (ldb = 9216) in every store mode.
	for _, ab := range modes[2:5] {
		checkSgemmPacked(t, rng, true, false, 128, 9216, 20, 0, ab[0], ab[1])
		checkSgemmPacked(t, rng, false, false, 20, 9216, 128, 0, ab[0], ab[1])
	}
	// m·kc above sgemmColsMaxA: packed block by block, over several
	// column blocks.
	for _, ab := range modes[:3] {
		seen[checkSgemmPacked(t, rng, false, false, 37, 530, 256, 1024, ab[0], ab[1])] = true
		seen[checkSgemmPacked(t, rng, true, false, 41, 300, 700, 1024, ab[0], ab[1])] = true
	}
	for _, want := range [][2]bool{{false, false}, {false, true}, {true, false}} {
		if !seen[want] {
			t.Errorf("no case with sgemmPackB = %v", want)
		}
	}
}

// checkSgemmPacked runs sgemmPacked (checkPadded) with lda = k or m + 2
// for A and ldb as given, or n + 3, for B, and C with 3 extra elements per
// row, within Gemm's documented bound γ_{k+nb}·Σ|alpha·a·b| +
// γ_{nb}·|beta·c| (nb k blocks; γ_{k+nb+1} on the sum of both here). It
// returns sgemmPackB's choice.
func checkSgemmPacked(t *testing.T, rng *rand.Rand, tA, tB bool, m, n, k, ldb int, alpha, beta float32) [2]bool {
	t.Helper()
	colsA, colsB := k, n
	if tA {
		colsA = m
	}
	if tB {
		colsB = k
	}
	lda, ldc := colsA+2, n+3
	if ldb == 0 {
		ldb = colsB + 3
	}
	nb := (k + sgemmKC - 1) / sgemmKC
	name := fmt.Sprintf("sgemmPacked tA=%v tB=%v", tA, tB)
	checkPadded(t, rng, name, tA, tB, m, n, k, lda, ldb, ldc, alpha, beta, gamma(k+nb+1), func(a, b, c []float32) {
		sgemmPacked(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
	})
	packB, cols := sgemmPackB(tB, m, ldb, (k+nb-1)/nb)
	return [2]bool{packB, cols}
}

// checkPadded checks one assembly kernel run, kern(a, b, c), of C =
// alpha·op(A)·op(B) + beta·C on random op(A) m×k and op(B) k×n stored with
// leading dimensions lda and ldb whose padding is NaN (so an element read
// outside the matrices shows), the last row of each ending at its last
// element, and C with ldc (c is its m rows, the last ending at element n)
// followed by a guard row; C is NaN when beta = 0, which must not be
// read. C must match refGemm within tol·Σ|alpha·a·b|, and its padding and
// the guard row must stay untouched.
func checkPadded(t *testing.T, rng *rand.Rand, name string, tA, tB bool, m, n, k, lda, ldb, ldc int, alpha, beta float32, tol float64, kern func(a, b, c []float32)) {
	t.Helper()
	nan := float32(math.NaN())
	rowsA, colsA := m, k
	if tA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB {
		rowsB, colsB = n, k
	}
	fill := func(rows, cols, ld int) []float32 {
		x := make([]float32, rows*ld)
		for i := range x {
			x[i] = nan
		}
		for i := range rows {
			for j := range cols {
				x[i*ld+j] = float32(rng.NormFloat64())
			}
		}
		return x[:(rows-1)*ld+cols] // the last row ends at its last element
	}
	a, b := fill(rowsA, colsA, lda), fill(rowsB, colsB, ldb)
	c := randVec(rng, (m+1)*ldc)
	if beta == 0 {
		for i := range c {
			c[i] = nan
		}
	}
	want, abs := refGemm(tA, tB, m, n, k, float64(alpha), a, lda, b, ldb, float64(beta), c, ldc)
	orig := append([]float32(nil), c...)
	kern(a, b, c[:(m-1)*ldc+n])
	name += fmt.Sprintf(" m=%d n=%d k=%d lda=%d ldb=%d ldc=%d alpha=%v beta=%v", m, n, k, lda, ldb, ldc, alpha, beta)
	for i := range m + 1 {
		for j := range ldc {
			got := c[i*ldc+j]
			if i == m || j >= n {
				if math.Float32bits(got) != math.Float32bits(orig[i*ldc+j]) {
					t.Fatalf("%s: C[%d,%d] outside the matrix changed", name, i, j)
				}
				continue
			}
			w := want[i*n+j]
			if !(math.Abs(float64(got)-w) <= tol*abs[i*n+j]+1e-30) {
				t.Fatalf("%s: C[%d,%d] = %v, want %v (tol %g)", name, i, j, got, w, tol*abs[i*n+j])
			}
		}
	}
}

// TestSgemmPackedNonFinite checks that zeros of A are not skipped (0·Inf
// and 0·NaN in B give NaN), that an infinity gives an infinity of the
// right sign, on each way of reading B (in place, columns, the rows past
// m of a partial strip) and for the rows of a partial strip.
func TestSgemmPackedNonFinite(t *testing.T) {
	if !cpuAsmGemm {
		t.Skip("no AVX2+FMA")
	}
	inf := float32(math.Inf(1))
	for _, s := range []struct{ m, n, k, ldb int }{{7, 40, 13, 40}, {7, 40, 13, 1024}, {3, 17, 5, 17}} {
		for _, tA := range []bool{false, true} {
			a := make([]float32, s.m*s.k)
			lda := s.k
			if tA {
				lda = s.m
			}
			set := func(i, p int, v float32) {
				if tA {
					a[p*lda+i] = v
				} else {
					a[i*lda+p] = v
				}
			}
			for i := range s.m {
				for p := range s.k {
					set(i, p, 1)
				}
			}
			b := make([]float32, (s.k-1)*s.ldb+s.n)
			for i := range b {
				b[i] = 0.5
			}
			set(s.m-1, 4, 0)               // the last row: a zero at step 4
			b[4*s.ldb+3] = inf             // column 3: 0·Inf there
			b[2*s.ldb+s.n-1] = inf         // the last column: +Inf for every row
			set(0, 2, float32(math.NaN())) // row 0: NaN everywhere
			c := make([]float32, s.m*s.n)
			sgemmPacked(tA, false, s.m, s.n, s.k, -1, a, lda, b, s.ldb, 0, c, s.n)
			for i := range s.m {
				for j := range s.n {
					got := float64(c[i*s.n+j])
					switch {
					case i == 0, i == s.m-1 && j == 3:
						if !math.IsNaN(got) {
							t.Fatalf("%+v tA=%v: C[%d,%d] = %v, want NaN", s, tA, i, j, got)
						}
					case j == s.n-1 || j == 3:
						if !math.IsInf(got, -1) {
							t.Fatalf("%+v tA=%v: C[%d,%d] = %v, want -Inf", s, tA, i, j, got)
						}
					}
				}
			}
		}
	}
}
