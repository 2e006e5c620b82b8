package pld

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// naiveDFT is X[k] = Σ_j x[j]·e^{−2πi·jk/n}, k = 0 … n/2, summed directly
// in extended form (angles reduced exactly mod n).
func naiveDFT(x []float64) []complex128 {
	n := len(x)
	out := make([]complex128, n/2+1)
	for k := range out {
		var s complex128
		for j, v := range x {
			s += complex(v, 0) * cmplx.Exp(complex(0, -2*math.Pi*float64((j*k)%n)/float64(n)))
		}
		out[k] = s
	}
	return out
}

// TestRealFFT checks forward against the direct DFT and inverse(forward(x))
// against n·x, for every length fftLen produces up to 3,072 and for two
// larger ones.
func TestRealFFT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lengths := []int{}
	for n := 2; n <= 3072; n++ {
		if fftLen(n) == n {
			lengths = append(lengths, n)
		}
	}
	lengths = append(lengths, 1<<15, 3<<14)
	for _, n := range lengths {
		f := newRealFFT(n)
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.Float64()
		}
		X := f.forward(x)
		if n <= 3072 {
			want := naiveDFT(x)
			for k := range want {
				if d := cmplx.Abs(X[k] - want[k]); d > 1e-12*float64(n) {
					t.Fatalf("n=%d: X[%d] = %v, direct DFT %v", n, k, X[k], want[k])
				}
			}
		}
		back := make([]float64, n)
		f.inverse(back, X)
		for i := range x {
			if d := math.Abs(back[i]/float64(n) - x[i]); d > 1e-13*math.Log2(float64(n)) {
				t.Fatalf("n=%d: inverse(forward(x))[%d]/n = %v, x = %v", n, i, back[i]/float64(n), x[i])
			}
		}
	}
}

// TestFFTLen checks that fftLen gives the smallest 2·2^k or 6·2^k ≥ need.
func TestFFTLen(t *testing.T) {
	ok := func(n int) bool {
		if n%2 != 0 {
			return false
		}
		m := n / 2
		if m%3 == 0 {
			m /= 3
		}
		return m&(m-1) == 0
	}
	for need := 1; need <= 5000; need++ {
		want := max(need, 2)
		for !ok(want) {
			want++
		}
		if got := fftLen(need); got != want {
			t.Fatalf("fftLen(%d) = %d, want %d", need, got, want)
		}
	}
}

// BenchmarkRealFFTInverse is the inverse transform at the window lengths
// of a ledger near 10,000 rounds.
func BenchmarkRealFFTInverse(b *testing.B) {
	for _, n := range []int{12288, 16384, 24576, 32768} {
		f := newRealFFT(n)
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Sin(float64(i))
		}
		X := f.forward(x)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				f.inverse(x, X)
			}
		})
	}
}
