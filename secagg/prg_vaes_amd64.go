package secagg

import "golang.org/x/sys/cpu"

// hasVAES reports whether addMask runs the VAES kernel (prg_amd64.s):
// AES-256-CTR on 256-bit registers, two blocks per instruction (twice the
// AES-NI rate on Zen 3), with the keystream added straight into the
// destination instead of written to a buffer and added in a second pass.
// (x/sys/cpu has no VAES flag outside AVX-512: CPUID leaf 7, ECX bit 9.)
var hasVAES = cpu.X86.HasAVX2 && cpu.X86.HasAES && cpuid7ecx()&(1<<9) != 0

// cpuid7ecx is ECX of CPUID leaf 7, subleaf 0.
func cpuid7ecx() uint32

// aes256Expand writes the 15 round keys of the AES-256 key, each twice
// side by side (the 256-bit operand of VAESENC).
//
//go:noescape
func aes256Expand(rk *[15][32]byte, key *[32]byte)

// ctrVAES combines the AES-256-CTR keystream of blocks ctr, ctr+1, …
// (round keys rk, zero IV) with chunks×64 words at dst: mode 0 adds, 1
// subtracts, 2 overwrites.
//
//go:noescape
func ctrVAES(dst *uint32, chunks int, rk *[15][32]byte, ctr uint64, mode int)
