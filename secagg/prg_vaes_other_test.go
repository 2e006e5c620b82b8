//go:build !amd64

package secagg

// prgKernels lists the addMask kernels this machine runs: only "generic"
// (crypto/aes's CTR and addWords) off amd64.
func prgKernels() []string { return []string{"generic"} }

// usePRGKernel makes addMask run the kernel named as in prgKernels (there
// is one) and returns a function that restores the selection.
func usePRGKernel(name string) (restore func()) {
	if name != "generic" {
		panic("secagg: unknown PRG kernel " + name)
	}
	return func() {}
}
