//go:build !cgo || !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "nvdecbench: NVDEC is not in this build: build it with cgo on Linux (CGO_ENABLED=1)")
	os.Exit(1)
}
