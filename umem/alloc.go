package umem

// CUDAAllocator hands out CUDA buffers of one kind from a device.
type CUDAAllocator struct {
	d        *Device
	o        MemOptions
	strategy Strategy
}

// NewAllocator returns an allocator of buffers described by o, reporting
// strategy st (the configuration value it implements).
func (d *Device) NewAllocator(st Strategy, o MemOptions) *CUDAAllocator {
	return &CUDAAllocator{d: d, o: o, strategy: st}
}

// Strategy implements Allocator.
func (a *CUDAAllocator) Strategy() Strategy { return a.strategy }

// Kind is the kind of memory of the buffers it allocates.
func (a *CUDAAllocator) Kind() Kind { return a.o.Kind }

// Options are the buffer options of this allocator.
func (a *CUDAAllocator) Options() MemOptions { return a.o }

// Alloc implements Allocator; the buffer is a *Mem.
func (a *CUDAAllocator) Alloc(n int) (Buffer, error) {
	m, err := a.d.Alloc(n, a.o)
	if err != nil {
		return nil, err
	}
	return m, nil
}
