package avcodec

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/sensors"
)

// Errors of this package.
var (
	// ErrNoLibrary: libavcodec could not be loaded (not installed, another
	// major version, a symbol missing, or a build without cgo).
	ErrNoLibrary = errors.New("avcodec: libavcodec not available")
	// ErrDecode: libavcodec refused an access unit or failed on it; the
	// decoder goes on, but pictures that refer to it are suspect.
	ErrDecode = errors.New("avcodec: decoding failed")
)

// Libraries are the file names Open tries, in order, when Options.Library
// is empty.
var Libraries = []string{"libavcodec.so.61", "libavcodec.so.60", "libavcodec.so.59", "libavcodec.so.58"}

// Thread types (AVCodecContext's thread_type option).
const (
	// ThreadsFrameSlice decodes several pictures at once (and slices of one
	// picture): the most throughput, but each thread past the first delays
	// output by one picture.
	ThreadsFrameSlice = "frame+slice"
	// ThreadsSlice decodes the slices of one picture at once: no delay, and
	// no help for streams of one slice a picture (most cameras').
	ThreadsSlice = "slice"
)

// Options configure a decoder.
type Options struct {
	// Library is the libavcodec file to load; "" tries Libraries. One
	// process loads one libavcodec: the first Open decides.
	Library string
	// Threads is libavcodec's thread count: 0 lets it choose (about one
	// per core). With frame threads each thread past the first holds one
	// more picture back (33 ms at 30 frames a second). 1 decodes inside
	// Send's cgo call: no delay, but Go's scheduler then polls the stuck
	// thread, which measured 21 % more CPU per 1080p frame than libavcodec's
	// own threads (docs/PERFORMANCE.md).
	Threads int
	// ThreadType is ThreadsFrameSlice (the default) or ThreadsSlice.
	ThreadType string
	// Params are the stream's parameter sets as Annex-B (an SDP's
	// sprop-parameter-sets, h26x.Params.AnnexB), given to libavcodec as
	// extradata; nil when the stream carries them in band.
	Params []byte
}

func (o Options) check() error {
	if o.Threads < 0 || o.Threads > 64 {
		return fmt.Errorf("avcodec: threads %d: want 0 (libavcodec chooses) to 64", o.Threads)
	}
	switch o.ThreadType {
	case "", ThreadsFrameSlice, ThreadsSlice:
		return nil
	}
	return fmt.Errorf("avcodec: thread type %q: want %q or %q", o.ThreadType, ThreadsFrameSlice, ThreadsSlice)
}

// nv12 is the format Write lays a w×h picture out in: NV12, lines of the
// width rounded up to even (the interleaved chroma line of an odd width
// is one byte longer than its luma line).
func nv12(w, h int) sensors.Format {
	f := sensors.Format{Width: w, Height: h, Pixel: sensors.NV12}
	if w%2 == 1 {
		f.Stride = w + 1
	}
	return f
}
