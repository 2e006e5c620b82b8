package model

import "math"

// softmaxCrossEntropy treats logits as n×C rows z and returns the summed
// cross-entropy Σ_k (logsumexp(z_k) − z_k[y_k]) in nats and the number of
// rows whose first maximal logit is the label. If dst is not nil it gets
// (softmax(z_k) − onehot(y_k))·scale, the gradient of scale·loss w.r.t. z
// (Goodfellow et al., "Deep Learning", §6.2.2.3).
//
// Stability: the row maximum m is subtracted before exponentiating, so
// every exp argument is ≤ 0 and the sum of exps is in [1, C]; logsumexp =
// m + log Σ exp(z_j − m) then neither overflows nor loses the scale of
// large logits. The per-row arithmetic is in float64 (C exps per row:
// negligible next to the matrix products). It panics on a label ≥ C.
func softmaxCrossEntropy(dst, logits []float32, labels []uint8, C int, scale float64) (lossSum float64, correct int) {
	for k, y := range labels {
		if int(y) >= C {
			panic("model: label out of range [0, classes)")
		}
		z := logits[k*C : (k+1)*C]
		m, arg := z[0], 0
		for j, v := range z {
			if v > m {
				m, arg = v, j
			}
		}
		mf := float64(m)
		// Each exp is computed once and kept for the gradient (C ≤ 256,
		// since labels are uint8 and New caps classes there).
		var e [256]float64
		var s float64
		for j, v := range z {
			e[j] = math.Exp(float64(v) - mf)
			s += e[j]
		}
		lossSum += mf + math.Log(s) - float64(z[y])
		if arg == int(y) {
			correct++
		}
		if dst != nil {
			d := dst[k*C : (k+1)*C]
			for j := range z {
				p := e[j] / s
				if j == int(y) {
					p--
				}
				d[j] = float32(p * scale)
			}
		}
	}
	return lossSum, correct
}
