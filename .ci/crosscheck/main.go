// Command crosscheck proves that the cross toolchain flags of `make cross`
// build, link and run cgo code in C and C++ against the sysroot: it calls
// dlopen (libdl on glibc 2.31), pthreads and a C++ function that uses the
// standard library and exceptions, the things the trt and umem shims use.
package main

/*
#cgo LDFLAGS: -ldl -lstdc++
#include <dlfcn.h>
#include <stdlib.h>
int cc_sum(int n);
static int can_dlopen(void) {
	void *h = dlopen("libc.so.6", RTLD_NOW);
	if (h == NULL) return 0;
	dlclose(h);
	return 1;
}
*/
import "C"

import (
	"fmt"
	"os"
)

func main() {
	if C.can_dlopen() != 1 {
		fmt.Println("crosscheck: dlopen(libc.so.6) failed")
		os.Exit(1)
	}
	if got := C.cc_sum(10); got != 45 {
		fmt.Println("crosscheck: C++ cc_sum(10) =", got, "want 45")
		os.Exit(1)
	}
	fmt.Println("crosscheck: ok")
}
