package main

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt/demomodel"
)

// batchedText is the default configuration with its pipeline batching
// cameras cams (synthetic 160x120 YUYV at 30 fps, cam0's table the
// default one's) on model path, every frame (schedule queue); extra
// goes into the pipeline table.
func batchedText(t *testing.T, sock, path string, cams []string, extra string) string {
	t.Helper()
	text := strings.Replace(string(configs.Default), `path = ""                 # "" = $XDG_RUNTIME_DIR`, `path = "`+sock+`" # `, 1)
	quoted := make([]string, len(cams))
	for i, c := range cams {
		quoted[i] = fmt.Sprintf("%q", c)
	}
	for _, e := range [][2]string{
		{"width = 640 ", "width = 160 "}, {"height = 480", "height = 120"},
		{`schedule = "latest"`, `schedule = "queue"`},
		{`source = "cam0"`, "sources = [" + strings.Join(quoted, ", ") + "]" + extra},
		{`path = "builtin:demo"`, `path = "` + path + `"`},
	} {
		if !strings.Contains(text, e[0]) {
			fatalf(t, "edit: %q not in the default configuration", e[0])
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	for i := 1; i < 8; i++ {
		text += fmt.Sprintf(`
[[source]]
name = "cam%[1]d"
kind = "synthetic"
width = 160
height = 120
format = "YUYV"
fps = 30.0
seed = %[1]d
period = 30
`, i)
	}
	return text
}

// writeBatchModel writes the demo model with a dynamic batch dimension.
func writeBatchModel(t *testing.T, dir string) string {
	t.Helper()
	b, err := demomodel.Build(demomodel.Options{DynamicBatch: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "demo-batch.onnx")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkBatched checks the results of a batched pipeline as a client reads
// them: each names its camera, each camera's frames come one after
// another, the class is the one that camera drew, engine.batch is 1 to
// max and the latency stages (the batch wait among them) add up to the
// total. It returns the results per camera.
func checkBatched(t *testing.T, cfg *config.Config, recs []stream.Decoded, max int) map[string]int {
	t.Helper()
	last := map[string]uint64{}
	per := map[string]int{}
	for _, r := range recs {
		if r.Type != "result" {
			continue
		}
		sc := cfg.Source(r.Source)
		if sc == nil {
			fatalf(t, "result #%d names source %q, not a camera of the configuration", r.Seq, r.Source)
		}
		if p, ok := last[r.Source]; ok && r.FrameSeq != p+1 {
			fatalf(t, "camera %s: frame %d followed by %d: frames were lost", r.Source, p, r.FrameSeq)
		}
		last[r.Source] = r.FrameSeq
		per[r.Source]++
		if r.Engine == nil || r.Engine.Batch < 1 || r.Engine.Batch > max {
			fatalf(t, "camera %s frame %d: engine %+v, want a batch of 1 to %d", r.Source, r.FrameSeq, r.Engine, max)
		}
		l := r.LatencyUs
		if l == nil || l.Fill+l.Queue+l.Batch+l.Pre+l.Infer+l.Post+l.Encode != l.Total {
			fatalf(t, "camera %s frame %d: latency stages %+v do not add up to the total", r.Source, r.FrameSeq, l)
		}
		pf, _ := sensors.ParsePixelFormat(sc.Format)
		o := synthetic.Options{Name: sc.Name, Width: sc.Width, Height: sc.Height, Pixel: pf, FPS: sc.FPS, Seed: uint64(sc.Seed), PeriodFrames: sc.Period}
		want := demomodel.Expected(synthetic.TruthAt(o, r.FrameSeq).Background, 0)
		if got := r.Outputs["class"].Top; len(got) == 0 || got[0].Index != want {
			fatalf(t, "camera %s frame %d: classes %+v, want %d first (the result of another camera's frame?)", r.Source, r.FrameSeq, got, want)
		}
	}
	return per
}

// TestBatchedPipelineThroughTheBinary runs a batched pipeline of four
// cameras in the real binary: a client reads one record per camera per
// frame (source, its own frame_seq in order, engine.batch, the batch
// wait as a latency stage, its own camera's class); SIGHUP removes a
// camera and adds another, and the records follow.
func TestBatchedPipelineThroughTheBinary(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "edged.sock")
	model := writeBatchModel(t, dir)
	cfgPath := filepath.Join(dir, "edged.toml")
	write := func(cams ...string) *config.Config {
		text := batchedText(t, sock, model, cams, "")
		if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(cfgPath, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := write("cam0", "cam1", "cam2", "cam3")
	d := start(t, lib, cfgPath, sock, "NOTIFY_SOCKET="+n.path)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	recs := readRecords(t, sock)
	per := map[string]int{}
	recs.wait(t, "30 results of each camera", 0, func(r stream.Decoded) bool {
		if r.Type == "result" {
			per[r.Source]++
		}
		return len(per) == 4 && per["cam0"] >= 30 && per["cam1"] >= 30 && per["cam2"] >= 30 && per["cam3"] >= 30
	})
	got := checkBatched(t, cfg, recs.since(0), 4)
	t.Logf("before the reload: results per camera %v", got)

	// SIGHUP: cam3 leaves the batch, cam4 joins it.
	cfg = write("cam0", "cam1", "cam2", "cam4")
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, d, "configuration reloaded")
	from := recs.len()
	per = map[string]int{}
	at := recs.wait(t, "30 results of cam4", from, func(r stream.Decoded) bool {
		if r.Type == "result" {
			per[r.Source]++
		}
		return per["cam4"] >= 30
	})
	after := recs.since(from)[:at-from+1]
	// Records of cam3 already encoded when the reload happened may still
	// come first; none comes after cam4's first.
	first := -1
	for i, r := range after {
		if r.Type == "result" && r.Source == "cam4" && first < 0 {
			first = i
		}
		if first >= 0 && r.Type == "result" && r.Source == "cam3" {
			fatalf(t, "a result of cam3, removed by the reload, after cam4's first: %+v", r)
		}
	}
	var tail []stream.Decoded
	for _, r := range after[first:] {
		if r.Source != "cam3" {
			tail = append(tail, r)
		}
	}
	got = checkBatched(t, cfg, tail, 4)
	if got["cam0"] == 0 || got["cam4"] == 0 {
		fatalf(t, "after the reload: results per camera %v", got)
	}
	// A camera that stays is restarted with the pipeline (docs/OPERATIONS.md,
	// fault 77): its frame_seq starts again, once, after a pause.
	var prev, before, again stream.Decoded
	restarts := 0
	for _, r := range recs.since(0)[:at+1] {
		if r.Type != "result" || r.Source != "cam0" {
			continue
		}
		if prev.Type != "" && r.FrameSeq <= prev.FrameSeq {
			restarts++
			before, again = prev, r
		}
		prev = r
	}
	if restarts != 1 {
		errorf(t, "cam0's frame_seq started again %d times over the reload, want once (fault 77: the batched pipeline is restarted; update it if that changed)", restarts)
	} else {
		// Four cameras before and after: the batch is the same, so the
		// engine carries over (fault 77): the same generation serves.
		if before.Engine == nil || again.Engine == nil || before.Engine.Generation != again.Engine.Generation || before.Engine.SHA256 != again.Engine.SHA256 {
			errorf(t, "cam0's engine before the restart %+v, after %+v: want the same generation carried over", before.Engine, again.Engine)
		}
		t.Logf("cam0 paused %v for the restart (frame %d, then frame %d)", time.Duration(again.TCapture-before.TCapture).Round(time.Millisecond), before.FrameSeq, again.FrameSeq)
	}
	t.Logf("after the reload: results per camera %v", got)
	if code, _ := d.stop(t); code != 0 {
		errorf(t, "exit %d", code)
	}
}

// TestBatchedConfigErrors: what a batched pipeline cannot be is refused
// before anything runs, exit 78, each problem at its file:line:column and
// key, all of them at once: source and sources together, a camera listed
// twice, a camera in two batched pipelines, batch beyond the sources, and
// (once the model is read) batch beyond its fixed batch dimension.
func TestBatchedConfigErrors(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "edged.sock")
	model := writeBatchModel(t, dir)
	run := func(name, text string, want ...string) {
		t.Helper()
		path := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sub := range []string{"run", "check"} {
			cmd := edged(sub, "-config", path)
			cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 78 {
				errorf(t, "%s: edged %s exited %d, want 78:\n%s", name, sub, code, out)
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					errorf(t, "%s: edged %s does not say %q:\n%s", name, sub, w, out)
				}
			}
		}
	}
	base := strings.Replace(batchedText(t, sock, model, []string{"cam0", "cam1", "cam2"}, "\nsource = \"cam3\""), "\nbatch = 0 ", "\nbatch = 4 ", 1)
	second := `
[[pipeline]]
name = "more"
sources = ["cam4", "cam1", "cam4"]
model = "demo"
sinks = ["local"]
`
	text := base + second
	line := func(s string) int { return strings.Count(text[:strings.Index(text, s)], "\n") + 1 }
	run("schema", text,
		fmt.Sprintf("schema.toml:%d:11: pipeline[0].sources: set source (one camera) or sources (a batched pipeline of several), not both", line(`sources = ["cam0"`)),
		fmt.Sprintf("schema.toml:%d:9: pipeline[0].batch: 4: want 1 to 3", line("batch = 4")),
		fmt.Sprintf("schema.toml:%d:20: pipeline[1].sources[1]: camera \"cam1\" is in batched pipeline \"demo\" already", line(`sources = ["cam4"`)),
		fmt.Sprintf("schema.toml:%d:28: pipeline[1].sources[2]: camera \"cam4\" is listed twice", line(`sources = ["cam4"`)))

	fixed := strings.Replace(batchedText(t, sock, "builtin:demo", []string{"cam0", "cam1", "cam2"}, ""), "\nbatch = 0 ", "\nbatch = 2 ", 1)
	run("fixed", fixed, "pipeline[0].batch: batch 2 does not fit model \"demo\"", "the model's fixed batch dimension 1")
}

// TestCheckBatchedThreads: edged check says how a batched pipeline runs
// and on how many ONNX Runtime threads its model runs: left at 0, the
// batch capped at the cores; set, what is set.
func TestCheckBatchedThreads(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := writeBatchModel(t, dir)
	cfg := filepath.Join(dir, "edged.toml")
	cores := goruntime.NumCPU()
	for _, tc := range []struct{ threads, want int }{{0, min(4, cores)}, {3, 3}} {
		text := batchedText(t, filepath.Join(dir, "edged.sock"), model, []string{"cam0", "cam1", "cam2", "cam3"}, "")
		text = strings.Replace(text, "threads = 0               # CPU threads for ONNX Runtime", fmt.Sprintf("threads = %d # CPU threads for ONNX Runtime", tc.threads), 1)
		if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCheck(t, lib, cfg)
		if code != 0 {
			fatalf(t, "threads = %d: exit %d:\n%s", tc.threads, code, out)
		}
		want := fmt.Sprintf("ONNX Runtime intra-op threads %d (threads)", tc.want)
		if tc.threads == 0 {
			want = fmt.Sprintf("ONNX Runtime intra-op threads %d (threads = 0: batched pipeline demo's batch", tc.want)
		}
		for _, w := range []string{want, "pipeline demo: batched: cameras cam0, cam1, cam2, cam3 into one engine, up to 4 frames per inference"} {
			if !strings.Contains(out, w) {
				errorf(t, "threads = %d: check output lacks %q:\n%s", tc.threads, w, out)
			}
		}
	}
}
