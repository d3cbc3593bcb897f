// Package nvdec is the hardware video decoder of network cameras on
// discrete NVIDIA GPUs: NVDEC through libnvcuvid.so.1, the library the
// NVIDIA driver installs beside libcuda, loaded at run time (dlopen; no
// NVIDIA header is compiled in: the few structures are laid out by
// offsets this package declares, the same on x86-64 and arm64). It
// decodes H.264 and H.265 access units (Annex-B, as sensors/h26x
// assembles them) and writes each picture, as NV12, into a frame slot:
// device to device (cuMemcpy2D through internal/cuda, the one binding of
// the CUDA driver) when the slot is memory the GPU addresses, so a
// decoded picture never passes through the host on its way to the GPU
// preprocessing.
//
// # Parser and decoder
//
// A Decoder owns one video parser (cuvidCreateVideoParser, no display
// delay) and the decoder it makes from the parser's sequence callback:
// the first SPS creates it (cuvidCreateDecoder, after cuvidGetDecoderCaps
// says the GPU decodes that codec, chroma, depth and size); a new size at
// a later SPS reconfigures it (cuvidReconfigureDecoder) when it is no
// larger than the one it was made for, else the decoder is made again;
// 4:2:2, 4:4:4, more than 8 bits and sizes the GPU does not decode are
// refused with an error wrapping sensors.ErrFormat. The decode callback
// hands each picture to cuvidDecodePicture; the display callback queues
// its surface and the id its access unit was sent with. Write maps the
// queued surface (cuvidMapVideoFrame64 on the decoder's own CUDA stream),
// reads its decode status (an error or concealment makes the picture
// corrupt, as libavcodec's flags do for the CPU decoder), copies its luma
// and chroma rows out and unmaps it. The callbacks are driven from inside
// cuvidParseVideoData, on the calling thread, which Send locks with the
// device's context current for the call.
//
// # Loss
//
// The decoder never guesses at what was lost: sensors/rtsp drops every
// access unit after a loss until the next key picture before it reaches a
// decoder, and drops the pictures of a decoder that failed until the next
// key, as it does for libavcodec. A Send the parser or the decoder
// refuses returns an error wrapping ErrDecode (the source then waits for
// a key); a stream NVDEC cannot decode returns one wrapping
// sensors.ErrFormat (the session ends).
//
// The library boundary (libnvcuvid's calls) and the copy (the CUDA
// stream) are interfaces inside this package, so its tests drive the
// parser callbacks, errors and reconfiguration through a fake of
// libnvcuvid without a GPU; the GPU tests decode real streams on a
// machine with one and compare the pictures with libavcodec's. A build
// without cgo has no NVDEC: Load says so.
package nvdec
