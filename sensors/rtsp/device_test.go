package rtsp

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
)

// gpuMemory is "device memory" for TestDeviceWriterFillsDeviceSlots: slots
// with a device address and no host bytes, as umem's device strategy has.
type gpuMemory struct {
	mu   sync.Mutex
	mem  map[uintptr][]byte
	free chan uintptr
	size int
}

const gpuBase = 0x10_0000_0000

func newGPUMemory(slots, size int) *gpuMemory {
	g := &gpuMemory{mem: map[uintptr][]byte{}, free: make(chan uintptr, slots), size: size}
	for i := range slots {
		a := gpuBase + uintptr(i)<<24
		g.mem[a] = make([]byte, size)
		g.free <- a
	}
	return g
}

type gpuSlot struct {
	g    *gpuMemory
	addr uintptr
}

func (s gpuSlot) Bytes() []byte   { return nil }
func (s gpuSlot) Device() uintptr { return s.addr }
func (s gpuSlot) Size() int       { return s.g.size }
func (s gpuSlot) Release()        { s.g.free <- s.addr }

func (g *gpuMemory) Get(ctx context.Context) (sensors.Slot, error) {
	select {
	case a := <-g.free:
		return gpuSlot{g, a}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// gpuDecoder is libavcodec pretending its pictures are on the GPU: it
// implements DeviceWriter by writing into gpuMemory, and fails Write, so a
// source that wrote a device slot through the host would be seen.
type gpuDecoder struct {
	Decoder
	g       *gpuMemory
	written int
}

func (d *gpuDecoder) Write([]byte) (bool, error) { return false, errHostWrite }

func (d *gpuDecoder) WriteDevice(dst uintptr, n int) (bool, error) {
	d.g.mu.Lock()
	b := d.g.mem[dst]
	d.g.mu.Unlock()
	d.written++
	return d.Decoder.Write(b[:n])
}

var errHostWrite = errors.New("a device slot written through Write")

// TestDeviceWriterFillsDeviceSlots: a decoder whose pictures are on the
// GPU writes them through WriteDevice into slots that have a device
// address (and no host bytes), with the stream's pictures; Write is never
// used for them.
func TestDeviceWriterFillsDeviceSlots(t *testing.T) {
	cpu := cpuDecoder(t)
	aus, sums := sample(t, h26x.H264, cpu)
	g := newGPUMemory(4, 170*100*3/2)
	var dec *gpuDecoder
	fs := fileServer(t, rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	s, err := New(Options{Name: "cam", URL: fs.URL, Transport: TransportTCP, Timeout: 3 * time.Second,
		Decoder: func(c h26x.Codec, params []byte) (Decoder, error) {
			d, err := cpu(c, params)
			if err != nil {
				return nil, err
			}
			dec = &gpuDecoder{Decoder: d, g: g}
			return dec, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx, g); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		f, _, err := nextFrame(t, s, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ds := f.Slot.(gpuSlot)
		g.mu.Lock()
		sum := sha256.Sum256(g.mem[ds.addr][:f.BytesUsed])
		g.mu.Unlock()
		if _, ok := sums[sum]; !ok {
			t.Fatal("a device slot that does not hold one of the stream's pictures")
		}
		f.Slot.Release()
	}
	if dec.written < 10 {
		t.Errorf("%d pictures written to device slots", dec.written)
	}
}
