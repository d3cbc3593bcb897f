//go:build amd64 && !purego

#include "textflag.h"

// func widenF16C(dst *float32, src *uint16, n int)
// Converts n (a multiple of 8) float16 values to float32.
TEXT ·widenF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ done

loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET
