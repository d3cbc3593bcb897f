package main

import (
	"testing"

	"github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt"
)

// TestCases: the configuration of a case is valid and has its n cameras
// and pipelines on one model; the memory plan counts that model once and
// each camera's pool as the bound assumes (poolBytes); the separate
// engines hide trt.Sharer, so StageSet loads one per pipeline.
func TestCases(t *testing.T) {
	for _, n := range []int{1, 8} {
		cfg, err := config.Parse("case.toml", []byte(configText(n, "/nonexistent/model.onnx", "/tmp/x.sock")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Pipelines) != n || len(cfg.Sources) != n || len(cfg.Models) != 1 {
			t.Fatalf("n=%d: %d pipelines, %d sources, %d models", n, len(cfg.Pipelines), len(cfg.Sources), len(cfg.Models))
		}
		sizes := func(_ *config.Pipeline, sc *config.Source) (int, int64) {
			src, err := camera(sc)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			return runtime.SourceSize(src, sc)
		}
		for i, need := range runtime.PlanMemory(cfg, sizes, false).Needs {
			if need.PoolBytes() != poolBytes {
				t.Errorf("pipeline %d: pool %d bytes, the bound assumes %d", i, need.PoolBytes(), poolBytes)
			}
			if (i > 0) != (need.SharedWith != "") {
				t.Errorf("pipeline %d: shared with %q", i, need.SharedWith)
			}
		}
	}
	var e trt.Engine = separate{}
	if _, ok := e.(trt.Sharer); ok {
		t.Fatal("a separate engine can share")
	}
}
