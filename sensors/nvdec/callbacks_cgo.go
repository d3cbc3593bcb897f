//go:build cgo && linux

package nvdec

// The parser's callbacks, called from C (cuvid_cgo.go's trampolines) inside
// cuvidParseVideoData, on the thread that called it. A file with //export
// may declare, not define, C in its preamble: the definitions are in
// cuvid_cgo.go.

/*
#include <stdint.h>
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export edgedNvdecSequence
func edgedNvdecSequence(user C.uintptr_t, format unsafe.Pointer) C.int {
	return C.int(cgo.Handle(user).Value().(callbacks).sequence(format))
}

//export edgedNvdecDecode
func edgedNvdecDecode(user C.uintptr_t, pic unsafe.Pointer) C.int {
	return C.int(cgo.Handle(user).Value().(callbacks).decode(pic))
}

//export edgedNvdecDisplay
func edgedNvdecDisplay(user C.uintptr_t, info unsafe.Pointer) C.int {
	return C.int(cgo.Handle(user).Value().(callbacks).display(info))
}
