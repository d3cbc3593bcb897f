//go:build cgo && linux

package nvdec

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/umem"
)

// TestGPUDeviceFramesNeverCrossTheHost: the daemon's path for a network
// camera decoded by NVDEC on a discrete GPU with memory = "auto": the
// pipeline's pool comes from the device-frames placement
// (umem.Placement.DeviceFrames, what cmd/edged's frameAllocator gives an
// NVDEC-fed pipeline), sensors/rtsp plays a stream (gortsplib's server in
// this process, 30 fps over TCP), NVDEC writes each picture device to
// device into a slot, and the GPU preprocessing reads it there into a
// tensor in device memory. From before each Next to after each Run, the
// CUDA driver binding (internal/cuda, through which every copy of umem
// and NVDEC goes) must count no copy to or from the host, and the slots
// are cuMemAlloc memory the host cannot map, so the 2D copies' device
// destinations are on the GPU too. Outside those windows each frame is
// copied out (ReadBack) and must be one of libavcodec's pictures of the
// stream, and the tensor must match the CPU preprocessing of that
// picture. The same run through the daemon-wide pinned placement (what
// memory = "auto" gave every pipeline before) is the control: it must
// count host copies, or the counter proves nothing.
func TestGPUDeviceFramesNeverCrossTheHost(t *testing.T) {
	needNVDEC(t)
	stream := filepath.Join("..", "h26x", "testdata", "h264_170x100.h264")
	if dir := os.Getenv("EDGED_NVDEC_STREAMS"); dir != "" {
		if p := filepath.Join(dir, "h264_1080p30_gop30.h264"); fileExists(p) {
			stream = p
		}
	}
	ref, err := readReference(referencePath(stream))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]bool{}
	for _, f := range ref.Frames {
		sums[f.SHA256] = true
	}
	fs, err := rtsptest.StartFileServer(rtsptest.FileOptions{Codec: h26x.H264, AUs: readAUs(t, stream, h26x.H264)})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()

	base, err := umem.Open(umem.Options{}) // memory = "auto"
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if base.Device == nil || base.Probe.Integrated {
		t.Skipf("not a discrete GPU: %s", base.Reason)
	}
	if base.Frames != umem.KindPinned {
		t.Fatalf("memory = \"auto\" on a discrete GPU gives %s frames, want pinned: %s", base.Frames, base.Reason)
	}
	dev, err := base.DeviceFrames("NVDEC-fed pipeline")
	if err != nil {
		t.Fatal(err)
	}
	for _, lane := range []struct {
		name    string
		place   *umem.Placement
		viaHost bool
	}{{"device frames", dev, false}, {"pinned frames (control)", base, true}} {
		t.Run(lane.name, func(t *testing.T) {
			host := runDeviceLane(t, fs.URL, lane.place, ref.Frames[0].W, ref.Frames[0].H, sums)
			switch {
			case !lane.viaHost && host.Host() != 0:
				t.Errorf("%d copies crossed the host (%d to the device, %d to the host) while decoding and preprocessing", host.Host(), host.HostToDevice, host.DeviceToHost)
			case lane.viaHost && host.HostToDevice == 0:
				t.Errorf("the pinned control counted no copy to the device: the counter does not see the upload")
			}
			t.Logf("%s: copies in the decode+preprocess windows: %d host→device, %d device→host, %d device→device", lane.name, host.HostToDevice, host.DeviceToHost, host.DeviceToDevice)
		})
	}
}

