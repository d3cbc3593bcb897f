package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/procfs/procfstest"
	"github.com/edged-dev/edged/runtime/stream"
)

// waitWithin is records.wait with a deadline of its own.
func (r *records) waitWithin(t *testing.T, what string, from int, within time.Duration, pred func(stream.Decoded) bool) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		for i := from; i < len(r.recs); i++ {
			if pred(r.recs[i]) {
				r.mu.Unlock()
				return i
			}
		}
		from = len(r.recs)
		err := r.err
		r.mu.Unlock()
		if err != nil {
			fatalf(t, "waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			fatalf(t, "no %s within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replaceWith puts what make creates at path, by rename.
func replaceWith(t *testing.T, path string, make func(tmp string) error) {
	t.Helper()
	tmp := path + ".new"
	os.Remove(tmp)
	if err := make(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestSIGHUPWithFilesThatAreNotFiles: SIGHUP while the configuration path
// leads to /dev/zero (a symlink), a FIFO, or a 2 GiB file, or while the
// configuration names a password file or a model path that is a FIFO.
// Before, /dev/zero grew edged to 16 GB in 24 s, the 2 GiB file left 8 GB
// resident, and a FIFO blocked the reload for good (no later SIGHUP
// applied). Each is now refused within a second, unread, with
// config_rejected naming the file and why; results and /metrics go on,
// edged's RSS stays where it was, and the next valid SIGHUP applies.
func TestSIGHUPWithFilesThatAreNotFiles(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	cfg, sock, metrics := metricsConfig(t, dir)
	good, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=2000000")
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	r.results(t, "demo", 0, 5)
	rss0 := procfstest.RSS(t, d.cmd.Process.Pid)

	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	pwFIFO, modelFIFO := filepath.Join(dir, "password"), filepath.Join(dir, "model.onnx")
	for _, p := range []string{pwFIFO, modelFIFO} {
		if err := fifo(p); err != nil {
			t.Fatal(err)
		}
	}
	withText := func(text string) func(string) error {
		return func(p string) error { return os.WriteFile(p, []byte(text), 0o644) }
	}
	mqtt := string(good) + "\n[[sink]]\nname = \"broker\"\nkind = \"mqtt\"\nurl = \"mqtt://127.0.0.1:1\"\nusername = \"edged\"\npassword_file = \"" + pwFIFO + "\"\n"
	for _, c := range []struct {
		name string
		make func(tmp string) error
		want string
	}{
		{"a symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, cfg + ": cannot read configuration: not a regular file (a character device)"},
		{"a FIFO", fifo, cfg + ": cannot read configuration: not a regular file (a FIFO)"},
		{"a 2 GiB file", func(p string) error {
			f, err := os.Create(p)
			if err == nil {
				err = f.Truncate(2 << 30)
				f.Close()
			}
			return err
		}, cfg + ": cannot read configuration: file too large: 2048 MiB, more than the 1 MiB limit; it was not read"},
		{"a password file that is a FIFO", withText(mqtt), "sink[1].password_file: password file " + pwFIFO + ": not a regular file (a FIFO)"},
		{"a model path that is a FIFO", withText(strings.Replace(string(good), `path = "builtin:demo" `, `path = "`+modelFIFO+`" `, 1)),
			"model[0].path: model path " + modelFIFO + ": not a regular file (a FIFO)"},
	} {
		replaceWith(t, cfg, c.make)
		from := r.len()
		t0 := time.Now()
		d.cmd.Process.Signal(syscall.SIGHUP)
		at := r.waitWithin(t, "config_rejected for "+c.name, from, 5*time.Second, isStatus("config_rejected"))
		rec := r.since(at)[0]
		if !strings.Contains(rec.Reason, c.want) {
			t.Errorf("%s: config_rejected says %q, want %q", c.name, rec.Reason, c.want)
		}
		if took := time.Since(t0); took > scaled(time.Second) {
			t.Errorf("%s: rejected after %v", c.name, took)
		}
		r.results(t, "demo", at, 10)
		if _, err := tryScrape(metrics, `edged_results_total{pipeline="demo"}`); err != nil {
			t.Errorf("%s: /metrics: %v", c.name, err)
		}
		if rss := procfstest.RSS(t, d.cmd.Process.Pid); rss > rss0+64<<20 {
			t.Errorf("%s: edged's RSS grew from %d to %d MiB", c.name, rss0>>20, rss>>20)
		}
		d.alive(t)
	}

	// A valid, changed configuration applies: nothing was left waiting.
	replaceWith(t, cfg, withText(strings.Replace(string(good), "fps = 30.0", "fps = 20.0", 1)))
	from := r.len()
	d.cmd.Process.Signal(syscall.SIGHUP)
	at := r.waitWithin(t, "config_reloaded", from, 15*time.Second, isStatus("config_reloaded"))
	r.results(t, "demo", at, 5)
	if code := httpGet(t, metrics, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d", code)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
