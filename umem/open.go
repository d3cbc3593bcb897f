package umem

import (
	"errors"
	"fmt"
)

// Options configure Open; they mirror the [gpu] table of the configuration.
type Options struct {
	// Device is the CUDA device ordinal.
	Device int
	// Strategy is the memory strategy; "" means auto.
	Strategy Strategy
	// Strict enforces the concurrentManagedAccess = 0 rules on any device
	// (see DeviceOptions.Strict).
	Strict bool
	// NoPrefetch turns prefetching of managed memory off where it would be
	// used (managed memory on devices with concurrentManagedAccess = 1):
	// pages then migrate on first touch. For measurements.
	NoPrefetch bool
	// BlockingSync makes CUDA waits sleep instead of spin.
	BlockingSync bool
	// ProcRoot is where /proc/meminfo is read; "" means /proc.
	ProcRoot string
}

// Placement is how frames reach the GPU on this machine: the allocator for
// frame slots, and how an Uploader hands a filled slot to a stream.
type Placement struct {
	// Strategy is the strategy in use (never auto).
	Strategy Strategy
	// Reason says why, for the daemon's log.
	Reason string
	// Probe describes the device, or why there is none.
	Probe Probe
	// Device is the opened device; nil for the host strategy.
	Device *Device
	// Alloc allocates frame slots (host-writable memory, except in a
	// placement from DeviceFrames).
	Alloc Allocator
	// Frames is the kind of memory Alloc's slots are: what a kernel reads
	// in place (managed, mapped, device) or has copied to the device
	// first (host, pinned).
	Frames Kind

	upload uploadMode
	shared bool // DeviceFrames: the device is another placement's
}

type uploadMode int

const (
	uploadNone    uploadMode = iota // no GPU
	uploadCopy                      // copy into a device staging buffer
	uploadInPlace                   // the kernel reads the slot itself (managed, mapped)
)

// Open opens the device (unless the strategy is host), resolves auto, and
// returns the placement. With auto and no usable CUDA it falls back to host
// memory; an explicit CUDA strategy without CUDA is an error that wraps
// ErrNoCUDA.
func Open(o Options) (*Placement, error) {
	st := o.Strategy
	if st == "" {
		st = StrategyAuto
	}
	if _, err := ParseStrategy(string(st)); err != nil {
		return nil, err
	}
	if st == StrategyHost {
		return &Placement{
			Strategy: StrategyHost,
			Reason:   "memory = \"host\": page-aligned host memory (mmap); CUDA is not used",
			Probe:    Probe{NoCUDA: "not probed (memory = \"host\")", Ordinal: o.Device},
			Alloc:    NewHost(),
			Frames:   KindHost,
		}, nil
	}
	drv, err := loadDriver()
	if err != nil {
		return openFallback(st, o, err)
	}
	return openWith(drv, st, o)
}

func openFallback(st Strategy, o Options, err error) (*Placement, error) {
	if st == StrategyAuto && errors.Is(err, ErrNoCUDA) {
		return &Placement{
			Strategy: StrategyHost,
			Reason:   "no usable CUDA (" + err.Error() + "): page-aligned host memory (mmap); CPU backends read frames in place",
			Probe:    Probe{NoCUDA: err.Error(), Ordinal: o.Device},
			Alloc:    NewHost(),
			Frames:   KindHost,
		}, nil
	}
	return nil, fmt.Errorf("umem: memory = %q needs CUDA on device %d: %w; set [gpu] memory = \"auto\" or \"host\" on machines without an NVIDIA GPU", st, o.Device, err)
}

func openWith(drv driver, st Strategy, o Options) (*Placement, error) {
	d, err := openDevice(drv, DeviceOptions{Ordinal: o.Device, Strict: o.Strict, BlockingSync: o.BlockingSync, ProcRoot: o.ProcRoot})
	if err != nil {
		return openFallback(st, o, err)
	}
	p, err := place(d, st, o)
	if err != nil {
		d.Close()
		return nil, err
	}
	return p, nil
}

