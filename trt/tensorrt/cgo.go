//go:build cgo && linux

package tensorrt

// All cgo flags of the package. The TensorRT headers are not named here:
// they come from the compiler's default path (JetPack installs them in
// /usr/include/aarch64-linux-gnu) or from CGO_CXXFLAGS="-isystem DIR"
// (make -C trt/tensorrt test TENSORRT_INCLUDE=DIR), so builds without the
// tensorrt tag need no headers at all. cudastub/ provides the two CUDA
// typedefs TensorRT's headers use. For arm64 cross builds against the
// JetPack sysroot, CGO_CXXFLAGS also carries the sysroot's include folders
// (see DESIGN.md, "Testing tiers"); glibc 2.31 keeps dlopen in libdl.

// #cgo CXXFLAGS: -std=c++17 -I${SRCDIR}/cudastub
// #cgo LDFLAGS: -ldl
import "C"
