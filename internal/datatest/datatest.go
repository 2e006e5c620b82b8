// Package datatest gives tests the datasets they need, or fails them
// loudly: a test that needs Fashion-MNIST must not pass by skipping on a
// machine without it (CI installs Debian's dataset-fashion-mnist).
package datatest

import (
	"os"
	"path/filepath"
	"testing"
)

// FashionMNISTDir is where Debian's dataset-fashion-mnist installs the
// IDX files (the same path as fl/data.DefaultFashionMNISTDir, repeated
// here so that tests of packages below fl/data can use it).
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNIST returns the Fashion-MNIST directory, or fails tb with the
// command that installs it. It never skips.
func FashionMNIST(tb testing.TB) string {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(FashionMNISTDir, "train-images-idx3-ubyte.gz")); err != nil {
		tb.Fatalf("this test needs Fashion-MNIST at %s: apt-get install dataset-fashion-mnist (%v)", FashionMNISTDir, err)
	}
	return FashionMNISTDir
}
