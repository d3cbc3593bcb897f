package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/umem"
)

// ErrMemory is wrapped by a MemoryError: the frame pools and engines of a
// configuration do not fit in the memory there is.
var ErrMemory = errors.New("not enough memory")

// MemoryNeed is what one pipeline needs: its frame pool, its engine, the
// tensors the engine binds, preprocessing's tables and what its source
// allocates to decode.
type MemoryNeed struct {
	Pipeline    string
	Slots       int   // frame pool slots: source buffers + 2 + mailbox depth
	SlotBytes   int64 // bytes per slot
	Model       string
	ModelBytes  int64 // size of the model file
	EngineBytes int64 // estimate: ModelBytes × reload.DefaultBudgetFactor; 0 when SharedWith holds it
	// SharedWith names the pipeline whose need counts the engine's model
	// when this pipeline shares it (the model's first pipeline holds the
	// weights once for all of them); "" for that first pipeline.
	SharedWith string
	OnDevice   bool // the engine lives in a discrete GPU's own memory
	// PoolOnDevice: the frame pool lives in a discrete GPU's own memory
	// (a GPU decoder's pictures: Factories.FrameAllocator); the caller of
	// PlanMemory sets it.
	PoolOnDevice bool
	// TensorBytes are the engine's input and output tensors at the shapes
	// it will bind (a dynamic input at the pipeline's preprocess.width and
	// height), allocated beside the engine; 0 where the model file does
	// not say (TensorRT plans, dynamic outputs).
	TensorBytes int64
	// PreBytes bound preprocessing's tables and row buffers
	// (preprocess.WorkBytes).
	PreBytes int64
	// DecodeBytes bound what the source allocates besides its slots: the
	// decoding of MJPEG and image files.
	DecodeBytes int64

	pipe, source, model int    // indexes in the configuration, for positions
	slotsWhy, frame     string // how Slots and SlotBytes follow from the configuration
	tensorsWhy          string // the tensors and their sizes
	tensorsKey          string // the key that decides TensorBytes
}

// PoolBytes is the size of the pipeline's frame pool.
func (n MemoryNeed) PoolBytes() int64 { return satMul(int64(n.Slots), n.SlotBytes) }

// hostBytes is what the pipeline takes from system memory.
func (n MemoryNeed) hostBytes() int64 {
	t := satAdd(n.TensorBytes, n.PreBytes, n.DecodeBytes)
	if !n.PoolOnDevice {
		t = satAdd(t, n.PoolBytes())
	}
	if !n.OnDevice {
		t = satAdd(t, n.EngineBytes)
	}
	return t
}

// satAdd and satMul saturate at math.MaxInt64: a model may declare a
// tensor of 2^31 × 2^31 elements, and the sum must still say "too much".
func satAdd(a int64, b ...int64) int64 {
	for _, x := range b {
		if x > math.MaxInt64-a {
			return math.MaxInt64
		}
		a += x
	}
	return a
}

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// MemoryPlan is what a configuration needs, pipeline by pipeline.
type MemoryPlan struct{ Needs []MemoryNeed }

// Host is what the plan takes from system memory: every frame pool, and
// every engine that does not live in a discrete GPU's memory (on Jetson
// the GPU's memory is the system's).
func (p MemoryPlan) Host() int64 {
	var n int64
	for _, x := range p.Needs {
		n = satAdd(n, x.hostBytes())
	}
	return n
}

// Device is what the plan takes from a discrete GPU's memory: the
// engines there and the frame pools there.
func (p MemoryPlan) Device() int64 {
	var n int64
	for _, x := range p.Needs {
		if x.OnDevice {
			n = satAdd(n, x.EngineBytes)
		}
		if x.PoolOnDevice {
			n = satAdd(n, x.PoolBytes())
		}
	}
	return n
}

// SourceSizes reports, for a pipeline's source, its frame slot size and
// what it allocates besides its slots (decoding buffers); SourceSize does
// it for a source that is built. nil: what the source's configuration
// takes (SlotSize without a source, no decoding).
type SourceSizes func(*config.Pipeline, *config.Source) (slot int, decode int64)

