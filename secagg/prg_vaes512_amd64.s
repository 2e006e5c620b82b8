#include "textflag.h"

// AES-256-CTR (FIPS 197; NIST SP 800-38A, §6.5) on 512-bit registers:
// VAESENC on a ZMM register runs one AES round on four independent
// 128-bit blocks, one per lane, so eight ZMM registers hold 32 blocks
// (two 64-word chunks) in flight. The keystream layout is ctrVAES's
// (prg_amd64.s): block i is the encryption of the big-endian 128-bit
// counter ctr+i (zero IV), read as little-endian uint32 words.
//
// Registers: Z0–Z7 blocks, Z8 scratch, Z9 next counters, Z10 counter
// step, Z11 byte-swap table, Z16–Z30 round keys 0–14 (each broadcast to
// all four lanes).

// Z512ROUND8 and Z512ROUND4 apply one AES round (FIPS 197, §5.1) with
// round key k to the blocks in Z0–Z7 and Z0–Z3.
#define Z512ROUND8(k) \
	VAESENC k, Z0, Z0; \
	VAESENC k, Z1, Z1; \
	VAESENC k, Z2, Z2; \
	VAESENC k, Z3, Z3; \
	VAESENC k, Z4, Z4; \
	VAESENC k, Z5, Z5; \
	VAESENC k, Z6, Z6; \
	VAESENC k, Z7, Z7

#define Z512ROUND4(k) \
	VAESENC k, Z0, Z0; \
	VAESENC k, Z1, Z1; \
	VAESENC k, Z2, Z2; \
	VAESENC k, Z3, Z3

// Z512ROUNDS applies rounds 1–13 (FIPS 197, §5.1: all but the first
// AddRoundKey and the final round) with the macro R.
#define Z512ROUNDS(R) \
	R(Z17); R(Z18); R(Z19); R(Z20); R(Z21); R(Z22); R(Z23); \
	R(Z24); R(Z25); R(Z26); R(Z27); R(Z28); R(Z29)

// Z512CTR sets block register r to the counters in Z9 (four consecutive
// ones, a little-endian qword in the upper half of each lane), advances
// Z9 by four, and turns r into AddRoundKey(CTR block, key 0): the byte
// swap (Z11) gives the big-endian block, eight zero bytes and the count.
#define Z512CTR(r) \
	VPSHUFB Z11, Z9, r; \
	VPADDQ  Z10, Z9, Z9; \
	VPXORD  Z16, r, r

// Z512KS8 encrypts the next 32 counter blocks into Z0–Z7.
#define Z512KS8 \
	Z512CTR(Z0); Z512CTR(Z1); Z512CTR(Z2); Z512CTR(Z3); \
	Z512CTR(Z4); Z512CTR(Z5); Z512CTR(Z6); Z512CTR(Z7); \
	Z512ROUNDS(Z512ROUND8); \
	VAESENCLAST Z30, Z0, Z0; \
	VAESENCLAST Z30, Z1, Z1; \
	VAESENCLAST Z30, Z2, Z2; \
	VAESENCLAST Z30, Z3, Z3; \
	VAESENCLAST Z30, Z4, Z4; \
	VAESENCLAST Z30, Z5, Z5; \
	VAESENCLAST Z30, Z6, Z6; \
	VAESENCLAST Z30, Z7, Z7

// Z512KS4 encrypts the next 16 counter blocks into Z0–Z3.
#define Z512KS4 \
	Z512CTR(Z0); Z512CTR(Z1); Z512CTR(Z2); Z512CTR(Z3); \
	Z512ROUNDS(Z512ROUND4); \
	VAESENCLAST Z30, Z0, Z0; \
	VAESENCLAST Z30, Z1, Z1; \
	VAESENCLAST Z30, Z2, Z2; \
	VAESENCLAST Z30, Z3, Z3

// Z512ADD, Z512SUB and Z512SET combine keystream register r with the 64
// bytes (16 words) at off(DI): add, subtract from, or overwrite them.
#define Z512ADD(r, off) \
	VPADDD    off(DI), r, r; \
	VMOVDQU32 r, off(DI)

#define Z512SUB(r, off) \
	VMOVDQU32 off(DI), Z8; \
	VPSUBD    r, Z8, Z8; \
	VMOVDQU32 Z8, off(DI)

#define Z512SET(r, off) \
	VMOVDQU32 r, off(DI)

// Z512OP8 and Z512OP4 apply OP to two chunks (Z0–Z7) and one (Z0–Z3).
#define Z512OP8(OP) \
	OP(Z0, 0); OP(Z1, 64); OP(Z2, 128); OP(Z3, 192); \
	OP(Z4, 256); OP(Z5, 320); OP(Z6, 384); OP(Z7, 448)

#define Z512OP4(OP) \
	OP(Z0, 0); OP(Z1, 64); OP(Z2, 128); OP(Z3, 192)

