package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// runCheck runs edged check -config cfg with ONNX Runtime lib and returns
// what it printed (stdout and stderr) and its exit status.
func runCheck(t *testing.T, lib, cfg string) (string, int) {
	t.Helper()
	cmd := edged("check", "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("edged check: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestCheckDecidesAsRun is issue 11's second finding: check said
// "runnable" (exit 0) for configurations that run refuses with 78 once the
// model is loaded. Both now ask one function whether a pipeline fits its
// engine, so for a postprocess output the model lacks, an input the
// preprocessing cannot fill, labels that do not match the classes and a
// kind the output's shape does not suit, check and run both exit 78 and
// name the same file:line:column and key.
func TestCheckDecidesAsRun(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	cases := []struct{ from, to, key, want string }{
		{`output = "centroid"`, `output = "centroidz"`, "pipeline[0].postprocess[1].output",
			`model "demo" has no output "centroidz" (its outputs: ["class", "centroid"])`},
		{`layout = "auto" `, `layout = "nhwc" `, "pipeline[0].preprocess.layout",
			`model "demo" input image:float32[1,3,64,64] cannot be filled by preprocessing`},
		{`labels = ["red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"]`, `labels = ["red", "green"]`, "pipeline[0].postprocess[0].labels",
			`model "demo" output class:float32[1,8]: postprocess: wrong number of labels`},
		{`kind = "topk" `, `kind = "detections" `, "pipeline[0].postprocess[0].kind",
			`model "demo" output class:float32[1,8]: postprocess: unsuitable shape`},
	}
	for _, c := range cases {
		cfg, _ := testConfig(t, dir, c.from, c.to)
		text, _ := os.ReadFile(cfg)
		line := 1 + strings.Count(string(text[:strings.Index(string(text), c.to)]), "\n")
		want := fmt.Sprintf("%s:%d:1: %s: %s", cfg, line, c.key, c.want)
		out, code := runCheck(t, lib, cfg)
		if code != 78 || !strings.Contains(out, want) || !strings.Contains(out, "not runnable") {
			t.Errorf("check with %s: exit %d, want 78 and %q in:\n%s", c.to, code, want, out)
		}
		code, stderr := runBriefly(t, lib, "run", cfg)
		if code != 78 || !strings.Contains(stderr, want) {
			t.Errorf("run with %s: exit %d, want 78 and %q in:\n%s", c.to, code, want, stderr)
		}
	}
}
