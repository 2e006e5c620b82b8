package export

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// safetensors (https://github.com/huggingface/safetensors, "Format"):
//
//	8 bytes   N, the header's length, unsigned 64-bit little-endian
//	N bytes   the header: a JSON object {name: {"dtype", "shape",
//	          "data_offsets": [begin, end]}, …, "__metadata__": {string:
//	          string}}, starting with '{' and possibly padded with spaces
//	rest      the byte buffer: each tensor's values, row-major and
//	          little-endian, at [begin, end) of it, with no holes
//
// The reference implementation pads the header so that the buffer starts
// at a multiple of 8 bytes; Safetensors does too.

// safetensorsMaxHeader is the reference implementation's bound on N.
const safetensorsMaxHeader = 100 << 20

// stEntry is one tensor's header entry.
type stEntry struct {
	Dtype       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// Safetensors returns a's parameters params (fl/model's flat vector) as
// a safetensors file: a.Tensors(params), dtype "F32", named and shaped
// as the package doc's table says (the ONNX initializers' names and
// layout, which PyTorch modules of the same names load with
// load_state_dict), stored one after the other in that order, with meta
// (Certificate.Metadata) as the header's "__metadata__". It refuses an
// unknown architecture and a wrong number of parameters.
func Safetensors(a Arch, params []float32, meta map[string]string) ([]byte, error) {
	ts, err := a.Tensors(params)
	if err != nil {
		return nil, err
	}
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var size int64
	for _, t := range ts {
		n := int64(4 * len(t.Data))
		header[t.Name] = stEntry{Dtype: "F32", Shape: t.Shape, DataOffsets: [2]int64{size, size + n}}
		size += n
	}
	var hb bytes.Buffer
	enc := json.NewEncoder(&hb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header); err != nil {
		return nil, err
	}
	h := bytes.TrimRight(hb.Bytes(), "\n")
	pad := (8 - (8+len(h))%8) % 8
	out := make([]byte, 0, 8+len(h)+pad+int(size))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(h)+pad))
	out = append(out, h...)
	out = append(out, bytes.Repeat([]byte{' '}, pad)...)
	for _, t := range ts {
		for _, v := range t.Data {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out, nil
}

// ReadSafetensors decodes a safetensors file of float32 ("F32") tensors:
// its tensors in the order of their offsets, and its "__metadata__"
// (nil if none). It checks what the format requires: the header's length
// and JSON, shapes that match the offsets, and a buffer the tensors cover
// exactly, without overlaps or holes.
func ReadSafetensors(data []byte) ([]Tensor, map[string]string, error) {
	if len(data) < 8 {
		return nil, nil, errors.New("safetensors: shorter than its 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(data)
	if n > safetensorsMaxHeader || n > uint64(len(data)-8) {
		return nil, nil, fmt.Errorf("safetensors: header length %d past the file's %d bytes (or the 100 MB bound)", n, len(data))
	}
	hb := data[8 : 8+n]
	if len(hb) == 0 || hb[0] != '{' {
		return nil, nil, errors.New("safetensors: the header does not start with '{'")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return nil, nil, fmt.Errorf("safetensors: header: %w", err)
	}
	buf := data[8+n:]
	var meta map[string]string
	var ts []Tensor
	var offs [][2]int64
	for name, v := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &meta); err != nil {
				return nil, nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e stEntry
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if e.Dtype != "F32" {
			return nil, nil, fmt.Errorf("safetensors: tensor %q has dtype %q; this reader takes F32 only", name, e.Dtype)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return nil, nil, fmt.Errorf("safetensors: tensor %q has shape %v", name, e.Shape)
			}
			count *= int64(d)
		}
		b, end := e.DataOffsets[0], e.DataOffsets[1]
		if b < 0 || end < b || end > int64(len(buf)) || end-b != 4*count {
			return nil, nil, fmt.Errorf("safetensors: tensor %q: offsets [%d, %d) do not hold shape %v of F32 in a buffer of %d bytes", name, b, end, e.Shape, len(buf))
		}
		vals := make([]float32, count)
		for i := range vals {
			vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[b+4*int64(i):]))
		}
		ts = append(ts, Tensor{Name: name, Shape: e.Shape, Data: vals})
		offs = append(offs, e.DataOffsets)
	}
	idx := make([]int, len(ts))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return offs[idx[i]][0] < offs[idx[j]][0] })
	sorted := make([]Tensor, len(ts))
	var at int64
	for k, i := range idx {
		if offs[i][0] != at {
			return nil, nil, fmt.Errorf("safetensors: tensor %q starts at %d, want %d: the buffer has a hole or an overlap", ts[i].Name, offs[i][0], at)
		}
		at = offs[i][1]
		sorted[k] = ts[i]
	}
	if at != int64(len(buf)) {
		return nil, nil, fmt.Errorf("safetensors: the tensors cover %d of the buffer's %d bytes", at, len(buf))
	}
	return sorted, meta, nil
}
