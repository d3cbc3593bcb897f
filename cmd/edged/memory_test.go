package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/umem"
)

// TestFramePoolMemoryRefused is issue 10's fourth finding through the
// binary: 16384x16384 frames with 32 buffers and a queue of 64, in as many
// pipelines as it takes to exceed this machine's memory. check says it is
// not runnable, run refuses to start (exit 78: it can never fit), both
// naming the key and the numbers, before anything is allocated; and a
// SIGHUP to it is rejected while the running configuration keeps serving.
func TestFramePoolMemoryRefused(t *testing.T) {
	lib := needORT(t)
	mi, err := umem.ReadMeminfo("")
	if err != nil || mi.MemAvailable == 0 {
		t.Skipf("no MemAvailable: %v", err)
	}
	// A pipeline's pool: (32 + 2 + 64) slots of 16384x16384 frames in
	// RGB24-sized slots, 73.5 GiB.
	perPipeline := uint64(98 * 16384 * 16384 * 3)
	k := int(mi.MemTotal/perPipeline) + 1
	dir := t.TempDir()
	var b strings.Builder
	for i := range k {
		fmt.Fprintf(&b, "[[source]]\nname = \"cam%d\"\nkind = \"synthetic\"\nwidth = 16384\nheight = 16384\nbuffers = 32\n\n", i)
		fmt.Fprintf(&b, "[[pipeline]]\nname = \"p%d\"\nsource = \"cam%d\"\nmodel = \"demo\"\nsinks = [\"local\"]\nschedule = \"queue\"\nqueue = 64\n\n", i, i)
	}
	fmt.Fprintf(&b, "[[model]]\nname = \"demo\"\npath = \"builtin:demo\"\n\n[[sink]]\nname = \"local\"\nkind = \"socket\"\npath = %q\n", filepath.Join(dir, "huge.sock"))
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("huge.toml:6:11: source[0].buffers: pipeline \"p0\": frame pool of 98 slots (buffers 32 + 2 + queue 64) × 512.0 MiB (16384x16384 YUYV) = 49.00 GiB")

	cmd := edged("check", "-config", huge)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	out, _ := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 78 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "this machine can never hold it") || !strings.Contains(string(out), "not runnable") {
		// Stop here: an edged without the check would try to run it.
		t.Fatalf("check: exit %d, want 78 and %q:\n%s", code, want, out)
	}
	t0 := time.Now()
	code, stderr := runBriefly(t, lib, "run", huge)
	if code != 78 || !strings.Contains(stderr, want) {
		t.Fatalf("run: exit %d, want 78 and %q:\n%s", code, want, stderr)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("run took %v to refuse", took)
	}

	// A running daemon gets it on SIGHUP: rejected, the old one serves.
	n := newNotifySocket(t)
	cfg, sock := testConfig(t, dir)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	before := r.results(t, "demo", 0, 5)
	if err := exec.Command("cp", huge, cfg).Run(); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	i := r.wait(t, "config_rejected", 0, isStatus("config_rejected"))
	if rec := r.since(i)[0]; !strings.Contains(rec.Reason, "memory: ") || !strings.Contains(rec.Reason, "source[0].buffers") {
		t.Errorf("config_rejected reason %q", rec.Reason)
	}
	after := r.results(t, "demo", i, 5)
	if after[0].FrameSeq <= before[len(before)-1].FrameSeq || *after[0].Engine != *before[0].Engine {
		t.Errorf("the running pipeline was disturbed: frame %d %+v after frame %d %+v", after[0].FrameSeq, after[0].Engine, before[len(before)-1].FrameSeq, before[0].Engine)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
