//go:build amd64 && !purego

#include "textflag.h"

// The vector forms of fusedYUV (fused.go) and h2YUV (convert.go) for AVX2
// with FMA: eight output columns per iteration, in float32. Offsets into a
// colBlock (fused_simd.go).
#define O0 0
#define OC0 32
#define SY0 64
#define SU0 96
#define SV0 128
#define O1 160
#define OC1 192
#define SY1 224
#define SU1 256
#define SV1 288
#define WT 320
#define BLOCK 352

// Offsets into simdConsts: each a vector of 8.
#define YGAIN 0
#define KR 32
#define KG 64
#define KB 96
#define RV 128
#define NGU 160
#define NGV 192
#define BU 224
#define ZERO 256
#define C255 288
#define M255 320
#define C0R 352
#define C0G 384
#define C0B 416
#define C1R 448
#define C1G 480
#define C1B 512
#define BR 544
#define BG 576
#define BB 608
#define FIX 640
#define IDX0 672
#define IDX1 704
#define IDX2 736
#define UNP0 768
#define UNP1 800
#define UNP2 832
#define FIX8 864
#define LAST7 896
#define LINEBLOCK 160

// GATHER loads the dword at line + offsets (8 int32 at R10+OFF) into DST.
#define GATHER(OFF, LINE, DST) \
	VPCMPEQD Y15, Y15, Y15; \
	VMOVDQU OFF(R10), Y14; \
	VPXOR DST, DST, DST; \
	VPGATHERDD Y15, (LINE)(Y14*1), DST

// FIELD extracts the byte at bit shift (8 int32 at R10+SH) of SRC as float32 into DST.
#define FIELD(SH, SRC, DST) \
	VPSRLVD SH(R10), SRC, DST; \
	VPAND M255(R11), DST, DST; \
	VCVTDQ2PS DST, DST

// CONVERT turns Y (Y13), U (Y11) and V (Y12) into clamped R, G, B.
#define CONVERT(RA, GA, BA) \
	VMULPS YGAIN(R11), Y13, Y13; \
	VADDPS KR(R11), Y13, RA; \
	VFMADD231PS RV(R11), Y12, RA; \
	VADDPS KG(R11), Y13, GA; \
	VFMADD231PS NGU(R11), Y11, GA; \
	VFMADD231PS NGV(R11), Y12, GA; \
	VADDPS KB(R11), Y13, BA; \
	VFMADD231PS BU(R11), Y11, BA; \
	VMAXPS ZERO(R11), RA, RA; \
	VMINPS C255(R11), RA, RA; \
	VMAXPS ZERO(R11), GA, GA; \
	VMINPS C255(R11), GA, GA; \
	VMAXPS ZERO(R11), BA, BA; \
	VMINPS C255(R11), BA, BA

// TAPP converts one tap of a packed (4:2:2) line: Y, U and V in one dword.
#define TAPP(O, SY, SU, SV, LINE, RA, GA, BA) \
	GATHER(O, LINE, Y13); \
	FIELD(SU, Y13, Y11); \
	FIELD(SV, Y13, Y12); \
	FIELD(SY, Y13, Y13); \
	CONVERT(RA, GA, BA)

// TAPN converts one tap of NV12: Y from the luma line, U and V from the chroma line.
#define TAPN(O, OC, SY, SU, SV, LINE, CLINE, RA, GA, BA) \
	GATHER(O, LINE, Y13); \
	GATHER(OC, CLINE, Y12); \
	FIELD(SU, Y12, Y11); \
	FIELD(SV, Y12, Y12); \
	FIELD(SY, Y13, Y13); \
	CONVERT(RA, GA, BA)

// LERP blends tap 0 (A) into tap 1 (B): B = A + w·(B − A).
#define LERP(A, B) \
	VSUBPS A, B, B; \
	VFMADD132PS WT(R10), A, B

// OUT writes channel k: top·c0 + bottom·c1 + bias.
#define OUT(T, B, C0, C1, BIAS, D) \
	VMULPS C0(R11), T, T; \
	VFMADD231PS C1(R11), B, T; \
	VADDPS BIAS(R11), T, T; \
	VMOVUPS T, (D)(DX*4)

#define STORE \
	OUT(Y0, Y3, C0R, C1R, BR, R12); \
	OUT(Y1, Y4, C0G, C1G, BG, R13); \
	OUT(Y2, Y5, C0B, C1B, BB, R14); \
	ADDQ $8, DX; \
	ADDQ $BLOCK, R10

// func fusedYUVAVX2(yt, ct, yb, cb *byte, tab *colBlock, nblk int, k *simdConsts, d0, d1, d2 *float32, packed int)
TEXT ·fusedYUVAVX2(SB), NOSPLIT, $0-88
	MOVQ yt+0(FP), SI
	MOVQ ct+8(FP), DI
	MOVQ yb+16(FP), R8
	MOVQ cb+24(FP), R9
	MOVQ tab+32(FP), R10
	MOVQ nblk+40(FP), CX
	MOVQ k+48(FP), R11
	MOVQ d0+56(FP), R12
	MOVQ d1+64(FP), R13
	MOVQ d2+72(FP), R14
	MOVQ packed+80(FP), AX
	XORQ DX, DX
	TESTQ CX, CX
	JZ done
	TESTQ AX, AX
	JZ planar

