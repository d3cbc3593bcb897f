package reload_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
)

// meminfoRoot builds a fake root whose /proc/meminfo says MemAvailable
// is availKB kB (as on a Jetson Orin Nano with 8 GB).
func meminfoRoot(t *testing.T, text string) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "meminfo"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

const orinMeminfo = `MemTotal:        7620592 kB
MemFree:          201236 kB
MemAvailable:     409600 kB
Buffers:           33812 kB
Cached:          1801952 kB
`

func TestMemInfoBudget(t *testing.T) {
	root := meminfoRoot(t, orinMeminfo) // 400 MiB available
	b := reload.MemInfoBudget{Root: root}
	if err := b.Check(100 << 20); err != nil { // 2 x 100 + 64 = 264 MiB
		t.Fatalf("100 MiB model: %v", err)
	}
	err := b.Check(200 << 20) // 2 x 200 + 64 = 464 MiB
	if !errors.Is(err, trt.ErrMemory) || !strings.Contains(err.Error(), "MemAvailable 400 MiB") || !strings.Contains(err.Error(), filepath.Join(root, "proc", "meminfo")) {
		t.Fatalf("200 MiB model: %v", err)
	}
	if err := (reload.MemInfoBudget{Root: root, Factor: 1, Reserve: -1}).Check(400 << 20); err != nil {
		t.Fatalf("factor 1, no reserve: %v", err)
	}
	if err := (reload.MemInfoBudget{Root: root, Factor: 1, Reserve: 1}).Check(400 << 20); !errors.Is(err, trt.ErrMemory) {
		t.Fatalf("factor 1, 1-byte reserve: %v", err)
	}
	// No meminfo, or one without MemAvailable: the reload goes ahead.
	if err := (reload.MemInfoBudget{Root: t.TempDir()}).Check(1 << 40); err != nil {
		t.Fatalf("missing meminfo: %v", err)
	}
	if err := (reload.MemInfoBudget{Root: meminfoRoot(t, "MemTotal: 1 kB\n")}).Check(1 << 40); err != nil {
		t.Fatalf("no MemAvailable: %v", err)
	}
	// A 1 TiB model does not fit this machine's real memory.
	if err := (reload.MemInfoBudget{}).Check(1 << 40); !errors.Is(err, trt.ErrMemory) {
		t.Fatalf("1 TiB model on this machine: %v", err)
	}
}
