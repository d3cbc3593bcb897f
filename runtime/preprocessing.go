package runtime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// GPUPreprocessor is the GPU preprocessing path as a pipeline uses it
// (preprocess.GPU): one frame at a time, written straight into the
// engine's input tensor.
type GPUPreprocessor interface {
	Run(src umem.Buffer, n int, f sensors.Format, dst umem.Buffer) (preprocess.Transform, error)
	// Read says how frames reach the kernel (preprocess.ReadCopy or
	// preprocess.ReadInPlace).
	Read() string
	Close() error
}

// inputLayout reads the preprocessing output from an engine input: batch
// 1, 1 or 3 channels, float32 or float16, NCHW or NHWC (layout "auto"
// takes NCHW when the second dimension is 1 or 3, else NHWC when the last
// is).
func inputLayout(in trt.TensorSpec, layout string) (preprocess.Output, error) {
	var out preprocess.Output
	switch in.Type {
	case trt.Float32:
	case trt.Float16:
		out.Half = true
	default:
		return out, fmt.Errorf("preprocessing writes float32 or float16 tensors, not %s", in.Type)
	}
	s := in.Shape
	if len(s) != 4 || s[0] != 1 {
		return out, errors.New("preprocessing fills image tensors of shape [1,C,H,W] or [1,H,W,C]")
	}
	chans := func(d int64) bool { return d == 1 || d == 3 }
	switch {
	case layout == "nchw" || (layout != "nhwc" && chans(s[1])):
		if !chans(s[1]) {
			return out, fmt.Errorf("layout = \"nchw\" needs 1 or 3 channels in dimension 1, the shape has %d", s[1])
		}
		out.C, out.H, out.W = int(s[1]), int(s[2]), int(s[3])
	case chans(s[3]):
		out.NHWC, out.C, out.H, out.W = true, int(s[3]), int(s[1]), int(s[2])
	default:
		return out, errors.New("neither [1,C,H,W] nor [1,H,W,C] with C = 1 or 3")
	}
	if out.H <= 0 || out.W <= 0 {
		return out, errors.New("the image size is dynamic: set preprocess.width and preprocess.height")
	}
	return out, nil
}

// newPreprocessors builds the CPU path and, unless device = "cpu", the GPU
// path with options o (from planEngine), replacing earlier ones.
func (p *pipeline) newPreprocessors(o preprocess.Options) error {
	p.closePreprocessors()
	pp := p.cfg.Preprocess
	pre, err := preprocess.New(o)
	if err != nil {
		return fmt.Errorf("%w: pipeline %q: %w", config.ErrInvalid, p.cfg.Name, err)
	}
	p.pre = pre
	p.preKey = sensors.Format{}
	p.useGPU = false
	if pp.Device == "cpu" {
		return nil
	}
	mk := p.newGPU
	if mk == nil {
		if pp.Device == "gpu" {
			return fmt.Errorf("%w: pipeline %q: preprocess.device = \"gpu\", but this daemon has no GPU preprocessing", config.ErrInvalid, p.cfg.Name)
		}
		return nil
	}
	frames, err := p.frames()
	if err != nil {
		return err
	}
	g, err := mk(o, frames, p.conf)
	if err != nil {
		if pp.Device == "gpu" {
			return fmt.Errorf("%w: pipeline %q: preprocess.device = \"gpu\": %w", config.ErrInvalid, p.cfg.Name, err)
		}
		p.log.Info("preprocessing on the CPU", "why", err.Error())
		return nil
	}
	p.gpre = g
	return nil
}

func (p *pipeline) closePreprocessors() {
	if p.pre != nil {
		p.pre.Close()
		p.pre = nil
	}
	if p.gpre != nil {
		if err := p.gpre.Close(); err != nil {
			p.log.Warn("closing GPU preprocessing", "err", err)
		}
		p.gpre = nil
	}
}

// preprocess writes frame f into the engine input in, on the path chosen
// for f's format.
func (p *pipeline) preprocess(f sensors.Frame, in *trt.Tensor) (preprocess.Transform, error) {
	slot, _ := f.Slot.(frameSlot)
	if p.gpre != nil && slot != nil && f.Format != p.preKey {
		p.choose(f, slot, in)
	}
	if p.useGPU && slot != nil {
		slot.SetState(umem.SlotGPU)
		return p.gpre.Run(slot.Buffer(), f.BytesUsed, f.Format, in.Buf)
	}
	data := f.Data()
	if slot != nil {
		slot.SetState(umem.SlotCPU)
		if data == nil { // device memory: the GPU path is off (it failed, or device = "cpu")
			var err error
			if data, err = p.hostBytes(slot.Buffer(), f.BytesUsed); err != nil {
				return preprocess.Transform{}, fmt.Errorf("frame memory: %w", err)
			}
		}
	}
	dst, err := in.Buf.Host()
	if err != nil {
		return preprocess.Transform{}, fmt.Errorf("engine input %q: %w", in.Name, err)
	}
	return p.pre.Run(data, f.Format, dst)
}