// SourceSize is a built source's SourceSizes: SlotSize, and what it
// says it allocates besides its slots (a method WorkBytes() int64).
func SourceSize(src sensors.Source, sc *config.Source) (int, int64) {
	var work int64
	if w, ok := src.(interface{ WorkBytes() int64 }); ok {
		work = w.WorkBytes()
	}
	return SlotSize(src, sc), work
}

// PlanMemory computes what each pipeline of c needs. sizes reports each
// pipeline's source (nil: what its configuration takes); discreteGPU says
// whether TensorRT engines live in a GPU's own memory. Each pipeline has
// an engine of its own on its model's weights (ARCHITECTURE.md, item 1),
// the weights estimated as trt's reload
// budget estimates a staging engine (the model file size times
// reload.DefaultBudgetFactor), counted once per model: the first pipeline
// naming it holds it, the others share it (SharedWith). Each pipeline
// adds the tensors its engine binds, read from the
// model file (modelTensors) without loading it, plus preprocessing's
// tables and the source's decoding buffers.
func PlanMemory(c *config.Config, sizes SourceSizes, discreteGPU bool) MemoryPlan {
	var plan MemoryPlan
	holder := map[string]string{} // model -> the pipeline whose need counts it
	for i := range c.Pipelines {
		pc := &c.Pipelines[i]
		// A batched pipeline: a need per camera, its engine (model and
		// tensors) counted at the first.
		for j, cam := range pc.Cameras() {
			plan.Needs = planNeed(c, sizes, discreteGPU, i, j, c.Source(cam), holder, plan.Needs)
		}
	}
	return plan
}

// planNeed appends what camera j of pipeline i needs (sc: its source).
func planNeed(c *config.Config, sizes SourceSizes, discreteGPU bool, i, j int, sc *config.Source, holder map[string]string, needs []MemoryNeed) []MemoryNeed {
	pc := &c.Pipelines[i]
	mc := c.Model(pc.Model)
	if sc == nil || mc == nil {
		return needs
	}
	n := MemoryNeed{Pipeline: pc.Name, Model: mc.Name, pipe: i, source: indexIn(c.Sources, sc), model: indexIn(c.Models, mc)}
	if pc.Batched() {
		n.Pipeline = pc.Name + "/" + sc.Name
	}
	n.Slots = poolSlots(sc, pc)
	depth := "mailbox 1"
	if pc.Schedule == "queue" {
		depth = fmt.Sprintf("queue %d", pc.Queue)
	}
	n.slotsWhy = fmt.Sprintf("buffers %d + 2 + %s", sc.Buffers, depth)
	size := frameSize(sc)
	if sizes != nil {
		size, n.DecodeBytes = sizes(pc, sc)
	}
	n.SlotBytes = int64(size)
	n.frame = fmt.Sprintf("%dx%d %s", sc.Width, sc.Height, sc.Format)
	switch {
	case sc.Width == 0 || sc.Height == 0:
		n.frame = "the recording's frame size"
	case sc.Format != "RGB24" && sc.Format != "BGR24" && size == sc.Width*sc.Height*3:
		n.frame += ", slots sized for RGB24" // frameSize: decoded frames land as RGB24
	}
	n.ModelBytes = modelBytes(c, mc)
	if j > 0 {
		n.SharedWith = pc.Name + "/" + pc.Sources[0]
		n.PreBytes = 0
		return append(needs, n)
	}
	if first, ok := holder[mc.Name]; ok {
		n.SharedWith = first
	} else {
		holder[mc.Name] = pc.Name
		n.EngineBytes = int64(float64(n.ModelBytes) * reload.DefaultBudgetFactor)
	}
	bn, _ := config.ModelBackend(mc)
	n.OnDevice = discreteGPU && bn == "tensorrt"
	inW, inH := pc.Preprocess.Width, pc.Preprocess.Height
	if bn == "onnx" {
		t := modelTensors(c, mc, pc)
		n.TensorBytes, n.tensorsWhy, n.tensorsKey = t.bytes, t.why, fmt.Sprintf("model[%d].path", n.model)
		if t.fromPreprocess {
			n.tensorsKey = fmt.Sprintf("pipeline[%d].preprocess.width", i)
		}
		if t.w > 0 {
			inW, inH = t.w, t.h
		}
	}
	if inW > 0 && inH > 0 {
		srcW, srcH := sc.Width, sc.Height
		if srcW <= 0 || srcH <= 0 {
			srcW, srcH = inW, inH
		}
		n.PreBytes = preprocess.WorkBytes(srcW, srcH, inW, inH, pc.Preprocess.Threads)
	}
	return append(needs, n)
}

