//go:build amd64

#include "textflag.h"

// func sgemmKernel5x16(kc int, a unsafe.Pointer, rsA, csA uintptr, b unsafe.Pointer, rsB uintptr, c unsafe.Pointer, ldc uintptr, alpha, beta float32, load int)
//
// The 5×16 AVX2 + FMA micro-kernel of sgemm_amd64.go (see sgemmAsm): ten
// YMM accumulators C[i][0:8], C[i][8:16] for rows i = 0..4, summed over
// kc steps p with one VFMADD231PS each:
//
//	acc[i][j] += A(i, p) · B(p, j),  A(i, p) at a + i·rsA + p·csA,
//	                                 B(p, 0:16) at b + p·rsB (16 floats).
//
// Then each row of C (c + i·ldc, 16 floats) becomes alpha·acc, or with
// load ≠ 0 alpha·acc + beta·C (one fused multiply-add, so C is read only
// then). Registers: Y0–Y9 accumulators, Y10–Y11 the row of B, Y12–Y15 the
// broadcasts of A. Ends with VZEROUPPER (Go's scalar float code is legacy
// SSE; doc.go).
TEXT ·sgemmKernel5x16(SB), NOSPLIT, $0-80
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ rsA+16(FP), DX
	MOVQ csA+24(FP), SI
	MOVQ b+32(FP), BX
	MOVQ rsB+40(FP), DI
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	LEAQ (R11)(DX*1), R12
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
	TESTQ CX, CX
	JEQ store

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

store:
	MOVQ c+48(FP), R8
	MOVQ ldc+56(FP), DX
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
	MOVQ load+72(FP), AX
	TESTQ AX, AX
	JEQ overwrite
	VBROADCASTSS beta+68(FP), Y11
	VFMADD231PS (R8), Y11, Y0
	VFMADD231PS 32(R8), Y11, Y1
	VMOVUPS Y0, (R8)
	VMOVUPS Y1, 32(R8)
	ADDQ DX, R8
	VFMADD231PS (R8), Y11, Y2
	VFMADD231PS 32(R8), Y11, Y3
	VMOVUPS Y2, (R8)
	VMOVUPS Y3, 32(R8)
	ADDQ DX, R8
	VFMADD231PS (R8), Y11, Y4
	VFMADD231PS 32(R8), Y11, Y5
	VMOVUPS Y4, (R8)
	VMOVUPS Y5, 32(R8)
	ADDQ DX, R8
	VFMADD231PS (R8), Y11, Y6
	VFMADD231PS 32(R8), Y11, Y7
	VMOVUPS Y6, (R8)
	VMOVUPS Y7, 32(R8)
	ADDQ DX, R8
	VFMADD231PS (R8), Y11, Y8
	VFMADD231PS 32(R8), Y11, Y9
	VMOVUPS Y8, (R8)
	VMOVUPS Y9, 32(R8)
	VZEROUPPER
	RET

overwrite:
	VMOVUPS Y0, (R8)
	VMOVUPS Y1, 32(R8)
	ADDQ DX, R8
	VMOVUPS Y2, (R8)
	VMOVUPS Y3, 32(R8)
	ADDQ DX, R8
	VMOVUPS Y4, (R8)
	VMOVUPS Y5, 32(R8)
	ADDQ DX, R8
	VMOVUPS Y6, (R8)
	VMOVUPS Y7, 32(R8)
	ADDQ DX, R8
	VMOVUPS Y8, (R8)
	VMOVUPS Y9, 32(R8)
	VZEROUPPER
	RET
