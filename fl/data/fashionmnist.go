package data

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultFashionMNISTDir is where Debian's package dataset-fashion-mnist
// installs the four Fashion-MNIST files.
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// fashionMNISTFiles are the file names of Xiao, Rasul, Vollgraf 2017
// ("Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning
// Algorithms"), identical to MNIST's: train images, train labels, test
// images, test labels.
var fashionMNISTFiles = [4]string{
	"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
	"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
}

// LoadFashionMNIST loads Fashion-MNIST (Xiao, Rasul, Vollgraf 2017) from
// the gzip'd IDX files train-images-idx3-ubyte.gz,
// train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz in dir: train has 60,000 examples, test 10,000,
// each 28×28 = 784 pixels in [0, 1] with one of 10 classes.
//
// A missing dir or file gives an error (wrapping fs.ErrNotExist) that names
// the missing path, the Debian package to install (apt-get install
// dataset-fashion-mnist) and the --data-dir flag that overrides the
// location. Malformed files give LoadIDXPair's errors; images that are not
// 784 pixels are an error.
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	for _, p := range append([]string{dir}, fashionMNISTFiles[:]...) {
		if p != dir {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, nil, fmt.Errorf("data: Fashion-MNIST: %w; install it with `apt-get install dataset-fashion-mnist` (files go to %s) or pass --data-dir pointing at a directory holding %v",
				err, DefaultFashionMNISTDir, fashionMNISTFiles)
		}
	}
	path := func(i int) string { return filepath.Join(dir, fashionMNISTFiles[i]) }
	if train, err = LoadIDXPair(path(0), path(1), 10); err != nil {
		return nil, nil, err
	}
	if test, err = LoadIDXPair(path(2), path(3), 10); err != nil {
		return nil, nil, err
	}
	for _, d := range [2]struct {
		ds   *Dataset
		file string
	}{{train, path(0)}, {test, path(2)}} {
		if d.ds.Dim != 28*28 {
			return nil, nil, fmt.Errorf("data: %s: images have %d pixels, Fashion-MNIST has 28×28 = 784", d.file, d.ds.Dim)
		}
	}
	return train, test, nil
}
