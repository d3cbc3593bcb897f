package umem

import (
	"fmt"
	"strings"
)

// Probe describes the CUDA device umem would use, or why there is none.
// `edged check` prints it with String.
type Probe struct {
	// CUDA is true when a driver and the device were found.
	CUDA bool
	// NoCUDA says why not, when CUDA is false.
	NoCUDA string

	DriverVersion int // e.g. 13000 for CUDA 13.0
	Ordinal       int
	Name          string
	Major, Minor  int // compute capability
	Multiprocs    int

	Integrated              bool // GPU shares system DRAM (Jetson)
	ConcurrentManagedAccess bool // CPU and GPU may touch managed memory at the same time
	PageableMemoryAccess    bool // GPU can read pageable host memory
	ManagedMemory           bool
	CanMapHostMemory        bool
	UnifiedAddressing       bool

	TotalMem, FreeMem uint64 // device memory, bytes (cuMemGetInfo)

	// MemAvailable is /proc/meminfo MemAvailable in bytes, read on
	// integrated devices only (their GPU memory is system DRAM); 0 when
	// not read. MeminfoErr says why it could not be read.
	MemAvailable uint64
	MeminfoErr   string
}

// Arch is the NVRTC virtual architecture of the device, e.g. "compute_87".
func (p Probe) Arch() string { return fmt.Sprintf("compute_%d%d", p.Major, p.Minor) }

// Kind is "integrated" or "discrete".
func (p Probe) Kind() string {
	if p.Integrated {
		return "integrated"
	}
	return "discrete"
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// String is a short multi-line report for people.
func (p Probe) String() string {
	if !p.CUDA {
		return "no CUDA: " + p.NoCUDA
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CUDA driver %d.%d, device %d: %s (sm_%d%d, %s, %d SMs)\n",
		p.DriverVersion/1000, p.DriverVersion%1000/10, p.Ordinal, p.Name, p.Major, p.Minor, p.Kind(), p.Multiprocs)
	fmt.Fprintf(&b, "  device memory: %s total, %s free\n", gib(p.TotalMem), gib(p.FreeMem))
	if p.Integrated {
		if p.MeminfoErr != "" {
			fmt.Fprintf(&b, "  system memory: MemAvailable unknown (%s)\n", p.MeminfoErr)
		} else {
			fmt.Fprintf(&b, "  system memory (shared with the GPU): %s available\n", gib(p.MemAvailable))
		}
	}
	fmt.Fprintf(&b, "  managedMemory=%d concurrentManagedAccess=%d pageableMemoryAccess=%d canMapHostMemory=%d unifiedAddressing=%d",
		b01(p.ManagedMemory), b01(p.ConcurrentManagedAccess), b01(p.PageableMemoryAccess), b01(p.CanMapHostMemory), b01(p.UnifiedAddressing))
	return b.String()
}
