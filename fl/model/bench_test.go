package model

import (
	"math/rand/v2"
	"testing"
)

// Benchmark inputs are image-like: 784 features in [0,1), about half of
// them 0 (Fashion-MNIST has ≈50% zero pixels), 10 classes.

func BenchmarkLossGrad(b *testing.B) {
	const B = 20
	for _, name := range Names() {
		b.Run(name+"/batch=20", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := mustNew(b, name, 784, 10)
			params := randParams(m, rng)
			grad := make([]float32, m.NumParams())
			x, y := randBatch(rng, B, 784, 10)
			ws := m.NewWorkspace(B)
			b.ReportAllocs()
			for b.Loop() {
				ws.LossGrad(params, x, y, grad)
			}
			b.ReportMetric(float64(B*b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

func BenchmarkEvaluate(b *testing.B) {
	const N = 10000
	for _, name := range Names() {
		b.Run(name+"/n=10000", func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			m := mustNew(b, name, 784, 10)
			params := randParams(m, rng)
			x, y := randBatch(rng, N, 784, 10)
			ws := m.NewWorkspace(256) // the chunk fl.Evaluator uses
			b.ReportAllocs()
			for b.Loop() {
				ws.Evaluate(params, x, y)
			}
			b.ReportMetric(float64(N*b.N)/b.Elapsed().Seconds(), "examples/s")
		})
	}
}
