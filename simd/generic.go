package simd

// Portable loops. Callers have already checked that all slices have the
// same length; re-slicing to len(dst) here lets the compiler prove the
// unrolled accesses in range and drop bounds checks.

func axpyGeneric(dst []float32, alpha float32, x []float32) {
	x = x[:len(dst)]
	for len(dst) >= 8 && len(x) >= 8 {
		dst[0] += alpha * x[0]
		dst[1] += alpha * x[1]
		dst[2] += alpha * x[2]
		dst[3] += alpha * x[3]
		dst[4] += alpha * x[4]
		dst[5] += alpha * x[5]
		dst[6] += alpha * x[6]
		dst[7] += alpha * x[7]
		dst, x = dst[8:], x[8:]
	}
	for i, v := range x {
		dst[i] += alpha * v
	}
}

// dotGeneric sums pairs of products into four accumulators (eight
// accumulators would need more than the 15 usable XMM registers and spill
// one into the dependency chain: measured 1.5× slower). Each accumulator
// takes ⌊n/8⌋ pair sums plus at most two tail products, then the four are
// added pairwise; this is what the error bound documented on Dot counts.
func dotGeneric(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	for len(x) >= 8 && len(y) >= 8 {
		s0 += x[0]*y[0] + x[4]*y[4]
		s1 += x[1]*y[1] + x[5]*y[5]
		s2 += x[2]*y[2] + x[6]*y[6]
		s3 += x[3]*y[3] + x[7]*y[7]
		x, y = x[8:], y[8:]
	}
	if len(x) >= 4 && len(y) >= 4 {
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		x, y = x[4:], y[4:]
	}
	y = y[:len(x)]
	switch len(x) {
	case 3:
		s2 += x[2] * y[2]
		fallthrough
	case 2:
		s1 += x[1] * y[1]
		fallthrough
	case 1:
		s0 += x[0] * y[0]
	}
	return (s0 + s1) + (s2 + s3)
}

// sumSquaresGeneric returns Σ x_i² in float64. Each square of a float32
// widened to float64 is exact (24+24 significand bits ≤ 53), so the only
// rounding is in the float64 additions.
func sumSquaresGeneric(x []float32) float64 {
	var s0, s1, s2, s3 float64
	for len(x) >= 8 {
		a0, a1, a2, a3 := float64(x[0]), float64(x[1]), float64(x[2]), float64(x[3])
		a4, a5, a6, a7 := float64(x[4]), float64(x[5]), float64(x[6]), float64(x[7])
		s0 += a0*a0 + a4*a4
		s1 += a1*a1 + a5*a5
		s2 += a2*a2 + a6*a6
		s3 += a3*a3 + a7*a7
		x = x[8:]
	}
	for _, v := range x {
		a := float64(v)
		s0 += a * a
	}
	return (s0 + s1) + (s2 + s3)
}

func scaleGeneric(dst []float32, alpha float32) {
	for len(dst) >= 8 {
		dst[0] *= alpha
		dst[1] *= alpha
		dst[2] *= alpha
		dst[3] *= alpha
		dst[4] *= alpha
		dst[5] *= alpha
		dst[6] *= alpha
		dst[7] *= alpha
		dst = dst[8:]
	}
	for i := range dst {
		dst[i] *= alpha
	}
}

func addGeneric(dst, x []float32) {
	x = x[:len(dst)]
	for len(dst) >= 8 && len(x) >= 8 {
		dst[0] += x[0]
		dst[1] += x[1]
		dst[2] += x[2]
		dst[3] += x[3]
		dst[4] += x[4]
		dst[5] += x[5]
		dst[6] += x[6]
		dst[7] += x[7]
		dst, x = dst[8:], x[8:]
	}
	for i, v := range x {
		dst[i] += v
	}
}

func subGeneric(dst, x, y []float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for len(dst) >= 8 && len(x) >= 8 && len(y) >= 8 {
		dst[0] = x[0] - y[0]
		dst[1] = x[1] - y[1]
		dst[2] = x[2] - y[2]
		dst[3] = x[3] - y[3]
		dst[4] = x[4] - y[4]
		dst[5] = x[5] - y[5]
		dst[6] = x[6] - y[6]
		dst[7] = x[7] - y[7]
		dst, x, y = dst[8:], x[8:], y[8:]
	}
	y = y[:len(x)]
	for i, v := range x {
		dst[i] = v - y[i]
	}
}

// allFiniteGeneric relies on v*0 being ±0 for finite v and NaN for NaN and
// ±Inf: the accumulators stay zero exactly when every element is finite.
// Branch-free, so the loop never mispredicts on the common all-finite path.
func allFiniteGeneric(x []float32) bool {
	var s0, s1, s2, s3 float32
	for len(x) >= 8 {
		s0 += x[0]*0 + x[4]*0
		s1 += x[1]*0 + x[5]*0
		s2 += x[2]*0 + x[6]*0
		s3 += x[3]*0 + x[7]*0
		x = x[8:]
	}
	for _, v := range x {
		s0 += v * 0
	}
	return (s0+s1)+(s2+s3) == 0
}

func reluGeneric(v []float32) {
	for i, x := range v {
		if x < 0 {
			v[i] = 0
		}
	}
}

func reluMaskGeneric(d, a []float32) {
	a = a[:len(d)]
	for i, x := range a {
		if !(x > 0) {
			d[i] = 0
		}
	}
}

func addUint32Generic(dst, x []uint32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] += v
	}
}

func subUint32Generic(dst, x []uint32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] -= v
	}
}
