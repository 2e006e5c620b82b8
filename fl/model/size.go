package model

// WorkspaceBytes returns how many bytes m.NewWorkspace(maxBatch) allocates
// for its buffers, and with train how many it holds once it has trained
// (the cnn's workspace for maxBatch > 32 allocates its training buffers at
// the first LossGrad or LossStep; see Model.NewWorkspace). Slice headers,
// the workspace struct and simd.Gemm's pooled packing buffers are not
// counted. It is -1 for a model this package did not make. Memory
// admission (job) budgets workers with it instead of restating the
// layouts.
func WorkspaceBytes(m Model, maxBatch int, train bool) int64 {
	const f32 = 4
	b := int64(max(maxBatch, 1))
	switch m := m.(type) {
	case *denseNet:
		var floats, widest int64
		for _, ly := range m.layers {
			floats += 2 * b * int64(ly.out) // act and delta
			widest = max(widest, int64(ly.out))
		}
		return f32 * (floats + widest)
	case *cnn:
		c1, c2, h, C := int64(m.c1), int64(m.c2), int64(m.hidden), int64(m.classes)
		p1, flat, nb := int64(m.p1), int64(m.flat), int64(m.nb)
		tp := int64(winoPad(m.nb * m.cr * m.tq))
		// One chunk's convolutions: col1, w1, a1one, ut and u, V and M.
		floats := p1*cnnK1 + c1*cnnK1 + nb*p1*c1 + 2*winoTile*c1*c2 + winoTile*tp*(c1+c2)
		trains := train || maxBatch <= cnnEvalBatch
		capacity := min(b, cnnEvalBatch)
		if trains {
			capacity = b
			// a1, mask1 and dPool, mask2 and dH, dLogits; dA1; gW1,
			// gW2, gb, gu.
			floats += b*(p1*c1+2*flat+2*h+C) + nb*p1*c1 + cnnK1*c1 + c2*int64(m.k2) + max(c2, h, C) + winoTile*c1*c2
		}
		// pool, h, logits, and win (winFlat words an image).
		return f32 * (floats + capacity*(flat+h+C+int64(m.winFlat())))
	}
	return -1
}
