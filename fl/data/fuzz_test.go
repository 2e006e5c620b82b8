package data

import (
	"bytes"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets for the readers of files from outside the program: IDX
// (Fashion-MNIST, and a device's own data in dpfl-client) and LEAF JSON
// (whose directory a job's client names). Each must return an error, not
// panic, on any input, and must not allocate much more than the input
// warrants. `go test` runs the seeds and testdata/fuzz/<target>/ as
// regression tests; `go test -run '^$' -fuzz '^FuzzReadIDX$' ./fl/data/`
// searches for more.

// idxSeeds are IDX files, well-formed and not, for the IDX targets.
func idxSeeds() [][]byte {
	raw := idxBytes(8, []uint32{2, 3}, []byte{1, 2, 3, 4, 5, 6})
	return [][]byte{
		raw,
		gzipped(raw),
		idxBytes(8, []uint32{3}, []byte{7, 0, 9}),
		gzipped(idxBytes(8, []uint32{3}, []byte{7, 0, 9})),
		idxBytes(8, []uint32{2, 2, 2, 1}, make([]byte, 8)),
		idxBytes(8, []uint32{0}, nil),
		idxBytes(8, []uint32{0, 1 << 31}, nil),
		raw[:len(raw)-1],
		append(slices.Clone(raw), 9),
		idxBytes(8, []uint32{1 << 15, 1 << 15}, nil), // announces 1 GiB, holds none
		gzipped(idxBytes(8, []uint32{1 << 15, 1 << 15}, nil)),
		idxBytes(8, []uint32{1 << 16, 1 << 16}, nil),
		idxBytes(0x0D, []uint32{2}, make([]byte, 8)),
		{0, 0, 8},
		{0x1f, 0x8b},
		nil,
	}
}

// allocBound is the most ReadIDX may allocate for input: a fixed amount
// for its buffers and the gzip reader, and a few times the elements the
// input can hold (growing by doubling copies at most twice the final
// size).
func allocBound(input []byte) uint64 {
	n := uint64(len(input))
	if len(input) >= 2 && input[0] == 0x1f && input[1] == 0x8b {
		n *= idxMaxGzipRatio
	}
	return 1<<18 + 4*n
}

func FuzzReadIDX(f *testing.F) {
	for _, s := range idxSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		dims, data, err := ReadIDX(bytes.NewReader(b))
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, allocBound(b); got > bound {
			t.Errorf("a %d-byte input allocated %d bytes, more than %d", len(b), got, bound)
		}
		if err != nil {
			if dims != nil || data != nil || !strings.HasPrefix(err.Error(), "idx: ") {
				t.Errorf("error %v with dims %v, %d bytes", err, dims, len(data))
			}
			return
		}
		if len(dims) < 1 || len(dims) > idxMaxDims {
			t.Fatalf("%d dimensions", len(dims))
		}
		size := 1
		for _, d := range dims {
			size *= d
		}
		if size != len(data) || size > idxMaxBytes {
			t.Fatalf("dims %v but %d bytes", dims, len(data))
		}
	})
}

// FuzzIDXPair fuzzes the images and labels files of LoadIDXPair together.
func FuzzIDXPair(f *testing.F) {
	seeds := idxSeeds()
	img := idxBytes(8, []uint32{3, 2, 2}, []byte{0, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	lab := idxBytes(8, []uint32{3}, []byte{7, 0, 9})
	f.Add(img, lab)
	f.Add(gzipped(img), gzipped(lab))
	f.Add(img, idxBytes(8, []uint32{3}, []byte{7, 0, 10}))
	f.Add(idxBytes(8, []uint32{3, 0}, nil), lab)
	f.Add(lab, img)
	for _, s := range seeds {
		f.Add(s, lab)
		f.Add(img, s)
	}
	f.Fuzz(func(t *testing.T, img, lab []byte) {
		idims, ib, err := ReadIDX(bytes.NewReader(img))
		if err != nil {
			return
		}
		ldims, lb, err := ReadIDX(bytes.NewReader(lab))
		if err != nil {
			return
		}
		ds, err := idxDataset("images", idims, ib, "labels", ldims, lb, 10)
		if err != nil {
			if ds != nil || !strings.HasPrefix(err.Error(), "data: ") {
				t.Errorf("error %v with a dataset", err)
			}
			return
		}
		if err := ds.Validate(); err != nil {
			t.Fatalf("LoadIDXPair's dataset is invalid: %v", err)
		}
		if ds.Len() != idims[0] || len(ds.X) != len(ib) || ds.Dim*ds.Len() != len(ib) {
			t.Fatalf("dims %v and %v gave %d examples of %d features", idims, ldims, ds.Len(), ds.Dim)
		}
	})
}

// upperRun finds runs of capitals, which LEAF's errors may not copy from
// a file (they copy nothing from it).
var upperRun = regexp.MustCompile(`[A-Z]{4,}`)

func FuzzLEAFFile(f *testing.F) {
	for _, s := range []string{
		leafTrainA, leafTrainB, leafTest,
		`{"users": [], "num_samples": [], "user_data": {}}`,
		`{"users": ["SECRETUSER"], "num_samples": [1], "user_data": {"SECRETUSER": {"x": [[1, 2]], "y": [300]}}}`,
		`{"users": ["A", "A"], "num_samples": [0, 0], "user_data": {"A": {"x": [], "y": []}}}`,
		`{"users": ["A"], "num_samples": [1], "user_data": {"A": {"x": ["to be or"], "y": ["b"]}}}`,
		`{"users": ["A"], "num_samples": [1], "user_data": {"A": {"x": [[]], "y": [0]}}}`,
		`{"users": ["A"], "num_samples": [2], "user_data": {"A": {"x": [[1], [1, 2]], "y": [0, 1]}}}`,
		`{"users": ["A"], "num_samples": [1], "user_data": {"A": {"x": null, "y": null}}}`,
		`{"users": {"SECRETKEY": 1}}`,
		`{"users": ["A"], "num_samples": [1], "user_data": {"B": {"x": [[1]], "y": [1]}}}`,
		`{"users": ["A"], "num_samples": [1e400], "user_data": {}}`,
		secret,
		`[1, 2]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &leafReader{}
		s := &leafSplit{dir: "d", start: []int{0}, seen: map[string]string{}}
		if err := r.parse("d/f.json", b, s); err != nil {
			msg := err.Error()
			for _, w := range upperRun.FindAll(b, -1) {
				if w := string(w); w != "JSON" && w != "LEAF" && w != "FEMNIST" && strings.Contains(msg, w) {
					t.Fatalf("error %q quotes %q from the file", msg, w)
				}
			}
			if strings.Contains(msg, "json:") || strings.Contains(msg, "invalid character") || strings.Contains(msg, "%!") {
				t.Fatalf("error %q shows the JSON decoder's text or a formatting slip", msg)
			}
			return
		}
		if len(s.start) != len(s.users)+1 || s.start[len(s.users)] != len(s.y) || len(s.x) != r.dim*len(s.y) {
			t.Fatalf("%d users, starts %v, %d labels, %d features of dim %d", len(s.users), s.start, len(s.y), len(s.x), r.dim)
		}
		if !slices.IsSorted(s.start) {
			t.Fatalf("starts %v decrease", s.start)
		}
		seen := map[string]bool{}
		for _, u := range s.users {
			if seen[u] {
				t.Fatalf("user %q twice", u)
			}
			seen[u] = true
		}
		if len(s.y) > 0 && int(slices.Max(s.y)) != r.maxLabel {
			t.Fatalf("max label %d, recorded %d", slices.Max(s.y), r.maxLabel)
		}
	})
}
