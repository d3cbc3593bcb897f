// Package avcodec is the CPU video decoder of network cameras: FFmpeg's
// libavcodec, loaded at run time (dlopen of libavcodec.so.61, .60, .59 or
// .58, the first found: FFmpeg 7, 6, 5 and 4, so one binary serves Debian
// 12 and 13 and JetPack 5 and 6), decoding H.264 and H.265 access units
// (Annex-B, as sensors/h26x assembles them) with libavcodec's threads, and writing each
// picture into a frame slot as NV12 (the luma plane copied, the chroma
// planes interleaved on the way).
//
// No FFmpeg header is compiled in. The few structure fields edged reads are
// at offsets that are the same in libavcodec 58 to 61 (AVFrame's planes,
// line sizes, size, format and pts; AVPacket's data, size and pts;
// AVCodecParameters' extradata), the two that move (AVFrame's flags and
// decode_error_flags) come from a table per major version, and every
// setting goes through AVOptions (av_opt_set), which have no offsets at
// all. A library of another major version is refused, never guessed at.
//
// libavcodec's own log is silenced (it would write to the journal from
// inside every decoder); its last error message for a decoder is kept and
// named in that decoder's next error.
//
// The cgo binding is in files built with cgo on Linux; elsewhere (and with
// CGO_ENABLED=0) Open returns ErrNoLibrary.
package avcodec