// engineTensors is what modelTensors found.
type engineTensors struct {
	bytes          int64
	why            string
	fromPreprocess bool // a dynamic input was sized by preprocess.width and height
	w, h           int  // the image input's width and height, when known
}

// modelTensors reads the inputs and outputs an ONNX model declares
// (onnxproto.ReadIO: no weights read, nothing loaded) and sizes them as
// the ONNX backend will bind them for pc: dynamic input dimensions from
// preprocess.width and height (trt.ImageShape, as Load resolves them),
// dynamic output dimensions named like a resolved input dimension with its
// size; outputs it cannot size are left out (the backend learns them from
// a probe inference). Nothing when the file cannot be read: CheckFiles
// and the load report that.
func modelTensors(c *config.Config, mc *config.Model, pc *config.Pipeline) engineTensors {
	var r io.ReaderAt
	var size int64
	if name, ok := mc.Builtin(); ok {
		b, err := config.BuiltinModel(name)
		if err != nil {
			return engineTensors{}
		}
		r, size = bytes.NewReader(b), int64(len(b))
	} else {
		f, err := os.Open(c.Resolve(mc.Path))
		if err != nil {
			return engineTensors{}
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return engineTensors{}
		}
		r, size = f, st.Size()
	}
	decl, err := onnxproto.ReadIO(r, size)
	if err != nil {
		return engineTensors{}
	}
	img := LoadOptions(c, mc, pc, nil).Image
	var t engineTensors
	params := map[string]int64{} // dynamic input dimensions by name, as resolved
	var parts []string
	batch, _ := BatchSize(c, pc)
	for i, v := range decl.Inputs {
		dims := slices.Clone(v.Dims)
		if batch > 0 && len(dims) > 0 && dims[0] < 0 {
			// A batched pipeline's engine binds its largest batch.
			dims[0] = int64(batch)
			if p := v.Params[0]; p != "" {
				params[p] = int64(batch)
			}
		}
		if want := img.Resolve(v.Name, i == 0, dims); want != nil {
			for k, d := range dims {
				if d < 0 && k < len(want) {
					if p := v.Params[k]; p != "" {
						params[p] = want[k]
					}
				}
			}
			dims, t.fromPreprocess = want, true
			if len(want) == 4 {
				t.w, t.h = int(img.Width), int(img.Height)
			}
		}
		n, ok := tensorBytes(v.Elem, dims)
		if !ok {
			continue // unresolved: the load says which size to set
		}
		t.bytes = satAdd(t.bytes, n)
		parts = append(parts, fmt.Sprintf("input %s%v %s", v.Name, dims, FormatSize(n)))
	}
	var unsized []string
	for _, v := range decl.Outputs {
		dims := slices.Clone(v.Dims)
		for k, d := range dims {
			if d < 0 {
				if x, ok := params[v.Params[k]]; ok && v.Params[k] != "" {
					dims[k] = x
				}
			}
		}
		n, ok := tensorBytes(v.Elem, dims)
		if !ok {
			unsized = append(unsized, v.Name)
			continue
		}
		t.bytes = satAdd(t.bytes, n)
		parts = append(parts, fmt.Sprintf("output %s%v %s", v.Name, dims, FormatSize(n)))
	}
	t.why = strings.Join(parts, ", ")
	if len(unsized) > 0 {
		t.why += fmt.Sprintf("; outputs %s have dynamic shapes, sized when the engine loads", strings.Join(unsized, ", "))
	}
	return t
}

// tensorBytes is the size of a tensor of ONNX element type elem and
// shape dims (saturated), or false when a dimension is dynamic.
func tensorBytes(elem int, dims []int64) (int64, bool) {
	n := int64(onnxproto.ElemSize(elem))
	if n == 0 {
		return 0, false
	}
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		n = satMul(n, d)
	}
	return n, true
}

func indexIn[T any](s []T, p *T) int {
	for i := range s {
		if &s[i] == p {
			return i
		}
	}
	return -1
}

