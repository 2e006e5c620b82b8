package simd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/dpfl/dpfl/dp"
	"github.com/dpfl/dpfl/simd"
)

// The aggregation target of the SIMD layer: a cohort of 1,000 updates of
// the MLP's 199,210 floats clipped and summed (DP-FedAvg, McMahan et al.
// 2018, Algorithm 1), then Gaussian noise on the sum. The updates cycle
// through 128 distinct buffers (≈102 MB, more than the last-level cache),
// so every update streams from DRAM as it would from a real cohort.
// MB/s counts each update's bytes once; BenchmarkCohortStreamRead reads
// the same buffers once each (Dot(x, x): one load stream) and is the
// measured memory bandwidth the clip+accumulate figure is compared to.

const (
	cohortDim     = 199210
	cohortUpdates = 1000
	cohortBuffers = 128
)

var cohortBufs [][]float32

func cohort() [][]float32 {
	if cohortBufs == nil {
		rng := rand.New(rand.NewPCG(7, 7))
		for range cohortBuffers {
			u := make([]float32, cohortDim)
			for i := range u {
				u[i] = float32(rng.NormFloat64() * 0.01) // norm ≈ 4.5: clipped at 1
			}
			cohortBufs = append(cohortBufs, u)
		}
	}
	return cohortBufs
}

var sink float32

func BenchmarkCohortClipAccumulateNoise(b *testing.B) {
	bufs := cohort()
	sum := make([]float32, cohortDim)
	noise := rand.New(rand.NewChaCha8([32]byte{1}))
	b.SetBytes(cohortUpdates * cohortDim * 4)
	for b.Loop() {
		clear(sum)
		for i := range cohortUpdates {
			simd.ClipAdd(sum, bufs[i%cohortBuffers], 1)
		}
		dp.AddGaussianNoise(sum, 1, noise)
	}
}

// BenchmarkCohortClipAccumulate is the same without the noise (which is
// per-coordinate scalar Gaussian sampling, ≈1–2 ms per release).
func BenchmarkCohortClipAccumulate(b *testing.B) {
	bufs := cohort()
	sum := make([]float32, cohortDim)
	b.SetBytes(cohortUpdates * cohortDim * 4)
	for b.Loop() {
		clear(sum)
		for i := range cohortUpdates {
			simd.ClipAdd(sum, bufs[i%cohortBuffers], 1)
		}
	}
}

// BenchmarkCohortClipThenAdd is the unfused sequence (AllFinite is left
// out of all three): ClipToNorm in place, then Add.
func BenchmarkCohortClipThenAdd(b *testing.B) {
	bufs := cohort()
	sum := make([]float32, cohortDim)
	tmp := make([]float32, cohortDim)
	b.SetBytes(cohortUpdates * cohortDim * 4)
	for b.Loop() {
		clear(sum)
		for i := range cohortUpdates {
			copy(tmp, bufs[i%cohortBuffers]) // keep the inputs unclipped
			simd.ClipToNorm(tmp, 1)
			simd.Add(sum, tmp)
		}
	}
}

func BenchmarkCohortStreamRead(b *testing.B) {
	bufs := cohort()
	b.SetBytes(cohortUpdates * cohortDim * 4)
	for b.Loop() {
		for i := range cohortUpdates {
			u := bufs[i%cohortBuffers]
			sink += simd.Dot(u, u)
		}
	}
}

// BenchmarkMaskAddUint32 is SecAgg mask arithmetic in cache: 8,192 words
// (32 KiB per operand); MB/s counts both reads and the write.
func BenchmarkMaskAddUint32(b *testing.B) {
	const n = 8192
	dst, x := make([]uint32, n), make([]uint32, n)
	for i := range x {
		x[i] = uint32(i) * 2654435761
	}
	b.SetBytes(3 * 4 * n)
	for b.Loop() {
		simd.AddUint32(dst, x)
	}
}

func BenchmarkMaskSubUint32(b *testing.B) {
	const n = 8192
	dst, x := make([]uint32, n), make([]uint32, n)
	b.SetBytes(3 * 4 * n)
	for b.Loop() {
		simd.SubUint32(dst, x)
	}
}
