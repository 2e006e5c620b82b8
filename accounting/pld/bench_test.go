package pld

import (
	"fmt"
	"testing"
)

// BenchmarkEpsilonPoissonGaussian is the end-to-end cost of one ε for
// 10,000 steps at z = 1 (targets: < 1 s and < 200 MB per call): "cold"
// empties every cache first, as a batch recomputation in a fresh process
// pays (its grid, and every earlier epoch's last count for the floor);
// "v1" is EpsilonPoissonGaussianV1, which caches nothing.
func BenchmarkEpsilonPoissonGaussian(b *testing.B) {
	for _, q := range []float64{0.001, 0.01, 0.1} {
		b.Run(fmt.Sprintf("cold/q=%g", q), func(b *testing.B) {
			b.ReportAllocs()
			var eps float64
			for b.Loop() {
				b.StopTimer()
				resetSeriesCaches()
				b.StartTimer()
				var err error
				if eps, err = EpsilonPoissonGaussian(q, 1, 10000, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(eps, "ε")
		})
		b.Run(fmt.Sprintf("v1/q=%g", q), func(b *testing.B) {
			b.ReportAllocs()
			var eps float64
			for b.Loop() {
				var err error
				if eps, err = EpsilonPoissonGaussianV1(q, 1, 10000, 1e-5); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(eps, "ε")
		})
	}
}

// BenchmarkEpsilonNextRound is the cost of the next count of a ledger at
// round T, q = 0.02, z = 1, δ = 1e-5 (the demo job's mechanism): counts
// T+1, T+2, … with the caches warm, as a running job asks for them,
// wrapping back to T+1 after T/4 counts so the window stays near T's.
func BenchmarkEpsilonNextRound(b *testing.B) {
	for _, T := range []int{300, 1000, 10000} {
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) {
			if _, err := EpsilonPoissonGaussian(0.02, 1, T, 1e-5); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := EpsilonPoissonGaussian(0.02, 1, T+1+i%(T/4), 1e-5); err != nil {
					b.Fatal(err)
				}
			}
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