packed:
	// top row: tap 0 in Y3–Y5, tap 1 and the blend in Y0–Y2
	TAPP(O0, SY0, SU0, SV0, SI, Y3, Y4, Y5)
	TAPP(O1, SY1, SU1, SV1, SI, Y0, Y1, Y2)
	LERP(Y3, Y0)
	LERP(Y4, Y1)
	LERP(Y5, Y2)
	// bottom row: tap 0 in Y6–Y8, tap 1 and the blend in Y3–Y5
	TAPP(O0, SY0, SU0, SV0, R8, Y6, Y7, Y8)
	TAPP(O1, SY1, SU1, SV1, R8, Y3, Y4, Y5)
	LERP(Y6, Y3)
	LERP(Y7, Y4)
	LERP(Y8, Y5)
	STORE
	DECQ CX
	JNZ packed
	JMP done

planar:
	TAPN(O0, OC0, SY0, SU0, SV0, SI, DI, Y3, Y4, Y5)
	TAPN(O1, OC1, SY1, SU1, SV1, SI, DI, Y0, Y1, Y2)
	LERP(Y3, Y0)
	LERP(Y4, Y1)
	LERP(Y5, Y2)
	TAPN(O0, OC0, SY0, SU0, SV0, R8, R9, Y6, Y7, Y8)
	TAPN(O1, OC1, SY1, SU1, SV1, R8, R9, Y3, Y4, Y5)
	LERP(Y6, Y3)
	LERP(Y7, Y4)
	LERP(Y8, Y5)
	STORE
	DECQ CX
	JNZ planar

done:
	VZEROUPPER
	RET

// INTERLEAVE stores R (Y0), G (Y1) and B (Y2), eight int32 each, as 24
// int32 R G B R G B ... at R8: for each third of the output, one VPERMD
// index spreads each channel over the positions it may take, and two
// blends pick G's and B's positions (GM and BM) over R's.
#define INTERLEAVE(IDX, GM, BM, OFF) \
	VMOVDQU IDX(R11), Y9; \
	VPERMD Y0, Y9, Y3; \
	VPERMD Y1, Y9, Y4; \
	VPERMD Y2, Y9, Y5; \
	VPBLENDD $GM, Y4, Y3, Y3; \
	VPBLENDD $BM, Y5, Y3, Y3; \
	VMOVDQU Y3, OFF(R8)

// func h2YUVAVX2(yl, cl *byte, tab *colBlock, nblk int, k *simdConsts, out *int32, packed int)
TEXT ·h2YUVAVX2(SB), NOSPLIT, $0-56
	MOVQ yl+0(FP), SI
	MOVQ cl+8(FP), DI
	MOVQ tab+16(FP), R10
	MOVQ nblk+24(FP), CX
	MOVQ k+32(FP), R11
	MOVQ out+40(FP), R8
	MOVQ packed+48(FP), AX
	TESTQ CX, CX
	JZ h2done

h2loop:
	TESTQ AX, AX
	JZ h2planar
	TAPP(O0, SY0, SU0, SV0, SI, Y3, Y4, Y5)
	TAPP(O1, SY1, SU1, SV1, SI, Y0, Y1, Y2)
	JMP h2blend

h2planar:
	TAPN(O0, OC0, SY0, SU0, SV0, SI, DI, Y3, Y4, Y5)
	TAPN(O1, OC1, SY1, SU1, SV1, SI, DI, Y0, Y1, Y2)

h2blend:
	LERP(Y3, Y0)
	LERP(Y4, Y1)
	LERP(Y5, Y2)
	// to h2YUV's fixed point, RGB·2^(fracBits+wBits), rounded to nearest
	VMULPS FIX(R11), Y0, Y0
	VMULPS FIX(R11), Y1, Y1
	VMULPS FIX(R11), Y2, Y2
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	// R G B R G B R G | B R G B R G B R | G B R G B R G B
	INTERLEAVE(IDX0, 0x92, 0x24, 0)
	INTERLEAVE(IDX1, 0x24, 0x49, 32)
	INTERLEAVE(IDX2, 0x49, 0x92, 64)
	ADDQ $96, R8
	ADDQ $BLOCK, R10
	DECQ CX
	JNZ h2loop

h2done:
	VZEROUPPER
	RET

