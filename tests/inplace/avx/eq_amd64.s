#include "textflag.h"

// func eqmask(p, q *[32]byte, n int) uint32
// A frame whose top word is no code address (q), as a compiled function's locals: a
// fault's pc is then taken as the function's own, which must be in .gopclntab.
TEXT ·eqmask(SB), NOSPLIT, $16-28
	MOVQ p+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ DI, 0(SP)
	MOVQ n+16(FP), CX
	VMOVDQU (DI), Y1
	XORL BX, BX
loop:
	VPCMPEQB (SI), Y1, Y2
	VPMOVMSKB Y2, AX
	ADDL AX, BX
	DECQ CX
	JNZ loop
	VZEROUPPER
	MOVL BX, ret+24(FP)
	RET
