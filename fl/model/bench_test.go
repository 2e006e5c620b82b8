package model

import (
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/simd"
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

// BenchmarkStep compares one SGD step at batch 20 taken as LossGrad then
// Axpy (grad) with the fused LossStep (fused).
func BenchmarkStep(b *testing.B) {
	const B = 20
	for _, name := range []string{"mlp", "cnn"} {
		for _, fused := range []bool{false, true} {
			kind := "grad"
			if fused {
				kind = "fused"
			}
			b.Run(name+"/"+kind, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				m := mustNew(b, name, 784, 10)
				params := randParams(m, rng)
				grad := make([]float32, m.NumParams())
				x, y := randBatch(rng, B, 784, 10)
				ws := m.NewWorkspace(B)
				b.ReportAllocs()
				for b.Loop() {
					if fused {
						ws.(Stepper).LossStep(params, x, y, 1e-6)
					} else {
						ws.LossGrad(params, x, y, grad)
						simd.Axpy(params, -1e-6, grad)
					}
				}
				b.ReportMetric(float64(B*b.N)/b.Elapsed().Seconds(), "examples/s")
			})
		}
	}
}
