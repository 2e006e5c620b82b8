//go:build ignore

// gen_fe8 writes x25519_ifma_amd64.s, the AVX-512 IFMA arithmetic of
// x25519_ifma_amd64.go: eight GF(2^255−19) elements at a time, one per
// 64-bit lane of a ZMM register, in radix 2^51 (five limbs; limb i of lane
// l is fe8[i][l], at bit 51·i). Run with `go generate ./secagg`
// (x25519_ifma_amd64.go holds the directive); the output is checked in.
//
// # Products
//
// VPMADD52LUQ and VPMADD52HUQ (Intel SDM, vol. 2; AVX-512 IFMA) multiply
// the low 52 bits of two lanes and add the low, respectively the high, 52
// bits of the 104-bit product to a 64-bit accumulator; bits 52–63 of an
// operand are ignored, so every limb that is multiplied must be below
// 2^52. With limbs at bit 51·i, a limb product f_i·g_j = lo + 2^52·hi
// contributes lo at position i+j and 2·hi at position i+j+1 (2^52 =
// 2·2^51), so the coefficient at position k is c_k = L_k + 2·H_k, L_k the
// sum of the low halves landing there and H_k of the high halves. One
// accumulator R_k per position computes it: the high halves go in first,
// R_k is doubled, then the low halves are added. Positions 5 to 9 wrap
// around with 2^255 ≡ 19 (mod p): the result is h_k = c_k + 19·c_{k+5},
// the factor applied with VPMULLQ (AVX-512DQ; 38 for R_9, which holds
// only high halves and is not doubled first). A square computes the same
// h_k, limb for limb, with fifteen limb products instead of twenty-five:
// the cross products f_i·f_j (i < j) are accumulated once and doubled
// (sqrRegs).
//
// # Bounds
//
// "Reduced" limbs are below 2^51 + 2^16; "wide" limbs are below 267·2^52
// (< 2^60.1). Every multiplicand is reduced (hence below 2^52, which is
// all the instructions need), and the bounds hold for any multiplicands
// below 2^52:
//
//   - A limb product is below 2^104, so lo < 2^52 and hi < 2^52. The worst
//     output limb is h_0 = L_0 + 19·(L_5 + 2·H_5): one low half at
//     position 0, four at position 5 and five high halves landing there,
//     below (1 + 19·(4 + 2·5))·2^52 = 267·2^52. Every other h_k has fewer
//     terms with factor 19, and every partial sum is below that bound, so
//     nothing overflows 64 bits. A product or square (fe8Mul, fe8Sqr) is
//     wide.
//   - A sum of two wide elements is below 2^61.1; a difference x − y is
//     computed as x + K − y, K = 2^10·p, whose limbs 2^10·(2^51 − 19) and
//     2^10·(2^51 − 1) exceed every wide limb, so each limb stays
//     non-negative and below 2^62.
//   - The carry (fe8Carry) takes limbs below 2^62 and returns reduced
//     ones, in one parallel round: c_k = x_k >> 51 (< 2^11) moves to limb
//     k+1, and c_4 to limb 0 as 19·c_4 (< 2^16, a VPMADD52LUQ with the
//     constant 19), so limb k ≥ 1 is below 2^51 + 2^11 and limb 0 below
//     2^51 + 19·2^11 < 2^51 + 2^16. Carries happen only there: once after
//     every sum or difference, and at the end of the squares whose
//     result is multiplied.
//
// Every multiplicand in the ladder step therefore goes through a carry
// first: the sums and differences A, B, C, D, DA ± CB and E, the squares
// AA, BB and (DA − CB)² (carried in the same code, before they are
// stored), and AA + a24·E. The products whose only uses are additions
// (DA, CB, and the new x2, z2, x3, z3) stay wide; the ladder state x2, z2,
// x3, z3 is wide between steps. AA + a24·E (a24 = 121665 < 2^17) is AA
// plus lo(a24·E_k) at k and 2·hi(a24·E_k) < 2^18 at k + 1 (38·hi at 0 for
// k = 4): below 2^53, then carried.
//
// # The ladder step
//
// ladderStep8 is one function with the operations written out in line.
// The constants live in Z26–Z31; the elements that more than one later
// operation reads (A, B, C, D, DA, CB, AA, BB) go through the ladder8 in
// memory, the others stay in registers from the operation that makes them
// to the one that uses them (DA + CB into its square, DA − CB into its
// square and that into the product with x1, E and AA + a24·E into their
// product). Per step that is 392 IFMA instructions and about 840 other
// vector ones; on the Zen 5 it was tuned on (EPYC, two IFMA pipes) a
// step of eight ladders takes 90–95 ns, against 230 ns for a step of four
// in AVX2 (gen_fe4.go): 5× less per ladder. Passing every intermediate
// through memory, other orders of the operations, separate accumulators
// for L_k and H_k, and running all 255 steps in one assembly function (no
// call per step) all measured within noise of this: the two IFMA pipes
// and the four vector pipes are close to full.
package main

