package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt/demomodel"
)

// TestCheckShowsModelSharing: check loads a model once for every pipeline
// naming it (the others get an engine shared from it, as run gives them),
// counts its memory once, and says per model its batch dimension (1, or
// dynamic), the pipelines sharing it and the memory it takes once; two
// [[model]] tables on one file are pointed out at the second one's path.
func TestCheckShowsModelSharing(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	dyn, err := demomodel.Build(demomodel.Options{DynamicBatch: true})
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "dyn.onnx")
	if err := os.WriteFile(model, dyn, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // not a file still being written
	if err := os.Chtimes(model, old, old); err != nil {
		t.Fatal(err)
	}
	cfg, _ := testConfig(t, dir)
	text, _ := os.ReadFile(cfg)
	var b strings.Builder
	b.Write(text)
	fmt.Fprintf(&b, "\n[[model]]\nname = \"dyn\"\npath = %q\n\n[[model]]\nname = \"dyn2\"\npath = %q\n", model, model)
	for i, m := range []string{"demo", "demo", "dyn", "dyn2"} {
		fmt.Fprintf(&b, "\n[[source]]\nname = \"cam%[1]d\"\nkind = \"synthetic\"\nwidth = 64\nheight = 64\nformat = \"RGB24\"\n\n"+
			"[[pipeline]]\nname = \"p%[1]d\"\nsource = \"cam%[1]d\"\nmodel = %[2]q\nsinks = [\"local\"]\n\n[pipeline.preprocess]\nwidth = 64\nheight = 64\n\n"+
			"[[pipeline.postprocess]]\noutput = \"class\"\nkind = \"topk\"\n", i+1, m)
	}
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCheck(t, lib, cfg)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"model demo: batch dimension 1; shared by pipelines demo, p1, p2 (loaded once, an engine each); engine about ",
		"model dyn: batch dimension dynamic (from 1); pipeline p3; engine about ",
		"; ONNX Runtime intra-op threads 1 (threads = 0: 1)",
		"pipeline p1: frame pool 7 × 12.0 KiB = 84.0 KiB; engine shared with pipeline demo (model demo counted once, there)",
		"an engine shared from the one loaded for pipeline demo, warmed up",
		`models "dyn" and "dyn2" name the same file ` + model,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	// The demo model's engine is counted once in the memory total: the
	// sum line says the engines of demo, dyn and dyn2, not five.
	lines := regexp.MustCompile(`engine about (\S+ \S+) \(system memory\)`).FindAllStringSubmatch(out, -1)
	if len(lines) != 3 {
		t.Errorf("%d pipelines count an engine, want 3 (demo once, dyn, dyn2):\n%s", len(lines), out)
	}
	if n := strings.Count(out, "loaded and warmed up"); n != 3 {
		t.Errorf("%d models loaded, want 3 (demo once for three pipelines, dyn, dyn2):\n%s", n, out)
	}
}
