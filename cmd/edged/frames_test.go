package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/nvdec"
	"github.com/edged-dev/edged/umem"
)

// fakeNVDEC puts what NVDEC can do on a CUDA device ordinal no machine
// has (probeNVDEC's answer, asked once per process and device), for the
// test's life.
func fakeNVDEC(t *testing.T, device int, h *nvdecHere) {
	nvdecMu.Lock()
	nvdecProbes[device] = h
	nvdecMu.Unlock()
	t.Cleanup(func() {
		nvdecMu.Lock()
		delete(nvdecProbes, device)
		nvdecMu.Unlock()
	})
}

// TestFramePlace: which pipelines get their frames in device memory (an
// NVDEC-fed network camera on a discrete GPU), and the reason given for
// each other one, as run logs it and check prints it.
func TestFramePlace(t *testing.T) {
	both := nvdec.Caps{Supported: true, Engines: 7, MaxWidth: 4096, MaxHeight: 4096}
	fakeNVDEC(t, 97, &nvdecHere{name: "Fake H200", h264: both, h265: both})
	fakeNVDEC(t, 98, &nvdecHere{name: "Fake T4", h264: both})
	fakeNVDEC(t, 99, &nvdecHere{err: errors.New("nvdec: NVDEC not available: libnvcuvid.so.1: cannot open shared object file")})
	discrete := gpuFacts{discrete: true, frames: umem.KindPinned}
	cases := []struct {
		name     string
		kind     string // the source's
		decoder  string
		device   int // [gpu] device
		pre      string
		gpu      gpuFacts
		dev      bool
		contains []string
	}{
		{"nvdec-auto", "rtsp", "auto", 97, "auto", discrete, true, []string{"NVDEC on CUDA device 97", "device memory", "pinned frames they would cross the host", "preview copies out"}},
		{"nvdec-explicit", "rtsp", "nvdec", 97, "gpu", discrete, true, []string{"NVDEC"}},
		{"nvdec-explicit-h264-only", "rtsp", "nvdec", 98, "auto", discrete, true, []string{"NVDEC"}},
		{"auto-h264-only", "rtsp", "auto", 98, "auto", discrete, false, []string{"does not decode both H.264 and H.265", `memory = "auto" (pinned frames)`}},
		{"no-nvdec", "rtsp", "auto", 99, "auto", discrete, false, []string{"NVDEC is not here", "libnvcuvid.so.1"}},
		{"cpu-decoder", "rtsp", "cpu", 97, "auto", discrete, false, []string{`decoder = "cpu"`}},
		{"cpu-preprocessing", "rtsp", "auto", 97, "cpu", discrete, false, []string{`preprocess.device = "cpu"`}},
		{"managed", "rtsp", "auto", 97, "auto", gpuFacts{discrete: true, frames: umem.KindManaged}, false, []string{"managed memory on the GPU"}},
		{"jetson", "rtsp", "auto", 97, "auto", gpuFacts{frames: umem.KindManaged}, false, []string{"no discrete GPU"}},
		{"v4l2-camera", "v4l2", "", 97, "auto", discrete, false, []string{"writes its frames on the CPU"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &config.Config{GPU: config.GPU{Device: c.device, Memory: "auto"},
				Sources:   []config.Source{{Name: "cam", Kind: c.kind, Decoder: c.decoder}},
				Pipelines: []config.Pipeline{{Name: "p", Source: "cam", Preprocess: config.Preprocess{Device: c.pre}}}}
			dev, why := framePlace(&cfg.Pipelines[0], &cfg.Sources[0], cfg, c.gpu)
			if dev != c.dev {
				t.Errorf("device memory = %v, want %v (%s)", dev, c.dev, why)
			}
			for _, w := range c.contains {
				if !strings.Contains(why, w) {
					t.Errorf("why %q lacks %q", why, w)
				}
			}
		})
	}
}

// TestFrameAllocatorWithoutCUDA: on a machine without CUDA every
// pipeline takes the daemon's allocator, the network camera included, and
// says why; the device-frames placement is never made.
func TestFrameAllocatorWithoutCUDA(t *testing.T) {
	fakeNVDEC(t, 97, &nvdecHere{name: "Fake", h264: nvdec.Caps{Supported: true}, h265: nvdec.Caps{Supported: true}})
	w := &wiring{}
	cfg := &config.Config{GPU: config.GPU{Device: 97, Memory: "host"},
		Sources:   []config.Source{{Name: "cam", Kind: "rtsp", Decoder: "auto"}},
		Pipelines: []config.Pipeline{{Name: "p", Source: "cam", Preprocess: config.Preprocess{Device: "auto"}}}}
	if _, _, err := w.allocator(cfg.GPU); err != nil {
		t.Fatal(err)
	}
	a, why, err := w.frameAllocator(&cfg.Pipelines[0], &cfg.Sources[0], cfg)
	if err != nil || a != nil || !strings.Contains(why, "no discrete GPU") || w.devFrames != nil || isDevFed("cam") {
		t.Fatalf("frameAllocator without CUDA: %v, %q, %v (device frames %v)", a, why, err, w.devFrames)
	}
	if p := w.placementFor(nil); p != w.place {
		t.Error("the GPU preprocessing of the daemon's frames is not given the daemon's placement")
	}
}

// TestAutoDecoderKeepsDeviceFramesOffTheCPU: a camera set to decoder =
// "auto" whose frames live in device memory gets no libavcodec fallback
// (it writes host memory, which such a slot has none of): a stream its
// NVDEC does not decode fails the session (retried) with the reason; the
// same camera with host frames falls back to the CPU as before.
func TestAutoDecoderKeepsDeviceFramesOffTheCPU(t *testing.T) {
	fakeNVDEC(t, 96, &nvdecHere{name: "Fake T4", h264: nvdec.Caps{Supported: true}})
	sc := &config.Source{Name: "devcam", Kind: "rtsp", Decoder: "auto"}
	cfg := &config.Config{GPU: config.GPU{Device: 96}}
	open, err := newDecoder(sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	devFed.Store(sc.Name, true)
	t.Cleanup(func() { devFed.Delete(sc.Name) })
	d, err := open(h26x.H265, nil)
	if err == nil {
		d.Close()
		t.Fatal("an H.265 session of a device-frames camera on an NVDEC without H.265 opened a decoder")
	}
	if !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "device memory") {
		t.Fatalf("error %v: want sensors.ErrFormat saying the frames live in device memory", err)
	}
	devFed.Delete(sc.Name)
	d, err = open(h26x.H265, nil)
	if err == nil {
		if !strings.Contains(d.Describe(), "libavcodec") && !strings.Contains(strings.ToLower(d.Describe()), "cpu") {
			t.Errorf("host-frames fallback decoder %q", d.Describe())
		}
		d.Close()
	} else if strings.Contains(err.Error(), "device memory") {
		t.Fatalf("a host-frames camera was refused for device memory: %v", err)
	}
}