// place resolves the strategy for an open device.
func place(d *Device, st Strategy, o Options) (*Placement, error) {
	pr := d.Probe()
	dev := fmt.Sprintf("%s (sm_%d%d, %s, concurrentManagedAccess=%d)", pr.Name, pr.Major, pr.Minor, pr.Kind(), b01(pr.ConcurrentManagedAccess))
	strict := ""
	if o.Strict {
		strict = "; strict mode: the concurrentManagedAccess = 0 rules are enforced"
	}
	p := &Placement{Probe: pr, Device: d}
	prefetch := !o.NoPrefetch && !d.cmaRules
	managed := func(reason string) {
		p.Strategy = StrategyManaged
		p.Alloc = d.NewAllocator(StrategyManaged, MemOptions{Kind: KindManaged, Prefetch: prefetch})
		p.Frames = KindManaged
		p.upload = uploadInPlace
		p.Reason = reason
	}
	switch st {
	case StrategyAuto:
		switch {
		case pr.Integrated && pr.ManagedMemory && d.cmaRules:
			managed(dev + ": managed memory allocated attach-HOST; the CPU writes frames while the host owns them, " +
				"each is attached to the pipeline stream alone for GPU work and back to the host after the stream syncs; no prefetch (unsupported)" + strict)
		case pr.Integrated && pr.ManagedMemory:
			how := "prefetched to the GPU before GPU work and back after it"
			if !prefetch {
				how = "pages migrate on touch (prefetch off)"
			}
			managed(dev + ": managed memory, attach-GLOBAL, " + how)
		default:
			p.Strategy = StrategyPinned
			p.Alloc = d.NewAllocator(StrategyPinned, MemOptions{Kind: KindPinned})
			p.Frames = KindPinned
			p.upload = uploadCopy
			p.Reason = dev + ": pinned host slots, copied asynchronously into a device staging buffer " +
				"(fastest measured on a discrete GPU; managed memory migrates twice per frame)" + strict
		}
		p.Reason = "memory = \"auto\" on " + p.Reason
		return p, nil
	case StrategyManaged:
		if !pr.ManagedMemory {
			return nil, fmt.Errorf("umem: memory = \"managed\": %s has no managed memory; use \"auto\" or \"pinned\"", dev)
		}
		how := "no prefetch"
		if prefetch {
			how = "prefetched on each hand-over"
		} else if d.cmaRules {
			how = "attached to one stream for GPU work, to the host after it; no prefetch"
		}
		managed(fmt.Sprintf("memory = \"managed\" on %s: managed memory, %s%s", dev, how, strict))
	case StrategyPinned:
		p.Strategy = StrategyPinned
		p.Alloc = d.NewAllocator(StrategyPinned, MemOptions{Kind: KindPinned})
		p.Frames = KindPinned
		p.upload = uploadCopy
		p.Reason = "memory = \"pinned\" on " + dev + ": pinned host slots, copied asynchronously into a device staging buffer" + strict
	case StrategyMapped:
		if !pr.CanMapHostMemory {
			return nil, fmt.Errorf("umem: memory = \"mapped\": %s cannot map host memory; use \"auto\" or \"pinned\"", dev)
		}
		p.Strategy = StrategyMapped
		p.Alloc = d.NewAllocator(StrategyMapped, MemOptions{Kind: KindMapped})
		p.Frames = KindMapped
		p.upload = uploadInPlace
		p.Reason = "memory = \"mapped\" on " + dev + ": pinned host slots that kernels read in place over the bus (zero-copy)" + strict
	case StrategyDevice:
		p.Strategy = StrategyDevice
		p.Alloc = relabeled{NewHost(), StrategyDevice}
		p.Frames = KindHost
		p.upload = uploadCopy
		p.Reason = "memory = \"device\" on " + dev + ": pageable host slots (mmap), copied into device memory for GPU work" + strict
	default:
		return nil, fmt.Errorf("umem: unknown memory strategy %q", st)
	}
	return p, nil
}

// DeviceFrames is a placement for the frames of a decoder that writes its
// pictures on the GPU (NVDEC): slots of device memory on p's device
// (cuMemAlloc), which the decoder fills device to device and kernels read
// in place, so a picture never crosses the host. The host cannot map
// them: a CPU consumer copies one out (Mem.ReadBack). reason says why, for
// the log and edged check. It shares p's device: close p, not it (its
// Close does nothing); its Strategy is p's.
func (p *Placement) DeviceFrames(reason string) (*Placement, error) {
	if p.Device == nil {
		return nil, fmt.Errorf("%w: memory = %q: frames in device memory need a CUDA device", ErrNoCUDA, p.Strategy)
	}
	return &Placement{Strategy: p.Strategy, Reason: reason, Probe: p.Probe, Device: p.Device,
		Alloc:  p.Device.NewAllocator(p.Strategy, MemOptions{Kind: KindDevice}),
		Frames: KindDevice, upload: uploadInPlace, shared: true}, nil
}

// Close closes the device, if any. Buffers from Alloc must be released
// first. It is idempotent; a placement from DeviceFrames leaves the
// device to the one it came from.
func (p *Placement) Close() error {
	if p.Device == nil || p.shared {
		return nil
	}
	return p.Device.Close()
}

// relabeled reports another strategy for an allocator.
type relabeled struct {
	*HostAllocator
	st Strategy
}

func (r relabeled) Strategy() Strategy { return r.st }
