#include "textflag.h"

// func addWordsAsm(dst, w []uint32)
// dst[i] += w[i] for i < len(dst); the caller guarantees len(w) ≥ len(dst).
TEXT ·addWordsAsm(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ w_base+24(FP), SI
	MOVQ CX, BX
	SHRQ $3, BX
	JZ   addtail

addloop:
	MOVOU (DI), X0
	MOVOU 16(DI), X1
	MOVOU (SI), X2
	MOVOU 16(SI), X3
	PADDL X2, X0
	PADDL X3, X1
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	ADDQ  $32, DI
	ADDQ  $32, SI
	DECQ  BX
	JNZ   addloop

addtail:
	ANDQ $7, CX
	JZ   adddone

addtail1:
	MOVL (SI), AX
	ADDL AX, (DI)
	ADDQ $4, DI
	ADDQ $4, SI
	DECQ CX
	JNZ  addtail1

adddone:
	RET

// func subWordsAsm(dst, w []uint32)
// dst[i] -= w[i] for i < len(dst); the caller guarantees len(w) ≥ len(dst).
TEXT ·subWordsAsm(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ w_base+24(FP), SI
	MOVQ CX, BX
	SHRQ $3, BX
	JZ   subtail

subloop:
	MOVOU (DI), X0
	MOVOU 16(DI), X1
	MOVOU (SI), X2
	MOVOU 16(SI), X3
	PSUBL X2, X0
	PSUBL X3, X1
	MOVOU X0, (DI)
	MOVOU X1, 16(DI)
	ADDQ  $32, DI
	ADDQ  $32, SI
	DECQ  BX
	JNZ   subloop

subtail:
	ANDQ $7, CX
	JZ   subdone

subtail1:
	MOVL (SI), AX
	SUBL AX, (DI)
	ADDQ $4, DI
	ADDQ $4, SI
	DECQ CX
	JNZ  subtail1

subdone:
	RET