// runDeviceLane decodes 60 frames into slots of place and preprocesses
// each; it returns the copies counted from before each Next to after each
// Run.
func runDeviceLane(t *testing.T, url string, place *umem.Placement, w, h int, sums map[string]bool) cuda.Copies {
	size := sensors.Format{Width: w, Height: h, Pixel: sensors.NV12}.FrameSize()
	pool, err := umem.NewPool(place.Alloc, 6, size)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	o := preprocess.Options{Out: preprocess.Output{C: 3, H: 128, W: 160}, Scale: 1.0 / 255, Std: [3]float32{1, 1, 1}, Threads: 1}
	g, err := preprocess.NewGPU(o, preprocess.GPUOptions{Placement: place, CacheDir: t.TempDir(), NVRTC: os.Getenv("EDGED_NVRTC_LIB")})
	if err != nil {
		if errors.Is(err, preprocess.ErrNoGPU) && os.Getenv("EDGED_REQUIRE_GPU") != "1" {
			t.Skipf("no NVRTC: %v", err)
		}
		t.Fatal(err)
	}
	defer g.Close()
	if place.Frames == umem.KindDevice && g.Read() != preprocess.ReadInPlace {
		t.Fatalf("preprocessing of device frames reads them by %q, want in place", g.Read())
	}
	cpu, err := preprocess.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	tensor, err := place.Device.Alloc(o.Out.Bytes(), umem.MemOptions{Kind: umem.KindDevice})
	if err != nil {
		t.Fatal(err)
	}
	defer tensor.Release()
	src, err := rtsp.New(rtsp.Options{Name: "cam", URL: url, Transport: rtsp.TransportTCP,
		Decoder: func(c h26x.Codec, params []byte) (rtsp.Decoder, error) {
			d, err := Open(c, Options{Params: params})
			if err != nil {
				return nil, err
			}
			return d, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := src.Start(ctx, umemPool{pool}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer src.Close()
	var counted cuda.Copies
	pic := make([]byte, size)
	got, want := make([]byte, o.Out.Bytes()), make([]byte, o.Out.Bytes())
	for good := 0; good < 60; {
		before := cuda.CopyCounts()
		f, err := src.Next(ctx)
		if errors.Is(err, sensors.ErrSkipped) {
			continue
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", good, err)
		}
		slot := f.Slot.(*umem.Slot)
		if _, err := g.Run(slot.Buffer(), f.BytesUsed, f.Format, tensor); err != nil {
			t.Fatalf("frame %d: GPU preprocessing: %v", f.Seq, err)
		}
		d := cuda.CopyCounts().Sub(before)
		counted.HostToDevice += d.HostToDevice
		counted.DeviceToHost += d.DeviceToHost
		counted.DeviceToDevice += d.DeviceToDevice

		// Outside the window: what the GPU saw.
		if place.Frames == umem.KindDevice {
			if slot.Bytes() != nil {
				t.Fatal("a device-frames slot has host bytes")
			}
			if err := slot.Buffer().(*umem.Mem).ReadBack(pic[:f.BytesUsed]); err != nil {
				t.Fatal(err)
			}
		} else {
			copy(pic, slot.Bytes()[:f.BytesUsed])
		}
		if s := summarize(0, pic, f.Format); !sums[s.SHA256] {
			t.Fatalf("frame %d is none of libavcodec's pictures of the stream", f.Seq)
		}
		if err := tensor.ReadBack(got); err != nil {
			t.Fatal(err)
		}
		if _, err := cpu.Run(pic[:f.BytesUsed], f.Format, want); err != nil {
			t.Fatal(err)
		}
		if worst, mean := tensorDiff(got, want); worst > 3.0/255 || mean > 0.5/255 {
			t.Fatalf("frame %d: the GPU tensor differs from the CPU preprocessing of the decoded picture: max |d| %g, mean %g", f.Seq, worst, mean)
		}
		f.Slot.Release()
		good++
	}
	return counted
}

// tensorDiff is the largest and the mean absolute difference of two
// float32 tensors.
func tensorDiff(a, b []byte) (worst, mean float64) {
	x := unsafe.Slice((*float32)(unsafe.Pointer(&a[0])), len(a)/4)
	y := unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	var sum float64
	for i := range x {
		d := math.Abs(float64(x[i] - y[i]))
		if math.IsNaN(d) {
			return math.Inf(1), math.Inf(1)
		}
		worst = max(worst, d)
		sum += d
	}
	return worst, sum / float64(len(x))
}
