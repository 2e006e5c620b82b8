package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func idxBytes(dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestReadIDX(t *testing.T) {
	payload := []byte{1, 2, 3, 4, 5, 6}
	raw := idxBytes([]uint32{2, 3}, payload)
	for name, in := range map[string][]byte{"raw": raw, "gzip": gz(raw)} {
		dims, data, err := ReadIDX(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(dims) != 2 || dims[0] != 2 || dims[1] != 3 || !bytes.Equal(data, payload) {
			t.Fatalf("%s: dims %v data %v", name, dims, data)
		}
	}
	bad := map[string][]byte{
		"magic":     append([]byte{1, 0}, raw[2:]...),
		"type":      append([]byte{0, 0, 0x0d}, raw[3:]...),
		"truncated": raw[:len(raw)-1],
		"trailing":  append(append([]byte{}, raw...), 9),
		"empty":     {},
	}
	for name, in := range bad {
		if _, _, err := ReadIDX(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLoadIDXPairChecks(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img.gz")
	lab := filepath.Join(dir, "lab")
	os.WriteFile(img, gz(idxBytes([]uint32{2, 2, 2}, []byte{0, 255, 51, 102, 0, 0, 0, 255})), 0o644)
	os.WriteFile(lab, idxBytes([]uint32{2}, []byte{1, 0}), 0o644)
	ds, err := LoadIDXPair(img, lab, 2)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 2 || ds.Dim != 4 || ds.X[1] != 1 || math.Abs(float64(ds.X[2])-0.2) > 1e-7 || ds.Y[0] != 1 {
		t.Fatalf("dataset %+v", ds)
	}
	os.WriteFile(lab, idxBytes([]uint32{3}, []byte{1, 0, 1}), 0o644)
	if _, err := LoadIDXPair(img, lab, 2); err == nil {
		t.Fatal("count mismatch accepted")
	}
	os.WriteFile(lab, idxBytes([]uint32{2}, []byte{1, 2}), 0o644)
	if _, err := LoadIDXPair(img, lab, 2); err == nil {
		t.Fatal("label out of range accepted")
	}
}

func TestMissingDatasetNamesPackageAndFlag(t *testing.T) {
	_, _, err := LoadFashionMNIST(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "dataset-fashion-mnist") || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("error %v should name the package and --data-dir", err)
	}
}

func TestFashionMNIST(t *testing.T) {
	if _, err := os.Stat(DefaultFashionMNISTDir); err != nil {
		t.Skip("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)")
	}
	train, test, err := LoadFashionMNIST(DefaultFashionMNISTDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ds     *Dataset
		n, per int
	}{{train, 60000, 6000}, {test, 10000, 1000}} {
		if c.ds.Len() != c.n || c.ds.Dim != 784 || c.ds.Classes != 10 {
			t.Fatalf("%d examples of dim %d", c.ds.Len(), c.ds.Dim)
		}
		hist := make([]int, 10)
		for _, y := range c.ds.Y {
			hist[y]++
		}
		for k, h := range hist {
			if h != c.per {
				t.Fatalf("class %d has %d examples, want %d (the published balanced split)", k, h, c.per)
			}
		}
	}
}

// synthetic labels: 10 balanced classes.
func labelsDataset(n int) *Dataset {
	ds := &Dataset{X: make([]float32, n), Y: make([]uint8, n), Dim: 1, Classes: 10}
	for i := range ds.Y {
		ds.Y[i] = uint8(i % 10)
		ds.X[i] = float32(i)
	}
	return ds
}

// Every partition is an exact partition: each example exactly once.
func TestPartitionsAreExact(t *testing.T) {
	ds := labelsDataset(5000)
	for _, p := range []Partitioner{IID{}, Dirichlet{Alpha: 0.1}, Dirichlet{Alpha: 1}, Shards{PerClient: 2}} {
		for _, n := range []int{1, 7, 100, 5000} {
			f, err := NewFederated(ds, Options{NumClients: n, Partitioner: p, Seed: 3, HeldOutFraction: 0.25})
			if err != nil {
				if _, ok := p.(Shards); ok && n*2 > ds.Len() {
					continue
				}
				t.Fatalf("%v, %d clients: %v", p, n, err)
			}
			seen := make([]int, ds.Len())
			for _, id := range f.ClientIDs() {
				c := f.Client(id)
				if len(c.Train) != f.ClientSize(id) {
					t.Fatalf("ClientSize %d != %d", f.ClientSize(id), len(c.Train))
				}
				if want := int(math.Floor(0.25 * float64(len(c.Train)+len(c.HeldOut)))); len(c.HeldOut) != want {
					t.Fatalf("held out %d of %d", len(c.HeldOut), len(c.Train)+len(c.HeldOut))
				}
				for _, i := range append(append([]int32{}, c.Train...), c.HeldOut...) {
					seen[i]++
				}
			}
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("%v, %d clients: example %d assigned %d times", p, n, i, s)
				}
			}
			if f.TotalExamples() != ds.Len() {
				t.Fatalf("total %d", f.TotalExamples())
			}
		}
	}
}

func clientSets(f *Federated) [][]int32 {
	out := make([][]int32, f.NumClients())
	for i := range out {
		out[i] = f.Client(i).Train
	}
	return out
}

func TestPartitionReproducible(t *testing.T) {
	ds := labelsDataset(3000)
	mk := func(seed uint64) [][]int32 {
		f, err := NewFederated(ds, Options{NumClients: 50, Partitioner: Dirichlet{Alpha: 0.5}, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return clientSets(f)
	}
	a, b, c := mk(1), mk(1), mk(2)
	same := func(x, y [][]int32) bool {
		for i := range x {
			if len(x[i]) != len(y[i]) {
				return false
			}
			for j := range x[i] {
				if x[i][j] != y[i][j] {
					return false
				}
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("same seed gave different partitions")
	}
	if same(a, c) {
		t.Fatal("different seeds gave the same partition")
	}
}

func distinctClasses(ds *Dataset, f *Federated) float64 {
	var total float64
	for _, id := range f.ClientIDs() {
		var has [10]bool
		n := 0
		for _, i := range f.Client(id).Train {
			if !has[ds.Y[i]] {
				has[ds.Y[i]] = true
				n++
			}
		}
		total += float64(n)
	}
	return total / float64(f.NumClients())
}

// Hsu et al. 2019: small α concentrates each client on few classes, large α
// approaches the IID mix. With 100 examples per client, IID clients see
// all 10 classes; α = 0.05 clients see about 1–2.
func TestDirichletSkewFollowsAlpha(t *testing.T) {
	ds := labelsDataset(10000)
	get := func(p Partitioner) float64 {
		f, err := NewFederated(ds, Options{NumClients: 100, Partitioner: p, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		return distinctClasses(ds, f)
	}
	iid, hi, lo := get(IID{}), get(Dirichlet{Alpha: 100}), get(Dirichlet{Alpha: 0.05})
	if iid < 9.9 || hi < 9.5 || lo > 3 || !(lo < hi) {
		t.Fatalf("mean distinct classes per client: iid %.2f, α=100 %.2f, α=0.05 %.2f", iid, hi, lo)
	}
}

func TestShardsGiveFewClasses(t *testing.T) {
	ds := labelsDataset(6000)
	f, err := NewFederated(ds, Options{NumClients: 100, Partitioner: Shards{PerClient: 2}, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	// 200 shards of 30 sorted examples: a shard lies within one class
	// (600 per class is a multiple of 30), so a client has at most 2 classes.
	for _, id := range f.ClientIDs() {
		var has [10]bool
		n := 0
		for _, i := range f.Client(id).Train {
			if !has[ds.Y[i]] {
				has[ds.Y[i]] = true
				n++
			}
		}
		if n > 2 || f.ClientSize(id) != 60 {
			t.Fatalf("client %d: %d classes, %d examples", id, n, f.ClientSize(id))
		}
	}
}

// The Dirichlet sampler's moments match the closed forms: for Dir(a),
// E[q_i] = a_i/a_0 and Var[q_i] = a_i(a_0 − a_i)/(a_0²(a_0+1)).
func TestDirichletSamplerMoments(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, conc := range [][]float64{{0.3, 0.5, 1.2}, {2, 5, 0.05}} {
		var a0 float64
		for _, a := range conc {
			a0 += a
		}
		const T = 200000
		q := make([]float64, len(conc))
		sum, sq := make([]float64, len(conc)), make([]float64, len(conc))
		for range T {
			sampleDirichlet(q, conc, rng)
			for i, v := range q {
				sum[i] += v
				sq[i] += v * v
			}
		}
		for i, a := range conc {
			mean := sum[i] / T
			v := sq[i]/T - mean*mean
			wm, wv := a/a0, a*(a0-a)/(a0*a0*(a0+1))
			if math.Abs(mean-wm) > 6*math.Sqrt(wv/T) || math.Abs(v-wv) > 0.05*wv {
				t.Fatalf("Dir%v component %d: mean %v var %v, want %v %v", conc, i, mean, v, wm, wv)
			}
		}
	}
}

func TestBadOptions(t *testing.T) {
	ds := labelsDataset(100)
	for _, o := range []Options{
		{NumClients: 0, Partitioner: IID{}},
		{NumClients: 101, Partitioner: IID{}},
		{NumClients: 10, Partitioner: Dirichlet{Alpha: 0}},
		{NumClients: 10, Partitioner: Shards{PerClient: 11}},
		{NumClients: 10, Partitioner: IID{}, HeldOutFraction: 1},
		{NumClients: 10},
	} {
		if _, err := NewFederated(ds, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := ParsePartitioner("zipf", 1, 1); err == nil {
		t.Error("unknown partition accepted")
	}
}

func BenchmarkNewFederatedDirichlet(b *testing.B) {
	ds := labelsDataset(60000)
	for _, n := range []int{6000, 60000} {
		b.Run(map[int]string{6000: "6k", 60000: "60k"}[n], func(b *testing.B) {
			for b.Loop() {
				NewFederated(ds, Options{NumClients: n, Partitioner: Dirichlet{Alpha: 1}, Seed: 1})
			}
		})
	}
}
