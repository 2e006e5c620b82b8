//go:build !goexperiment.simd || !amd64

package simd

// streamReadWidths: the plain build has only the portable read.
func streamReadWidths() []string { return []string{"read-go"} }

func streamRead(_ string, x, y []float32) float32 { return streamReadGo(x) + streamReadGo(y) }
