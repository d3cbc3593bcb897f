package runtime

import (
	"errors"
	"fmt"

	"github.com/edged-dev/edged/umem"
)

// Where a pipeline's frame pool lives. The daemon's memory strategy
// (Factories.Allocator) serves every pipeline whose source writes frames
// on the CPU; a source whose decoder writes its pictures on the GPU
// (NVDEC) gets a pool where the decoder writes them (device memory on a
// discrete GPU, Factories.FrameAllocator), so the picture goes from the
// decoder to the preprocessing kernel without crossing the host. What the
// CPU needs of such a frame (the preview tap, CPU preprocessing where the
// GPU path failed) is copied out when it needs it, off the kernel's path
// (hostBytes).

// frames is the allocator of p's frame pool, asked of the daemon once
// per pipeline: when its engine is bound (the GPU preprocessing is built
// for it) or when it starts, whichever comes first.
func (p *pipeline) frames() (umem.Allocator, error) {
	if p.alloc == nil && p.frameAlloc != nil {
		a, err := p.frameAlloc()
		if err != nil {
			return nil, err
		}
		p.alloc = a
	}
	return p.alloc, nil
}

// frameAllocator is the allocator of p's frame pool and logs where its
// frames live and why.
func (d *daemon) frameAllocator(p *pipeline) (umem.Allocator, error) {
	alloc, why := d.alloc, "the daemon's memory strategy"
	if f := d.opts.Factories.FrameAllocator; f != nil {
		a, w, err := f(p.cfg, p.scfg, p.conf)
		if err != nil {
			return nil, fmt.Errorf("pipeline %q: frame memory: %w", p.cfg.Name, err)
		}
		if a != nil {
			alloc = a
		}
		if w != "" {
			why = w
		}
	}
	p.log.Info("frame memory", "source", p.scfg.Name, "memory", allocKind(alloc).String(), "strategy", string(alloc.Strategy()), "why", why)
	return alloc, nil
}

// allocKind is the kind of memory an allocator hands out (umem's
// allocators say; another is taken for host memory).
func allocKind(a umem.Allocator) umem.Kind {
	if k, ok := a.(interface{ Kind() umem.Kind }); ok {
		return k.Kind()
	}
	return umem.KindHost
}

// hostBytes is the first n bytes of a frame buffer as the CPU reads them:
// the buffer itself when the host may read it, else, for device memory
// (the pictures of a decoder on the GPU), a copy in p's read-back buffer,
// valid until the next call. Only CPU consumers call it, never the GPU
// path.
func (p *pipeline) hostBytes(b umem.Buffer, n int) ([]byte, error) {
	h, err := b.Host()
	if err == nil {
		return h[:min(n, len(h))], nil
	}
	m, ok := b.(*umem.Mem)
	if !ok || !errors.Is(err, umem.ErrNotHostAccessible) {
		return nil, err
	}
	n = min(n, m.Len())
	if cap(p.readBack) < n {
		p.readBack = make([]byte, n)
	}
	out := p.readBack[:n]
	if err := m.ReadBack(out); err != nil {
		return nil, err
	}
	return out, nil
}

// markDevicePools marks the needs of plan whose pipelines' frames live in
// device memory (asked of each pipeline now, before its pool is made: a
// failure is the start's to report).
func markDevicePools(plan MemoryPlan, pipes map[string]*pipeline) {
	for i := range plan.Needs {
		p := pipes[plan.Needs[i].Pipeline]
		if p == nil {
			continue
		}
		if a, err := p.frames(); err == nil && allocKind(a) == umem.KindDevice {
			plan.Needs[i].PoolOnDevice = true
		}
	}
}
