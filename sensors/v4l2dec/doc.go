// Package v4l2dec is the hardware video decoder of network cameras on a
// Jetson (JetPack 5 and 6): the decoder engine's V4L2 memory-to-memory
// device (/dev/v4l2-nvdec, /dev/nvhost-nvdec on older releases), driven
// through libv4l2 and NVIDIA's libv4l2 plugin (plain ioctls do not reach
// the engine there), with NVIDIA's buffer library (NvBufSurface) for the
// pictures, all loaded at run time.
//
// Access units go in on the bitstream (OUTPUT_MPLANE) plane, one per MMAP
// buffer, carrying their id in the buffer's timestamp, which the engine
// copies to the picture. The first key picture's SPS raises
// V4L2_EVENT_RESOLUTION_CHANGE; the decoder then reads the picture format
// (NV12M) and crop, requests the capture plane's buffers (the engine's
// minimum plus two), wraps each one's dmabuf as an NvBufSurface, and
// starts the plane; a later change does it all again. The engine's
// pictures are block-linear: Write converts each (NvBufSurfTransform)
// into one pitch-linear NV12 surface mapped for CUDA once (its EGL image
// registered with the CUDA driver), and copies the visible rows from
// there, device to device, into the frame slot (cuMemcpy2D through
// internal/cuda) or into host memory. A managed frame slot (what umem's
// auto chooses on a Jetson, attached to the host) is given to the
// decoder's stream for the copy and back to the host after it, as a
// device without concurrent managed access requires. A picture the engine
// flags (V4L2_BUF_FLAG_ERROR) is written and marked corrupt.
//
// Loss is handled as for the other decoders: sensors/rtsp drops access
// units after a loss until the next key picture before they reach the
// decoder.
//
// The boundary (libv4l2's calls on the node; NvBufSurface and the CUDA
// mapping) is two interfaces inside the package: the tests drive the
// whole sequence against a fake of the engine written from NVIDIA's
// documentation and samples (formats, controls, events, both planes,
// resolution changes, end of stream, flagged pictures and failures), and
// the hil tests decode real streams on a board. A build without cgo, or
// not for Linux, has no Jetson decoder.
package v4l2dec
