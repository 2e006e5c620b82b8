package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// quadratic is a test model whose one example per client is the client's
// objective F_i(x) = ½‖A_i^{1/2}(x − c_i)‖² with A_i diagonal: the
// example's features are A_i's diagonal then c_i (Wang et al. 2021, the
// Field Guide, §4.3.1).
type quadratic struct{ d int }

func (q quadratic) Name() string                              { return "quadratic" }
func (q quadratic) NumParams() int                            { return q.d }
func (q quadratic) InputDim() int                             { return 2 * q.d }
func (q quadratic) NumClasses() int                           { return 2 }
func (q quadratic) Init(p []float32, _ *rand.Rand)            { clear(p) }
func (q quadratic) NewWorkspace(maxBatch int) model.Workspace { return q }

func (q quadratic) LossGrad(p, x []float32, labels []uint8, grad []float32) float64 {
	clear(grad)
	var loss float64
	n := len(labels)
	for k := range n {
		a, c := x[k*2*q.d:k*2*q.d+q.d], x[k*2*q.d+q.d:(k+1)*2*q.d]
		for j := range q.d {
			r := p[j] - c[j]
			loss += 0.5 * float64(a[j]*r*r)
			grad[j] += a[j] * r / float32(n)
		}
	}
	return loss / float64(n)
}

func (q quadratic) Evaluate(p, x []float32, labels []uint8) (float64, int) {
	return 0, 0
}

// FedSGD (one full-batch local step per client, server SGD with η_s = 1,
// equal weights) on heterogeneous quadratics converges to the minimiser of
// the average objective, x* = (E A_i)^† E[A_i c_i] (Field Guide §4.3.1),
// not to the average of the clients' optima E c_i.
func TestFedSGDQuadraticConvergesToClosedForm(t *testing.T) {
	const d, clients = 4, 8
	rng := rand.New(rand.NewPCG(11, 12))
	ds := &data.Dataset{X: make([]float32, clients*2*d), Y: make([]uint8, clients), Dim: 2 * d, Classes: 2}
	sumA := make([]float64, d)
	sumAc := make([]float64, d)
	sumC := make([]float64, d)
	for i := range clients {
		for j := range d {
			a := 0.2 + 1.8*rng.Float64()
			c := 4 * rng.NormFloat64()
			ds.X[i*2*d+j], ds.X[i*2*d+d+j] = float32(a), float32(c)
			sumA[j] += a
			sumAc[j] += a * c
			sumC[j] += c
		}
	}
	fed, err := data.NewFederated(ds, data.Options{NumClients: clients, Partitioner: data.IID{}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range clients {
		if n := fed.ClientSize(i); n != 1 {
			t.Fatalf("client %d holds %d objectives, want 1", i, n)
		}
	}
	alg := &FedAvg{Model: quadratic{d}, Client: ClientConfig{Epochs: 1, BatchSize: 1, LR: 0.3},
		Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 1}
	x := make([]float32, d)
	all := fed.ClientIDs()
	for r := 1; r <= 400; r++ {
		if _, err := alg.Round(context.Background(), r, x, fed, all, clients); err != nil {
			t.Fatal(err)
		}
	}
	far := false
	for j := range d {
		star := sumAc[j] / sumA[j]
		if math.Abs(float64(x[j])-star) > 1e-4 {
			t.Fatalf("x[%d] = %v, closed form x* = %v", j, x[j], star)
		}
		far = far || math.Abs(star-sumC[j]/clients) > 0.1
	}
	if !far {
		t.Fatal("x* coincides with the mean of the c_i: the instance cannot tell the two apart")
	}
}
