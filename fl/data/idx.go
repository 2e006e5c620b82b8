package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// IDX format (LeCun, Cortes, Burges, "THE MNIST DATABASE of handwritten
// digits", section "FILE FORMATS FOR THE MNIST DATABASE"): a 4-byte magic
// number 0x00 0x00 <type> <number of dimensions>, then one big-endian
// uint32 per dimension, then the elements, row-major. MNIST and
// Fashion-MNIST use type 0x08 (unsigned byte): labels are 0x00000801
// (1 dimension), images 0x00000803 (N×rows×cols).
const (
	idxTypeUint8 = 0x08
	idxMaxDims   = 4       // enough for N×rows×cols×channels
	idxMaxBytes  = 1 << 30 // refuse to read more than 1 GiB of elements
	idxFirstRead = 1 << 26 // trust a header for at most 64 MiB up front (Fashion-MNIST: 45 MiB)
	// idxMaxGzipRatio is deflate's largest expansion: a 258-byte match
	// coded in 2 bits, 1032 bytes per input byte.
	idxMaxGzipRatio = 1032
)

// idxTypeNames names the IDX element types other than unsigned byte, for
// errors.
var idxTypeNames = map[byte]string{0x09: "signed byte", 0x0B: "int16", 0x0C: "int32", 0x0D: "float32", 0x0E: "float64"}

// ReadIDX reads one IDX file of unsigned bytes from r, gzip-compressed or
// not (detected by the gzip magic 0x1f 0x8b). It returns the dimensions
// (1 to 4 of them) and the elements, row-major, product(dims) bytes long.
//
// Errors, each prefixed "idx:": a magic number not starting with two zero
// bytes, an element type other than 0x08 (the "wrong type code"), 0 or more
// than 4 dimensions, a dimension or their product over 1 GiB of elements,
// a file shorter than its header announces ("truncated"), bytes after the
// last element ("trailing data"), and gzip errors (corrupt stream,
// checksum mismatch).
//
// A header cannot make ReadIDX allocate much more than the file holds:
// where r tells its size (a Size method, as *bytes.Reader has, or a Stat
// of a regular file, as *os.File has), an uncompressed file announcing
// more elements than it has bytes is refused before any allocation, and
// the first allocation for a compressed one is at most deflate's largest
// expansion (1032:1) of its size; beyond that, and where the size is
// unknown, memory grows only as elements arrive, from at most 64 MiB.
func ReadIDX(r io.Reader) (dims []int, data []byte, err error) {
	return readIDX(r, readerSize(r))
}

// readerSize is the size of what r reads, if it can tell, else -1.
func readerSize(r io.Reader) int64 {
	switch r := r.(type) {
	case interface{ Size() int64 }:
		return r.Size()
	case interface{ Stat() (fs.FileInfo, error) }:
		if fi, err := r.Stat(); err == nil && fi.Mode().IsRegular() {
			return fi.Size()
		}
	}
	return -1
}

