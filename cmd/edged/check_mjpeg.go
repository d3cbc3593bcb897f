package main

import (
	"fmt"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/trt"
)

// checkMJPEG says, for each pipeline whose camera delivers MJPEG (a
// replayed recording says so in its header), which decoder serves it, the
// DCT scale its frames are decoded at for the model's input and why (what
// run logs as "MJPEG decoding"). sigs are the loaded models' signatures by
// model name.
func checkMJPEG(wr *wiring, cfg *config.Config, sigs map[string]trt.Signature, ok, warn func(string, ...any)) {
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		for _, cam := range pc.Cameras() {
			if sc := cfg.Source(cam); sc != nil {
				checkCameraMJPEG(wr, cfg, pc, sc, sigs, ok, warn)
			}
		}
	}
}

// checkCameraMJPEG is checkMJPEG for camera sc of pipeline pc.
func checkCameraMJPEG(wr *wiring, cfg *config.Config, pc *config.Pipeline, sc *config.Source, sigs map[string]trt.Signature, ok, warn func(string, ...any)) {
	name := pc.Name
	if pc.Batched() {
		name += " camera " + sc.Name
	}
	if sc.Kind == replay.Kind {
		f, dir, err := replayFormat(cfg.Resolve(sc.Path), 0)
		if err != nil || dir || f.Pixel != sensors.MJPEG {
			return
		}
		c := *sc
		c.Format, c.Width, c.Height = "MJPEG", f.Width, f.Height
		sc = &c
	}
	if sc.Format != "MJPEG" && sc.Format != "MJPG" {
		return
	}
	// The decoder run would make for this source (nvJPEG where frames
	// go to the GPU, else the CPU's).
	dec, err := jpeg.New(wr.jpegOptions(sc, cfg))
	if err != nil {
		warn("pipeline %s: MJPEG decoder: %v", name, err)
		return
	}
	b := dec.Backend()
	dec.Close()
	w, h := inputSize(sigs[pc.Model], pc)
	scale := "scale chosen when the engine is loaded"
	if b.FullScaleOnly || (sc.Width > 0 && sc.Height > 0 && w > 0 && h > 0) {
		d, why := b.ChooseScale(sc.Width, sc.Height, w, h, pc.Preprocess.Resize)
		scale = fmt.Sprintf("scale 1/%d (%s)", d, why)
	}
	if b.Warning != "" {
		warn("pipeline %s: MJPEG decoded by %s, %s", name, b, scale)
		return
	}
	ok("pipeline %s: MJPEG decoded by %s, %s", name, b, scale)
}

// inputSize is the image size of the pipeline's engine input: the shape
// [1,C,H,W] or [1,H,W,C] (C 1 or 3), else preprocess.width and height.
func inputSize(sig trt.Signature, pc *config.Pipeline) (int, int) {
	for _, t := range sig.Inputs {
		if pc.Preprocess.Input != "" && t.Name != pc.Preprocess.Input {
			continue
		}
		s := t.Shape
		if len(s) == 4 {
			h, w := s[2], s[3]
			if s[1] != 1 && s[1] != 3 {
				h, w = s[1], s[2]
			}
			if h > 0 && w > 0 {
				return int(w), int(h)
			}
		}
		break
	}
	return pc.Preprocess.Width, pc.Preprocess.Height
}
