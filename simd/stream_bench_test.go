package simd

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// streamSizes are vector lengths whose two-vector working sets (8n bytes)
// sit in different levels of the memory hierarchy of a Zen 5 core (1 MiB
// L2, 32 MiB L3 per CCD shared with other tenants, of which ≈16–24 MiB
// was effective in a read sweep): 101,770 floats (the 784-128-10 MLP's
// parameter count; 814 KB, L2), 1 Mi (8 MiB, L3), 4 Mi (32 MiB, at and
// beyond the L3's reach) and 16 Mi (128 MiB, memory).
var streamSizes = []int{101770, 1 << 20, 1 << 22, 1 << 24}

// BenchmarkStream compares the level-1 kernels and ClipAdd with a
// reference read of the same working set, per size. Each iteration runs
// the read and then the kernel and times both, so that the other work on
// a shared machine slows them alike; the metrics are medians over the
// iterations: GB/s of the kernel, read-GB/s of the read and %read, the
// kernel's GB/s over the read's in the same iteration. Bytes count what
// each kernel reads and writes (the bytes it moves through the level of
// the memory hierarchy its working set lives in; a write counts once, as
// in STREAM):
//
//	read     x and y read once, interleaved: 8n (streamRead; 512- and
//	         256-bit loads in the SIMD build, a Go loop in the plain one)
//	ClipAdd  delta read twice (the norm, then the scaled add), sum read
//	         and written: 16n (every call clips, c = 1)
//	Axpy, Add  two reads and a write: 12n
//	Dot      8n;  Norm2 4n;  Scale 8n
//
// The kernels are those Path reports (DPFL_SIMD selects); the read is
// named in the benchmark: read512 on the avx512 path, read256 (and read512
// where the CPU has AVX-512) on the avx2 path (streamReadWidths).
// docs/performance.md, "VZEROUPPER and ClipAdd", gives the figures.
func BenchmarkStream(b *testing.B) {
	for _, n := range streamSizes {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(i%17) - 8
			y[i] = float32(i%13) - 6
		}
		alpha := [2]float32{1.0001, 1 / 1.0001}
		i := 0
		for _, w := range streamReadWidths() {
			for _, k := range []struct {
				name  string
				bytes int
				f     func()
			}{
				{"ClipAdd", 16 * n, func() { sinkF64 = ClipAdd(y, x, 1) }},
				{"Axpy", 12 * n, func() { Axpy(y, 1e-9, x) }},
				{"Add", 12 * n, func() { Add(y, x) }},
				{"Dot", 8 * n, func() { sinkF32 = Dot(x, y) }},
				{"Norm2", 4 * n, func() { sinkF64 = Norm2(x) }},
				{"Scale", 8 * n, func() { Scale(x, alpha[i&1]); i++ }},
			} {
				b.Run(fmt.Sprintf("n=%d/%s/%s", n, k.name, w), func(b *testing.B) {
					read := func() { sinkF32 = streamRead(w, x, y) }
					pairedBandwidth(b, read, 8*n, k.f, k.bytes)
				})
			}
		}
	}
}

// pairedBandwidth times read and then f in every iteration and reports
// the medians over the iterations of f's bandwidth (GB/s), the read's
// (read-GB/s) and their ratio in the same iteration (%read).
func pairedBandwidth(b *testing.B, read func(), readBytes int, f func(), bytes int) {
	read()
	f() // warm the caches
	var ratio, gbs, rgbs []float64
	for b.Loop() {
		t0 := time.Now()
		read()
		t1 := time.Now()
		f()
		t2 := time.Now()
		r := float64(readBytes) / float64(t1.Sub(t0).Nanoseconds())
		k := float64(bytes) / float64(t2.Sub(t1).Nanoseconds())
		ratio, gbs, rgbs = append(ratio, 100*k/r), append(gbs, k), append(rgbs, r)
	}
	b.ReportMetric(median(gbs), "GB/s")
	b.ReportMetric(median(rgbs), "read-GB/s")
	b.ReportMetric(median(ratio), "%read")
}

// median returns the median of v (v is reordered).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// streamReadGo is the portable reference read: eight accumulators.
func streamReadGo(x []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(x) >= 8 {
		s0 += x[0]
		s1 += x[1]
		s2 += x[2]
		s3 += x[3]
		s4 += x[4]
		s5 += x[5]
		s6 += x[6]
		s7 += x[7]
		x = x[8:]
	}
	for _, v := range x {
		s0 += v
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// BenchmarkStreamCohort is BenchmarkCohortClipAccumulate (cohort_bench_test.go)
// with the paired timing of BenchmarkStream: 199,210-float updates cycling
// through 128 buffers (≈102 MB, beyond the last-level cache), each clipped
// (c = 1) and added into one sum by ClipAdd; before each update, the read
// streams a buffer 64 updates away (as cold as the update) through
// streamRead, in two halves. Bytes count the update once, the bytes ClipAdd
// moves from memory: its second pass reads the update again from the
// caches, and the sum (0.8 MB) stays in the L3.
func BenchmarkStreamCohort(b *testing.B) {
	const dim, buffers = 199210, 128
	bufs := make([][]float32, buffers)
	for i := range bufs {
		bufs[i] = make([]float32, dim)
		for j := range bufs[i] {
			bufs[i][j] = float32((i+j)%23-11) * 0.01 // norm ≈ 2: clipped at 1
		}
	}
	sum := make([]float32, dim)
	for _, w := range streamReadWidths() {
		b.Run(w, func(b *testing.B) {
			i := 0
			read := func() {
				u := bufs[(i+buffers/2)%buffers]
				sinkF32 = streamRead(w, u[:dim/2], u[dim/2:])
			}
			clipAdd := func() {
				sinkF64 = ClipAdd(sum, bufs[i%buffers], 1)
				i++
			}
			pairedBandwidth(b, read, 4*dim, clipAdd, 4*dim)
		})
	}
}
