package pld

import (
	"fmt"
	"testing"
)

// BenchmarkEpsilonPoissonGaussian is the end-to-end cost of one ε for
// 10,000 steps at z = 1 (targets: < 1 s and < 200 MB per call).
func BenchmarkEpsilonPoissonGaussian(b *testing.B) {
	for _, q := range []float64{0.001, 0.01, 0.1} {
		b.Run(fmt.Sprintf("q=%g", q), func(b *testing.B) {
			b.ReportAllocs()
			var eps float64
			for b.Loop() {
				var err error
				if eps, err = EpsilonPoissonGaussian(q, 1, 10000, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(eps, "ε")
		})
	}
}

// BenchmarkSelfCompose is the FFT power on a fixed grid.
func BenchmarkSelfCompose(b *testing.B) {
	p, err := PoissonGaussian(0.01, 1, 1e-4)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.SelfCompose(10000); err != nil {
			b.Fatal(err)
		}
	}
}
