//go:build !amd64 || purego

package trt

// haveF16C is false: there is no vector conversion on this architecture
// (the table serves).
var haveF16C = false

func widenFast([]float32, []uint16) int { return 0 }
