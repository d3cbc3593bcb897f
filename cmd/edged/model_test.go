package main

import (
	"context"
	encbin "encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/procfs/procfstest"
	"github.com/edged-dev/edged/runtime/stream"
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

// renameIn puts a file of size bytes that starts with head (and is a hole
// after it) over path by rename, as a deployment would.
func renameIn(t *testing.T, path string, head []byte, size int64) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, head, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(tmp, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestModelFileMemoryBounded (issue 10, finding 1) runs the real binary
// with ONNX Runtime and daemon.max_model_bytes = 256 MiB, and renames
// large files over its model: one over the limit (2 GiB), junk under it,
// and one that starts like an ONNX model and is junk after its first
// bytes. Each is rejected with its reason, results keep coming, and the
// daemon's RSS (from /proc) ends within 64 MiB of where it was; then a
// good model still reloads. Before, every file was read whole, and the
// memory stayed resident for minutes.
func TestModelFileMemoryBounded(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	v0, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	renameIn(t, model, v0, int64(len(v0)))
	cfg, sock := testConfig(t, dir,
		`path = "builtin:demo" `, `path = "`+model+`" `,
		`max_model_bytes = 1_073_741_824`, `max_model_bytes = 268_435_456`)
	d := start(t, lib, cfg, sock, "STATE_DIRECTORY=")
	waitLog(t, d, "engine loaded")
	c, err := stream.Dial(context.Background(), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	timer := time.AfterFunc(2*time.Minute, func() { c.Close() })
	defer timer.Stop()

	// status reads records until the status event, counting results.
	status := func(event string) (stream.Decoded, int) {
		t.Helper()
		results := 0
		var m stream.Message
		for {
			if err := c.Next(&m); err != nil {
				t.Fatalf("waiting for %s (%d results so far): %v", event, results, err)
			}
			switch {
			case m.Rec.Type == "result":
				results++
			case m.Rec.Type == "status" && m.Rec.Event == event:
				return m.Rec, results
			}
		}
	}
	results := func(n int) {
		t.Helper()
		var m stream.Message
		for got := 0; got < n; {
			if err := c.Next(&m); err != nil {
				t.Fatalf("waiting for results: %v", err)
			}
			if m.Rec.Type == "result" {
				got++
			}
		}
	}
	results(10)
	pid := d.cmd.Process.Pid
	base := procfstest.RSS(t, pid)
	const slack = 64 << 20
	onnxHead := encbin.AppendUvarint([]byte{0x08, 0x08, 0x3a}, 200<<20-16) // ir_version 8, a graph to the end
	for _, c := range []struct {
		name   string
		head   []byte
		size   int64
		reason string
	}{
		{"2 GiB, over max_model_bytes", nil, 2 << 30, "too_large: "},
		{"200 MiB of zeros", nil, 200 << 20, "invalid: "},
		{"200 MiB that start like ONNX", onnxHead, 200 << 20, "invalid: "},
	} {
		t0 := time.Now()
		renameIn(t, model, c.head, c.size)
		rec, _ := status("engine_rejected")
		if !strings.HasPrefix(rec.Reason, c.reason) {
			t.Errorf("%s: rejected with %q, want a reason starting %q", c.name, rec.Reason, c.reason)
		}
		took := time.Since(t0)
		results(10) // still serving
		var grew int64
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if grew = procfstest.RSS(t, pid) - base; grew <= slack || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("%s: rejected after %s; RSS %+d MiB", c.name, took.Round(time.Millisecond), grew>>20)
		if grew > slack {
			t.Errorf("%s: edged's RSS stayed %d MiB above the %d MiB it had before", c.name, grew>>20, base>>20)
		}
	}
	v2, err := demomodel.Variant(2)
	if err != nil {
		t.Fatal(err)
	}
	renameIn(t, model, v2, int64(len(v2)))
	status("engine_reloaded")
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// TestSlowInPlaceWriter (issue 10, finding 3) runs the real binary and
// rewrites its model in place the way cp over a slow link does: half the
// file, a 3 s stall, the rest. edged must not reject the half file: the
// log says it was incomplete, and the next status record is
// engine_reloaded with the finished file.
func TestSlowInPlaceWriter(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	v0, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	renameIn(t, model, v0, int64(len(v0)))
	cfg, sock := testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
	d := start(t, lib, cfg, sock, "STATE_DIRECTORY=")
	waitLog(t, d, "engine loaded")
	c, err := stream.Dial(context.Background(), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	timer := time.AfterFunc(time.Minute, func() { c.Close() })
	defer timer.Stop()
	var m stream.Message
	if err := c.Next(&m); err != nil {
		t.Fatal(err)
	}

	v3, err := demomodel.Variant(3)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(model, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(v3[:len(v3)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the stimulus: a stalled writer
	if _, err := f.Write(v3[len(v3)/2:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for {
		if err := c.Next(&m); err != nil {
			t.Fatalf("waiting for engine_reloaded: %v", err)
		}
		if m.Rec.Type != "status" {
			continue
		}
		if m.Rec.Event == "engine_reloaded" {
			if m.Rec.Engine.Generation != 2 {
				t.Errorf("engine_reloaded with generation %d, want 2", m.Rec.Engine.Generation)
			}
			break
		}
		if m.Rec.Event == "engine_rejected" {
			t.Fatalf("the half-written file was rejected: %s", m.Rec.Reason)
		}
	}
	if !strings.Contains(d.stderr.String(), "incomplete?") {
		t.Errorf("the log does not say the file read was incomplete:\n%s", d.stderr.String())
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
