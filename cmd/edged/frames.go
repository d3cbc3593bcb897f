package main

import (
	"fmt"
	"sync"

	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/umem"
)

// Where a pipeline's pictures live. The daemon's memory strategy ([gpu]
// memory) places the frames of every source the CPU writes. A network
// camera decoded by NVDEC on a discrete GPU gets its own pool in device
// memory instead: NVDEC writes each picture there device to device and
// the preprocessing kernel reads it in place, so the picture never
// crosses the host (with memory = "auto", which is pinned host memory on
// a discrete GPU, it would go device → host → device). The CPU reads such
// a frame only where it must: the live preview copies out the frames it
// shows (at its own rate), and CPU preprocessing, where the GPU path
// could not be built, copies out every frame.

// gpuFacts is what framePlace needs of the daemon's placement.
type gpuFacts struct {
	discrete bool      // a CUDA device that is not integrated
	frames   umem.Kind // the kind of memory of the daemon's frames
}

func factsOf(p *umem.Placement) gpuFacts {
	if p == nil {
		return gpuFacts{}
	}
	return gpuFacts{discrete: p.Device != nil && !p.Probe.Integrated, frames: p.Frames}
}

// framePlace says whether the frames of camera sc of pipeline pc live
// in device memory (dev), and why, or why they live in the daemon's
// strategy's memory.
func framePlace(pc *config.Pipeline, sc *config.Source, c *config.Config, place gpuFacts) (dev bool, why string) {
	daemon := fmt.Sprintf("memory = %q (%s frames)", c.GPU.Memory, place.frames)
	switch {
	case sc == nil || sc.Kind != rtsp.Kind:
		return false, "the source writes its frames on the CPU: " + daemon
	case !place.discrete:
		return false, "no discrete GPU: " + daemon
	case sc.Decoder == rtsp.DecoderCPU || sc.Decoder == rtsp.DecoderV4L2:
		return false, fmt.Sprintf("decoder = %q writes the pictures on the CPU: %s", sc.Decoder, daemon)
	}
	h := probeNVDEC(c.GPU.Device)
	switch {
	case h.err != nil:
		return false, fmt.Sprintf("NVDEC is not here (%s): the pictures are decoded on the CPU into %s", shortNVDEC(h.err), daemon)
	case sc.Decoder != rtsp.DecoderNVDEC && !(h.caps(h26x.H264).Supported && h.caps(h26x.H265).Supported):
		return false, fmt.Sprintf("decoder = \"auto\" and %s does not decode both H.264 and H.265, so a stream may be decoded on the CPU: %s", h.describe(c.GPU.Device), daemon)
	case pc.Preprocess.Device == "cpu":
		return false, fmt.Sprintf("preprocess.device = \"cpu\" reads every picture on the CPU, so NVDEC copies each into host memory: %s", daemon)
	case place.frames == umem.KindManaged:
		return false, fmt.Sprintf("NVDEC writes the pictures into managed memory on the GPU, where the preprocessing kernel reads them in place: %s", daemon)
	}
	return true, fmt.Sprintf("decoded by NVDEC on CUDA device %d: the pictures stay in device memory, where NVDEC writes them, and the preprocessing kernel reads them there; "+
		"with the daemon's %s frames they would cross the host. The live preview copies out the frames it shows", c.GPU.Device, place.frames)
}

// devFed are the network cameras whose pipelines' frames live in device
// memory now (set at each pipeline start): a session of one that NVDEC
// cannot open has no CPU fallback (libavcodec writes host memory).
var devFed sync.Map // source name → true

// frameAllocator is runtime's Factories.FrameAllocator: device memory
// for the frames of a pipeline whose pictures NVDEC writes (framePlace),
// else the daemon's allocator (nil), with the sentence saying why.
func (w *wiring) frameAllocator(pc *config.Pipeline, sc *config.Source, c *config.Config) (umem.Allocator, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dev, why := framePlace(pc, sc, c, factsOf(w.place))
	if !dev {
		if sc != nil {
			devFed.Delete(sc.Name)
		}
		return nil, why, nil
	}
	if w.devFrames == nil {
		p, err := w.place.DeviceFrames("frames in device memory, where a GPU decoder writes them")
		if err != nil {
			return nil, "", err
		}
		w.devFrames = p
	}
	devFed.Store(sc.Name, true)
	return w.devFrames.Alloc, why, nil
}

// placementFor is the placement the GPU preprocessing of frames from
// allocator frames reads them by: the device-frames one for NVDEC's pool,
// else the daemon's.
func (w *wiring) placementFor(frames umem.Allocator) *umem.Placement {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.devFrames != nil && frames == w.devFrames.Alloc {
		return w.devFrames
	}
	return w.place
}

// checkFrames is edged check's line per pipeline (per camera of a
// batched one): where its pictures will live and why (as run's "frame
// memory" log line says it).
func checkFrames(r *report, w *wiring, cfg *config.Config) {
	w.mu.Lock()
	place := w.place
	w.mu.Unlock()
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		where := "the daemon's memory strategy"
		if place != nil {
			where = place.Frames.String() + " memory"
		}
		for _, cam := range pc.Cameras() {
			name, at := pc.Name, where
			if pc.Batched() {
				name += " camera " + cam
			}
			dev, why := framePlace(pc, cfg.Source(cam), cfg, factsOf(place))
			if dev {
				at = "device memory"
			}
			r.note("pipeline %s: frames in %s: %s", name, at, why)
		}
	}
}

// markDevicePools marks the needs of plan whose pipelines' frames will
// live in device memory (framePlace), as run's memory check does.
func markDevicePools(plan edruntime.MemoryPlan, w *wiring, cfg *config.Config) {
	w.mu.Lock()
	facts := factsOf(w.place)
	w.mu.Unlock()
	for i := range plan.Needs {
		for j := range cfg.Pipelines {
			pc := &cfg.Pipelines[j]
			for _, cam := range pc.Cameras() {
				name := pc.Name // as PlanMemory names the need
				if pc.Batched() {
					name += "/" + cam
				}
				if name == plan.Needs[i].Pipeline {
					plan.Needs[i].PoolOnDevice, _ = framePlace(pc, cfg.Source(cam), cfg, facts)
				}
			}
		}
	}
}
