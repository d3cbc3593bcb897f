//go:build amd64 && !purego

package trt

import "golang.org/x/sys/cpu"

// haveF16C says whether Float16ToFloat32Into uses the CPU's conversion;
// tests turn it off to check the table on the same machine.
var haveF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

//go:noescape
func widenF16C(dst *float32, src *uint16, n int)

// widenFast converts what it can eight at a time with F16C's VCVTPH2PS
// (exact, as the table: every half value has a float32) and returns how
// many it converted.
func widenFast(dst []float32, src []uint16) int {
	if !haveF16C {
		return 0
	}
	n := len(src) &^ 7
	if n > 0 {
		widenF16C(&dst[:n][0], &src[0], n)
	}
	return n
}
