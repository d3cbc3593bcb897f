//go:build cgo && linux

package tensorrt

// #include <stdlib.h>
// #include "loader.h"
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
)

// openLibrary opens the first usable name and reads its version.
func openLibrary(names []string) (C.edged_trt_lib, Library, error) {
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	defer func() {
		for _, p := range cnames {
			C.free(unsafe.Pointer(p))
		}
	}()
	carr := (**C.char)(C.malloc(C.size_t(len(names)) * C.size_t(unsafe.Sizeof(cnames[0]))))
	defer C.free(unsafe.Pointer(carr))
	copy(unsafe.Slice(carr, len(names)), cnames)

	var lib C.edged_trt_lib
	var errbuf [2048]C.char
	rc := C.edged_trt_lib_open(carr, C.int(len(names)), &lib, &errbuf[0], C.size_t(len(errbuf)))
	detail := C.GoString(&errbuf[0])
	switch rc {
	case C.EDGED_TRT_LIB_OK:
		return lib, Library{Name: C.GoString(&lib.name[0]), Version: plan.VersionFromInt(int(lib.version))}, nil
	case C.EDGED_TRT_LIB_NO_SYMBOL:
		return lib, Library{}, fmt.Errorf("%w: tensorrt: no usable libnvinfer (%s); check that the file is TensorRT's "+
			"runtime library", trt.ErrBackend, detail)
	}
	return lib, Library{}, notFound(names, detail)
}

// Probe reports which libnvinfer this machine has, trying the same names as
// New. It works in builds without the tensorrt tag, for `edged check`. The
// library stays loaded: libnvinfer is never unloaded.
func Probe(library string) (Library, error) {
	_, l, err := openLibrary(sonames(HeaderVersion().Major, library))
	return l, err
}
