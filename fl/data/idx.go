package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
// than 4 dimensions, more than 1 GiB of elements, a file shorter than its
// header announces ("truncated"), bytes after the last element ("trailing
// data"), and gzip errors (corrupt stream, checksum mismatch). A truncated
// file does not make ReadIDX allocate the size its header claims.
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
	size := 1
	for i := range dims {
		dims[i] = int(binary.BigEndian.Uint32(hdr[4*i:]))
		size *= dims[i] // ≤ 2^30 · 2^32: no overflow in 64-bit int
		if size > idxMaxBytes {
			return nil, nil, fmt.Errorf("idx: dimensions %v exceed %d bytes", dims[:i+1], idxMaxBytes)
		}
	}
	data = make([]byte, 0, min(size, idxFirstRead))
	for len(data) < size {
		if len(data) == cap(data) {
			data = slices.Grow(data, min(size-len(data), len(data)))
		}
		n, err := io.ReadFull(br, data[len(data):min(cap(data), size)])
		data = data[:len(data)+n]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, nil, fmt.Errorf("idx: truncated: dimensions %v announce %d bytes of data, found %d", dims, size, len(data))
			}
			return nil, nil, fmt.Errorf("idx: reading data: %w", err)
		}
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return nil, nil, fmt.Errorf("idx: trailing data after the %d bytes announced by dimensions %v", size, dims)
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
