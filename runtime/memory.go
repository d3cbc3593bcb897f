package runtime

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// ErrMemory is wrapped by a MemoryError: the frame pools and engines of a
// configuration do not fit in the memory there is.
var ErrMemory = errors.New("not enough memory")

// MemoryNeed is what one pipeline needs: its frame pool and its engine.
type MemoryNeed struct {
	Pipeline    string
	Slots       int   // frame pool slots: source buffers + 2 + mailbox depth
	SlotBytes   int64 // bytes per slot
	Model       string
	ModelBytes  int64 // size of the model file
	EngineBytes int64 // estimate: ModelBytes × trt.DefaultBudgetFactor
	OnDevice    bool  // the engine lives in a discrete GPU's own memory

	pipe, source, model int    // indexes in the configuration, for positions
	slotsWhy, frame     string // how Slots and SlotBytes follow from the configuration
}

// PoolBytes is the size of the pipeline's frame pool.
func (n MemoryNeed) PoolBytes() int64 { return int64(n.Slots) * n.SlotBytes }

// MemoryPlan is what a configuration needs, pipeline by pipeline.
type MemoryPlan struct{ Needs []MemoryNeed }

// Host is what the plan takes from system memory: every frame pool, and
// every engine that does not live in a discrete GPU's memory (on Jetson
// the GPU's memory is the system's).
func (p MemoryPlan) Host() int64 {
	var n int64
	for _, x := range p.Needs {
		n += x.PoolBytes()
		if !x.OnDevice {
			n += x.EngineBytes
		}
	}
	return n
}

// Device is what the plan takes from a discrete GPU's memory.
func (p MemoryPlan) Device() int64 {
	var n int64
	for _, x := range p.Needs {
		if x.OnDevice {
			n += x.EngineBytes
		}
	}
	return n
}

