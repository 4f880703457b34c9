//go:build amd64 && !purego

#include "textflag.h"

// func minBytesSSE2(dst, a, b *byte, n int)
TEXT ·minBytesSSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   mindone
minloop:
	MOVOU (SI), X0
	MOVOU (DX), X1
	PMINUB X1, X0
	MOVOU X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DX
	ADDQ $16, DI
	DECQ CX
	JNZ  minloop
mindone:
	RET

// func maxBytesSSE2(dst, a, b *byte, n int)
TEXT ·maxBytesSSE2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   maxdone
maxloop:
	MOVOU (SI), X0
	MOVOU (DX), X1
	PMAXUB X1, X0
	MOVOU X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DX
	ADDQ $16, DI
	DECQ CX
	JNZ  maxloop
maxdone:
	RET
