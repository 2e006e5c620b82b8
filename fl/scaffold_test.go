package fl

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// given is a Partitioner returning a fixed split.
type given [][]int32

func (g given) Partition([]uint8, int, int, *rand.Rand) ([][]int32, error) { return g, nil }
func (g given) String() string                                             { return "given" }

// quadratics builds a population whose client i holds copies[i] copies of
// its objective F_i = ½Σ_j a_ij(x_j − c_ij)²; it returns the population
// and the a_i, c_i.
func quadratics(t *testing.T, d int, copies []int, seed uint64) (*data.Federated, [][]float64, [][]float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	total := 0
	for _, m := range copies {
		total += m
	}
	ds := &data.Dataset{X: make([]float32, total*2*d), Y: make([]uint8, total), Dim: 2 * d, Classes: 2}
	a := make([][]float64, len(copies))
	c := make([][]float64, len(copies))
	parts := make(given, len(copies))
	row := 0
	for i, m := range copies {
		a[i], c[i] = make([]float64, d), make([]float64, d)
		for j := range d {
			a[i][j] = 0.2 + 1.8*rng.Float64()
			c[i][j] = 4 * rng.NormFloat64()
		}
		for range m {
			for j := range d {
				ds.X[row*2*d+j], ds.X[row*2*d+d+j] = float32(a[i][j]), float32(c[i][j])
			}
			parts[i] = append(parts[i], int32(row))
			row++
		}
	}
	fed, err := data.NewFederated(ds, data.Options{NumClients: len(copies), Partitioner: parts, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return fed, a, c
}

func runRounds(t *testing.T, alg *FedAvg, fed *data.Federated, d, rounds int) []float32 {
	t.Helper()
	x := make([]float32, d)
	all := fed.ClientIDs()
	for r := 1; r <= rounds; r++ {
		if _, err := alg.Round(context.Background(), r, x, fed, all, float64(len(all))); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// With K local steps of rate η on a quadratic, client i's update is
// B_i(c_i − x) with B_i = 1 − (1 − η a_i)^K per coordinate, so FedAvg
// settles at the B-weighted point Σ B_i c_i / Σ B_i (client drift), while
// SCAFFOLD's control variates remove the drift and reach the minimiser
// x* = Σ a_i c_i / Σ a_i of the average objective (Karimireddy et al.
// 2020, §4–5).
func TestScaffoldRemovesClientDrift(t *testing.T) {
	const d, K, lr = 3, 10, 0.15
	fed, a, c := quadratics(t, d, []int{1, 1, 1, 1, 1}, 21)
	cfg := ClientConfig{Epochs: K, BatchSize: 1, LR: lr}
	fedavg := runRounds(t, &FedAvg{Model: quadratic{d}, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 1}, fed, d, 300)
	scaffold := runRounds(t, &FedAvg{Model: quadratic{d}, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 2, Seed: 1,
		Scaffold: &Scaffold{N: 5}}, fed, d, 300)
	for j := range d {
		var sa, sac, sb, sbc float64
		for i := range a {
			b := 1 - math.Pow(1-lr*a[i][j], K)
			sa, sac, sb, sbc = sa+a[i][j], sac+a[i][j]*c[i][j], sb+b, sbc+b*c[i][j]
		}
		star, drift := sac/sa, sbc/sb
		if math.Abs(float64(fedavg[j])-drift) > 1e-4 {
			t.Fatalf("FedAvg x[%d] = %v, drift fixed point %v", j, fedavg[j], drift)
		}
		if math.Abs(float64(scaffold[j])-star) > 1e-4 {
			t.Fatalf("SCAFFOLD x[%d] = %v, x* = %v (FedAvg's drifted point %v)", j, scaffold[j], star, drift)
		}
		if math.Abs(star-drift) < 1e-2 {
			t.Fatalf("coordinate %d: x* and the drifted point are too close to tell apart", j)
		}
	}
}

// In its first round every client's c_i and the server's c are 0, so
// SCAFFOLD is FedAvg bit for bit.
func TestScaffoldFirstRoundIsFedAvg(t *testing.T) {
	ds := blobs(200, 8)
	fed := population(t, ds, 5)
	m, _ := model.New("logreg", 784, 10)
	cfg := ClientConfig{Epochs: 2, BatchSize: 10, LR: 0.1}
	plain := runRounds(t, &FedAvg{Model: m, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 4}, fed, m.NumParams(), 1)
	sc := runRounds(t, &FedAvg{Model: m, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 4, Scaffold: &Scaffold{N: 5}}, fed, m.NumParams(), 1)
	for i := range plain {
		if plain[i] != sc[i] {
			t.Fatalf("param %d: SCAFFOLD %v, FedAvg %v", i, sc[i], plain[i])
		}
	}
}

// Clients with m_i examples take τ_i = m_i steps per epoch. For small η,
// FedAvg's example-weighted mean converges to the minimiser of
// Σ p_i τ_i F_i (objective inconsistency), FedNova's to that of the true
// objective Σ p_i F_i, p_i = m_i/Σm (Wang et al. 2020, Theorem 1).
func TestFedNovaFixesObjectiveInconsistency(t *testing.T) {
	const d, lr = 3, 0.004
	copies := []int{1, 2, 4, 8}
	fed, a, c := quadratics(t, d, copies, 33)
	cfg := ClientConfig{Epochs: 1, BatchSize: 1, LR: lr}
	avg := runRounds(t, &FedAvg{Model: quadratic{d}, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 1}, fed, d, 3000)
	nova := runRounds(t, &FedAvg{Model: quadratic{d}, Client: cfg, Server: ServerUpdate{Optimizer: &SGD{LR: 1}}, Aggregate: WeightedMean{}, Workers: 1, Seed: 1, Variant: &FedNova{}}, fed, d, 3000)
	for j := range d {
		var s1, s1c, s2, s2c float64
		for i, m := range copies {
			p := float64(m)
			s1, s1c = s1+p*a[i][j], s1c+p*a[i][j]*c[i][j]
			s2, s2c = s2+p*p*a[i][j], s2c+p*p*a[i][j]*c[i][j]
		}
		truth, surrogate := s1c/s1, s2c/s2
		if math.Abs(truth-surrogate) < 0.2 {
			t.Fatalf("coordinate %d: objectives too close (%v, %v) to test", j, truth, surrogate)
		}
		tol := 0.05 * math.Abs(truth-surrogate)
		if math.Abs(float64(nova[j])-truth) > tol {
			t.Fatalf("FedNova x[%d] = %v, minimiser of Σp_iF_i %v (surrogate %v)", j, nova[j], truth, surrogate)
		}
		if math.Abs(float64(avg[j])-surrogate) > tol {
			t.Fatalf("FedAvg x[%d] = %v, surrogate minimiser %v (truth %v)", j, avg[j], surrogate, truth)
		}
	}
}

func TestScaffoldStateRoundTrip(t *testing.T) {
	s := &Scaffold{N: 3}
	s.init(4)
	s.afterTraining(2, []float32{1, 2, 3, 4}, 2, 0.5)
	s.afterTraining(7, []float32{-1, 0, 1, 0}, 1, 0.5)
	s.afterRound()
	b := s.MarshalState()
	var r Scaffold
	if err := r.UnmarshalState(b); err != nil {
		t.Fatal(err)
	}
	for j := range s.c {
		if r.c[j] != s.c[j] || r.ci[2][j] != s.ci[2][j] || r.ci[7][j] != s.ci[7][j] {
			t.Fatalf("round trip differs at %d", j)
		}
	}
	if err := r.UnmarshalState(b[:len(b)-3]); err == nil {
		t.Fatal("truncated state accepted")
	}
}
