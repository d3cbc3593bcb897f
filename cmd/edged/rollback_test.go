package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRolledBackReloadKeepsClients: SIGHUPs that fail leave what they did
// not have to touch as it was. Before, a reload whose socket could not be
// bound was rolled back, but every client of the socket sink was
// disconnected (the running sink was stopped before the new one was
// bound). Now a sink that can exist beside the running ones is built
// first: when it cannot be bound, the reload is rejected with nothing
// stopped. Three reloads that fail: the socket sink moved to a path that
// cannot be bound, a second socket sink that cannot be bound, and a
// camera that is not there (this one fails after the pipeline stopped
// and is restored; the socket sink, unchanged, keeps its client). The
// client stays connected through all of them with no record lost, and
// the pipeline of the first two is never restarted.
func TestRolledBackReloadKeepsClients(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	cfg, sock, metrics := metricsConfig(t, dir)
	good, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(dir, "file")
	os.WriteFile(notADir, nil, 0o644)
	unbindable := filepath.Join(notADir, "edged.sock")
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	r.results(t, "demo", 0, 5)

	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit := func(pairs ...string) string {
		text := string(good)
		for i := 0; i+1 < len(pairs); i += 2 {
			if !strings.Contains(text, pairs[i]) {
				t.Fatalf("edit: %q not in the configuration", pairs[i])
			}
			text = strings.Replace(text, pairs[i], pairs[i+1], 1)
		}
		return text
	}
	camera := "[[source]]\nname = \"gone\"\nkind = \"v4l2\"\ndevice = \"" + filepath.Join(dir, "no-such-camera") + "\"\nwidth = 640\nheight = 480\nformat = \"YUYV\"\n\n[[model]]"
	for _, c := range []struct {
		name, text string
		touches    bool // the pipeline is stopped, then restored
	}{
		{"the socket moved to a path that cannot be bound", edit(`path = "`+sock+`"`, `path = "`+unbindable+`"`), false},
		{"a second socket sink that cannot be bound", edit(`sinks = ["local"]`, `sinks = ["local", "more"]`,
			"# Serial (UART) sink:", "[[sink]]\nname = \"more\"\nkind = \"socket\"\npath = \""+unbindable+"\"\n\n# Serial (UART) sink:"), false},
		{"a camera that is not there", edit("[[model]]", camera, `source = "cam0"`, `source = "gone"`), true},
	} {
		from := r.len()
		last := r.results(t, "demo", from, 1)[0]
		write(c.text)
		d.cmd.Process.Signal(syscall.SIGHUP)
		at := r.waitWithin(t, "config_rejected for "+c.name, from, 30*time.Second, isStatus("config_rejected"))
		after := r.results(t, "demo", at, 10)
		if !c.touches {
			for _, res := range after {
				if res.FrameSeq <= last.FrameSeq {
					t.Errorf("%s: frame_seq %d after %d: the pipeline was restarted", c.name, res.FrameSeq, last.FrameSeq)
					break
				}
			}
			if strings.Contains(d.stderr.String(), "restoring the previous one") {
				t.Errorf("%s: the reload stopped something and had to restore it", c.name)
			}
		}
		r.mu.Lock()
		err := r.err
		r.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: the client was disconnected or lost records: %v", c.name, err)
		}
		if v := scrape(t, metrics, `edged_stream_disconnects_total{reason="any",sink="local"}`); v != 0 {
			t.Fatalf("%s: %v socket clients disconnected", c.name, v)
		}
		d.alive(t)
	}
	if _, err := os.Stat(unbindable); err == nil {
		t.Error("something was made at the path that cannot be bound")
	}

	// And a valid reload applies.
	write(edit("fps = 30.0", "fps = 20.0"))
	from := r.len()
	d.cmd.Process.Signal(syscall.SIGHUP)
	r.waitWithin(t, "config_reloaded", from, 30*time.Second, isStatus("config_reloaded"))
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
