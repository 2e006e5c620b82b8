//go:build ignore

// gen_fe4 writes x25519_amd64.s, the AVX2 arithmetic of x25519_amd64.go:
// four GF(2^255−19) elements at a time, one per 64-bit lane, in radix
// 2^25.5 (ten limbs of 26, 25, 26, … bits; the representation of
// Bernstein's ref10, with unsigned limbs so that VPMULUDQ's 32×32→64-bit
// products apply). Run with `go generate ./secagg` (x25519_amd64.go holds
// the directive); the output is checked in.
//
// Bounds (documented with the functions in x25519_amd64.go): a reduced
// element has even limbs ≤ 2^26 and odd limbs ≤ 2^25 + 2^17; a sum of two
// reduced ones, or x + 2p − y of two reduced ones, has even limbs <
// 1.5·2^27 and odd limbs < 1.5·2^26. Multiplying two such operands, every
// output coefficient stays below 2^62.2 (h0 ≤ 2.25·2^54·(1 + 4·19 +
// 5·38/4)), and every pre-multiplied 32-bit operand of VPMULUDQ (19·f and
// 2·f of any limb, 38·f and 4·f of an odd one, 121665·f) fits: 19·1.5·2^27
// and 38·1.5·2^26 are below 2^32.
//
// The ladder step is one function, the operations written out in line
// and the swap, additions and subtractions fused into the loads of the
// multiplications that use them: about 2,500 instructions, a quarter
// fewer than calling the single operations, at 270 ns per step of four
// ladders on the machine it was tuned on (Zen 3), against 150 ns for one
// step of circl's scalar MULX ladder. Interleaving a scalar ladder on the
// integer units with the vector code was tried and was slower per ladder:
// the core's issue width, not the vector units, is the limit.
package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }

// operand addresses limb i of an element in memory.
type operand func(i int) string

func at(base string, off int) operand {
	return func(i int) string { return fmt.Sprintf("%d(%s)", off+32*i, base) }
}

// c19 is where mul and sqr find the vector of 19s: memory in the single
// operations, Y15 inside the ladder step (loaded after the swap, which
// needs Y15 for the mask).
var c19 = "c19<>(SB)"

func acc(i int) string { return fmt.Sprintf("Y%d", i) }

// odd reports whether limb i has 25 bits (and a doubled product when both
// factors' limbs are odd).
func odd(i int) bool { return i%2 == 1 }

// carry reduces the coefficients in Y0–Y9 (each < 2^63) to a reduced
// element, ref10's carry order; Y10–Y14 are clobbered.
func carry() {
	p("VMOVDQU mask26<>(SB), Y13")
	p("VMOVDQU mask25<>(SB), Y14")
	step := func(i int) {
		bits, mask := 26, "Y13"
		if odd(i) {
			bits, mask = 25, "Y14"
		}
		p("VPSRLQ $%d, %s, Y10", bits, acc(i))
		p("VPAND %s, %s, %s", mask, acc(i), acc(i))
		if i == 9 {
			// h0 += 19·c: c < 2^38 is too wide for VPMULUDQ.
			p("VPSLLQ $1, Y10, Y11")
			p("VPSLLQ $4, Y10, Y12")
			p("VPADDQ Y11, Y10, Y10")
			p("VPADDQ Y12, Y10, Y10")
			p("VPADDQ Y10, Y0, Y0")
			return
		}
		p("VPADDQ Y10, %s, %s", acc(i+1), acc(i+1))
	}
	for _, i := range []int{0, 4, 1, 5, 2, 6, 3, 7, 4, 8, 9, 0} {
		step(i)
	}
}

func store(z operand) {
	for i := range 10 {
		p("VMOVDQU %s, %s", acc(i), z(i))
	}
}

