package secagg

import "golang.org/x/sys/cpu"

// hasVAES reports whether addMask runs the VAES kernel (prg_amd64.s):
// AES-256-CTR on 256-bit registers, two blocks per instruction (twice the
// AES-NI rate on Zen 3), with the keystream added straight into the
// destination instead of written to a buffer and added in a second pass.
// (x/sys/cpu has no VAES flag outside AVX-512: CPUID leaf 7, ECX bit 9.)
var hasVAES = cpu.X86.HasAVX2 && cpu.X86.HasAES && cpuid7ecx()&(1<<9) != 0

// cpuVAES512 reports whether the CPU (and OS) runs ctrVAES512: VAES on
// ZMM registers needs AVX-512F and the VAES bit (x/sys/cpu reports it as
// HasAVX512VAES, set only where the OS saves the ZMM state), and the
// byte-swapping VPSHUFB on ZMM needs AVX-512BW.
var cpuVAES512 = hasVAES && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VAES

// hasVAES512 selects ctrVAES512 over ctrVAES in ctrMask: where the CPU
// has it and DPFL_SIMD allows AVX-512 (avx512Path, the rule the X25519
// ladder follows). Tests turn it off to check both kernels.
var hasVAES512 = cpuVAES512 && avx512Path

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

// ctrVAES512 is ctrVAES on 512-bit registers (prg_vaes512_amd64.s): the
// same contract (AES-256-CTR, FIPS 197 and NIST SP 800-38A §6.5, zero IV,
// block i the big-endian counter ctr+i, keystream read as little-endian
// uint32 words combined with chunks×64 words at dst by mode 0 add, 1
// subtract, 2 overwrite, mod 2^32), four blocks per VAESENC and 32 in
// flight. It reads the first 16 bytes of each rk[i]. Only where
// cpuVAES512.
//
//go:noescape
func ctrVAES512(dst *uint32, chunks int, rk *[15][32]byte, ctr uint64, mode int)

// ctrMask is ctrVAES's contract on the fastest VAES kernel hasVAES512
// allows: ctrVAES512, else ctrVAES.
func ctrMask(dst *uint32, chunks int, rk *[15][32]byte, ctr uint64, mode int) {
	if hasVAES512 {
		ctrVAES512(dst, chunks, rk, ctr, mode)
		return
	}
	ctrVAES(dst, chunks, rk, ctr, mode)
}
