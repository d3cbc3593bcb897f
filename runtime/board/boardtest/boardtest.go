package boardtest

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// The boards whose trees testdata/ holds.
const (
	OrinJP5   = "orin-jp5"   // Jetson AGX Orin 64GB, JetPack 5 (L4T r35): CPU-therm … tj-therm, 17000000.ga10b, two INA3221
	OrinJP6   = "orin-jp6"   // Jetson Orin Nano, JetPack 6 (L4T r36): cpu-thermal … tj-thermal, 17000000.gpu, VDD_IN, VDD_CPU_GPU_CV, VDD_SOC
	XavierJP5 = "xavier-jp5" // Jetson AGX Xavier, JetPack 5 (L4T r35): CPU-therm, GPU-therm …, 17000000.gv11b
	X86       = "x86"        // an x86 host: two acpitz zones and x86_pkg_temp, cpufreq, PSI; no GPU of its own, rails or nvpmodel
)

// Boards lists every tree.
var Boards = []string{OrinJP5, OrinJP6, XavierJP5, X86}

// Paths are a tree's three roots, for [daemon] sysfs, procfs and rootfs;
// board.Paths(tree.Paths) converts them (boardtest does not import board,
// so that board's own tests can use it).
type Paths struct {
	Sys, Proc, Root string
}

// Tree is a copy of a board's tree in a temporary folder.
type Tree struct {
	Dir   string // holds sys/, proc/ and root/
	Paths Paths
	tb    testing.TB
}

// trees holds testdata/: embedded, so a test binary built anywhere (with
// -trimpath, or cross-built and copied to a board) has them.
//
//go:embed testdata
var trees embed.FS

// Copy copies board's tree into a new temporary folder of tb.
func Copy(tb testing.TB, name string) *Tree {
	tb.Helper()
	src := path.Join("testdata", name)
	dst := tb.TempDir()
	err := fs.WalkDir(trees, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, src), "/")
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := trees.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		tb.Fatalf("boardtest: copying %s: %v", name, err)
	}
	return &Tree{Dir: dst, tb: tb, Paths: Paths{
		Sys: filepath.Join(dst, "sys"), Proc: filepath.Join(dst, "proc"), Root: filepath.Join(dst, "root")}}
}

// Write replaces the file at rel (relative to Dir: "sys/class/…") with
// content and a newline, making its folder if needed.
func (t *Tree) Write(rel, content string) {
	t.tb.Helper()
	p := filepath.Join(t.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.tb.Fatal(err)
	}
	// Written to a temporary file and renamed, so a reader never sees a
	// half-written value.
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		t.tb.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.tb.Fatal(err)
	}
}

// Remove deletes the file at rel (a sensor that went away).
func (t *Tree) Remove(rel string) {
	t.tb.Helper()
	if err := os.RemoveAll(filepath.Join(t.Dir, rel)); err != nil {
		t.tb.Fatal(err)
	}
}

// Unreadable replaces the file at rel with a folder, which no read of a
// file gets through (EISDIR), even as root.
func (t *Tree) Unreadable(rel string) {
	t.tb.Helper()
	t.Remove(rel)
	if err := os.MkdirAll(filepath.Join(t.Dir, rel), 0o755); err != nil {
		t.tb.Fatal(err)
	}
}

// SetTemp sets thermal_zoneN's temperature in °C.
func (t *Tree) SetTemp(zone int, celsius float64) {
	t.tb.Helper()
	t.Write(fmt.Sprintf("sys/class/thermal/thermal_zone%d/temp", zone), fmt.Sprint(int64(celsius*1000)))
}

// SetPowerMode writes nvpmodel's status file as nvpmodel -m does.
func (t *Tree) SetPowerMode(id int) {
	t.tb.Helper()
	t.Write("root/var/lib/nvpmodel/status", fmt.Sprintf("pmode:%04d", id))
}