// modelBytes is the size of a model's file (0 when it cannot be read:
// CheckFiles reports that).
func modelBytes(c *config.Config, mc *config.Model) int64 {
	if name, ok := mc.Builtin(); ok {
		b, err := config.BuiltinModel(name)
		if err != nil {
			return 0
		}
		return int64(len(b))
	}
	st, err := os.Stat(c.Resolve(mc.Path))
	if err != nil {
		return 0
	}
	return st.Size()
}

// MemoryBudget says where to find how much memory there is.
type MemoryBudget struct {
	// ProcRoot holds meminfo; "" means /proc. Tests use a fixture.
	ProcRoot string
	// Device reports a discrete GPU's free and total memory
	// (cuMemGetInfo); nil when there is none.
	Device func() (free, total uint64, err error)
}

// MemoryReport is what CheckMemory compared.
type MemoryReport struct {
	Checked                      bool  // false: /proc/meminfo could not be read; nothing was checked
	Need, Held                   int64 // system memory the plan needs, and what the running daemon holds of it
	Available, Total, Reserve    int64 // MemAvailable, MemTotal, what is kept for the rest of the system
	DeviceNeed, DeviceHeld       int64
	DeviceFree, DeviceTotal      int64
	DeviceReserve                int64
	DeviceChecked                bool
	pools, engines, deviceEngine int64
	devicePools                  int64 // frame pools in GPU memory (PoolOnDevice)
	tensors, pre, decode         int64
}

// parts says where the system memory goes, for messages.
func (r MemoryReport) parts() string {
	s := fmt.Sprintf("frame pools %s, engines about %s", FormatSize(r.pools), FormatSize(r.engines))
	if r.tensors > 0 {
		s += ", engine tensors " + FormatSize(r.tensors)
	}
	if r.pre > 0 {
		s += ", preprocessing " + FormatSize(r.pre)
	}
	if r.decode > 0 {
		s += ", decoding " + FormatSize(r.decode)
	}
	return s
}

// Usable is the system memory edged may plan with.
func (r MemoryReport) Usable() int64 { return r.Available + r.Held - r.Reserve }

func (r MemoryReport) String() string {
	if !r.Checked {
		return "not checked: /proc/meminfo has no MemAvailable"
	}
	s := fmt.Sprintf("%s need %s of %s usable (MemAvailable %s", r.parts(), FormatSize(r.Need), FormatSize(r.Usable()), FormatSize(r.Available))
	if r.Held > 0 {
		s += fmt.Sprintf(" + %s the running configuration holds", FormatSize(r.Held))
	}
	s += fmt.Sprintf(" - %s kept for the rest of the system)", FormatSize(r.Reserve))
	if r.DeviceChecked {
		what := "GPU engines about"
		if r.devicePools > 0 {
			what = "GPU engines and frame pools (" + FormatSize(r.devicePools) + ") about"
		}
		s += fmt.Sprintf("; %s %s of %s usable (free %s - %s kept)", what, FormatSize(r.DeviceNeed), FormatSize(r.DeviceFree+r.DeviceHeld-r.DeviceReserve), FormatSize(r.DeviceFree), FormatSize(r.DeviceReserve))
	}
	return s
}

// hostMemory is what edged plans with out of mi, at start, at a reload
// and when a pool regrows: MemAvailable, MemTotal and the reserve kept
// for the rest of the system (memoryReserve); ok is false when meminfo
// has no MemAvailable (then nothing is checked).
func hostMemory(mi umem.Meminfo) (avail, total, reserve int64, ok bool) {
	if mi.MemAvailable == 0 {
		return 0, 0, 0, false
	}
	avail, total = int64(min(mi.MemAvailable, 1<<62)), int64(min(mi.MemTotal, 1<<62))
	return avail, total, memoryReserve(total), true
}

// memoryReserve is what edged leaves to the rest of the system out of
// total: a quarter of it (the OS, drivers, the page cache, on Jetson the
// GPU's working memory), at least trt's staging reserve.
func memoryReserve(total int64) int64 { return max(reload.DefaultBudgetReserve, total/4) }

// MemoryError lists where a configuration's memory goes when it does not
// fit. It wraps ErrMemory, and config.ErrInvalid too when it cannot fit on this
// machine at all (more than its total memory): then restarting does not
// help (exit 78), while memory that is merely in use now may be freed.
type MemoryError struct {
	Problems  []config.Problem
	NeverFits bool
}

