//go:build amd64

#include "textflag.h"

// Column masks for VMASKMOVPS: sixteen all-ones words, then sixteen
// zeros; the eight words at 4·(16 − r) bytes in have the first r lanes set
// (0 ≤ r ≤ 8), those at 4·(24 − r) the lanes past eight of r ≤ 16.
DATA sgemmMask<>+0(SB)/8, $-1
DATA sgemmMask<>+8(SB)/8, $-1
DATA sgemmMask<>+16(SB)/8, $-1
DATA sgemmMask<>+24(SB)/8, $-1
DATA sgemmMask<>+32(SB)/8, $-1
DATA sgemmMask<>+40(SB)/8, $-1
DATA sgemmMask<>+48(SB)/8, $-1
DATA sgemmMask<>+56(SB)/8, $-1
DATA sgemmMask<>+64(SB)/8, $0
DATA sgemmMask<>+72(SB)/8, $0
DATA sgemmMask<>+80(SB)/8, $0
DATA sgemmMask<>+88(SB)/8, $0
DATA sgemmMask<>+96(SB)/8, $0
DATA sgemmMask<>+104(SB)/8, $0
DATA sgemmMask<>+112(SB)/8, $0
DATA sgemmMask<>+120(SB)/8, $0
GLOBL sgemmMask<>(SB), RODATA|NOPTR, $128

// func sgemmKernel5x16(kc int, a unsafe.Pointer, rsA, csA uintptr, b unsafe.Pointer, rsB uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load, mr, nt int, aStep, bStep, cStep uintptr, pack unsafe.Pointer, nr int)
//
// The 5×16 AVX2 + FMA micro-kernel of sgemm_amd64.go (see sgemmAsm), run
// over nt ≥ 1 tiles of C in one call: tile t reads op(A) from
// a + t·aStep, op(B) from b + t·bStep and stores C at c + t·cStep. For
// each tile, ten YMM accumulators C[i][0:8], C[i][8:16] for rows
// i = 0..4 are summed over kc ≥ 1 steps p with one VFMADD231PS each:
//
//	acc[i][j] += A(i, p) · B(p, j),  A(i, p) at a + i·rsA + p·csA,
//	                                 B(p, 0:16) at b + p·rsB (16 floats).
//
// Rows i ≥ mr (1 ≤ mr ≤ 5) read row 0 of A instead (so nothing past the
// mr rows is read) and are not stored. With nr < 16 only the first nr
// columns of B are read (VMASKMOVPS, the rest are zero) and stored; the
// A broadcasts then take two registers and the masks Y14–Y15. Then each
// of the mr rows of C (c + i·ldc) becomes alpha·acc, or with load ≠ 0
// alpha·acc + beta·C (one fused multiply-add, so C is read only then);
// for alpha = 1 the multiplication, exact, is skipped.
//
// With pack ≠ nil (and nr = 16, bStep = 0), the first tile also copies
// each row of B it reads to pack (kc rows of 16 floats) and prefetches
// the line after it into L2 (B in place: the next 16 columns); the later
// tiles read B from pack. Registers: Y0–Y9 accumulators, Y10–Y11 the row
// of B, Y12–Y15 the broadcasts of A; R13, R14, R15 the tile's A, B and C;
// the tiles left and pack in the frame. Ends with VZEROUPPER (Go's scalar
// float code is legacy SSE; doc.go).
TEXT ·sgemmKernel5x16(SB), NOSPLIT, $16-136
	MOVQ a+8(FP), R13
	MOVQ b+32(FP), R14
	MOVQ c+48(FP), R15
	MOVQ nt+88(FP), DX
	MOVQ DX, left-8(SP)
	MOVQ pack+120(FP), DX
	MOVQ DX, pk-16(SP)
	MOVQ csA+24(FP), SI
	MOVQ rsB+40(FP), DI
	// Column masks (used only for nr < 16).
	MOVQ nr+128(FP), AX
	NEGQ AX
	LEAQ sgemmMask<>+64(SB), DX
	VMOVUPS (DX)(AX*4), Y14
	VMOVUPS 32(DX)(AX*4), Y15

