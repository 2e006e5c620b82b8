#include "textflag.h"

// AES-256 key expansion (FIPS 197, §5.2) with AESKEYGENASSIST, as in
// Intel's AES-NI white paper (Gueron 2010, Fig. 25): every round key is
// stored twice, side by side, so that VAESENC can take it as a 256-bit
// memory operand for two blocks at once.

// EXPAND folds the word broadcast in X2 into the previous round key of the
// same parity, X1: X1 ^= X1<<32 ^ X1<<64 ^ X1<<96 ^ X2. X4 is clobbered.
#define EXPAND \
	MOVOU X1, X4; \
	PSLLO $4, X4; \
	PXOR  X4, X1; \
	PSLLO $4, X4; \
	PXOR  X4, X1; \
	PSLLO $4, X4; \
	PXOR  X4, X1; \
	PXOR  X2, X1

// EXPAND3 is EXPAND for the odd round keys, held in X3.
#define EXPAND3 \
	MOVOU X3, X4; \
	PSLLO $4, X4; \
	PXOR  X4, X3; \
	PSLLO $4, X4; \
	PXOR  X4, X3; \
	PSLLO $4, X4; \
	PXOR  X4, X3; \
	PXOR  X2, X3

#define STORE1(off) \
	MOVOU X1, off(DI); \
	MOVOU X1, off+16(DI)

#define STORE3(off) \
	MOVOU X3, off(DI); \
	MOVOU X3, off+16(DI)

// EVEN derives round key 2i (rcon) from keys 2i−2 (X1) and 2i−1 (X3).
#define EVEN(rcon, off) \
	AESKEYGENASSIST $rcon, X3, X2; \
	PSHUFD $0xff, X2, X2; \
	EXPAND; \
	STORE1(off)

// ODD derives round key 2i+1 from keys 2i−1 (X3) and 2i (X1).
#define ODD(off) \
	AESKEYGENASSIST $0, X1, X2; \
	PSHUFD $0xaa, X2, X2; \
	EXPAND3; \
	STORE3(off)

// func aes256Expand(rk *[15][32]byte, key *[32]byte)
TEXT ·aes256Expand(SB), NOSPLIT, $0-16
	MOVQ  rk+0(FP), DI
	MOVQ  key+8(FP), SI
	MOVOU (SI), X1
	MOVOU 16(SI), X3
	STORE1(0)
	STORE3(32)
	EVEN(0x01, 64)
	ODD(96)
	EVEN(0x02, 128)
	ODD(160)
	EVEN(0x04, 192)
	ODD(224)
	EVEN(0x08, 256)
	ODD(288)
	EVEN(0x10, 320)
	ODD(352)
	EVEN(0x20, 384)
	ODD(416)
	EVEN(0x40, 448)
	RET

// ROUND applies round key off(SI) to the eight block pairs Y0–Y7 (round
// keys 0, 1, 2 and 14 stay in Y9–Y12).
#define ROUND(off) \
	VAESENC off(SI), Y0, Y0; \
	VAESENC off(SI), Y1, Y1; \
	VAESENC off(SI), Y2, Y2; \
	VAESENC off(SI), Y3, Y3; \
	VAESENC off(SI), Y4, Y4; \
	VAESENC off(SI), Y5, Y5; \
	VAESENC off(SI), Y6, Y6; \
	VAESENC off(SI), Y7, Y7

// ROUNDR is ROUND with the round key in register k.
#define ROUNDR(k) \
	VAESENC k, Y0, Y0; \
	VAESENC k, Y1, Y1; \
	VAESENC k, Y2, Y2; \
	VAESENC k, Y3, Y3; \
	VAESENC k, Y4, Y4; \
	VAESENC k, Y5, Y5; \
	VAESENC k, Y6, Y6; \
	VAESENC k, Y7, Y7

// KEYSTREAM encrypts the sixteen counter blocks Y14 + 2r (+1 in the upper
// half), r = 0..7, into Y0–Y7 and advances Y14 by 16 blocks. Each counter
// is kept as a little-endian qword in the upper half of its 128-bit lane
// and byte-swapped (Y15) into the big-endian block of NIST CTR with an
// all-zero IV (Go's cipher.NewCTR): fifteen zero bytes and the count,
// for fewer than 2^64 blocks.
#define KEYSTREAM \
	VMOVDQU Y14, Y0; \
	VPADDQ  Y13, Y0, Y1; \
	VPADDQ  Y13, Y1, Y2; \
	VPADDQ  Y13, Y2, Y3; \
	VPADDQ  Y13, Y3, Y4; \
	VPADDQ  Y13, Y4, Y5; \
	VPADDQ  Y13, Y5, Y6; \
	VPADDQ  Y13, Y6, Y7; \
	VPADDQ  Y13, Y7, Y14; \
	VPSHUFB Y15, Y0, Y0; \
	VPSHUFB Y15, Y1, Y1; \
	VPSHUFB Y15, Y2, Y2; \
	VPSHUFB Y15, Y3, Y3; \
	VPSHUFB Y15, Y4, Y4; \
	VPSHUFB Y15, Y5, Y5; \
	VPSHUFB Y15, Y6, Y6; \
	VPSHUFB Y15, Y7, Y7; \
	VPXOR   Y9, Y0, Y0; \
	VPXOR   Y9, Y1, Y1; \
	VPXOR   Y9, Y2, Y2; \
	VPXOR   Y9, Y3, Y3; \
	VPXOR   Y9, Y4, Y4; \
	VPXOR   Y9, Y5, Y5; \
	VPXOR   Y9, Y6, Y6; \
	VPXOR   Y9, Y7, Y7; \
	ROUNDR(Y10); \
	ROUNDR(Y11); \
	ROUND(96); \
	ROUND(128); \
	ROUND(160); \
	ROUND(192); \
	ROUND(224); \
	ROUND(256); \
	ROUND(288); \
	ROUND(320); \
	ROUND(352); \
	ROUND(384); \
	ROUND(416); \
	VAESENCLAST Y12, Y0, Y0; \
	VAESENCLAST Y12, Y1, Y1; \
	VAESENCLAST Y12, Y2, Y2; \
	VAESENCLAST Y12, Y3, Y3; \
	VAESENCLAST Y12, Y4, Y4; \
	VAESENCLAST Y12, Y5, Y5; \
	VAESENCLAST Y12, Y6, Y6; \
	VAESENCLAST Y12, Y7, Y7