import (
	"bytes"
	"fmt"
	"os"
)

var out bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&out, "\t"+format+"\n", args...) }

// operand addresses limb i of an element in memory.
type operand func(i int) string

func at(base string, off int) operand {
	return func(i int) string { return fmt.Sprintf("%d(%s)", off+64*i, base) }
}

func z(i int) string { return fmt.Sprintf("Z%d", i) }

// Constants, in registers for the whole of every function.
const (
	rMask = "Z31" // 2^51 − 1
	r19   = "Z30" // 19
	r38   = "Z29" // 38
	rK0   = "Z28" // limb 0 of K = 2^10·p
	rK1   = "Z27" // limbs 1–4 of K
	rA24  = "Z26" // 121665
)

const (
	kLimb0 = 1 << 10 * (1<<51 - 19)
	kLimb  = 1 << 10 * (1<<51 - 1)
)

func constants() {
	p("VPBROADCASTQ mask51<>(SB), %s", rMask)
	p("VPBROADCASTQ c19<>(SB), %s", r19)
	p("VPBROADCASTQ c38<>(SB), %s", r38)
	p("VPBROADCASTQ k0<>(SB), %s", rK0)
	p("VPBROADCASTQ k1<>(SB), %s", rK1)
	p("VPBROADCASTQ a24<>(SB), %s", rA24)
}

func kLimbReg(i int) string {
	if i == 0 {
		return rK0
	}
	return rK1
}

// carry reduces the five limbs in regs (each < 2^62) in one parallel
// round; tmp are five scratch registers.
func carry(regs, tmp [5]string) {
	for k := range 5 {
		p("VPSRLQ $51, %s, %s", regs[k], tmp[k])
	}
	for k := range 5 {
		p("VPANDQ %s, %s, %s", rMask, regs[k], regs[k])
	}
	for k := range 4 {
		p("VPADDQ %s, %s, %s", tmp[k], regs[k+1], regs[k+1])
	}
	p("VPMADD52LUQ %s, %s, %s", r19, tmp[4], regs[0]) // += 19·c_4 (< 2^16)
}

func store(dst operand, regs [5]string) {
	for i := range 5 {
		p("VMOVDQU64 %s, %s", regs[i], dst(i))
	}
}

func load(src operand, regs [5]string) {
	for i := range 5 {
		p("VMOVDQU64 %s, %s", src(i), regs[i])
	}
}

func regs5(first int) [5]string {
	var r [5]string
	for i := range r {
		r[i] = z(first + i)
	}
	return r
}

// mul emits dst = x·y, carried (reduced) or not (wide). dst may alias x
// or y: every read precedes the first write. Registers: Z0–Z4 hold y,
// Z5–Z9 x, Z10–Z19 the accumulators R_0..R_9. The high halves go in
// first, R_k is doubled, and the low halves are added to it, so that
// R_k = L_k + 2·H_k needs no second set of accumulators.
//
// A nil x or y is already in its registers (left there by sqrRegs or
// mulA24), saving a store and a load on the step's longest paths.
func mul(dst, x, y operand, carried bool) {
	yr, xr := regs5(0), regs5(5)
	R := func(k int) string { return z(10 + k) }
	if y != nil {
		load(y, yr)
	}
	if x != nil {
		load(x, xr)
	}
	for k := range 10 {
		p("VPXORQ %s, %s, %s", R(k), R(k), R(k))
	}
	for i := range 5 {
		for j := range 5 {
			p("VPMADD52HUQ %s, %s, %s", yr[j], xr[i], R(i+j+1))
		}
	}
	for k := 1; k <= 8; k++ { // R_9 = H_9 is doubled by the wrap's 38
		p("VPADDQ %s, %s, %s", R(k), R(k), R(k))
	}
	for i := range 5 {
		for j := range 5 {
			p("VPMADD52LUQ %s, %s, %s", yr[j], xr[i], R(i+j))
		}
	}
	wrap(R)
	res := [5]string{R(0), R(1), R(2), R(3), R(4)}
	if carried {
		carry(res, [5]string{R(5), R(6), R(7), R(8), R(9)})
	}
	store(dst, res)
}

