// Package jpeg decodes camera JPEG (MJPEG) frames into packed RGB24, the
// format the preprocessing paths read, straight into a frame slot, and
// encodes RGBA images as JPEG (the live preview's pictures).
//
// # Backends
//
// [New] picks a backend at run time and says which and why in [Backend]:
//
//   - "nvJPEG": only when [Options.GPU] names a CUDA device. It loads
//     libnvjpeg.so.13, .12 or .11 (CUDA toolkit, JetPack) with dlopen, and
//     the CUDA driver through internal/cuda, the one package that loads it
//     (umem uses the same). Each device has one engine, shared by every Decoder on
//     it: a goroutine decodes the frames pending at that moment as one
//     batch on the GPU's JPEG engines (A100/H100-class, Jetson Orin),
//     else with the hybrid backend (Huffman on the CPU, IDCT and colour on
//     the GPU). A batch the engines refuse is retried frame by frame, so
//     a bad frame fails alone. The image goes into the destination itself
//     when [GPU.Direct] allows and the GPU can address it (mapped pinned
//     or managed memory); otherwise it goes into the Decoder's device
//     buffer and is copied out. Full scale only
//     ([Backend.FullScaleOnly]). A frame without EOI is corrupt before
//     nvJPEG sees it: nvJPEG would decode it without complaint.
//   - "libjpeg-turbo": libturbojpeg.so.0 (Debian libturbojpeg0, Ubuntu and
//     JetPack libturbojpeg) loaded with dlopen on first use, TurboJPEG 2.x
//     API (tjDecompressHeader3, tjDecompress2 with TJPF_RGB). Nothing of it
//     is needed to build; decoding a frame allocates nothing in Go.
//   - "image/jpeg": the standard library, used only when the library cannot
//     be loaded (or a binary built without cgo), with a warning in
//     [Backend.Warning] naming the package to install. It allocates a
//     decoded image per frame and is several times slower.
//
// [Options.Backend] or the environment variable EDGED_JPEG ("go",
// "turbojpeg", "nvjpeg") forces one; tests use it to exercise the
// fallback.
//
// # Encoding
//
// [NewEncoder] uses libjpeg-turbo's compressor (tjInitCompress,
// tjCompress2 into the caller's buffer with TJFLAG_NOREALLOC: 4:2:0,
// baseline, [DefaultQuality] 80) from the same library the decoders load,
// once per process; nothing is allocated in Go once the buffer has room.
// Without the library it falls back to image/jpeg, with a warning in
// [Backend.Warning]. EDGED_JPEG=go forces image/jpeg here too.
//
// # Scaled decoding
//
// JPEG's DCT lets a decoder produce 1/2, 1/4 or 1/8 of the image for a
// fraction of the work. [ChooseScale] picks the smallest output that still
// covers what an engine input of a given size and resize mode samples from
// the source; [Decoder.Decode] decodes at that scale (image/jpeg decodes
// in full and averages d×d blocks). The output of a 1/d decode of a W×H
// image is ceil(W/d)×ceil(H/d), as TJSCALED computes it.
//
// # Corrupt frames
//
// Cameras deliver truncated frames (no EOI), bad entropy-coded data and
// empty buffers. Every decode error, and every libjpeg warning (libjpeg
// fills the rest of a truncated image with grey and only warns), is
// [ErrCorrupt]: the caller drops the frame, and the slot's contents are
// unspecified. MJPEG frames without Huffman tables (DHT) use the default
// tables of ITU-T T.81 Annex K.3: libjpeg-turbo inserts them itself, and
// for image/jpeg [WithDefaultHuffman] adds the segment.
//
// # One judgement of what decodes
//
// The backends support different things: image/jpeg decodes CMYK and
// refuses arithmetic coding, libjpeg-turbo does the reverse. So before any
// backend sees a frame, [ParseHeader] reads its markers up to the first
// scan (pure Go, no allocation) and refuses, with [ErrUnsupported] (wrapped
// with ErrCorrupt), what not every backend decodes: arithmetic, lossless or
// hierarchical coding, samples other than 8-bit, other than one or three
// components (CMYK, YCCK), and chroma subsampling image/jpeg does not
// handle. A frame therefore decodes on every backend or is dropped on
// every backend for the same reason.
package jpeg