// DEINTERLEAVE loads 24 int32 R G B R G B ... at BASE into R (Y0), G (Y1)
// and B (Y2) as float32: per channel, two blends gather its eight values
// from the three vectors and one VPERMD puts them in order.
#define DEINTERLEAVE(BASE) \
	VMOVDQU 0(BASE), Y6; \
	VMOVDQU 32(BASE), Y7; \
	VMOVDQU 64(BASE), Y8; \
	VPBLENDD $0x92, Y7, Y6, Y0; \
	VPBLENDD $0x24, Y8, Y0, Y0; \
	VPBLENDD $0x24, Y7, Y6, Y1; \
	VPBLENDD $0x49, Y8, Y1, Y1; \
	VPBLENDD $0x49, Y7, Y6, Y2; \
	VPBLENDD $0x92, Y8, Y2, Y2; \
	VMOVDQU UNP0(R11), Y9; \
	VPERMD Y0, Y9, Y0; \
	VMOVDQU UNP1(R11), Y9; \
	VPERMD Y1, Y9, Y1; \
	VMOVDQU UNP2(R11), Y9; \
	VPERMD Y2, Y9, Y2; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y1, Y1; \
	VCVTDQ2PS Y2, Y2

// func v2RGBAVX2(top, bot *int32, nblk int, k *simdConsts, d0, d1, d2 *float32)
TEXT ·v2RGBAVX2(SB), NOSPLIT, $0-56
	MOVQ top+0(FP), SI
	MOVQ bot+8(FP), DI
	MOVQ nblk+16(FP), CX
	MOVQ k+24(FP), R11
	MOVQ d0+32(FP), R12
	MOVQ d1+40(FP), R13
	MOVQ d2+48(FP), R14
	XORQ DX, DX
	TESTQ CX, CX
	JZ v2done

v2loop:
	DEINTERLEAVE(DI)
	VMOVAPS Y0, Y3
	VMOVAPS Y1, Y4
	VMOVAPS Y2, Y5
	DEINTERLEAVE(SI)
	OUT(Y0, Y3, C0R, C1R, BR, R12)
	OUT(Y1, Y4, C0G, C1G, BG, R13)
	OUT(Y2, Y5, C0B, C1B, BB, R14)
	ADDQ $8, DX
	ADDQ $96, SI
	ADDQ $96, DI
	DECQ CX
	JNZ v2loop

v2done:
	VZEROUPPER
	RET

// PREFIX turns the eight int32 of V into running sums continuing from the
// carry C (the sum so far, in every lane), and leaves the new total in C.
#define PREFIX(V, C) \
	VPSLLDQ $4, V, Y10; \
	VPADDD Y10, V, V; \
	VPSLLDQ $8, V, Y10; \
	VPADDD Y10, V, V; \
	VPSHUFD $0xFF, V, Y10; \
	VPERM2I128 $0x08, Y10, Y10, Y10; \
	VPADDD Y10, V, V; \
	VPADDD C, V, V; \
	VMOVDQU LAST7(R11), Y10; \
	VPERMD V, Y10, C

// func rowYUVAVX2(yl, cl *byte, tab *lineBlock, nblk int, k *simdConsts, s *int32, packed int, masks *[32]byte)
// Packed lines are read 16 bytes (8 pixels) at a time and taken apart with
// the VPSHUFB masks (Y, then U for each pixel; V for each pixel); NV12
// lines are gathered through tab like the other kernels.
TEXT ·rowYUVAVX2(SB), NOSPLIT, $0-64
	MOVQ yl+0(FP), SI
	MOVQ cl+8(FP), DI
	MOVQ tab+16(FP), R10
	MOVQ nblk+24(FP), CX
	MOVQ k+32(FP), R11
	MOVQ s+40(FP), R8
	MOVQ packed+48(FP), AX
	MOVQ masks+56(FP), R9
	MOVL $0, 0(R8)
	MOVL $0, 4(R8)
	MOVL $0, 8(R8)
	ADDQ $12, R8
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	TESTQ CX, CX
	JZ rowdone

rowloop:
	TESTQ AX, AX
	JZ rowplanar
	VMOVDQU (SI), X12
	VPSHUFB 0(R9), X12, X13
	VPSHUFB 16(R9), X12, X12
	VPSRLDQ $8, X13, X14
	VPMOVZXBD X13, Y13
	VPMOVZXBD X14, Y11
	VPMOVZXBD X12, Y12
	VCVTDQ2PS Y13, Y13
	VCVTDQ2PS Y11, Y11
	VCVTDQ2PS Y12, Y12
	CONVERT(Y0, Y1, Y2)
	ADDQ $16, SI
	JMP rowsum

rowplanar:
	TAPN(O0, OC0, SY0, SU0, SV0, SI, DI, Y0, Y1, Y2)

rowsum:
	// to the row functions' fixed point, RGB·2^fracBits, rounded to nearest
	VMULPS FIX8(R11), Y0, Y0
	VMULPS FIX8(R11), Y1, Y1
	VMULPS FIX8(R11), Y2, Y2
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	PREFIX(Y0, Y6)
	PREFIX(Y1, Y7)
	PREFIX(Y2, Y8)
	INTERLEAVE(IDX0, 0x92, 0x24, 0)
	INTERLEAVE(IDX1, 0x24, 0x49, 32)
	INTERLEAVE(IDX2, 0x49, 0x92, 64)
	ADDQ $96, R8
	ADDQ $LINEBLOCK, R10
	DECQ CX
	JNZ rowloop

rowdone:
	VZEROUPPER
	RET