// wrap emits h_k = R_k + 19·R_{k+5} (38·R_9: R_9 is not yet doubled),
// into R_k.
func wrap(R func(int) string) {
	for k := range 5 {
		f := r19
		if k == 4 {
			f = r38
		}
		p("VPMULLQ %s, %s, %s", f, R(k+5), R(k+5))
		p("VPADDQ %s, %s, %s", R(k+5), R(k), R(k))
	}
}

// sqr emits dst = x², carried or not; dst may alias x. Registers: Z0–Z4
// hold x, Z5–Z14 the accumulators R_0..R_9.
func sqr(dst, x operand, carried bool) {
	xr := regs5(0)
	load(x, xr)
	sqrRegs(dst, xr, carried)
}

// sqrRegs is sqr of an element already in Z0–Z4; a nil dst leaves the
// result in Z5–Z9, where mul takes x from. With L_k = 2·X_k + S_k
// and H_k = 2·Y_k + T_k, X and Y the low and high halves of the cross
// products f_i·f_j (i < j), S and T those of the squares f_i², the
// coefficient L_k + 2·H_k is 2·(2·Y_k + X_k + T_k) + S_k: R_k takes the
// cross high halves, is doubled, takes the cross low halves and the
// squares' high halves, is doubled again (for R_5, R_7, R_9, which hold no
// S_k, by the wrap's 38), and takes the squares' low halves.
func sqrRegs(dst operand, xr [5]string, carried bool) {
	R := func(k int) string { return z(5 + k) }
	for k := range 10 {
		p("VPXORQ %s, %s, %s", R(k), R(k), R(k))
	}
	for i := range 5 {
		for j := i + 1; j < 5; j++ {
			p("VPMADD52HUQ %s, %s, %s", xr[j], xr[i], R(i+j+1))
		}
	}
	for k := 2; k <= 8; k++ {
		p("VPADDQ %s, %s, %s", R(k), R(k), R(k))
	}
	for i := range 5 {
		for j := i + 1; j < 5; j++ {
			p("VPMADD52LUQ %s, %s, %s", xr[j], xr[i], R(i+j))
		}
		p("VPMADD52HUQ %s, %s, %s", xr[i], xr[i], R(2*i+1))
	}
	for k := 1; k <= 8; k++ {
		if k >= 5 && k%2 == 1 {
			continue
		}
		p("VPADDQ %s, %s, %s", R(k), R(k), R(k))
	}
	for i := range 5 {
		p("VPMADD52LUQ %s, %s, %s", xr[i], xr[i], R(2*i))
	}
	for k := range 5 {
		f := r19
		if (k+5)%2 == 1 {
			f = r38
		}
		p("VPMULLQ %s, %s, %s", f, R(k+5), R(k+5))
		p("VPADDQ %s, %s, %s", R(k+5), R(k), R(k))
	}
	res := [5]string{R(0), R(1), R(2), R(3), R(4)}
	if carried {
		carry(res, [5]string{R(5), R(6), R(7), R(8), R(9)})
	}
	if dst != nil {
		store(dst, res)
	}
}

// addCarry emits regs = x + y (minus false) or x + K − y (minus true),
// carried; tmp are five scratch registers.
func addCarry(regs, tmp [5]string, x, y operand, minus bool) {
	for i := range 5 {
		p("VMOVDQU64 %s, %s", x(i), regs[i])
		if minus {
			p("VPADDQ %s, %s, %s", kLimbReg(i), regs[i], regs[i])
			p("VPSUBQ %s, %s, %s", y(i), regs[i], regs[i])
		} else {
			p("VPADDQ %s, %s, %s", y(i), regs[i], regs[i])
		}
	}
	carry(regs, tmp)
}

