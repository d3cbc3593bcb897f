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

// modelConfig is a configuration whose model is a file (so that edged
// keeps a last-good copy of it) and whose state folder is state.
func modelConfig(t *testing.T, dir, state string) (cfg, sock, metrics string) {
	t.Helper()
	model := filepath.Join(dir, "demo.onnx")
	data, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return metricsConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `, `state_dir = ""`, `state_dir = "`+state+`"`)
}

// TestStaleTemporariesAreCleaned is finding 14's first file item: a
// SIGKILL while a last-good copy was written left .demo.model.tmp* in
// last-good/ for good. edged now removes, at start, the temporaries of
// its own writes that no process is writing (each is locked while it is
// written): a stale one goes, one another edged is writing stays. `edged
// demo-model -o` does the same next to its file.
func TestStaleTemporariesAreCleaned(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	lg := filepath.Join(state, "last-good")
	os.MkdirAll(lg, 0o750)
	stale := filepath.Join(lg, ".demo.model.tmp1234567")
	os.WriteFile(stale, []byte("half a copy"), 0o600)
	livePath := filepath.Join(lg, ".demo.model.tmp7654321")
	live, err := os.OpenFile(livePath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	syscall.Flock(int(live.Fd()), syscall.LOCK_EX) // being written by another edged
	cfg, sock, _ := modelConfig(t, dir, state)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, "removed temporaries left by an edged stopped while writing")
	waitLog(t, d, `msg=ready`)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary is still there: %v", err)
	}
	if _, err := os.Stat(livePath); err != nil {
		t.Errorf("the temporary being written was removed: %v", err)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}

	out := filepath.Join(dir, "models", "m.onnx")
	os.MkdirAll(filepath.Dir(out), 0o755)
	leftover := filepath.Join(dir, "models", ".m.onnx.tmp42")
	os.WriteFile(leftover, []byte("x"), 0o600)
	if _, stderr, code := runCmd(t, 30*time.Second, "demo-model", "-o", out); code != 0 {
		t.Fatalf("demo-model: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("demo-model left the stale temporary next to its file: %v", err)
	}
}

// TestSocketFolderIsNotCreated is finding 14's second file item: a socket
// path under a missing folder made edged create the folder (as root,
// anywhere). edged creates no folder outside its own: run exits 78 and
// check fails (78), both saying what to do, and the folder is not made.
func TestSocketFolderIsNotCreated(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	cfg, _ := testConfig(t, dir)
	text, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(text), filepath.Join(dir, "edged.sock"), filepath.Join(missing, "edged.sock"), 1)), 0o644)
	code, stderr := runBriefly(t, lib, "run", cfg)
	if code != exitConfig || !strings.Contains(stderr, missing+" does not exist") || !strings.Contains(stderr, "creates no folder outside its own") {
		t.Errorf("run: exit %d, want 78 and the folder named:\n%s", code, stderr)
	}
	out, code := runCheck(t, lib, cfg)
	if code != exitConfig || !strings.Contains(out, "FAIL  sink local:") || !strings.Contains(out, missing+" does not exist") {
		t.Errorf("check: exit %d, want 78:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !os.IsNotExist(err) {
		t.Errorf("the socket's folder was created: %v", err)
	}
}

// TestLastGoodLinkOutOfStateDirRefused is finding 14's third file item: a
// symbolic link last-good/ -> elsewhere was followed, and the copies were
// written out of state_dir. Nothing edged reads or writes in the state
// folder may lead out of it: the copy is refused (counted, logged naming
// the link), nothing is written where the link points, serving goes on.
func TestLastGoodLinkOutOfStateDirRefused(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	state, elsewhere := filepath.Join(dir, "state"), filepath.Join(dir, "elsewhere")
	os.MkdirAll(state, 0o750)
	os.MkdirAll(elsewhere, 0o750)
	os.Symlink(elsewhere, filepath.Join(state, "last-good"))
	cfg, sock, metrics := modelConfig(t, dir, state)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, "leads out of the state folder")
	waitMetric(t, metrics, `edged_state_writes_total{result="error"}`, 1)
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("written out of the state folder through the link: %v", ents)
	}
	waitLog(t, d, `msg=ready`)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
