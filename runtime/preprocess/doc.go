// Package preprocess turns a captured frame into an engine input tensor.
//
// options.go is the contract: Options (resize stretch or letterbox, filter
// bilinear or area, BT.601 or BT.709 in limited or full range, RGB or BGR,
// scale/mean/std, and an Output of 1 or 3 channels, NCHW or NHWC, float32
// or float16) and the function every implementation computes from them,
// spelled out by ColorCoeffs, Place, Taps, Affine and Half. Source frames
// are YUYV, UYVY, NV12, GREY, RGB24 or BGR24 with any stride; MJPEG must be
// decoded by the source.
//
// Three implementations compute it:
//
//   - reference, in reference_test.go: written for clarity, every output
//     pixel a weighted sum of source pixels converted one by one; the
//     tests of the other two compare against it.
//   - Preprocessor (New, Run, Close), the fast CPU path: fixed-point YUV
//     tables with branch-free clamps, so a frame costs the same whatever
//     its content; it converts only the source pixels the filter reads
//     (bilinear: two pixels per column in two rows per output row), caches
//     its tables per source format, splits rows across long-lived worker
//     goroutines and allocates nothing per frame. On amd64 CPUs with AVX2
//     and FMA its bilinear passes run fused_amd64.s, eight output columns
//     per iteration in float32 with one gathered 4-byte word per tap: the
//     fused pass (YUV source, shrinking 2× or more vertically), or the
//     horizontal YUV pass into the row cache and the 2-tap vertical pass,
//     and the area filter's conversion of YUV lines into running sums;
//     float16 tensors are stored with F16C. The portable Go code runs
//     elsewhere (arm64, the purego build tag) and is tested beside it.
//   - the GPU path in gpu.go, for frames and tensors in CUDA memory.
package preprocess