// OP combines keystream register Yr with the 32 bytes at off(DI).
#define ADDW(r, off) \
	VPADDD off(DI), r, r; \
	VMOVDQU r, off(DI)

#define SUBW(r, off) \
	VMOVDQU off(DI), Y8; \
	VPSUBD  r, Y8, Y8; \
	VMOVDQU Y8, off(DI)

#define SETW(r, off) \
	VMOVDQU r, off(DI)

// func ctrVAES(dst *uint32, chunks int, rk *[15][32]byte, ctr uint64, mode int)
// For each of chunks chunks of 64 words at dst, the keystream of blocks
// ctr, ctr+1, … (16 per chunk) is added to (mode 0), subtracted from (mode
// 1) or written over (mode 2) the words, read as little-endian uint32s.
TEXT ·ctrVAES(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ chunks+8(FP), CX
	MOVQ rk+16(FP), SI
	MOVQ mode+32(FP), DX
	TESTQ CX, CX
	JZ   done
	VMOVDQU bswapHigh<>(SB), Y15
	VMOVDQU ctrStep<>(SB), Y13
	// Y14 = [0, ctr | 0, ctr+1]
	VPBROADCASTQ ctr+24(FP), Y14
	VPAND   highQwords<>(SB), Y14, Y14
	VPADDQ  ctrFirst<>(SB), Y14, Y14
	VMOVDQU (SI), Y9
	VMOVDQU 32(SI), Y10
	VMOVDQU 64(SI), Y11
	VMOVDQU 448(SI), Y12
	CMPQ DX, $1
	JEQ  subloop
	JGT  setloop

addloop:
	KEYSTREAM
	ADDW(Y0, 0)
	ADDW(Y1, 32)
	ADDW(Y2, 64)
	ADDW(Y3, 96)
	ADDW(Y4, 128)
	ADDW(Y5, 160)
	ADDW(Y6, 192)
	ADDW(Y7, 224)
	ADDQ $256, DI
	DECQ CX
	JNZ  addloop
	JMP  finish

subloop:
	KEYSTREAM
	SUBW(Y0, 0)
	SUBW(Y1, 32)
	SUBW(Y2, 64)
	SUBW(Y3, 96)
	SUBW(Y4, 128)
	SUBW(Y5, 160)
	SUBW(Y6, 192)
	SUBW(Y7, 224)
	ADDQ $256, DI
	DECQ CX
	JNZ  subloop
	JMP  finish

setloop:
	KEYSTREAM
	SETW(Y0, 0)
	SETW(Y1, 32)
	SETW(Y2, 64)
	SETW(Y3, 96)
	SETW(Y4, 128)
	SETW(Y5, 160)
	SETW(Y6, 192)
	SETW(Y7, 224)
	ADDQ $256, DI
	DECQ CX
	JNZ  setloop

finish:
	VZEROUPPER
done:
	RET

// bswapHigh turns each 128-bit lane [0, c] (qwords, little-endian) into
// the block of eight zero bytes and c big-endian.
DATA bswapHigh<>+0(SB)/8, $0x8080808080808080
DATA bswapHigh<>+8(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapHigh<>+16(SB)/8, $0x8080808080808080
DATA bswapHigh<>+24(SB)/8, $0x08090a0b0c0d0e0f
GLOBL bswapHigh<>(SB), RODATA|NOPTR, $32

// highQwords keeps the upper qword of each lane.
DATA highQwords<>+0(SB)/8, $0
DATA highQwords<>+8(SB)/8, $0xffffffffffffffff
DATA highQwords<>+16(SB)/8, $0
DATA highQwords<>+24(SB)/8, $0xffffffffffffffff
GLOBL highQwords<>(SB), RODATA|NOPTR, $32

// ctrFirst offsets the two lanes' counters by 0 and 1; ctrStep advances
// both by 2.
DATA ctrFirst<>+0(SB)/8, $0
DATA ctrFirst<>+8(SB)/8, $0
DATA ctrFirst<>+16(SB)/8, $0
DATA ctrFirst<>+24(SB)/8, $1
GLOBL ctrFirst<>(SB), RODATA|NOPTR, $32

DATA ctrStep<>+0(SB)/8, $0
DATA ctrStep<>+8(SB)/8, $2
DATA ctrStep<>+16(SB)/8, $0
DATA ctrStep<>+24(SB)/8, $2
GLOBL ctrStep<>(SB), RODATA|NOPTR, $32

// func cpuid7ecx() uint32
TEXT ·cpuid7ecx(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