// mul emits z = x·y (z may alias x or y: every read precedes the first
// write). The factors 19 (of the wrapped terms, 2^255 ≡ 19) and 2 (of two
// odd limbs) go on x's limb, held in registers: Y10 = f_i, Y11 = 2·f_i,
// Y12 = 19·f_i, Y13 = 38·f_i, all below 2^32 for operands within the
// bounds.
func mul(z, x, y operand) {
	for i := range 10 {
		p("VMOVDQU %s, Y10", x(i))
		if odd(i) {
			p("VPADDQ Y10, Y10, Y11")
		}
		if i > 0 {
			p("VPMULUDQ %s, Y10, Y12", c19)
			if odd(i) {
				p("VPADDQ Y12, Y12, Y13")
			}
		}
		for j := range 10 {
			f, k := "Y10", i+j
			if k >= 10 {
				f, k = "Y12", k-10
			}
			if odd(i) && odd(j) {
				f = map[string]string{"Y10": "Y11", "Y12": "Y13"}[f]
			}
			if i == 0 {
				p("VPMULUDQ %s, %s, %s", y(j), f, acc(k))
				continue
			}
			p("VPMULUDQ %s, %s, Y14", y(j), f)
			p("VPADDQ Y14, %s, %s", acc(k), acc(k))
		}
	}
	carry()
	store(z)
}

// sqr emits z = x² (z may alias x); scratch receives 19·x.
func sqr(z, x, scratch operand) {
	for j := 1; j < 10; j++ {
		p("VMOVDQU %s, Y13", x(j))
		p("VPMULUDQ %s, Y13, Y13", c19)
		p("VMOVDQU Y13, %s", scratch(j))
	}
	sqrTerms(z, x, scratch)
}

// twoP loads the three distinct limbs of 2p (limb 0, the other even
// limbs, the odd limbs) into the registers r, for twoPLimb.
func twoP(r [3]string) {
	for k := range r {
		p("VMOVDQU twop3<>+%d(SB), %s", 32*k, r[k])
	}
}

// twoPLimb is the register of twoP's that holds limb i of 2p.
func twoPLimb(i int, r [3]string) string {
	switch {
	case i == 0:
		return r[0]
	case odd(i):
		return r[2]
	}
	return r[1]
}

// sqrOf emits x = a + b (plus 2p − 2b when minus: a − b) and then z = x²,
// the sum or difference stored on the way with its multiple 19·x.
func sqrOf(z, x, a, b operand, minus bool, scratch operand) {
	tp := [3]string{"Y0", "Y1", "Y2"} // free until sqrTerms
	if minus {
		twoP(tp)
	}
	for j := range 10 {
		p("VMOVDQU %s, Y13", a(j))
		if minus {
			p("VPADDQ %s, Y13, Y13", twoPLimb(j, tp))
			p("VPSUBQ %s, Y13, Y13", b(j))
		} else {
			p("VPADDQ %s, Y13, Y13", b(j))
		}
		p("VMOVDQU Y13, %s", x(j))
		if j > 0 {
			p("VPMULUDQ %s, Y13, Y13", c19)
			p("VMOVDQU Y13, %s", scratch(j))
		}
	}
	sqrTerms(z, x, scratch)
}

// sqrTerms emits z = x² given scratch = 19·x.
func sqrTerms(z, x, scratch operand) {
	started := [10]bool{}
	for i := range 10 {
		// Y10 = x_i, Y11 = 2·x_i, Y12 = 4·x_i.
		p("VMOVDQU %s, Y10", x(i))
		p("VPADDQ Y10, Y10, Y11")
		if odd(i) {
			p("VPADDQ Y11, Y11, Y12")
		}
		for j := i; j < 10; j++ {
			c := 1
			if i < j {
				c *= 2
			}
			if odd(i) && odd(j) {
				c *= 2
			}
			g, k := x(j), i+j
			if k >= 10 {
				g, k = scratch(j), k-10
			}
			f := map[int]string{1: "Y10", 2: "Y11", 4: "Y12"}[c]
			if !started[k] {
				p("VPMULUDQ %s, %s, %s", g, f, acc(k))
				started[k] = true
				continue
			}
			p("VPMULUDQ %s, %s, Y13", g, f)
			p("VPADDQ Y13, %s, %s", acc(k), acc(k))
		}
	}
	carry()
	store(z)
}

// add emits z = x + y.
func add(z, x, y operand) {
	for i := range 10 {
		p("VMOVDQU %s, Y0", x(i))
		p("VPADDQ %s, Y0, Y0", y(i))
		p("VMOVDQU Y0, %s", z(i))
	}
}

// sub emits z = x + 2p − y.
func sub(z, x, y operand) {
	for i := range 10 {
		p("VMOVDQU %s, Y0", x(i))
		p("VPADDQ twop<>+%d(SB), Y0, Y0", 32*i)
		p("VPSUBQ %s, Y0, Y0", y(i))
		p("VMOVDQU Y0, %s", z(i))
	}
}