tile:
	// Row pointers of A; rows past mr repeat row 0.
	MOVQ rsA+16(FP), AX
	MOVQ mr+80(FP), CX
	MOVQ R13, R8
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	LEAQ (R11)(AX*1), R12
	CMPQ CX, $2
	CMOVQLT R8, R9
	CMPQ CX, $3
	CMOVQLT R8, R10
	CMPQ CX, $4
	CMOVQLT R8, R11
	CMPQ CX, $5
	CMOVQLT R8, R12
	MOVQ R14, BX
	MOVQ kc+0(FP), CX
	XORQ AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	CMPQ nr+128(FP), $16
	JLT loopMask
	MOVQ pk-16(SP), DX
	TESTQ DX, DX
	JNE loopPack

loop:
	VMOVUPS (BX), Y10
	VMOVUPS 32(BX), Y11
	VBROADCASTSS (R8)(AX*1), Y12
	VBROADCASTSS (R9)(AX*1), Y13
	VFMADD231PS Y10, Y12, Y0
	VFMADD231PS Y11, Y12, Y1
	VBROADCASTSS (R10)(AX*1), Y14
	VFMADD231PS Y10, Y13, Y2
	VFMADD231PS Y11, Y13, Y3
	VBROADCASTSS (R11)(AX*1), Y15
	VFMADD231PS Y10, Y14, Y4
	VFMADD231PS Y11, Y14, Y5
	VBROADCASTSS (R12)(AX*1), Y12
	VFMADD231PS Y10, Y15, Y6
	VFMADD231PS Y11, Y15, Y7
	VFMADD231PS Y10, Y12, Y8
	VFMADD231PS Y11, Y12, Y9
	ADDQ SI, AX
	ADDQ DI, BX
	DECQ CX
	JNE loop
	JMP store

	// The first tile with pack ≠ nil: as loop, but each row of B is also
	// copied to pack (DX), and the line after it (the next 16 columns of
	// B in place) prefetched into L2. Later tiles read B from pack.
loopPack:
	VMOVUPS (BX), Y10
	VMOVUPS 32(BX), Y11
	PREFETCHT1 64(BX)
	VBROADCASTSS (R8)(AX*1), Y12
	VBROADCASTSS (R9)(AX*1), Y13
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	VFMADD231PS Y10, Y12, Y0
	VFMADD231PS Y11, Y12, Y1
	VBROADCASTSS (R10)(AX*1), Y14
	VFMADD231PS Y10, Y13, Y2
	VFMADD231PS Y11, Y13, Y3
	VBROADCASTSS (R11)(AX*1), Y15
	VFMADD231PS Y10, Y14, Y4
	VFMADD231PS Y11, Y14, Y5
	VBROADCASTSS (R12)(AX*1), Y12
	VFMADD231PS Y10, Y15, Y6
	VFMADD231PS Y11, Y15, Y7
	VFMADD231PS Y10, Y12, Y8
	VFMADD231PS Y11, Y12, Y9
	ADDQ SI, AX
	ADDQ DI, BX
	ADDQ $64, DX
	DECQ CX
	JNE loopPack
	MOVQ pack+120(FP), R14
	MOVQ $64, DI
	MOVQ $0, pk-16(SP)
	JMP store

	// nr < 16: loads under the masks Y14–Y15, broadcasts in Y12–Y13.
loopMask:
	VMASKMOVPS (BX), Y14, Y10
	VMASKMOVPS 32(BX), Y15, Y11
	VBROADCASTSS (R8)(AX*1), Y12
	VBROADCASTSS (R9)(AX*1), Y13
	VFMADD231PS Y10, Y12, Y0
	VFMADD231PS Y11, Y12, Y1
	VBROADCASTSS (R10)(AX*1), Y12
	VFMADD231PS Y10, Y13, Y2
	VFMADD231PS Y11, Y13, Y3
	VBROADCASTSS (R11)(AX*1), Y13
	VFMADD231PS Y10, Y12, Y4
	VFMADD231PS Y11, Y12, Y5
	VBROADCASTSS (R12)(AX*1), Y12
	VFMADD231PS Y10, Y13, Y6
	VFMADD231PS Y11, Y13, Y7
	VFMADD231PS Y10, Y12, Y8
	VFMADD231PS Y11, Y12, Y9
	ADDQ SI, AX
	ADDQ DI, BX
	DECQ CX
	JNE loopMask