// choose picks the path for a new frame format: device = "gpu" takes the
// GPU; "auto" runs both on this frame (one warm-up and three timed runs
// each, fastest run) and takes the faster, and logs the choice with the
// times, except for a frame in device memory, which stays on the GPU.
func (p *pipeline) choose(f sensors.Frame, slot frameSlot, in *trt.Tensor) {
	p.preKey = f.Format
	p.useGPU = true
	if p.cfg.Preprocess.Device == "gpu" {
		p.log.Info("preprocessing on the GPU", "format", f.Format.String(),
			"frames", p.gpre.Read(), "why", "preprocess.device = \"gpu\"")
		return
	}
	if f.Slot.Bytes() == nil {
		// The picture is in device memory (NVDEC's): the CPU path would
		// first copy it to the host, so the GPU is not raced against it.
		p.log.Info("preprocessing on the GPU", "format", f.Format.String(),
			"frames", p.gpre.Read(), "why", "the frames are in device memory, where the decoder wrote them")
		return
	}
	gpu, gerr := timePath(func() error {
		_, err := p.gpre.Run(slot.Buffer(), f.BytesUsed, f.Format, in.Buf)
		return err
	})
	cpu, cerr := timePath(func() error {
		dst, err := in.Buf.Host()
		if err != nil {
			return err
		}
		_, err = p.pre.Run(f.Data(), f.Format, dst)
		return err
	})
	switch {
	case gerr != nil:
		p.useGPU = false
		p.log.Warn("preprocessing on the CPU: the GPU path failed on the first frame",
			"format", f.Format.String(), "err", gerr)
	case cerr == nil && cpu < gpu:
		p.useGPU = false
		p.log.Info("preprocessing on the CPU", "format", f.Format.String(),
			"why", "faster on this frame", "cpu", cpu.String(), "gpu", gpu.String())
	default:
		p.log.Info("preprocessing on the GPU", "format", f.Format.String(),
			"frames", p.gpre.Read(), "why", "faster on this frame", "gpu", gpu.String(), "cpu", cpu.String())
	}
}

// timePath runs f once to warm up, then three times, and returns the
// fastest run.
func timePath(f func() error) (time.Duration, error) {
	if err := f(); err != nil {
		return 0, err
	}
	best := time.Duration(1<<63 - 1)
	for i := 0; i < 3; i++ {
		t := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		best = min(best, time.Since(t))
	}
	return best, nil
}

// decodeTargeter is a source that decodes compressed frames (MJPEG) and
// can decode them at the smallest scale that covers the engine input
// (sensors/v4l2, synthetic, replay). The line it returns names the decoder,
// the scale and why ("" when it decodes nothing).
type decodeTargeter interface {
	SetDecodeTarget(w, h int, resize string) string
}

// decodeLiner is a source that learns only when it starts whether it
// decodes MJPEG (replay of a recording); the line names the decoder.
type decodeLiner interface {
	DecodeLine() string
}

// logDecoder logs, once per pipeline run, which decoder a source that
// found MJPEG at Start uses (announceInput could not say yet).
func (p *pipeline) logDecoder() {
	t, ok := p.src.(decodeLiner)
	if !ok || p.decodeLogged {
		return
	}
	p.decodeLogged = p.logDecodeLine(t.DecodeLine())
}

// logDecodeLine logs a source's decoder line (a warning when it says the
// slow fallback serves) and reports whether there was one.
func (p *pipeline) logDecodeLine(line string) bool {
	switch {
	case line == "":
		return false
	case strings.Contains(line, "; warning: "):
		p.log.Warn("MJPEG decoding", "source", p.scfg.Name, "decoder", line)
	default:
		p.log.Info("MJPEG decoding", "source", p.scfg.Name, "decoder", line)
	}
	return true
}

// announceInput tells the source the engine input size once it is known.
func (p *pipeline) announceInput() {
	t, ok := p.src.(decodeTargeter)
	if !ok || p.w <= 0 || p.h <= 0 {
		return
	}
	p.logDecodeLine(t.SetDecodeTarget(p.w, p.h, p.cfg.Preprocess.Resize))
}

// fullResolution maps a transform of a frame decoded at 1/Downscale onto
// the camera's own pixels, so results are in full-resolution coordinates
// whatever scale the frame was decoded at.
func fullResolution(t preprocess.Transform, f sensors.Format) preprocess.Transform {
	if d := f.Downscale; d > 1 {
		t.ScaleX /= float32(d)
		t.ScaleY /= float32(d)
	}
	return t
}
