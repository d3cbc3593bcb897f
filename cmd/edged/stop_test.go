package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt/demomodel"
)

// TestStopDuringStartIsClean is issue 11's fifth finding: SIGINT or
// SIGTERM before the first engine had loaded logged `edged failed
// err="context canceled"` and exited 1. A stop asked for by the user is a
// clean stop at any moment: exit 0, STOPPING=1, no failure logged, within
// the stop budget. Two starts that take long: a torn model file written in
// place just before (edged waits up to 10 s for its writer), and a model
// load that ignores cancellation for a minute (failpoint model/load=stall,
// as a TensorRT deserialisation or warm-up inside the library does), with
// stop_timeout = "1s".
func TestStopDuringStartIsClean(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	full, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sig  syscall.Signal
		cfg  func() (string, string)
		env  []string
		max  time.Duration
	}{
		{"SIGTERM while a model file written in place is waited for", syscall.SIGTERM, func() (string, string) {
			if err := os.WriteFile(model, full[:len(full)/2], 0o644); err != nil {
				t.Fatal(err)
			}
			return testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
		}, nil, 3 * time.Second},
		{"SIGINT during a load that ignores cancellation", syscall.SIGINT, func() (string, string) {
			return testConfig(t, dir, `stop_timeout = "5s"`, `stop_timeout = "1s"`)
		}, []string{"EDGED_FAILPOINTS=model/load=stall:60s"}, 4 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newNotifySocket(t)
			cfg, sock := c.cfg()
			d := start(t, lib, cfg, sock, append(c.env, "STATE_DIRECTORY=", "NOTIFY_SOCKET="+n.path)...)
			waitLog(t, d, "sink started")
			time.Sleep(500 * time.Millisecond) // into the load
			if index(n.all(), "READY=1") >= 0 {
				t.Fatalf("edged started before the signal; this test stops it during start-up:\n%s", d.stderr.String())
			}
			t0 := time.Now()
			d.cmd.Process.Signal(c.sig)
			select {
			case <-d.done:
			case <-time.After(15 * time.Second):
				t.Fatalf("edged did not exit after %v", c.sig)
			}
			took := time.Since(t0)
			log := d.stderr.String()
			if code := d.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit status %d after %v during start-up, want 0:\n%s", code, c.sig, log)
			}
			if took > scaled(c.max) {
				t.Errorf("took %v to stop, want at most %v", took, scaled(c.max))
			}
			if strings.Contains(log, "edged failed") || strings.Contains(log, "level=ERROR") {
				t.Errorf("a stop asked for is logged as a failure:\n%s", log)
			}
			if index(n.all(), "STOPPING=1") < 0 {
				t.Errorf("no STOPPING=1: %q", n.all())
			}
		})
	}
}
