//go:build !purego

#include "textflag.h"

// func copyNT(dst, src *float64, n int)
//
// Copies n float64s with non-temporal stores (MOVNTDQ, SSE2): the
// destination's cache lines are written to memory without being read
// first. One element is copied plainly first when dst is not 16-byte
// aligned, and the last odd elements plainly; SFENCE at the end orders the
// non-temporal stores before any later store (another goroutine's or the
// GPU's view of dst follows a synchronising operation after this call).
TEXT ·copyNT(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	TESTQ	CX, CX
	JLE	done
	TESTQ	$15, DI
	JEQ	aligned
	MOVQ	(SI), AX
	MOVQ	AX, (DI)
	ADDQ	$8, SI
	ADDQ	$8, DI
	DECQ	CX

aligned:
	CMPQ	CX, $8
	JLT	tail

loop:
	MOVOU	(SI), X0
	MOVOU	16(SI), X1
	MOVOU	32(SI), X2
	MOVOU	48(SI), X3
	MOVNTO	X0, (DI)
	MOVNTO	X1, 16(DI)
	MOVNTO	X2, 32(DI)
	MOVNTO	X3, 48(DI)
	ADDQ	$64, SI
	ADDQ	$64, DI
	SUBQ	$8, CX
	CMPQ	CX, $8
	JGE	loop

tail:
	TESTQ	CX, CX
	JEQ	fence

tailloop:
	MOVQ	(SI), AX
	MOVQ	AX, (DI)
	ADDQ	$8, SI
	ADDQ	$8, DI
	DECQ	CX
	JNZ	tailloop

fence:
	SFENCE

done:
	RET
