package fl

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dpfl/dpfl/fl/data"
	"github.com/dpfl/dpfl/fl/model"
)

// A client's update depends only on its own data and seed, never on what
// the trainer (a simulation worker) trained before: otherwise one user
// more would change the updates of every later user on that worker, and
// the clipped sum would move by more than C. The CNN's dropout masks are
// the state at risk (model.Seeder); every model is checked.
func TestClientUpdateIndependentOfEarlierClients(t *testing.T) {
	const dim, n = 784, 6
	ds := &data.Dataset{Dim: dim, Classes: 10}
	src := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		for range dim {
			ds.X = append(ds.X, src.Float32())
		}
		ds.Y = append(ds.Y, uint8(i%10))
	}
	a, b := []int32{0, 1, 2}, []int32{3, 4, 5}
	for _, name := range model.Names() {
		m, err := model.New(name, dim, 10)
		if err != nil {
			t.Fatal(err)
		}
		global := make([]float32, m.NumParams())
		m.Init(global, rand.New(rand.NewPCG(1, 1)))
		cfg := ClientConfig{Epochs: 1, BatchSize: 3, LR: 0.1}
		update := func(tr *clientTrainer, idx []int32, id uint64) []float32 {
			delta := make([]float32, len(global))
			tr.train(delta, global, ds, idx, 1, 0.1, rand.New(rand.NewPCG(9, id)))
			return delta
		}
		fresh := update(newClientTrainer(m, cfg), b, 2)
		used := newClientTrainer(m, cfg)
		update(used, a, 1)
		if after := update(used, b, 2); !slices.Equal(fresh, after) {
			t.Errorf("%s: client 2's update changed because the trainer trained client 1 first", name)
		}
	}
}
