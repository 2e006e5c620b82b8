package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// idxBytes builds an IDX file by hand: magic 0x00 0x00 typ len(dims), then
// big-endian uint32 dims, then payload.
func idxBytes(typ byte, dims []uint32, payload []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, payload...)
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func TestReadIDXRoundTrip(t *testing.T) {
	labels := []byte{7, 0, 9}
	img := make([]byte, 3*2*4)
	for i := range img {
		img[i] = byte(10 * i)
	}
	// Hand-written header of a 0x00000803 file: 3 images of 2×4.
	imgFile := append([]byte{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4}, img...)
	if !bytes.Equal(imgFile, idxBytes(8, []uint32{3, 2, 4}, img)) {
		t.Fatal("test helper idxBytes disagrees with the hand-written header")
	}
	cases := []struct {
		name string
		file []byte
		dims []int
		data []byte
	}{
		{"labels raw", idxBytes(8, []uint32{3}, labels), []int{3}, labels},
		{"labels gzip", gzipped(idxBytes(8, []uint32{3}, labels)), []int{3}, labels},
		{"images raw", imgFile, []int{3, 2, 4}, img},
		{"images gzip", gzipped(imgFile), []int{3, 2, 4}, img},
		{"empty", idxBytes(8, []uint32{0}, nil), []int{0}, nil},
	}
	for _, c := range cases {
		dims, data, err := ReadIDX(bytes.NewReader(c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(dims, c.dims) || !bytes.Equal(data, c.data) {
			t.Fatalf("%s: got dims %v data %v, want %v %v", c.name, dims, data, c.dims, c.data)
		}
	}
}

// A payload above the first-read size exercises the growing read.
func TestReadIDXLarge(t *testing.T) {
	n := idxFirstRead + 12345
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	dims, data, err := ReadIDX(bytes.NewReader(idxBytes(8, []uint32{uint32(n)}, payload)))
	if err != nil || dims[0] != n || !bytes.Equal(data, payload) {
		t.Fatalf("dims %v, %d bytes, err %v", dims, len(data), err)
	}
}

func TestReadIDXErrors(t *testing.T) {
	raw := idxBytes(8, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	corrupt := gzipped(raw)
	corrupt[len(corrupt)-6] ^= 0xff // CRC-32 in the gzip trailer
	cases := []struct {
		name, want string
		file       []byte
	}{
		{"empty", "truncated", nil},
		{"short magic", "truncated", []byte{0, 0, 8}},
		{"bad magic", "magic", append([]byte{0x12, 0x34}, raw[2:]...)},
		{"float type", "type code 0x0d", idxBytes(0x0D, []uint32{2, 3}, make([]byte, 24))},
		{"int32 type", "type code 0x0c", idxBytes(0x0C, []uint32{2}, make([]byte, 8))},
		{"zero dims", "dimensions", idxBytes(8, nil, nil)},
		{"five dims", "dimensions", idxBytes(8, []uint32{1, 1, 1, 1, 1}, []byte{1})},
		{"short dims", "truncated", raw[:9]},
		{"short data", "truncated", raw[:len(raw)-1]},
		{"short data gzip", "truncated", gzipped(raw[:len(raw)-1])},
		{"truncated gzip stream", "truncated", gzipped(raw)[:20]},
		{"trailing", "trailing", append(slices.Clone(raw), 9)},
		{"huge", "exceed", idxBytes(8, []uint32{1 << 16, 1 << 16}, nil)},
		{"gzip checksum", "checksum", corrupt},
	}
	for _, c := range cases {
		_, _, err := ReadIDX(bytes.NewReader(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// writeIDX writes a gzip'd or raw IDX file into dir and returns its path.
func writeIDX(t *testing.T, dir, name string, dims []uint32, payload []byte) string {
	t.Helper()
	b := idxBytes(8, dims, payload)
	if strings.HasSuffix(name, ".gz") {
		b = gzipped(b)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadIDXPair(t *testing.T) {
	dir := t.TempDir()
	img := writeIDX(t, dir, "img.gz", []uint32{2, 2, 2}, []byte{0, 255, 51, 102, 1, 2, 3, 4})
	lab := writeIDX(t, dir, "lab", []uint32{2}, []byte{2, 0})
	ds, err := LoadIDXPair(img, lab, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 1, 0.2, 0.4, 1. / 255, 2. / 255, 3. / 255, 4. / 255}
	if ds.Len() != 2 || ds.Dim != 4 || ds.Classes != 3 || !slices.Equal(ds.Y, []uint8{2, 0}) {
		t.Fatalf("got %d examples of dim %d, %d classes, labels %v", ds.Len(), ds.Dim, ds.Classes, ds.Y)
	}
	for i, w := range want {
		if math.Abs(float64(ds.X[i]-w)) > 1e-7 {
			t.Fatalf("X[%d] = %v, want %v", i, ds.X[i], w)
		}
	}
	if err := ds.Validate(); err != nil {
		t.Fatal(err)
	}

	bad := []struct {
		name, want string
		img, lab   string
		classes    int
	}{
		{"count mismatch", "3 labels", img, writeIDX(t, dir, "lab3", []uint32{3}, []byte{1, 0, 1}), 3},
		{"label range", "not below 2 classes", img, lab, 2},
		{"labels as images", "N×", lab, lab, 3},
		{"images as labels", "one dimension", img, img, 3},
		{"no examples", "no examples", writeIDX(t, dir, "img0", []uint32{0, 2}, nil), writeIDX(t, dir, "lab0", []uint32{0}, nil), 3},
		{"missing file", "no such file", filepath.Join(dir, "nope"), lab, 3},
		{"classes", "classes", img, lab, 0},
	}
	for _, c := range bad {
		_, err := LoadIDXPair(c.img, c.lab, c.classes)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// A header announcing up to 1 GiB cannot make ReadIDX allocate it, or
// even its 64 MiB first read, for a file that holds a few bytes: raw or
// gzip'd, from memory or from a file.
func TestReadIDXHeaderCannotAllocate(t *testing.T) {
	huge := idxBytes(8, []uint32{1 << 15, 1 << 15}, []byte{1, 2, 3})
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		file []byte
	}{{"raw", huge}, {"gzip", gzipped(huge)}} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.file, 0o644); err != nil {
			t.Fatal(err)
		}
		read := map[string]func() error{
			"bytes.Reader": func() error { _, _, err := ReadIDX(bytes.NewReader(c.file)); return err },
			"file":         func() error { _, _, err := readIDXFile(p); return err },
		}
		for how, f := range read {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := f()
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Errorf("%s from a %s: error %v, want truncated", c.name, how, err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("%s from a %s: a %d-byte file announcing 1 GiB allocated %d bytes", c.name, how, len(c.file), got)
			}
		}
	}
	// A dimension over the limit is refused even where another is 0.
	if _, _, err := ReadIDX(bytes.NewReader(idxBytes(8, []uint32{0, 1 << 31}, nil))); err == nil || !strings.Contains(err.Error(), "exceed") {
		t.Errorf("dimensions 0×2^31: %v, want refused", err)
	}
}