store:
	// Store: R8 the row of C, R9 ldc, CX the rows left.
	MOVQ R15, R8
	MOVQ ldc+56(FP), R9
	MOVQ mr+80(FP), CX
	MOVL alpha+64(FP), AX
	CMPL AX, $0x3f800000
	JEQ scaled
	VBROADCASTSS alpha+64(FP), Y10
	VMULPS Y10, Y0, Y0
	VMULPS Y10, Y1, Y1
	VMULPS Y10, Y2, Y2
	VMULPS Y10, Y3, Y3
	VMULPS Y10, Y4, Y4
	VMULPS Y10, Y5, Y5
	VMULPS Y10, Y6, Y6
	VMULPS Y10, Y7, Y7
	VMULPS Y10, Y8, Y8
	VMULPS Y10, Y9, Y9

scaled:
	MOVQ load+72(FP), AX
	CMPQ nr+128(FP), $16
	JLT storeMask
	TESTQ AX, AX
	JEQ overwrite
	VBROADCASTSS beta+68(FP), Y11

#define ROWLOAD(lo, hi) \
	VFMADD231PS (R8), Y11, lo; \
	VFMADD231PS 32(R8), Y11, hi; \
	VMOVUPS lo, (R8); \
	VMOVUPS hi, 32(R8); \
	DECQ CX; \
	JEQ next; \
	ADDQ R9, R8

	ROWLOAD(Y0, Y1)
	ROWLOAD(Y2, Y3)
	ROWLOAD(Y4, Y5)
	ROWLOAD(Y6, Y7)
	ROWLOAD(Y8, Y9)
	JMP next

overwrite:
#define ROWOVER(lo, hi) \
	VMOVUPS lo, (R8); \
	VMOVUPS hi, 32(R8); \
	DECQ CX; \
	JEQ next; \
	ADDQ R9, R8

	ROWOVER(Y0, Y1)
	ROWOVER(Y2, Y3)
	ROWOVER(Y4, Y5)
	ROWOVER(Y6, Y7)
	ROWOVER(Y8, Y9)
	JMP next

storeMask:
	TESTQ AX, AX
	JEQ overwriteMask
	VBROADCASTSS beta+68(FP), Y11

#define ROWLOADM(lo, hi) \
	VMASKMOVPS (R8), Y14, Y12; \
	VMASKMOVPS 32(R8), Y15, Y13; \
	VFMADD231PS Y12, Y11, lo; \
	VFMADD231PS Y13, Y11, hi; \
	VMASKMOVPS lo, Y14, (R8); \
	VMASKMOVPS hi, Y15, 32(R8); \
	DECQ CX; \
	JEQ next; \
	ADDQ R9, R8

	ROWLOADM(Y0, Y1)
	ROWLOADM(Y2, Y3)
	ROWLOADM(Y4, Y5)
	ROWLOADM(Y6, Y7)
	ROWLOADM(Y8, Y9)
	JMP next

overwriteMask:
#define ROWOVERM(lo, hi) \
	VMASKMOVPS lo, Y14, (R8); \
	VMASKMOVPS hi, Y15, 32(R8); \
	DECQ CX; \
	JEQ next; \
	ADDQ R9, R8

	ROWOVERM(Y0, Y1)
	ROWOVERM(Y2, Y3)
	ROWOVERM(Y4, Y5)
	ROWOVERM(Y6, Y7)
	ROWOVERM(Y8, Y9)

next:
	ADDQ aStep+96(FP), R13
	ADDQ bStep+104(FP), R14
	ADDQ cStep+112(FP), R15
	DECQ left-8(SP)
	JNE tile
	VZEROUPPER
	RET
