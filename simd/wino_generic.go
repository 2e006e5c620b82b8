//go:build !(goexperiment.simd && amd64)

package simd

// Portable dispatch of the Winograd kernels (wino.go): the generic loops.
// wino_amd64_simd.go carries the opposite build constraint.

func winoInput(v []float32, ld int, e, o *[6][]float32, nt, c int) {
	winoInputGeneric(v, ld, e, o, nt, c, 0)
}

func winoInputAdjoint(e, o *[6][]float32, dv []float32, ld, nt, c int) {
	winoInputAdjointGeneric(e, o, dv, ld, nt, c, 0)
}

func winoOutputPool(out *[2][]float32, win []uint32, m []float32, ld int, bias []float32, nt, c, units int) {
	winoOutputPoolGeneric(out, win, m, ld, bias, 0, nt, c, units, 0, c)
}

func winoUnpool(dm []float32, ld int, dp, mask *[2][]float32, win []uint32, gb []float32, nt, c, units int) {
	winoUnpoolGeneric(dm, ld, dp, mask, win, gb, nt, c, units, 0)
}

func winoFilters(u, w []float32, c2, c1 int)      { winoFiltersGeneric(u, w, c2, c1, 0) }
func winoFilterGrad(gw, gu []float32, c2, c1 int) { winoFilterGradGeneric(gw, gu, c2, c1, 0) }