// mulA24 emits z = 121665·x.
func mulA24(z, x operand) {
	for i := range 10 {
		p("VMOVDQU %s, %s", x(i), acc(i))
		p("VPMULUDQ a24<>(SB), %s, %s", acc(i), acc(i))
	}
	carry()
	store(z)
}

// subA24Add emits e = a + 2p − b and then z = 121665·e + a.
func subA24Add(z, e, a, b operand) {
	tp := [3]string{"Y10", "Y11", "Y12"}
	twoP(tp)
	p("VMOVDQU a24<>(SB), Y13")
	for i := range 10 {
		p("VMOVDQU %s, %s", a(i), acc(i))
		p("VPADDQ %s, %s, %s", twoPLimb(i, tp), acc(i), acc(i))
		p("VPSUBQ %s, %s, %s", b(i), acc(i), acc(i))
		p("VMOVDQU %s, %s", acc(i), e(i))
		p("VPMULUDQ Y13, %s, %s", acc(i), acc(i))
	}
	carry()
	for i := range 10 {
		p("VPADDQ %s, %s, %s", a(i), acc(i), acc(i))
	}
	store(z)
}

// swapAddSub emits, with Y15 the swap mask, the conditional swap of (x2,
// z2) with (x3, z3) in registers and a = x2 + z2, b = x2 − z2, c = x3 +
// z3, d = x3 − z3 (the differences plus 2p); x2, z2, x3, z3 are left as
// they were, since the ladder step overwrites all four.
func swapAddSub(x2, z2, x3, z3, a, b, c, d operand) {
	tp := [3]string{"Y8", "Y9", "Y10"}
	twoP(tp)
	for i := range 10 {
		p("VMOVDQU %s, Y0", x2(i))
		p("VMOVDQU %s, Y1", x3(i))
		p("VMOVDQU %s, Y2", z2(i))
		p("VMOVDQU %s, Y3", z3(i))
		p("VPXOR Y0, Y1, Y4")
		p("VPXOR Y2, Y3, Y5")
		p("VPAND Y15, Y4, Y4")
		p("VPAND Y15, Y5, Y5")
		p("VPXOR Y4, Y0, Y0")
		p("VPXOR Y4, Y1, Y1")
		p("VPXOR Y5, Y2, Y2")
		p("VPXOR Y5, Y3, Y3")
		p("VPADDQ Y0, Y2, Y6")
		p("VMOVDQU Y6, %s", a(i))
		p("VPADDQ %s, Y0, Y0", twoPLimb(i, tp))
		p("VPSUBQ Y2, Y0, Y0")
		p("VMOVDQU Y0, %s", b(i))
		p("VPADDQ Y1, Y3, Y7")
		p("VMOVDQU Y7, %s", c(i))
		p("VPADDQ %s, Y1, Y1", twoPLimb(i, tp))
		p("VPSUBQ Y3, Y1, Y1")
		p("VMOVDQU Y1, %s", d(i))
	}
}

// cswap emits the swap of x and y where Y15 (the mask) is all ones.
func cswap(x, y operand) {
	for i := range 10 {
		p("VMOVDQU %s, Y0", x(i))
		p("VMOVDQU %s, Y1", y(i))
		p("VPXOR Y0, Y1, Y2")
		p("VPAND Y15, Y2, Y2")
		p("VPXOR Y2, Y0, Y0")
		p("VPXOR Y2, Y1, Y1")
		p("VMOVDQU Y0, %s", x(i))
		p("VMOVDQU Y1, %s", y(i))
	}
}

func text(name string, args int) {
	fmt.Fprintf(&out, "\n// func %s\nTEXT ·%s(SB), NOSPLIT, $0-%d\n", name, name[:bytes.IndexByte([]byte(name), '(')], args)
}

func data(name string, words ...uint64) {
	for i, w := range words {
		fmt.Fprintf(&out, "DATA %s+%d(SB)/8, $0x%x\n", name, 8*i, w)
	}
	fmt.Fprintf(&out, "GLOBL %s(SB), RODATA|NOPTR, $%d\n", name, 8*len(words))
}

func splat(name string, w uint64) { data(name, w, w, w, w) }

