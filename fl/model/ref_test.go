package model

import "math"

// refNet is an independent float64 re-implementation of the documented
// flat layout (package doc): for each layer, W (out×in row-major) then b,
// ReLU after every layer but the last, mean softmax cross-entropy.
type refNet struct{ sizes []int }

func refSizes(name string, in, classes int) []int {
	if name == "logreg" {
		return []int{in, classes}
	}
	return []int{in, 200, 200, classes}
}

// logits returns the float64 logits of one example.
func (r refNet) logits(p []float64, x []float64) []float64 {
	off := 0
	a := x
	for l := 0; l+1 < len(r.sizes); l++ {
		in, out := r.sizes[l], r.sizes[l+1]
		w, b := p[off:off+out*in], p[off+out*in:off+out*in+out]
		off += out*in + out
		z := make([]float64, out)
		for o := range out {
			s := b[o]
			for i := range in {
				s += w[o*in+i] * a[i]
			}
			if l+2 < len(r.sizes) && s < 0 {
				s = 0
			}
			z[o] = s
		}
		a = z
	}
	return a
}

// loss returns the per-example cross-entropies and whether each example's
// argmax is its label, together with the top-2 logit margin.
func (r refNet) loss(p []float64, x []float32, labels []uint8) (losses []float64, right []bool, margin []float64) {
	D := r.sizes[0]
	for k, y := range labels {
		xk := make([]float64, D)
		for i := range xk {
			xk[i] = float64(x[k*D+i])
		}
		z := r.logits(p, xk)
		// Naive log Σ exp, safe here because test logits are moderate.
		var s float64
		for _, v := range z {
			s += math.Exp(v)
		}
		losses = append(losses, math.Log(s)-z[y])
		best, second := math.Inf(-1), math.Inf(-1)
		arg := -1
		for j, v := range z {
			if v > best {
				best, second, arg = v, best, j
			} else if v > second {
				second = v
			}
		}
		right = append(right, arg == int(y))
		margin = append(margin, best-second)
	}
	return
}

func (r refNet) meanLoss(p []float64, x []float32, labels []uint8) float64 {
	l, _, _ := r.loss(p, x, labels)
	var s float64
	for _, v := range l {
		s += v
	}
	return s / float64(len(l))
}

func widen(p []float32) []float64 {
	q := make([]float64, len(p))
	for i, v := range p {
		q[i] = float64(v)
	}
	return q
}
