package tensorrt

import (
	"fmt"

	"github.com/edged-dev/edged/umem"
)

// UmemGPU adapts umem to GPU: TensorRT calls run on w's thread (where the
// primary context of d is current), each engine gets its own stream from d,
// and around every inference the engine's *umem.Mem buffers are attached to
// that stream and detached after it has finished (cuStreamAttachMemAsync on
// devices with concurrentManagedAccess = 0 or in strict mode). Engines that
// share w run one at a time; give each pipeline its own worker.
func UmemGPU(d *umem.Device, w *umem.Worker) GPU { return umemGPU{d: d, w: w} }

type umemGPU struct {
	d *umem.Device
	w *umem.Worker
}

func (g umemGPU) Do(f func() error) error { return g.w.Do(f) }

func (g umemGPU) NewStream() (Stream, error) {
	s, err := g.d.NewStream()
	if err != nil {
		return nil, err
	}
	return umemStream{s}, nil
}

// UmemStream returns the umem stream behind a stream that UmemGPU created,
// or nil for any other stream.
func UmemStream(s Stream) *umem.Stream {
	if us, ok := s.(umemStream); ok {
		return us.Stream
	}
	return nil
}

// umemStream is a umem stream that also moves umem buffers to and from it.
type umemStream struct{ *umem.Stream }

func (s umemStream) Attach(b umem.Buffer) error {
	if m, ok := b.(*umem.Mem); ok {
		return m.Attach(s.Stream)
	}
	return fmt.Errorf("tensorrt: a %s buffer that is not umem CUDA memory cannot be handed to the stream", b.Kind())
}

func (s umemStream) Detach(b umem.Buffer) error {
	if m, ok := b.(*umem.Mem); ok {
		return m.Detach(s.Stream)
	}
	return fmt.Errorf("tensorrt: a %s buffer that is not umem CUDA memory cannot be handed back from the stream", b.Kind())
}