// swapAddSub emits, with K1 the swap mask (bit l for lane l: all eight
// bits or none where the lanes share a scalar, ladder8Batch, one bit per
// scalar where they do not, keyGen8Batch), the lane-wise conditional swap
// of (x2 : z2) with (x3 : z3) and then a = x2 + z2,
// b = x2 − z2, c = x3 + z3, d = x3 − z3, carried. x2, z2, x3, z3 are read
// once and left as they were.
func swapAddSub(x2, z2, x3, z3, a, b, c, d operand) {
	// Pass 1: x2', x3' (swapped) into Z0–Z4, Z5–Z9; pass 2 the z's.
	X2, X3 := regs5(0), regs5(5)
	Z2, Z3 := regs5(10), regs5(15)
	for i := range 5 {
		p("VMOVDQU64 %s, Z20", x2(i))
		p("VMOVDQU64 %s, Z21", x3(i))
		p("VMOVDQU64 %s, Z22", z2(i))
		p("VMOVDQU64 %s, Z23", z3(i))
		p("VPBLENDMQ Z21, Z20, K1, %s", X2[i]) // K1 ? x3 : x2
		p("VPBLENDMQ Z20, Z21, K1, %s", X3[i])
		p("VPBLENDMQ Z23, Z22, K1, %s", Z2[i])
		p("VPBLENDMQ Z22, Z23, K1, %s", Z3[i])
	}
	// B = x2 + K − z2 into Z20–Z24 (no constant lives there), A = x2 + z2
	// in place of x2.
	tmp := regs5(20)
	sum := func(x, y [5]string, sumOut, diffOut operand) {
		diff := tmp
		for i := range 5 {
			p("VPADDQ %s, %s, %s", kLimbReg(i), x[i], diff[i])
			p("VPSUBQ %s, %s, %s", y[i], diff[i], diff[i])
			p("VPADDQ %s, %s, %s", y[i], x[i], x[i])
		}
		carry(x, y) // y is free now
		store(sumOut, x)
		carry(diff, y)
		store(diffOut, diff)
	}
	sum(X2, Z2, a, b)
	sum(X3, Z3, c, d)
}

// mulA24 emits, from the reduced aa and bb, e = aa − bb and
// f = aa + 121665·e, both carried; nil e and f stay in Z0–Z4 and Z5–Z9
// (mul's y and x).
func mulA24(e, f, aa, bb operand) {
	E, F, G, tmp := regs5(0), regs5(5), regs5(10), regs5(15)
	addCarry(E, tmp, aa, bb, true)
	if e != nil {
		store(e, E)
	}
	for i := range 5 {
		p("VMOVDQU64 %s, %s", aa(i), F[i])
		p("VPXORQ %s, %s, %s", G[i], G[i], G[i])
	}
	for i := range 5 {
		p("VPMADD52LUQ %s, %s, %s", rA24, E[i], F[i])
		p("VPMADD52HUQ %s, %s, %s", rA24, E[i], G[i])
	}
	for i := range 4 {
		p("VPADDQ %s, %s, %s", G[i], G[i], G[i])
		p("VPADDQ %s, %s, %s", G[i], F[i+1], F[i+1])
	}
	p("VPMADD52LUQ %s, %s, %s", r38, G[4], F[0]) // hi < 2^17
	carry(F, tmp)
	if f != nil {
		store(f, F)
	}
}

// cswap emits the swap of lane l of x and y where bit l of K1 is set.
func cswap(x, y operand) {
	for i := range 5 {
		p("VMOVDQU64 %s, Z0", x(i))
		p("VMOVDQU64 %s, Z1", y(i))
		p("VPBLENDMQ Z1, Z0, K1, Z2")
		p("VPBLENDMQ Z0, Z1, K1, Z3")
		p("VMOVDQU64 Z2, %s", x(i))
		p("VMOVDQU64 Z3, %s", y(i))
	}
}

func text(name string, args int) {
	fmt.Fprintf(&out, "\n// func %s\nTEXT ·%s(SB), NOSPLIT, $0-%d\n", name, name[:bytes.IndexByte([]byte(name), '(')], args)
}

func data(name string, w uint64) {
	fmt.Fprintf(&out, "DATA %s+0(SB)/8, $0x%x\n", name, w)
	fmt.Fprintf(&out, "GLOBL %s(SB), RODATA|NOPTR, $8\n", name)
}

