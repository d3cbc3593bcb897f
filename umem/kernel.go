package umem

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
)

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// D1 is a one-dimensional size.
func D1(x uint32) Dim3 { return Dim3{x, 1, 1} }

// Limits of Args.
const (
	maxArgs     = 32
	maxArgBytes = 512
)

// Args holds kernel arguments in the layout cuLaunchKernel wants: values
// packed in a fixed buffer with their offsets. Reset and refill it for each
// launch; it allocates nothing, so it can be reused per frame.
type Args struct {
	blob [maxArgBytes / 8]uint64 // 8-byte aligned storage
	off  [maxArgs]int32
	n    int
	used int
	err  error
}

// Reset clears the arguments.
func (a *Args) Reset() { a.n, a.used, a.err = 0, 0, nil }

func (a *Args) put(size int) []byte {
	if a.err != nil {
		return nil
	}
	at := roundUp(a.used, size)
	if a.n == maxArgs || at+size > maxArgBytes {
		a.err = fmt.Errorf("umem: more than %d kernel arguments or %d bytes", maxArgs, maxArgBytes)
		return nil
	}
	a.off[a.n] = int32(at)
	a.n++
	a.used = at + size
	b := (*[maxArgBytes]byte)(ptrOf(&a.blob))
	return b[at : at+size]
}

// Ptr adds a device address (a T* parameter).
func (a *Args) Ptr(p uintptr) { a.U64(uint64(p)) }

// U64 adds an unsigned long long / size_t parameter.
func (a *Args) U64(v uint64) {
	if b := a.put(8); b != nil {
		binary.NativeEndian.PutUint64(b, v)
	}
}

// U32 adds an unsigned int parameter.
func (a *Args) U32(v uint32) {
	if b := a.put(4); b != nil {
		binary.NativeEndian.PutUint32(b, v)
	}
}

// I32 adds an int parameter.
func (a *Args) I32(v int32) { a.U32(uint32(v)) }

// F32 adds a float parameter.
func (a *Args) F32(v float32) { a.U32(math.Float32bits(v)) }

// Module is a loaded CUDA module (PTX or cubin).
type Module struct {
	d      *Device
	h      uintptr
	closed atomic.Bool
}

// LoadModule loads PTX (NUL-terminated or not) or a cubin. The driver JITs
// PTX for the device; its error log is part of the error.
func (d *Device) LoadModule(image []byte) (*Module, error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if len(image) == 0 {
		return nil, fmt.Errorf("umem: load module: empty image")
	}
	if image[len(image)-1] != 0 && !isELF(image) {
		image = append(image[:len(image):len(image)], 0)
	}
	h, log, err := d.drv.moduleLoad(d.ctx, image)
	if err != nil {
		if log != "" {
			return nil, fmt.Errorf("umem: load module on device %d (%s): %w\n%s", d.probe.Ordinal, d.probe.Arch(), err, log)
		}
		return nil, fmt.Errorf("umem: load module on device %d (%s): %w", d.probe.Ordinal, d.probe.Arch(), err)
	}
	return &Module{d: d, h: h}, nil
}

func isELF(b []byte) bool { return len(b) >= 4 && string(b[:4]) == "\x7fELF" }

// Kernel looks up a kernel (an extern "C" __global__ function).
func (m *Module) Kernel(name string) (*Kernel, error) {
	if m.closed.Load() {
		return nil, ErrClosed
	}
	f, err := m.d.drv.moduleFunction(m.d.ctx, m.h, name)
	if err != nil {
		return nil, fmt.Errorf("umem: kernel %q: %w (is it declared extern \"C\"?)", name, err)
	}
	return &Kernel{m: m, h: f, name: name}, nil
}

// Close unloads the module; its kernels become invalid. It is idempotent.
func (m *Module) Close() error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	return m.d.drv.moduleUnload(m.d.ctx, m.h)
}

// Kernel is a function of a loaded module.
type Kernel struct {
	m    *Module
	h    uintptr
	name string
}

// Name is the kernel's name.
func (k *Kernel) Name() string { return k.name }

// Launch enqueues the kernel on s. Buffers it touches must be owned by s
// (Mem.Attach) or be device memory.
func (k *Kernel) Launch(s *Stream, grid, block Dim3, sharedMem int, a *Args) error {
	if a.err != nil {
		return a.err
	}
	if k.m.closed.Load() || s.closed.Load() {
		return ErrClosed
	}
	if err := k.m.d.drv.launch(k.m.d.ctx, k.h, grid, block, uint32(sharedMem), s.h, a); err != nil {
		return fmt.Errorf("umem: launch %s: %w", k.name, err)
	}
	return nil
}