// readIDX is ReadIDX of a stream of at most size bytes (-1: unknown).
func readIDX(r io.Reader, size int64) (dims []int, data []byte, err error) {
	br := bufio.NewReader(r)
	compressed := false
	if head, err := br.Peek(2); err == nil && head[0] == 0x1f && head[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("idx: gzip: %w", err)
		}
		defer gz.Close()
		br = bufio.NewReader(gz)
		compressed = true
	}
	var magic [4]byte
	if n, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, nil, fmt.Errorf("idx: truncated: %d of the 4 magic-number bytes: %w", n, err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, nil, fmt.Errorf("idx: bad magic number 0x%x: not an IDX file (want 0x000008NN)", magic)
	}
	if magic[2] != idxTypeUint8 {
		name := idxTypeNames[magic[2]]
		if name == "" {
			name = "unknown"
		}
		return nil, nil, fmt.Errorf("idx: wrong type code 0x%02x (%s) in magic number 0x%x: want 0x08, unsigned byte", magic[2], name, magic)
	}
	nd := int(magic[3])
	if nd < 1 || nd > idxMaxDims {
		return nil, nil, fmt.Errorf("idx: %d dimensions in magic number 0x%x: want 1 to %d", nd, magic, idxMaxDims)
	}
	var hdr [4 * idxMaxDims]byte
	if n, err := io.ReadFull(br, hdr[:4*nd]); err != nil {
		return nil, nil, fmt.Errorf("idx: truncated: %d of the %d dimension bytes: %w", n, 4*nd, err)
	}
	dims = make([]int, nd)
	var n uint64 = 1 // uint64: ≤ 2^30 · 2^32 cannot overflow, even where int has 32 bits
	for i := range dims {
		d := uint64(binary.BigEndian.Uint32(hdr[4*i:]))
		dims[i] = int(min(d, idxMaxBytes+1)) // fits an int of 32 bits too
		// Each dimension on its own too: after a 0, the product stays 0.
		if n *= d; d > idxMaxBytes || n > idxMaxBytes {
			return nil, nil, fmt.Errorf("idx: dimensions %v exceed %d bytes", dims[:i+1], idxMaxBytes)
		}
	}
	want := int(n)
	first := min(want, idxFirstRead)
	switch {
	case size < 0: // unknown: memory grows as elements arrive
	case !compressed:
		if left := size - int64(4+4*nd); int64(want) > left {
			return nil, nil, fmt.Errorf("idx: truncated: dimensions %v announce %d bytes of data, the file holds at most %d", dims, want, max(left, 0))
		}
	case size < int64(first)/idxMaxGzipRatio: // no overflow in the product
		first = int(size * idxMaxGzipRatio)
	}
	data = make([]byte, 0, first)
	for len(data) < want {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(want-len(data), max(len(data), 512)))
		}
		n, err := io.ReadFull(br, data[len(data):min(cap(data), want)])
		data = data[:len(data)+n]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, nil, fmt.Errorf("idx: truncated: dimensions %v announce %d bytes of data, found %d", dims, want, len(data))
			}
			return nil, nil, fmt.Errorf("idx: reading data: %w", err)
		}
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return nil, nil, fmt.Errorf("idx: trailing data after the %d bytes announced by dimensions %v", want, dims)
	case err != io.EOF: // e.g. gzip checksum, only checked at end of stream
		return nil, nil, fmt.Errorf("idx: after data: %w", err)
	}
	return dims, data, nil
}

// pixelScale[b] = b/255 in float32, a table because a division per pixel
// dominates loading Fashion-MNIST's 55 million pixels.
var pixelScale = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i) / 255
	}
	return t
}()

// readIDXFile is ReadIDX on a file, with the path in errors.
func readIDXFile(path string) ([]int, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	dims, b, err := ReadIDX(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return dims, b, nil
}

// LoadIDXPair loads an IDX images file (N×rows×cols, or any N×… of 2 to 4
// dimensions) and an IDX labels file (N) into a Dataset of N examples with
// Dim = product of the non-leading image dimensions and pixel bytes scaled
// by 1/255 into [0, 1]. Either file may be gzip-compressed.
//
// Errors: classes outside [1, 256], an unreadable or malformed file (see
// ReadIDX), wrong dimensionality, no examples or zero dim, image and label
// counts that disagree, and a label ≥ classes. Every error names the file.
func LoadIDXPair(imagesPath, labelsPath string, classes int) (*Dataset, error) {
	if classes < 1 || classes > 256 {
		return nil, fmt.Errorf("data: classes must be in [1, 256], got %d", classes)
	}
	idims, img, err := readIDXFile(imagesPath)
	if err != nil {
		return nil, err
	}
	ldims, lab, err := readIDXFile(labelsPath)
	if err != nil {
		return nil, err
	}
	return idxDataset(imagesPath, idims, img, labelsPath, ldims, lab, classes)
}

// idxDataset is LoadIDXPair's Dataset from the files' dimensions and
// elements, as ReadIDX returns them.
func idxDataset(imagesPath string, idims []int, img []byte, labelsPath string, ldims []int, lab []byte, classes int) (*Dataset, error) {
	if len(idims) < 2 {
		return nil, fmt.Errorf("data: %s: images need dimensions N×…, got %v", imagesPath, idims)
	}
	if len(ldims) != 1 {
		return nil, fmt.Errorf("data: %s: labels need one dimension N, got %v", labelsPath, ldims)
	}
	n := idims[0]
	if n != ldims[0] {
		return nil, fmt.Errorf("data: %d images in %s but %d labels in %s", n, imagesPath, ldims[0], labelsPath)
	}
	if n == 0 || len(img) == 0 {
		return nil, fmt.Errorf("data: %s: no examples or zero-size images (dimensions %v)", imagesPath, idims)
	}
	if err := checkLabels(lab, classes); err != nil {
		return nil, fmt.Errorf("data: %s: %w", labelsPath, err)
	}
	ds := &Dataset{X: make([]float32, len(img)), Y: lab, Dim: len(img) / n, Classes: classes}
	x := ds.X[:len(img)]
	for i, p := range img {
		x[i] = pixelScale[p]
	}
	return ds, nil
}
