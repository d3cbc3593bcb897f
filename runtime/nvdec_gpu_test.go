package runtime

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/cuda"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/nvdec"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/umem"
)

// TestNVDECPipelineKeepsPicturesOnTheGPU: the daemon end to end on a
// discrete GPU with memory = "auto" (pinned), a network camera decoded by
// NVDEC (gortsplib's server in this process looping the H.264 sample) and
// preprocess.device = "gpu": the pipeline's pool comes from its frame
// allocator (device memory, as cmd/edged gives such a pipeline), the GPU
// preprocessing is built for it and reads the frames in place, and over
// 60 results after the first 10 the CUDA binding counts no copy to or
// from the host (every copy of umem and NVDEC goes through it), while
// NVDEC's device-to-device writes are counted. It needs NVDEC and ONNX
// Runtime: it skips without them, and fails instead when
// EDGED_REQUIRE_GPU=1.
func TestNVDECPipelineKeepsPicturesOnTheGPU(t *testing.T) {
	backend := ortBackend(t)
	need := func(err error, what string) {
		if err == nil {
			return
		}
		if os.Getenv("EDGED_REQUIRE_GPU") == "1" {
			t.Fatalf("%s required: %v", what, err)
		}
		t.Skipf("no %s: %v", what, err)
	}
	place, err := umem.Open(umem.Options{})
	need(err, "CUDA")
	defer place.Close()
	if place.Device == nil || place.Probe.Integrated {
		need(umem.ErrNoCUDA, "discrete GPU ("+place.Reason+")")
	}
	_, h264, _, err := nvdec.Probe("", 0)
	if err == nil && !h264.Supported {
		err = nvdec.ErrNoNVDEC
	}
	need(err, "NVDEC")
	dev, err := place.DeviceFrames("decoded by NVDEC: the pictures stay in device memory")
	if err != nil {
		t.Fatal(err)
	}
	aus, err := rtsptest.ReadAccessUnits(filepath.Join("..", "sensors", "h26x", "testdata", "h264_170x100.h264"), h26x.H264)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := rtsptest.StartFileServer(rtsptest.FileOptions{Codec: h26x.H264, AUs: aus, FPS: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()

	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string {
		return mustReplace(t, s, `device = "auto"           #`, `device = "gpu"            #`)
	})
	f := testFactories(t, sink, backend)
	f.Allocator = func(config.GPU) (umem.Allocator, string, error) { return place.Alloc, place.Reason, nil }
	f.FrameAllocator = func(*config.Pipeline, *config.Source, *config.Config) (umem.Allocator, string, error) {
		return dev.Alloc, dev.Reason, nil
	}
	var gpuFrames atomic.Int64
	f.GPUPreprocess = func(o preprocess.Options, frames umem.Allocator, _ *config.Config) (GPUPreprocessor, error) {
		p := place
		if frames == dev.Alloc {
			p = dev
		}
		g, err := preprocess.NewGPU(o, preprocess.GPUOptions{Placement: p, CacheDir: t.TempDir(), NVRTC: os.Getenv("EDGED_NVRTC_LIB")})
		if err != nil {
			return nil, err
		}
		return countingGPU{g, &gpuFrames}, nil
	}
	f.Camera = func(sc *config.Source, _ *config.Config) (sensors.Source, error) {
		return rtsp.New(rtsp.Options{Name: sc.Name, URL: fs.URL, Transport: rtsp.TransportTCP,
			Decoder: func(c h26x.Codec, params []byte) (rtsp.Decoder, error) {
				d, err := nvdec.Open(c, nvdec.Options{Params: params})
				if err != nil {
					return nil, err
				}
				return d, nil
			}})
	}
	logs := &lockedBuffer{}
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: f, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	sink.waitResults(t, 10, 60*time.Second)
	before, framesBefore := cuda.CopyCounts(), gpuFrames.Load()
	sink.waitResults(t, 70, 60*time.Second)
	copies, frames := cuda.CopyCounts().Sub(before), gpuFrames.Load()-framesBefore
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d frames preprocessed on the GPU: %d host→device, %d device→host, %d device→device copies", frames, copies.HostToDevice, copies.DeviceToHost, copies.DeviceToDevice)
	if frames < 50 {
		t.Errorf("%d frames preprocessed on the GPU in the window, want about 60", frames)
	}
	if copies.Host() != 0 {
		t.Errorf("%d copies crossed the host while the pipeline ran (%d to the device, %d to the host)", copies.Host(), copies.HostToDevice, copies.DeviceToHost)
	}
	if copies.DeviceToDevice < uint64(frames) {
		t.Errorf("%d device-to-device copies for %d frames: NVDEC's writes were not seen", copies.DeviceToDevice, frames)
	}
	text := logs.String()
	for _, want := range []string{`msg="frame memory"`, "memory=device", `msg="preprocessing on the GPU"`, "frames=in-place"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}
