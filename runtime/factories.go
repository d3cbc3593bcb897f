package runtime

import (
	"context"
	"net"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// Sink receives every record of the pipelines that name it, and every status
// event. Publish never blocks and keeps no reference to the record; it may be
// called from several goroutines. Run serves clients or the device until ctx
// is done, then flushes what was already published within the stop budget
// and returns nil; Close releases everything and is idempotent.
type Sink interface {
	Publish(rec *stream.Record)
	Run(ctx context.Context) error
	Close() error
}

// Factories build the concrete parts the configuration names. cmd/edged
// supplies the real ones; tests supply fakes.
type Factories struct {
	// Allocator returns the memory strategy for frames and tensors and a
	// sentence saying why it was chosen.
	Allocator func(gpu config.GPU) (umem.Allocator, string, error)
	// Camera builds a frame source (kinds v4l2, synthetic, replay).
	Camera func(src *config.Source, cfg *config.Config) (sensors.Source, error)
	// Sensor builds a serial sample source (kind serial).
	Sensor func(src *config.Source, cfg *config.Config) (sensors.SampleSource, error)
	// Backend returns the engine backend for a model; name is the backend
	// ModelBackend chose (onnx, tensorrt). A backend that implements
	// io.Closer is closed after its engines when the configuration is
	// replaced or the daemon stops.
	Backend func(name string, m *config.Model, cfg *config.Config) (trt.Backend, error)
	// FrameAllocator returns the allocator of the frame pool of camera sc
	// of pipeline pc (a batched pipeline asks for each of its cameras)
	// where it is not Allocator's, and a sentence saying where its frames
	// live and why: a source whose decoder writes its pictures on the GPU
	// (NVDEC) gets device memory. A nil allocator (or a nil
	// FrameAllocator) means Allocator's; the sentence is logged either way.
	FrameAllocator func(pc *config.Pipeline, sc *config.Source, cfg *config.Config) (umem.Allocator, string, error)
	// GPUPreprocess builds the GPU preprocessing path of a pipeline whose
	// frames come from allocator frames (Allocator's or FrameAllocator's:
	// it says how the kernel reads them), or returns an error wrapping
	// preprocess.ErrNoGPU where there is no CUDA device (then
	// preprocess.device = "auto" runs on the CPU). nil means the CPU path
	// always.
	GPUPreprocess func(o preprocess.Options, frames umem.Allocator, cfg *config.Config) (GPUPreprocessor, error)
	// Sink builds a sink. inherited is the socket-activated listener for
	// this sink, or nil.
	Sink func(s *config.Sink, cfg *config.Config, inherited net.Listener, control ControlFunc) (Sink, error)
	// DeviceMemory reports a discrete GPU's free and total memory, where
	// TensorRT engines live; ok is false when there is none (no GPU, or
	// Jetson, whose GPU memory is the system's). nil means none.
	DeviceMemory func() (free, total uint64, ok bool)
}

// ControlFunc handles a request a client sent on a sink (e.g. "reload").
type ControlFunc func(ctx context.Context, request string) error
