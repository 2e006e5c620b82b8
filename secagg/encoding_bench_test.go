package secagg

import (
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkEncode times Encoding.Encode on one client's update of the
// secure-aggregation demo (7,850 floats, an L2-clipped Gaussian-like
// vector, f for a cohort of 120 at clip norm 1) and reports ns/value, the
// figure the demo's profile is about. rng is a ChaCha8 source, as
// dp.NewSecureRand gives the clients.
func BenchmarkEncode(b *testing.B) {
	const d = 7850
	e, err := NewEncoding(120, 1)
	if err != nil {
		b.Fatal(err)
	}
	data := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, d)
	var sq float64
	for i := range x {
		x[i] = float32(data.NormFloat64())
		sq += float64(x[i]) * float64(x[i])
	}
	for i := range x {
		x[i] = float32(float64(x[i]) / math.Sqrt(sq))
	}
	dst := make([]uint32, d)
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	b.SetBytes(4 * d)
	for b.Loop() {
		e.Encode(dst, x, rng)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/d, "ns/value")
}
