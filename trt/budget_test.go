package trt_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
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
	b := trt.MemInfoBudget{Root: root}
	if err := b.Check(100 << 20); err != nil { // 2 x 100 + 64 = 264 MiB
		t.Fatalf("100 MiB model: %v", err)
	}
	err := b.Check(200 << 20) // 2 x 200 + 64 = 464 MiB
	if !errors.Is(err, trt.ErrMemory) || !strings.Contains(err.Error(), "MemAvailable 400 MiB") || !strings.Contains(err.Error(), filepath.Join(root, "proc", "meminfo")) {
		t.Fatalf("200 MiB model: %v", err)
	}
	if err := (trt.MemInfoBudget{Root: root, Factor: 1, Reserve: -1}).Check(400 << 20); err != nil {
		t.Fatalf("factor 1, no reserve: %v", err)
	}
	if err := (trt.MemInfoBudget{Root: root, Factor: 1, Reserve: 1}).Check(400 << 20); !errors.Is(err, trt.ErrMemory) {
		t.Fatalf("factor 1, 1-byte reserve: %v", err)
	}
	// No meminfo, or one without MemAvailable: the reload goes ahead.
	if err := (trt.MemInfoBudget{Root: t.TempDir()}).Check(1 << 40); err != nil {
		t.Fatalf("missing meminfo: %v", err)
	}
	if err := (trt.MemInfoBudget{Root: meminfoRoot(t, "MemTotal: 1 kB\n")}).Check(1 << 40); err != nil {
		t.Fatalf("no MemAvailable: %v", err)
	}
	// The real one parses on this machine.
	if _, err := trt.ParseMemAvailable(mustRead(t, "/proc/meminfo")); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skip(err)
	}
	return b
}

func TestParseMemAvailable(t *testing.T) {
	for in, want := range map[string]int64{
		orinMeminfo:                     409600 << 10,
		"MemAvailable: 5 kB":            5 << 10,
		"X: 1\nMemAvailable:\t7\n":      7,
		"MemAvailable: 0 kB\n":          0,
		"MemAvailable: 12 B\nMemTotal:": 12,
	} {
		got, err := trt.ParseMemAvailable([]byte(in))
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MemAvailable:", "MemAvailable: -1 kB", "MemAvailable: 1 MB", "MemAvailable: 1 kB x", "MemAvailable: 99999999999999999999 kB", "MemAvailable: 9007199254740993 kB"} {
		if _, err := trt.ParseMemAvailable([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte(orinMeminfo))
	f.Add([]byte("MemAvailable: 5 kB"))
	f.Add([]byte("MemAvailable:\t\t7 B\n"))
	f.Add([]byte("MemAvailable: 9007199254740993 kB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := trt.ParseMemAvailable(b)
		if err == nil && v < 0 {
			t.Fatalf("negative MemAvailable %d from %q", v, b)
		}
	})
}
