// Package cuda is edged's one binding of the CUDA driver API: it loads
// libcuda.so.1 with dlopen at run time (nothing of CUDA is needed to build;
// the Jetson paths are tried after the loader's), binds the entry points by
// their versioned names, and calls them for context, device, memory,
// stream, event and module work, each returning its status as a [Result],
// whose name and text come from a table of every CUresult (the driver's
// own text once it is loaded).
//
// It is the bottom of the house: it imports nothing of edged, and umem
// (buffers, streams, kernels), sensors/jpeg (nvJPEG, which takes the
// driver's entry points for its C decode loop from [Driver.Proc]) and
// sensors/nvdec and sensors/v4l2dec (a decoder's stream on the primary
// context and its 2D copies: [Stream]) use it, so the
// driver is loaded once per process. Errors carry no sentinel
// of their own: each caller wraps them in its own (umem.ErrNoCUDA,
// jpeg.ErrNoNVJPEG). Tests of callers fake the driver at their own
// interface (umem's driver), not here. A build without cgo has no driver:
// [Load] says so.
package cuda
