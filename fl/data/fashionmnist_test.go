package data

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dpfl/dpfl/internal/datatest"
)

func TestLoadFashionMNISTMissing(t *testing.T) {
	dir := t.TempDir()
	for _, missing := range []string{filepath.Join(dir, "absent"), dir} {
		_, _, err := LoadFashionMNIST(missing)
		want := missing
		if missing == dir {
			want = filepath.Join(dir, "train-images-idx3-ubyte.gz")
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("LoadFashionMNIST(%s): error %v, want fs.ErrNotExist", missing, err)
		}
		for _, s := range []string{want, "apt-get install dataset-fashion-mnist", "--data-dir"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q should mention %q", err, s)
			}
		}
	}
}

// Fashion-MNIST as published (Xiao, Rasul, Vollgraf 2017; README of
// zalandoresearch/fashion-mnist): 60,000 training and 10,000 test images of
// 28×28, 10 classes, exactly 6,000 and 1,000 per class.
func TestLoadFashionMNIST(t *testing.T) {
	train, test, err := LoadFashionMNIST(datatest.FashionMNIST(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		ds    *Dataset
		n     int
		per   int
		first []uint8
	}{
		// First labels: ankle boot, T-shirt, T-shirt, dress, …
		{"train", train, 60000, 6000, []uint8{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}},
		{"test", test, 10000, 1000, []uint8{9, 2, 1, 1, 6}},
	} {
		if c.ds.Len() != c.n || c.ds.Dim != 784 || c.ds.Classes != 10 || len(c.ds.X) != c.n*784 {
			t.Fatalf("%s: %d examples of dim %d, %d classes", c.name, c.ds.Len(), c.ds.Dim, c.ds.Classes)
		}
		hist := make([]int, 10)
		for _, y := range c.ds.Y {
			hist[y]++
		}
		for k, h := range hist {
			if h != c.per {
				t.Errorf("%s: class %d has %d examples, want %d", c.name, k, h, c.per)
			}
		}
		if !slices.Equal(c.ds.Y[:len(c.first)], c.first) {
			t.Errorf("%s: first labels %v, want %v", c.name, c.ds.Y[:len(c.first)], c.first)
		}
		lo, hi := slices.Min(c.ds.X), slices.Max(c.ds.X)
		if lo != 0 || hi != 1 {
			t.Errorf("%s: pixels in [%v, %v], want [0, 1]", c.name, lo, hi)
		}
	}
}
