//go:build amd64 && !purego

package preprocess

import "golang.org/x/sys/cpu"

// haveF16C says whether halvesFast uses the CPU's conversion; tests turn
// it off to check the portable code on the same machine.
var haveF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

//go:noescape
func halvesF16C(dst *uint16, src *float32, n int)

// halvesFast is halves with the F16C instruction where the CPU has it,
// eight values at a time: the same rounding (to nearest even), the same
// bits for every value but NaN, which stays a NaN with another payload.
func halvesFast(dst []uint16, src []float32) {
	n := 0
	if haveF16C {
		n = len(src) &^ 7
		if n > 0 {
			dst = dst[:len(src)] // bounds: the conversion writes dst[:n]
			halvesF16C(&dst[0], &src[0], n)
		}
	}
	halves(dst[n:], src[n:])
}
