package runtime

import (
	"github.com/edged-dev/edged/runtime/config"
	"math"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
)

// TestDemoPipelineMJPEG: a synthetic camera with format = "MJPEG" (which
// used to pass `edged check` and then fail every frame in preprocessing)
// serves the demo model; its frames are decoded at the scale the model's
// input needs, and the results still match what the camera drew.
func TestDemoPipelineMJPEG(t *testing.T) {
	backend := ortBackend(t)
	sink := newRecordingSink()
	cfg := defaultConfig(t, func(s string) string {
		s = mustReplace(t, s, "fps = 30.0", "fps = 100.0")
		return mustReplace(t, s, `format = "YUYV"`, `format = "MJPEG"`)
	})
	var src *synthetic.Source
	f := testFactories(t, sink, backend)
	f.Camera = func(sc *config.Source, _ *config.Config) (sensors.Source, error) {
		s, err := synthetic.New(syntheticOptions(sc))
		src = s
		return s, err
	}
	runDaemon(t, Options{Config: cfg, Factories: f, Notifier: &fakeNotifier{sink: sink}})
	results := sink.waitResults(t, 30, 60*time.Second)
	if df := src.Format(); df.Pixel != sensors.RGB24 || df.Downscale < 2 {
		t.Errorf("decoded format %v: want RGB24 at a reduced scale for the demo model's small input", df)
	}
	opts := syntheticOptions(cfg.Source("cam0"))
	for _, r := range results[:30] {
		truth := synthetic.TruthAt(opts, r.FrameSeq)
		if cls := r.Outputs[0].Classes[0]; cls.Index != truth.Background {
			t.Fatalf("frame %d: class %d, the camera drew background %d", r.FrameSeq, cls.Index, truth.Background)
		}
		cx, cy := float64(r.Outputs[1].Data[0])*float64(opts.Width), float64(r.Outputs[1].Data[1])*float64(opts.Height)
		if math.Abs(cx-truth.CenterX) > 16 || math.Abs(cy-truth.CenterY) > 16 {
			t.Fatalf("frame %d: centroid (%.1f, %.1f), the square's centre is (%.1f, %.1f)", r.FrameSeq, cx, cy, truth.CenterX, truth.CenterY)
		}
	}
}

// TestFullResolution: the transform of a frame decoded at 1/d maps tensor
// points to the camera's pixels: the same points as the transform of the
// full-resolution frame (sizes that are multiples of d), and camera pixel
// x*d for frame pixel x in general.
func TestFullResolution(t *testing.T) {
	for _, c := range []struct {
		w, h, d int
		resize  string
	}{
		{1920, 1080, 4, preprocess.Stretch},
		{1920, 1080, 8, preprocess.Letterbox},
		{1080, 1920, 2, preprocess.Letterbox},
	} {
		full := preprocess.Place(c.w, c.h, 224, 224, c.resize).Transform
		f := sensors.Format{Width: c.w / c.d, Height: c.h / c.d, Pixel: sensors.RGB24, Downscale: c.d}
		scaled := fullResolution(preprocess.Place(f.Width, f.Height, 224, 224, c.resize).Transform, f)
		for _, p := range [][2]float32{{0, 0}, {112, 112}, {224, 224}, {30, 200}} {
			x0, y0 := full.ToSource(p[0], p[1])
			x1, y1 := scaled.ToSource(p[0], p[1])
			if math.Abs(float64(x0-x1)) > 0.01 || math.Abs(float64(y0-y1)) > 0.01 {
				t.Errorf("%dx%d 1/%d %s: tensor %v -> camera (%g,%g), full-resolution transform (%g,%g)", c.w, c.h, c.d, c.resize, p, x1, y1, x0, y0)
			}
		}
	}
	// Not a multiple: 1921 wide at 1/8 is 241 frame pixels; frame pixel
	// 240 (the last) starts at camera pixel 1920.
	f := sensors.Format{Width: 241, Height: 136, Pixel: sensors.RGB24, Downscale: 8}
	tr := fullResolution(preprocess.Place(241, 136, 241, 136, preprocess.Stretch).Transform, f)
	if x, y := tr.ToSource(240, 135); x != 1920 || y != 1080 {
		t.Errorf("frame pixel (240,135) -> camera (%g,%g), want (1920,1080)", x, y)
	}
}
