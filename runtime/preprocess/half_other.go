//go:build !amd64 || purego

package preprocess

// haveF16C is false: halvesFast has no vector conversion on this
// architecture.
var haveF16C = false

// halvesFast is halves.
func halvesFast(dst []uint16, src []float32) { halves(dst, src) }
