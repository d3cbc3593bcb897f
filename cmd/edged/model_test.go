package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt/demomodel"
)

// TestTornModelAtStartExits1: a model file that exists but whose content
// cannot be used at start (torn by a power cut, with no last-good copy to
// fall back to) is a runtime condition, not a configuration error: edged
// exits 1, so systemd's Restart= applies (78 would stop the restarts). A
// missing file stays a configuration error (TestBadConfigExit78).
func TestTornModelAtStartExits1(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	full, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // torn before this start
	if err := os.Chtimes(model, old, old); err != nil {
		t.Fatal(err)
	}
	cfg, sock := testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
	d := start(t, lib, cfg, sock, "STATE_DIRECTORY=")
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatal("edged did not exit")
	}
	if code := d.cmd.ProcessState.ExitCode(); code != exitFailure {
		t.Fatalf("exit status %d, want %d (runtime failure, restarted by systemd)\n%s", code, exitFailure, d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), model) {
		t.Errorf("stderr does not name %s:\n%s", model, d.stderr.String())
	}
}