func (e *MemoryError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is find ErrMemory, and config.ErrInvalid when it never fits.
func (e *MemoryError) Unwrap() []error {
	if e.NeverFits {
		return []error{ErrMemory, config.ErrInvalid}
	}
	return []error{ErrMemory}
}

// CheckMemory compares plan with the memory there is. held is what the
// running configuration already holds (a reload frees it when it replaces
// it; empty at start). It returns a *MemoryError naming, with positions,
// the keys that decide where the memory goes. When meminfo cannot be read
// it checks nothing, as trt's reload budget does.
func CheckMemory(c *config.Config, plan, held MemoryPlan, b MemoryBudget) (MemoryReport, error) {
	var r MemoryReport
	for _, n := range plan.Needs {
		if n.PoolOnDevice {
			r.devicePools = satAdd(r.devicePools, n.PoolBytes())
		} else {
			r.pools = satAdd(r.pools, n.PoolBytes())
		}
		r.tensors, r.pre, r.decode = satAdd(r.tensors, n.TensorBytes), satAdd(r.pre, n.PreBytes), satAdd(r.decode, n.DecodeBytes)
		if n.OnDevice {
			r.deviceEngine = satAdd(r.deviceEngine, n.EngineBytes)
		} else {
			r.engines = satAdd(r.engines, n.EngineBytes)
		}
	}
	var probs []config.Problem
	procRoot := b.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	if mi, err := umem.ReadMeminfo(procRoot); err == nil {
		if r.Available, r.Total, r.Reserve, r.Checked = hostMemory(mi); r.Checked {
			r.Need, r.Held = plan.Host(), held.Host()
		}
	}
	var neverFits bool
	if r.Checked && r.Need > r.Usable() {
		for _, n := range plan.Needs {
			pool := fmt.Sprintf("frame pool of %d slots (%s) × %s (%s) = %s", n.Slots, n.slotsWhy, FormatSize(n.SlotBytes), n.frame, FormatSize(n.PoolBytes()))
			eng := fmt.Sprintf("engine about %s (model %q, file %s × %g)", FormatSize(n.EngineBytes), n.Model, FormatSize(n.ModelBytes), reload.DefaultBudgetFactor)
			switch {
			case n.SharedWith != "":
				eng = fmt.Sprintf("model %q shared with pipeline %q (counted there)", n.Model, n.SharedWith)
			case n.OnDevice:
				eng = "engine in GPU memory"
			}
			probs = append(probs, c.Problem(fmt.Sprintf("source[%d].buffers", n.source), "pipeline %q: %s; %s", n.Pipeline, pool, eng))
			probs = append(probs, n.otherProblems(c)...)
		}
		msg := fmt.Sprintf("%s need %s, but %s/meminfo has MemAvailable %s", r.parts(), FormatSize(r.Need), procRoot, FormatSize(r.Available))
		if r.Held > 0 {
			msg += fmt.Sprintf(" (+ %s the running configuration holds)", FormatSize(r.Held))
		}
		msg += fmt.Sprintf(" and edged keeps %s (a quarter of MemTotal %s) for the rest of the system: %s usable", FormatSize(r.Reserve), FormatSize(r.Total), FormatSize(r.Usable()))
		if neverFits = r.Need > r.Total-r.Reserve; neverFits {
			msg += "; this machine can never hold it"
		}
		probs = append(probs, config.Problem{File: c.File, Msg: msg + "; lower the sources' buffers, width and height, the pipelines' queue and preprocess width and height, use a model with smaller inputs, or run fewer pipelines"})
	}
	if b.Device != nil && plan.Device() > 0 {
		if free, total, err := b.Device(); err == nil && total > 0 {
			r.DeviceChecked = true
			r.DeviceNeed, r.DeviceHeld = plan.Device(), held.Device()
			r.DeviceFree, r.DeviceTotal = int64(free), int64(total)
			r.DeviceReserve = memoryReserve(r.DeviceTotal)
			if r.DeviceNeed > r.DeviceFree+r.DeviceHeld-r.DeviceReserve {
				for _, n := range plan.Needs {
					if n.OnDevice && n.SharedWith == "" {
						probs = append(probs, c.Problem(fmt.Sprintf("model[%d].path", n.model), "pipeline %q: engine about %s in GPU memory (file %s × %g)", n.Pipeline, FormatSize(n.EngineBytes), FormatSize(n.ModelBytes), reload.DefaultBudgetFactor))
					}
				}
				for _, n := range plan.Needs {
					if n.PoolOnDevice {
						probs = append(probs, c.Problem(fmt.Sprintf("source[%d].buffers", n.source), "pipeline %q: frame pool of %d slots × %s = %s in GPU memory (where its decoder writes the pictures)", n.Pipeline, n.Slots, FormatSize(n.SlotBytes), FormatSize(n.PoolBytes())))
					}
				}
				what := "TensorRT engines need"
				if r.devicePools > 0 {
					what = "TensorRT engines and frame pools need"
				}
				msg := fmt.Sprintf("%s about %s of GPU memory, but the GPU has %s free (+ %s the running configuration holds) less %s kept", what, FormatSize(r.DeviceNeed), FormatSize(r.DeviceFree), FormatSize(r.DeviceHeld), FormatSize(r.DeviceReserve))
				if r.DeviceNeed > r.DeviceTotal-r.DeviceReserve {
					neverFits = true
					msg += fmt.Sprintf("; its %s can never hold them", FormatSize(r.DeviceTotal))
				}
				probs = append(probs, config.Problem{File: c.File, Msg: msg})
			}
		}
	}
	if len(probs) > 0 {
		return r, &MemoryError{Problems: probs, NeverFits: neverFits}
	}
	return r, nil
}

// significant is the part of a pipeline's need below which memory
// problems do not name it on a line of its own.
const significant = 1 << 20

// otherProblems names, at the keys that decide them, the parts of n
// besides its frame pool and engine that are large enough to matter.
func (n MemoryNeed) otherProblems(c *config.Config) []config.Problem {
	var probs []config.Problem
	if n.TensorBytes >= significant {
		probs = append(probs, c.Problem(n.tensorsKey, "pipeline %q: the engine binds tensors of %s (model %q: %s)", n.Pipeline, FormatSize(n.TensorBytes), n.Model, n.tensorsWhy))
	}
	if n.PreBytes >= significant {
		probs = append(probs, c.Problem(fmt.Sprintf("pipeline[%d].preprocess.width", n.pipe), "pipeline %q: preprocessing's tables and row buffers take up to %s", n.Pipeline, FormatSize(n.PreBytes)))
	}
	if n.DecodeBytes >= significant {
		probs = append(probs, c.Problem(fmt.Sprintf("source[%d].kind", n.source), "pipeline %q: the source's decoding takes up to %s besides its frame slots", n.Pipeline, FormatSize(n.DecodeBytes)))
	}
	return probs
}

// FormatSize formats a byte count for people (TiB, GiB, MiB, KiB).
func FormatSize(n int64) string {
	switch {
	case n == math.MaxInt64:
		return "more than 8 EiB"
	case n >= 1<<40:
		return fmt.Sprintf("%.2f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// heldMemory is what g holds: the frame pools of its running pipelines
// and the engines of all of them, estimated as PlanMemory does: a model's
// weights once for the pipelines whose engines share them.
func (g *graph) heldMemory(discreteGPU bool) MemoryPlan {
	var plan MemoryPlan
	var held []trt.Engine // one engine of each loaded model counted
	for _, p := range g.all() {
		n := MemoryNeed{Pipeline: p.cfg.Name}
		if p.bat != nil { // as PlanMemory names a batched pipeline's needs
			n.Pipeline += "/" + p.scfg.Name
		}
		if pool := p.framePool(); pool != nil && p.running() {
			n.Slots, n.SlotBytes = pool.Len(), int64(pool.SlotSize())
			n.PoolOnDevice = allocKind(p.alloc) == umem.KindDevice
			_, n.DecodeBytes = SourceSize(p.src, p.scfg)
			if p.h > 0 && p.w > 0 {
				n.PreBytes = preprocess.WorkBytes(p.scfg.Width, p.scfg.Height, p.w, p.h, p.cfg.Preprocess.Threads)
			}
		}
		if mc := g.cfg.Model(p.cfg.Model); mc != nil && p.hot.Current() != nil {
			eng := p.hot.Current().Engine
			n.ModelBytes = modelBytes(g.cfg, mc)
			if !slices.ContainsFunc(held, func(e trt.Engine) bool { return trt.SameWeights(e, eng) }) {
				held = append(held, eng)
				n.EngineBytes = int64(float64(n.ModelBytes) * reload.DefaultBudgetFactor)
			}
			bn, _ := config.ModelBackend(mc)
			n.OnDevice = discreteGPU && bn == "tensorrt"
			sig := trt.SignatureOf(eng) // a batched engine's largest batch, as bound
			for _, t := range slices.Concat(sig.Inputs, sig.Outputs) {
				if !n.OnDevice {
					n.TensorBytes = satAdd(n.TensorBytes, max(t.Bytes(), 0))
				}
			}
		}
		plan.Needs = append(plan.Needs, n)
		if p.bat == nil {
			continue
		}
		for _, l := range p.bat.lanes[1:] { // the other cameras' frame pools
			m := MemoryNeed{Pipeline: p.cfg.Name + "/" + l.scfg.Name}
			if pool := l.framePool(); pool != nil && p.running() {
				m.Slots, m.SlotBytes = pool.Len(), int64(pool.SlotSize())
				m.PoolOnDevice = allocKind(l.alloc) == umem.KindDevice
				_, m.DecodeBytes = SourceSize(l.src, l.scfg)
			}
			plan.Needs = append(plan.Needs, m)
		}
	}
	return plan
}

// checkMemory refuses a next graph whose frame pools and engines do not
// fit beside what base keeps, and logs the numbers when they fit.
func (d *daemon) checkMemory(base, next *graph) error {
	var b MemoryBudget
	discrete := false
	if d.opts.Factories.DeviceMemory != nil {
		if free, total, ok := d.opts.Factories.DeviceMemory(); ok {
			discrete = true
			b.Device = func() (uint64, uint64, error) { return free, total, nil }
		}
	}
	srcs, pipes := map[string]sensors.Source{}, map[string]*pipeline{}
	for _, p := range next.pipelines {
		for _, l := range p.lanesOf() {
			srcs[p.cfg.Name+"\x00"+l.scfg.Name] = l.src
			name := p.cfg.Name // as PlanMemory names the need
			if p.bat != nil {
				name += "/" + l.scfg.Name
			}
			pipes[name] = l
		}
	}
	plan := PlanMemory(next.cfg, func(pc *config.Pipeline, sc *config.Source) (int, int64) {
		return SourceSize(srcs[pc.Name+"\x00"+sc.Name], sc)
	}, discrete)
	markDevicePools(plan, pipes)
	r, err := CheckMemory(next.cfg, plan, base.heldMemory(discrete), b)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	d.log.Info("memory", "budget", r.String())
	return nil
}

// DeclaredBatch is the batch dimension an ONNX model (or a built-in one)
// declares on its first input, read from the file without loading it
// (onnxproto.ReadIO): axis 0 fixed to N (Fixed, Min = Opt = Max = N) or
// dynamic (Min 1, Max 0: no limit). ok is false for other models (a
// TensorRT plan says it through its optimization profile, at load) and
// files that cannot be read.
func DeclaredBatch(c *config.Config, mc *config.Model) (d trt.BatchDim, ok bool) {
	if bn, _ := config.ModelBackend(mc); bn != "onnx" {
		return d, false
	}
	var r io.ReaderAt
	var size int64
	if name, builtin := mc.Builtin(); builtin {
		b, err := config.BuiltinModel(name)
		if err != nil {
			return d, false
		}
		r, size = bytes.NewReader(b), int64(len(b))
	} else {
		f, err := os.Open(c.Resolve(mc.Path))
		if err != nil {
			return d, false
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return d, false
		}
		r, size = f, st.Size()
	}
	decl, err := onnxproto.ReadIO(r, size)
	if err != nil || len(decl.Inputs) == 0 || len(decl.Inputs[0].Dims) == 0 {
		return d, false
	}
	if n := decl.Inputs[0].Dims[0]; n > 0 {
		return trt.BatchDim{Min: int(n), Opt: int(n), Max: int(n), Fixed: true}, true
	}
	return trt.BatchDim{Min: 1, Opt: 1}, true
}
