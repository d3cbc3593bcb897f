package reload

import (
	"github.com/edged-dev/edged/trt"

	"fmt"
	"path/filepath"

	"github.com/edged-dev/edged/umem"
)

// Budget decides whether a model file of modelBytes bytes may be staged now.
// It returns nil to go ahead or an error wrapping ErrMemory. A reload calls
// it before the staging engine is created, so a reload that would not fit
// never allocates.
//
// On Jetson the GPU memory is the system DRAM and [MemInfoBudget] is the
// right check; on a discrete GPU the runtime supplies one based on
// cuMemGetInfo.
type Budget func(modelBytes int64) error

// MemInfoBudget checks MemAvailable in /proc/meminfo against the file size
// times a factor plus a reserve.
type MemInfoBudget struct {
	// Root is prefixed to /proc/meminfo; "" means "/". Tests point it at
	// a fixture tree.
	Root string
	// Factor multiplies the model file size to estimate what staging
	// needs (weights plus activations and runtime state); 0 means 2.
	Factor float64
	// Reserve is kept free for the rest of the system; 0 means 64 MiB,
	// a negative value means none.
	Reserve int64
}

// Defaults of MemInfoBudget.
const (
	DefaultBudgetFactor  = 2.0
	DefaultBudgetReserve = 64 << 20
)

// Check implements Budget. When meminfo cannot be read or has no
// MemAvailable line (kernels before 3.14, some containers) it lets the
// reload go ahead: a missing estimate must not stop engine updates.
func (b MemInfoBudget) Check(modelBytes int64) error {
	factor, reserve := b.Factor, b.Reserve
	if factor <= 0 {
		factor = DefaultBudgetFactor
	}
	if reserve == 0 {
		reserve = DefaultBudgetReserve
	} else if reserve < 0 {
		reserve = 0
	}
	procRoot := filepath.Join(rootOr(b.Root), "proc")
	mi, err := umem.ReadMeminfo(procRoot)
	if err != nil {
		return nil
	}
	avail := int64(min(mi.MemAvailable, 1<<62))
	path := filepath.Join(procRoot, "meminfo")
	need := int64(float64(modelBytes)*factor) + reserve
	if need <= avail {
		return nil
	}
	return fmt.Errorf("%w: staging a %d MiB model needs about %d MiB (%.1f x file size + %d MiB reserve) but %s reports MemAvailable %d MiB; free memory (on Jetson the GPU shares system DRAM) or lower the budget factor",
		trt.ErrMemory, mib(modelBytes), mib(need), factor, mib(reserve), path, mib(avail))
}

func rootOr(root string) string {
	if root == "" {
		return "/"
	}
	return root
}

func mib(n int64) int64 { return (n + 1<<20 - 1) >> 20 }
