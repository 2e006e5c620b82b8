package secagg

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestNewEncodingBound(t *testing.T) {
	for _, c := range []struct {
		n    int
		clip float64
	}{{1, 1}, {2, 0.5}, {10, 1}, {1000, 0.1}, {1000, 1}, {1 << 16, 1}, {100, 1e-6}, {3, 1000}} {
		e, err := NewEncoding(c.n, c.clip)
		if err != nil {
			t.Fatalf("NewEncoding(%d, %v): %v", c.n, c.clip, err)
		}
		fits := func(f int) bool { return float64(c.n)*(c.clip*math.Exp2(float64(f))+1) <= math.MaxInt32 }
		if e.FracBits < 8 || e.FracBits > 30 || !fits(e.FracBits) || (e.FracBits < 30 && fits(e.FracBits+1)) {
			t.Fatalf("NewEncoding(%d, %v) = %d fractional bits: not the largest that fits", c.n, c.clip, e.FracBits)
		}
	}
	for _, c := range []struct {
		n    int
		clip float64
	}{{0, 1}, {10, 0}, {10, -1}, {10, math.NaN()}, {10, math.Inf(1)}, {1 << 20, 100}} {
		if _, err := NewEncoding(c.n, c.clip); err == nil {
			t.Errorf("NewEncoding(%d, %v) did not fail", c.n, c.clip)
		}
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	e, _ := NewEncoding(100, 2)
	x := make([]float32, 10000)
	for i := range x {
		x[i] = float32(4*rng.Float64() - 2)
	}
	x[0], x[1] = 2, -2
	enc := make([]uint32, len(x))
	e.Encode(enc, x, rng)
	dec := make([]float64, len(x))
	e.Decode(dec, enc)
	ulp := math.Exp2(-float64(e.FracBits))
	for i := range x {
		if d := math.Abs(dec[i] - float64(x[i])); d >= ulp {
			t.Fatalf("x[%d] = %v decodes to %v, error %g ≥ 2^−f", i, x[i], dec[i], d)
		}
	}
	// Out-of-range values clamp to ±clip, NaN to 0.
	e.Encode(enc[:4], []float32{3, -1e30, float32(math.NaN()), float32(math.Inf(1))}, rng)
	e.Decode(dec[:4], enc[:4])
	if dec[0] != 2 || dec[1] != -2 || dec[2] != 0 || dec[3] != 2 {
		t.Fatalf("clamping: got %v, want [2 -2 0 2]", dec[:4])
	}
}

// TestEncodeUnbiased checks E[decode(encode(x))] = x: for a value whose
// scaled fraction is 0.3, round-to-nearest would be off by 0.3·2^−f; the
// mean of N stochastic roundings must be within 6 standard errors (a
// correct implementation fails with probability < 10^−8).
func TestEncodeUnbiased(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	e := Encoding{FracBits: 10, Clip: 1}
	ulp := math.Exp2(-10)
	for _, frac := range []float64{0.3, 0.5, 0.9} {
		v := float32((37 + frac) * ulp)
		const N = 200_000
		x := make([]float32, N)
		for i := range x {
			x[i] = v
		}
		enc := make([]uint32, N)
		e.Encode(enc, x, rng)
		dec := make([]float64, N)
		e.Decode(dec, enc)
		var sum float64
		for _, d := range dec {
			sum += d
		}
		mean := sum / N
		f := float64(v)/ulp - math.Floor(float64(v)/ulp)
		se := math.Sqrt(f*(1-f)/N) * ulp
		if math.Abs(mean-float64(v)) > 6*se {
			t.Fatalf("fraction %v: mean %v, want %v ± %v", frac, mean, float64(v), 6*se)
		}
	}
}

// TestEncodeWorstCaseNoWrap sums n vectors at ±clip in Z_{2^32} and checks
// that the decoded sum equals the exact integer sum of the encodings: no
// wrap-around, even at the edge of NewEncoding's bound.
func TestEncodeWorstCaseNoWrap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		n    int
		clip float64
	}{{2, 1}, {1000, 1}, {1 << 14, 0.37}, {5000, 3}} {
		e, err := NewEncoding(c.n, c.clip)
		if err != nil {
			t.Fatal(err)
		}
		for _, sign := range []float32{1, -1} {
			x := []float32{sign * float32(c.clip), sign * float32(c.clip)}
			enc := make([]uint32, 2)
			sum := make([]uint32, 2)
			var exact [2]int64
			for range c.n {
				e.Encode(enc, x, rng)
				for i := range enc {
					sum[i] += enc[i]
					exact[i] += int64(int32(enc[i]))
				}
			}
			dec := make([]float64, 2)
			e.Decode(dec, sum)
			for i := range dec {
				if want := float64(exact[i]) * math.Exp2(-float64(e.FracBits)); dec[i] != want {
					t.Fatalf("n=%d clip=%v sign=%v: decoded sum %v, exact %v (wrapped)", c.n, c.clip, sign, dec[i], want)
				}
				if math.Abs(dec[i]-float64(c.n)*float64(x[i])) > float64(c.n)*math.Exp2(-float64(e.FracBits)) {
					t.Fatalf("n=%d clip=%v: decoded sum %v far from n·clip", c.n, c.clip, dec[i])
				}
			}
		}
	}
}

func TestRoundingSlack(t *testing.T) {
	e := Encoding{FracBits: 16}
	if got, want := e.RoundingSlack(10000), 100*math.Exp2(-16); got != want {
		t.Fatalf("RoundingSlack = %v, want %v", got, want)
	}
}