func main() {
	fmt.Fprintln(&out, "// Code generated by gen_fe8.go; DO NOT EDIT.")
	fmt.Fprint(&out, "\n//go:build amd64\n\n#include \"textflag.h\"\n\n")
	data("mask51<>", 1<<51-1)
	data("c19<>", 19)
	data("c38<>", 38)
	data("k0<>", kLimb0)
	data("k1<>", kLimb)
	data("a24<>", 121665)

	const fe = 320 // bytes per fe8
	field := func(k int) operand { return at("DI", k*fe) }
	x1, x2, z2, x3, z3 := field(0), field(1), field(2), field(3), field(4)
	ta, tb, tc, td := field(5), field(6), field(7), field(8)

	// step emits one Montgomery ladder step (RFC 7748, §5) on the ladder8
	// at DI, after the conditional swap by K1, the constants loaded.
	step := func() {
		swapAddSub(x2, z2, x3, z3, ta, tb, tc, td) // A, B, C, D
		mul(td, td, ta, false)                     // DA = D·A
		mul(tc, tc, tb, false)                     // CB = C·B
		sqr(ta, ta, true)                          // AA = A²
		sqr(tb, tb, true)                          // BB = B²
		S, tmp := regs5(0), regs5(10)
		addCarry(S, tmp, td, tc, false) // DA + CB, squared in place
		sqrRegs(x3, S, false)           // x3 = (DA + CB)²
		mul(x2, ta, tb, false)          // x2 = AA·BB
		Dd := regs5(0)
		addCarry(Dd, tmp, td, tc, true) // DA − CB
		sqrRegs(nil, Dd, true)          // (DA − CB)², into mul's x
		mul(z3, nil, x1, false)         // z3 = x1·(DA − CB)²
		mulA24(nil, nil, ta, tb)        // E = AA − BB, F = AA + a24·E
		mul(z2, nil, nil, false)        // z2 = E·F
	}

	text("ladderStep8(s *ladder8, mask uint64)", 16)
	p("MOVQ s+0(FP), DI")
	p("MOVQ mask+8(FP), AX")
	p("KMOVW AX, K1")
	constants()
	step()
	p("VZEROUPPER")
	p("RET")

	// Single operations, for the tests and the ladder's last swap.
	text("fe8Mul(z, x, y *fe8)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	constants()
	mul(at("DI", 0), at("SI", 0), at("DX", 0), false)
	p("VZEROUPPER")
	p("RET")

	text("fe8Sqr(z, x *fe8)", 16)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	constants()
	sqr(at("DI", 0), at("SI", 0), false)
	p("VZEROUPPER")
	p("RET")

	text("fe8Carry(z, x *fe8)", 16)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	constants()
	load(at("SI", 0), regs5(0))
	carry(regs5(0), regs5(5))
	store(at("DI", 0), regs5(0))
	p("VZEROUPPER")
	p("RET")

	text("fe8AddCarry(z, x, y *fe8)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	constants()
	addCarry(regs5(0), regs5(5), at("SI", 0), at("DX", 0), false)
	store(at("DI", 0), regs5(0))
	p("VZEROUPPER")
	p("RET")

	text("fe8SubCarry(z, x, y *fe8)", 24)
	p("MOVQ z+0(FP), DI")
	p("MOVQ x+8(FP), SI")
	p("MOVQ y+16(FP), DX")
	constants()
	addCarry(regs5(0), regs5(5), at("SI", 0), at("DX", 0), true)
	store(at("DI", 0), regs5(0))
	p("VZEROUPPER")
	p("RET")

	text("fe8MulA24(e, f, aa, bb *fe8)", 32)
	p("MOVQ e+0(FP), DI")
	p("MOVQ f+8(FP), SI")
	p("MOVQ aa+16(FP), DX")
	p("MOVQ bb+24(FP), CX")
	constants()
	mulA24(at("DI", 0), at("SI", 0), at("DX", 0), at("CX", 0))
	p("VZEROUPPER")
	p("RET")

	text("fe8CSwap(x, y *fe8, mask uint64)", 24)
	p("MOVQ x+0(FP), DI")
	p("MOVQ y+8(FP), SI")
	p("MOVQ mask+16(FP), AX")
	p("KMOVW AX, K1")
	cswap(at("DI", 0), at("SI", 0))
	p("VZEROUPPER")
	p("RET")

	if err := os.WriteFile("x25519_ifma_amd64.s", out.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
