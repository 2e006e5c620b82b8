package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"testing"
)

// prgKernels lists the addMask kernels this machine runs, widest first:
// "vaes512" (ctrVAES512, where hasVAES512: the CPU has it and DPFL_SIMD
// allows it), "vaes256" (ctrVAES, where hasVAES) and "generic"
// (crypto/aes's CTR and addWords).
func prgKernels() []string {
	var ks []string
	if hasVAES512 {
		ks = append(ks, "vaes512")
	}
	if hasVAES {
		ks = append(ks, "vaes256")
	}
	return append(ks, "generic")
}

// usePRGKernel makes addMask run the kernel named as in prgKernels and
// returns a function that restores the previous selection.
func usePRGKernel(name string) (restore func()) {
	v, v512 := hasVAES, hasVAES512
	restore = func() { hasVAES, hasVAES512 = v, v512 }
	switch name {
	case "vaes512":
		hasVAES, hasVAES512 = true, true
	case "vaes256":
		hasVAES, hasVAES512 = true, false
	case "generic":
		hasVAES, hasVAES512 = false, false
	default:
		panic("secagg: unknown PRG kernel " + name)
	}
	return restore
}

// TestCtrVAESKernels checks ctrVAES and ctrVAES512 (where the CPU has
// it, whatever DPFL_SIMD says) directly against crypto/cipher's CTR
// (NIST SP 800-38A, §6.5) with the IV set to the start counter: every
// mode, chunk counts even and odd (ctrVAES512's two-chunk loop and its
// one-chunk tail), start counters that cross 2^32 and that end exactly
// at 2^64 (the kernels add the counter in 64 bits, so a stream must not
// wrap the low qword; addMask's never comes near), with guard words on
// both sides of dst that must stay untouched.
func TestCtrVAESKernels(t *testing.T) {
	if !hasVAES {
		t.Skip("no VAES")
	}
	kernels := []struct {
		name string
		f    func(*uint32, int, *[15][32]byte, uint64, int)
	}{{"vaes256", ctrVAES}, {"vaes512", ctrVAES512}}
	rng := mrand.New(mrand.NewPCG(31, 32))
	const guard = 16
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			if k.name == "vaes512" && !cpuVAES512 {
				t.Skip("no AVX-512 VAES")
			}
			for _, chunks := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 122, 123} {
				for _, ctr := range []uint64{0, 1, 3, 1<<32 - 5, 1<<40 + 7, 1<<63 - 2, ^uint64(0) - 1<<20 + 1, 0 - 16*uint64(chunks)} {
					var key [32]byte
					for i := range key {
						key[i] = byte(rng.Uint32())
					}
					var rk [15][32]byte
					aes256Expand(&rk, &key)
					n := 64 * chunks
					stream := make([]byte, 4*n)
					var iv [16]byte
					binary.BigEndian.PutUint64(iv[8:], ctr)
					block, _ := aes.NewCipher(key[:])
					cipher.NewCTR(block, iv[:]).XORKeyStream(stream, stream)
					for mode := range 3 {
						buf := make([]uint32, n+2*guard)
						for i := range buf {
							buf[i] = rng.Uint32()
						}
						orig := append([]uint32(nil), buf...)
						k.f(&buf[guard], chunks, &rk, ctr, mode)
						name := fmt.Sprintf("chunks=%d ctr=%#x mode=%d", chunks, ctr, mode)
						for i := range buf {
							want := orig[i]
							if j := i - guard; j >= 0 && j < n {
								w := binary.LittleEndian.Uint32(stream[4*j:])
								switch mode {
								case 0:
									want += w
								case 1:
									want -= w
								case 2:
									want = w
								}
							}
							if buf[i] != want {
								t.Fatalf("%s: word %d (guard %d) = %#x, want %#x", name, i-guard, guard, buf[i], want)
							}
						}
					}
				}
			}
		})
	}
}