func main() {
	fmt.Fprintln(&out, "// Code generated by gen_fe4.go; DO NOT EDIT.")
	fmt.Fprintln(&out, "\n//go:build amd64\n\n#include \"textflag.h\"\n")
	splat("mask26<>", 1<<26-1)
	splat("mask25<>", 1<<25-1)
	splat("c19<>", 19)
	splat("a24<>", 121665)
	var twop []uint64
	for i := range 10 {
		limb := uint64(1<<26 - 1)
		switch {
		case i == 0:
			limb = 1<<26 - 19
		case odd(i):
			limb = 1<<25 - 1
		}
		twop = append(twop, 2*limb, 2*limb, 2*limb, 2*limb)
	}
	data("twop<>", twop...)
	// limb 0, an even limb (2), an odd limb (1)
	data("twop3<>", slices.Concat(twop[0:4], twop[8:12], twop[4:8])...)

	// Single operations, for the tests (and the final multiplications).
	text("fe4Mul(z, x, y *fe4)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	mul(at("DI", 0), at("SI", 0), at("DX", 0))
	p("VZEROUPPER")
	p("RET")

	text("fe4Sqr(z, x, scratch *fe4)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ scratch+16(FP), CX")
	sqr(at("DI", 0), at("SI", 0), at("CX", 0))
	p("VZEROUPPER")
	p("RET")

	text("fe4Add(z, x, y *fe4)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	add(at("DI", 0), at("SI", 0), at("DX", 0))
	p("VZEROUPPER")
	p("RET")

	text("fe4Sub(z, x, y *fe4)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	sub(at("DI", 0), at("SI", 0), at("DX", 0))
	p("VZEROUPPER")
	p("RET")

	text("fe4MulA24(z, x *fe4)", 16)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	mulA24(at("DI", 0), at("SI", 0))
	p("VZEROUPPER")
	p("RET")

	// One Montgomery ladder step (RFC 7748, §5) on a ladder4, after the
	// conditional swap of (x2, z2) and (x3, z3) by mask. Each field has
	// its own base register, pointing 128 bytes into it, so that eight of
	// its ten limbs are reached with a one-byte displacement (the step ran
	// 11% faster than with one base register and four-byte ones), and the
	// constants sit in registers where the operation leaves one free.
	const fe = 320
	regs := []string{"BX", "AX", "CX", "DX", "SI", "DI", "R8", "R9", "R10", "R11", "R12"}
	field := func(k int) operand { return at(regs[k], -128) }
	x1, x2, z2, x3, z3 := field(0), field(1), field(2), field(3), field(4)
	ta, tb, tc, td, te, scr := field(5), field(6), field(7), field(8), field(9), field(10)
	text("ladderStep4(s *ladder4, mask uint64)", 16)
	p("MOVQ s+0(FP), R13")
	for k, r := range regs {
		p("LEAQ %d(R13), %s", k*fe+128, r)
	}
	p("VPBROADCASTQ mask+8(FP), Y15")
	swapAddSub(x2, z2, x3, z3, ta, tb, tc, td) // A, B, C, D of the swapped pairs
	p("VMOVDQU c19<>(SB), Y15")
	c19 = "Y15"
	mul(td, td, ta)                   // DA = D·A
	mul(tc, tc, tb)                   // CB = C·B
	sqr(ta, ta, scr)                  // AA = A²
	sqr(tb, tb, scr)                  // BB = B²
	sqrOf(z3, z3, td, tc, true, scr)  // (DA − CB)²
	sqrOf(x3, x3, td, tc, false, scr) // x3 = (DA + CB)²
	mul(z3, z3, x1)                   // z3 = x1·(DA − CB)²
	subA24Add(td, te, ta, tb)         // E = AA − BB, then AA + a24·E
	mul(x2, ta, tb)                   // x2 = AA·BB
	mul(z2, te, td)                   // z2 = E·(AA + a24·E)
	c19 = "c19<>(SB)"
	p("VZEROUPPER")
	p("RET")

	text("fe4CSwap(x, y *fe4, mask uint64)", 24)
	p("MOVQ x+0(FP), DI")
	p("MOVQ y+8(FP), SI")
	p("VPBROADCASTQ mask+16(FP), Y15")
	cswap(at("DI", 0), at("SI", 0))
	p("VZEROUPPER")
	p("RET")

	if err := os.WriteFile("x25519_amd64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