// func ctrVAES512(dst *uint32, chunks int, rk *[15][32]byte, ctr uint64, mode int)
// ctrVAES's contract on ZMM registers: for each of chunks chunks of 64
// words at dst, the keystream of blocks ctr, ctr+1, … (16 per chunk) is
// added to (mode 0), subtracted from (mode 1) or written over (mode 2)
// the words, read as little-endian uint32s. Two chunks per iteration, an
// odd last chunk on its own.
TEXT ·ctrVAES512(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  chunks+8(FP), CX
	MOVQ  rk+16(FP), SI
	MOVQ  mode+32(FP), DX
	TESTQ CX, CX
	JZ    done

	VMOVDQU64 bswapHigh512<>(SB), Z11
	VMOVDQU64 ctrStep512<>(SB), Z10
	// Z9 = [0, ctr | 0, ctr+1 | 0, ctr+2 | 0, ctr+3] (qwords)
	VPBROADCASTQ ctr+24(FP), Z9
	VPANDQ       highQwords512<>(SB), Z9, Z9
	VPADDQ       ctrFirst512<>(SB), Z9, Z9

	// Round key i is the first 16 bytes of rk[i].
	VBROADCASTI32X4 0(SI), Z16
	VBROADCASTI32X4 32(SI), Z17
	VBROADCASTI32X4 64(SI), Z18
	VBROADCASTI32X4 96(SI), Z19
	VBROADCASTI32X4 128(SI), Z20
	VBROADCASTI32X4 160(SI), Z21
	VBROADCASTI32X4 192(SI), Z22
	VBROADCASTI32X4 224(SI), Z23
	VBROADCASTI32X4 256(SI), Z24
	VBROADCASTI32X4 288(SI), Z25
	VBROADCASTI32X4 320(SI), Z26
	VBROADCASTI32X4 352(SI), Z27
	VBROADCASTI32X4 384(SI), Z28
	VBROADCASTI32X4 416(SI), Z29
	VBROADCASTI32X4 448(SI), Z30

	CMPQ DX, $1
	JEQ  sub2
	JGT  set2

add2:
	CMPQ CX, $2
	JLT  add1
	Z512KS8
	Z512OP8(Z512ADD)
	ADDQ $512, DI
	SUBQ $2, CX
	JMP  add2

add1:
	TESTQ CX, CX
	JZ    finish
	Z512KS4
	Z512OP4(Z512ADD)
	JMP   finish

sub2:
	CMPQ CX, $2
	JLT  sub1
	Z512KS8
	Z512OP8(Z512SUB)
	ADDQ $512, DI
	SUBQ $2, CX
	JMP  sub2

sub1:
	TESTQ CX, CX
	JZ    finish
	Z512KS4
	Z512OP4(Z512SUB)
	JMP   finish

set2:
	CMPQ CX, $2
	JLT  set1
	Z512KS8
	Z512OP8(Z512SET)
	ADDQ $512, DI
	SUBQ $2, CX
	JMP  set2

set1:
	TESTQ CX, CX
	JZ    finish
	Z512KS4
	Z512OP4(Z512SET)

finish:
	VZEROUPPER

done:
	RET

// bswapHigh512 turns each 128-bit lane [0, c] (qwords, little-endian)
// into the block of eight zero bytes and c big-endian (VPSHUFB indices;
// 0x80 writes a zero byte).
DATA bswapHigh512<>+0(SB)/8, $0x8080808080808080
DATA bswapHigh512<>+8(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapHigh512<>+16(SB)/8, $0x8080808080808080
DATA bswapHigh512<>+24(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapHigh512<>+32(SB)/8, $0x8080808080808080
DATA bswapHigh512<>+40(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapHigh512<>+48(SB)/8, $0x8080808080808080
DATA bswapHigh512<>+56(SB)/8, $0x08090a0b0c0d0e0f
GLOBL bswapHigh512<>(SB), RODATA|NOPTR, $64

// highQwords512 keeps the upper qword of each lane.
DATA highQwords512<>+0(SB)/8, $0
DATA highQwords512<>+8(SB)/8, $0xffffffffffffffff
DATA highQwords512<>+16(SB)/8, $0
DATA highQwords512<>+24(SB)/8, $0xffffffffffffffff
DATA highQwords512<>+32(SB)/8, $0
DATA highQwords512<>+40(SB)/8, $0xffffffffffffffff
DATA highQwords512<>+48(SB)/8, $0
DATA highQwords512<>+56(SB)/8, $0xffffffffffffffff
GLOBL highQwords512<>(SB), RODATA|NOPTR, $64

// ctrFirst512 offsets the four lanes' counters by 0, 1, 2 and 3;
// ctrStep512 advances each by 4.
DATA ctrFirst512<>+0(SB)/8, $0
DATA ctrFirst512<>+8(SB)/8, $0
DATA ctrFirst512<>+16(SB)/8, $0
DATA ctrFirst512<>+24(SB)/8, $1
DATA ctrFirst512<>+32(SB)/8, $0
DATA ctrFirst512<>+40(SB)/8, $2
DATA ctrFirst512<>+48(SB)/8, $0
DATA ctrFirst512<>+56(SB)/8, $3
GLOBL ctrFirst512<>(SB), RODATA|NOPTR, $64

DATA ctrStep512<>+0(SB)/8, $0
DATA ctrStep512<>+8(SB)/8, $4
DATA ctrStep512<>+16(SB)/8, $0
DATA ctrStep512<>+24(SB)/8, $4
DATA ctrStep512<>+32(SB)/8, $0
DATA ctrStep512<>+40(SB)/8, $4
DATA ctrStep512<>+48(SB)/8, $0
DATA ctrStep512<>+56(SB)/8, $4
GLOBL ctrStep512<>(SB), RODATA|NOPTR, $64
