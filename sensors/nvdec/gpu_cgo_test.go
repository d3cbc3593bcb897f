//go:build cgo && linux

package nvdec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
)

// The GPU tests run where libnvcuvid and a CUDA device are (the GPU
// machine); they skip elsewhere unless EDGED_REQUIRE_GPU=1 (or
// EDGED_REQUIRE_NVDEC=1) makes that a failure.
func needNVDEC(t testing.TB) {
	t.Helper()
	_, h264, _, err := Probe("", 0)
	if err == nil && !h264.Supported {
		err = ErrNoNVDEC
	}
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_GPU") == "1" || os.Getenv("EDGED_REQUIRE_NVDEC") == "1" {
			t.Fatalf("no NVDEC: %v", err)
		}
		t.Skipf("no NVDEC (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
	}
}

// gpuMem is device and managed memory for the tests, in device 0's primary
// context.
type gpuMem struct {
	drv     *cuda.Driver
	dev     int
	ctx     uintptr
	devPtr  uintptr
	managed uintptr
	host    unsafe.Pointer
	n       int
}

func newGPUMem(t testing.TB, n int) *gpuMem {
	t.Helper()
	drv, err := cuda.Load()
	if err != nil {
		t.Fatal(err)
	}
	m := &gpuMem{drv: drv, n: n}
	var r cuda.Result
	if m.dev, r = drv.DeviceGet(0); r != cuda.Success {
		t.Fatal(r)
	}
	if m.ctx, r = drv.PrimaryCtxRetain(m.dev); r != cuda.Success {
		t.Fatal(r)
	}
	if m.devPtr, r = drv.MemAlloc(m.ctx, n); r != cuda.Success {
		t.Fatal(r)
	}
	if m.managed, m.host, r = drv.MemAllocManaged(m.ctx, n, 1); r != cuda.Success { // CU_MEM_ATTACH_GLOBAL
		t.Fatal(r)
	}
	t.Cleanup(func() {
		drv.MemFree(m.ctx, m.devPtr)
		drv.MemFree(m.ctx, m.managed)
		drv.PrimaryCtxRelease(m.dev)
	})
	return m
}

// read copies device memory to the host.
func (m *gpuMem) read(t testing.TB, dst []byte) {
	if r := m.drv.MemcpyDtoH(m.ctx, unsafe.Pointer(&dst[0]), m.devPtr, len(dst), 0); r != cuda.Success {
		t.Fatal(r)
	}
	if r := m.drv.StreamSynchronize(m.ctx, 0); r != cuda.Success {
		t.Fatal(r)
	}
}

// decodeOnGPU decodes a stream with NVDEC, writing the pictures in turn to
// host memory (Write), to managed memory and to device memory
// (WriteDevice, the frame slot path), and summarizes each.
func decodeOnGPU(t *testing.T, path string) ([]summary, Stats, string) {
	c, _ := codecOfFile(path)
	aus := readAUs(t, path, c)
	d, err := Open(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mem := newGPUMem(t, 4096*4096*3/2)
	var out []summary
	corrupt := 0
	take := func() {
		for {
			id, f, ok, err := d.Receive()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !ok {
				return
			}
			buf := make([]byte, f.FrameSize())
			var bad bool
			switch len(out) % 3 {
			case 0:
				bad, err = d.Write(buf)
			case 1:
				bad, err = d.WriteDevice(mem.managed, mem.n)
				copy(buf, unsafe.Slice((*byte)(mem.host), len(buf)))
			case 2:
				bad, err = d.WriteDevice(mem.devPtr, mem.n)
				if err == nil {
					mem.read(t, buf)
				}
			}
			if err != nil {
				t.Fatalf("%s: picture %d: %v", path, len(out), err)
			}
			if bad {
				corrupt++
			}
			out = append(out, summarize(id, buf, f))
		}
	}
	for i, au := range aus {
		if err := d.Send(au, uint64(i)); err != nil {
			if errors.Is(err, sensors.ErrFormat) && i == 0 {
				return nil, Stats{}, err.Error() // a size this GPU's NVDEC does not decode (HEVC's minimum)
			}
			t.Fatalf("%s: access unit %d: %v", path, i, err)
		}
		take()
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	take()
	if corrupt > 0 {
		t.Errorf("%s: NVDEC flagged %d pictures of a clean stream", path, corrupt)
	}
	return out, d.Stats(), d.Describe()
}

// TestGPUDecodesLikeLibavcodec: NVDEC decodes every sample stream (and
// every stream in $EDGED_NVDEC_STREAMS, each with the reference libavcodec
// made of it beside it) into the same number of pictures, in the same
// order with the same ids and sizes, as libavcodec, and each picture
// equals libavcodec's or differs by at most 2 in any block mean. The
// pictures are copied out in turn to host, managed and device memory.
func TestGPUDecodesLikeLibavcodec(t *testing.T) {
	needNVDEC(t)
	for _, s := range streams(t) {
		ref, err := readReference(referencePath(s))
		if err != nil {
			t.Errorf("%s: no reference (%v): make it where libavcodec is, EDGED_NVDEC_WRITE_REFERENCES=1 go test -run TestReferencesAreLibavcodecs", s, err)
			continue
		}
		got, st, desc := decodeOnGPU(t, s)
		if got == nil {
			t.Logf("%s: not decoded: %s", filepath.Base(s), desc)
			continue
		}
		exact, worst, err := compare(ref.Frames, got)
		if err != nil {
			t.Errorf("%s: %v", s, err)
			continue
		}
		if exact != len(got) && worst > 2 {
			t.Errorf("%s: %d of %d pictures exact; a block mean differs by %d", s, exact, len(got), worst)
		}
		t.Logf("%s: %d pictures (libavcodec %d), %d bit-exact, largest block difference %d; decoders made %d, reconfigured %d; %s",
			filepath.Base(s), len(got), len(ref.Frames), exact, worst, st.Creates, st.Reconfigures, desc)
	}
}

// TestGPUSteadyStateAllocatesNothing: Send, Receive and WriteDevice of a
// running stream allocate nothing on the Go heap.
func TestGPUSteadyStateAllocatesNothing(t *testing.T) {
	needNVDEC(t)
	aus := readAUs(t, filepath.Join("..", "h26x", "testdata", "h264_170x100.h264"), h26x.H264)
	d, err := Open(h26x.H264, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mem := newGPUMem(t, 1<<20)
	i := 0
	step := func() {
		if err := d.Send(aus[i%len(aus)], uint64(i)); err != nil {
			t.Fatal(err)
		}
		i++
		for {
			_, _, ok, _ := d.Receive()
			if !ok {
				return
			}
			if _, err := d.WriteDevice(mem.devPtr, mem.n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range len(aus) {
		step()
	}
	if n := testing.AllocsPerRun(len(aus)*2, step); n != 0 {
		t.Errorf("%v allocations per access unit", n)
	}
}

// TestGPUProbe: Probe names the device and what its NVDEC decodes.
func TestGPUProbe(t *testing.T) {
	needNVDEC(t)
	name, h264, h265, err := Probe("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !h264.Supported || h264.MaxWidth < 1920 || h264.Engines < 1 {
		t.Errorf("H.264: %+v", h264)
	}
	t.Logf("%s: H.264 %+v, H.265 %+v", name, h264, h265)
}
