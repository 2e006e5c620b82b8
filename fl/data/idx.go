package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// IDX type code for unsigned bytes, the only one MNIST-style files use
// (LeCun et al., "THE MNIST DATABASE", file format section).
const idxUint8 = 0x08

// ReadIDX reads one IDX file, gzip-compressed or not (detected by the gzip
// magic 0x1f 0x8b). It returns the dimensions and the raw bytes (row-major,
// product of dims long). The file must hold unsigned bytes (type 0x08) and
// exactly as many bytes as its dimensions announce.
func ReadIDX(r io.Reader) (dims []int, data []byte, err error) {
	br := bufio.NewReader(r)
	if head, err := br.Peek(2); err == nil && head[0] == 0x1f && head[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("idx: gzip: %w", err)
		}
		defer gz.Close()
		br = bufio.NewReader(gz)
	}
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("idx: reading magic number: %w", err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, nil, fmt.Errorf("idx: bad magic %x: not an IDX file", magic)
	}
	if magic[2] != idxUint8 {
		return nil, nil, fmt.Errorf("idx: element type 0x%02x unsupported (want 0x08, unsigned byte)", magic[2])
	}
	nd := int(magic[3])
	if nd < 1 || nd > 4 {
		return nil, nil, fmt.Errorf("idx: %d dimensions unsupported (want 1..4)", nd)
	}
	dims = make([]int, nd)
	size := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(br, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("idx: reading dimension %d: %w", i, err)
		}
		if d == 0 || d > 1<<28 {
			return nil, nil, fmt.Errorf("idx: dimension %d is %d", i, d)
		}
		dims[i] = int(d)
		size *= int(d)
		if size > 1<<31 {
			return nil, nil, errors.New("idx: file announces more than 2 GiB of data")
		}
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(br, data); err != nil {
		return nil, nil, fmt.Errorf("idx: truncated: dimensions %v need %d bytes: %w", dims, size, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, nil, fmt.Errorf("idx: trailing data after %d bytes", size)
	}
	return dims, data, nil
}

func readIDXFile(path string) ([]int, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	dims, b, err := ReadIDX(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, b, nil
}

// LoadIDXPair loads an images file (N×rows×cols, or N×dim) and a labels
// file (N) into a Dataset with pixels scaled to [0, 1]. Counts must agree
// and every label must be < classes.
func LoadIDXPair(imagesPath, labelsPath string, classes int) (*Dataset, error) {
	idims, img, err := readIDXFile(imagesPath)
	if err != nil {
		return nil, err
	}
	ldims, lab, err := readIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	if len(idims) < 2 || len(ldims) != 1 {
		return nil, fmt.Errorf("data: %s has dims %v and %s dims %v; want images N×… and labels N", imagesPath, idims, labelsPath, ldims)
	}
	if idims[0] != ldims[0] {
		return nil, fmt.Errorf("data: %d images in %s but %d labels in %s", idims[0], imagesPath, ldims[0], labelsPath)
	}
	n := idims[0]
	dim := len(img) / n
	for i, l := range lab {
		if int(l) >= classes {
			return nil, fmt.Errorf("data: %s: label %d of example %d is not below %d classes", labelsPath, l, i, classes)
		}
	}
	ds := &Dataset{X: make([]float32, len(img)), Y: lab, Dim: dim, Classes: classes}
	for i, p := range img {
		ds.X[i] = float32(p) / 255
	}
	return ds, nil
}

// DefaultFashionMNISTDir is where Debian's package dataset-fashion-mnist
// installs the Fashion-MNIST files (Xiao, Rasul, Vollgraf 2017).
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// LoadFashionMNIST loads the 60,000 training and 10,000 test examples
// (28×28 = 784 features, 10 classes) from the four gzip'd IDX files in dir.
// A missing file yields an error naming it, the Debian package and the
// --data-dir flag.
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	files := []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, nil, fmt.Errorf("Fashion-MNIST not found: %s is missing; install it with `apt-get install dataset-fashion-mnist` (puts it in %s) or point --data-dir at a folder holding %v",
				filepath.Join(dir, f), DefaultFashionMNISTDir, files)
		}
	}
	if train, err = LoadIDXPair(filepath.Join(dir, files[0]), filepath.Join(dir, files[1]), 10); err != nil {
		return nil, nil, err
	}
	if test, err = LoadIDXPair(filepath.Join(dir, files[2]), filepath.Join(dir, files[3]), 10); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}