// PlanMemory computes what each pipeline of c needs. slotSize returns the
// frame slot size of a pipeline's source (nil: what the source's
// configuration takes, as SlotSize does without a source); discreteGPU
// says whether TensorRT engines live in a GPU's own memory. Each pipeline
// has its own engine (ARCHITECTURE.md, item 1), estimated as trt's reload
// budget estimates a staging engine: the model file size times
// trt.DefaultBudgetFactor.
func PlanMemory(c *config.Config, slotSize func(*config.Pipeline, *config.Source) int, discreteGPU bool) MemoryPlan {
	var plan MemoryPlan
	for i := range c.Pipelines {
		pc := &c.Pipelines[i]
		sc, mc := c.Source(pc.Source), c.Model(pc.Model)
		if sc == nil || mc == nil {
			continue
		}
		n := MemoryNeed{Pipeline: pc.Name, Model: mc.Name, pipe: i, source: indexIn(c.Sources, sc), model: indexIn(c.Models, mc)}
		n.Slots = poolSlots(sc, pc)
		depth := "mailbox 1"
		if pc.Schedule == "queue" {
			depth = fmt.Sprintf("queue %d", pc.Queue)
		}
		n.slotsWhy = fmt.Sprintf("buffers %d + 2 + %s", sc.Buffers, depth)
		size := frameSize(sc)
		if slotSize != nil {
			size = slotSize(pc, sc)
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
		n.EngineBytes = int64(float64(n.ModelBytes) * trt.DefaultBudgetFactor)
		bn, _ := config.ModelBackend(mc)
		n.OnDevice = discreteGPU && bn == "tensorrt"
		plan.Needs = append(plan.Needs, n)
	}
	return plan
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
}

// Usable is the system memory edged may plan with.
func (r MemoryReport) Usable() int64 { return r.Available + r.Held - r.Reserve }

func (r MemoryReport) String() string {
	if !r.Checked {
		return "not checked: /proc/meminfo has no MemAvailable"
	}
	s := fmt.Sprintf("frame pools %s and engines about %s need %s of %s usable (MemAvailable %s", FormatSize(r.pools), FormatSize(r.engines), FormatSize(r.Need), FormatSize(r.Usable()), FormatSize(r.Available))
	if r.Held > 0 {
		s += fmt.Sprintf(" + %s the running configuration holds", FormatSize(r.Held))
	}
	s += fmt.Sprintf(" - %s kept for the rest of the system)", FormatSize(r.Reserve))
	if r.DeviceChecked {
		s += fmt.Sprintf("; GPU engines about %s of %s usable (free %s - %s kept)", FormatSize(r.DeviceNeed), FormatSize(r.DeviceFree+r.DeviceHeld-r.DeviceReserve), FormatSize(r.DeviceFree), FormatSize(r.DeviceReserve))
	}
	return s
}

// memoryReserve is what edged leaves to the rest of the system out of
// total: a quarter of it (the OS, drivers, the page cache, on Jetson the
// GPU's working memory), at least trt's staging reserve.
func memoryReserve(total int64) int64 { return max(trt.DefaultBudgetReserve, total/4) }

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
		r.pools += n.PoolBytes()
		if n.OnDevice {
			r.deviceEngine += n.EngineBytes
		} else {
			r.engines += n.EngineBytes
		}
	}
	var probs []config.Problem
	procRoot := b.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	mi, err := umem.ReadMeminfo(procRoot)
	if err == nil && mi.MemAvailable > 0 {
		r.Checked = true
		r.Need, r.Held = plan.Host(), held.Host()
		r.Available, r.Total = int64(min(mi.MemAvailable, 1<<62)), int64(min(mi.MemTotal, 1<<62))
		r.Reserve = memoryReserve(r.Total)
	}
	var neverFits bool
	if r.Checked && r.Need > r.Usable() {
		for _, n := range plan.Needs {
			pool := fmt.Sprintf("frame pool of %d slots (%s) × %s (%s) = %s", n.Slots, n.slotsWhy, FormatSize(n.SlotBytes), n.frame, FormatSize(n.PoolBytes()))
			eng := fmt.Sprintf("engine about %s (model %q, file %s × %g)", FormatSize(n.EngineBytes), n.Model, FormatSize(n.ModelBytes), trt.DefaultBudgetFactor)
			if n.OnDevice {
				eng = "engine in GPU memory"
			}
			probs = append(probs, c.Problem(fmt.Sprintf("source[%d].buffers", n.source), "pipeline %q: %s; %s", n.Pipeline, pool, eng))
		}
		msg := fmt.Sprintf("frame pools (%s) and engines (about %s) need %s, but %s/meminfo has MemAvailable %s", FormatSize(r.pools), FormatSize(r.engines), FormatSize(r.Need), procRoot, FormatSize(r.Available))
		if r.Held > 0 {
			msg += fmt.Sprintf(" (+ %s the running configuration holds)", FormatSize(r.Held))
		}
		msg += fmt.Sprintf(" and edged keeps %s (a quarter of MemTotal %s) for the rest of the system: %s usable", FormatSize(r.Reserve), FormatSize(r.Total), FormatSize(r.Usable()))
		if neverFits = r.Need > r.Total-r.Reserve; neverFits {
			msg += "; this machine can never hold it"
		}
		probs = append(probs, config.Problem{File: c.File, Msg: msg + "; lower the sources' buffers, width and height, the pipelines' queue, or run fewer pipelines"})
	}
	if b.Device != nil && plan.Device() > 0 {
		if free, total, err := b.Device(); err == nil && total > 0 {
			r.DeviceChecked = true
			r.DeviceNeed, r.DeviceHeld = plan.Device(), held.Device()
			r.DeviceFree, r.DeviceTotal = int64(free), int64(total)
			r.DeviceReserve = memoryReserve(r.DeviceTotal)
			if r.DeviceNeed > r.DeviceFree+r.DeviceHeld-r.DeviceReserve {
				for _, n := range plan.Needs {
					if n.OnDevice {
						probs = append(probs, c.Problem(fmt.Sprintf("model[%d].path", n.model), "pipeline %q: engine about %s in GPU memory (file %s × %g)", n.Pipeline, FormatSize(n.EngineBytes), FormatSize(n.ModelBytes), trt.DefaultBudgetFactor))
					}
				}
				msg := fmt.Sprintf("TensorRT engines need about %s of GPU memory, but the GPU has %s free (+ %s the running configuration holds) less %s kept", FormatSize(r.DeviceNeed), FormatSize(r.DeviceFree), FormatSize(r.DeviceHeld), FormatSize(r.DeviceReserve))
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

// FormatSize formats a byte count for people (GiB, MiB, KiB).
func FormatSize(n int64) string {
	switch {
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
// and the engines of all of them, estimated as PlanMemory does.
func (g *graph) heldMemory(discreteGPU bool) MemoryPlan {
	var plan MemoryPlan
	for _, p := range g.all() {
		n := MemoryNeed{Pipeline: p.cfg.Name}
		if p.pool != nil && p.running() {
			n.Slots, n.SlotBytes = p.pool.Len(), int64(p.pool.SlotSize())
		}
		if mc := g.cfg.Model(p.cfg.Model); mc != nil && p.hot.Current() != nil {
			n.ModelBytes = modelBytes(g.cfg, mc)
			n.EngineBytes = int64(float64(n.ModelBytes) * trt.DefaultBudgetFactor)
			bn, _ := config.ModelBackend(mc)
			n.OnDevice = discreteGPU && bn == "tensorrt"
		}
		plan.Needs = append(plan.Needs, n)
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
	srcs := map[string]sensors.Source{}
	for _, p := range next.pipelines {
		srcs[p.cfg.Name] = p.src
	}
	plan := PlanMemory(next.cfg, func(pc *config.Pipeline, sc *config.Source) int { return SlotSize(srcs[pc.Name], sc) }, discrete)
	r, err := CheckMemory(next.cfg, plan, base.heldMemory(discrete), b)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	d.log.Info("memory", "budget", r.String())
	return nil
}
