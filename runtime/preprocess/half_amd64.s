//go:build amd64 && !purego

#include "textflag.h"

// func halvesF16C(dst *uint16, src *float32, n int)
// Converts n (a multiple of 8) float32 to float16, rounding to nearest even.
TEXT ·halvesF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ done

loop:
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ $32, SI
	ADDQ $16, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET
