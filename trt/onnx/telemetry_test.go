//go:build cgo && linux

package onnx

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

const telemetryChild = "EDGED_TEST_TELEMETRY_CHILD"

// TestTelemetryOff runs a process that loads ONNX Runtime as every user of
// this package does (New, Load, Infer), with HOME, TMPDIR and the XDG
// folders pointed at empty folders, ORT_DISABLE_TELEMETRY=0 set by "the
// user" and the CI variables (which switch ORT's telemetry off on their
// own) removed. Every folder must still be empty afterwards: without the
// switch, ONNX Runtime 1.30 writes XDG_CACHE_HOME/Microsoft/DeveloperTools/
// .onnxruntime/{deviceid,onnxruntime.db} and TMPDIR/{mat-debug-<pid>.log,
// .ses} while the environment is created. (The delayed DNS lookup is
// checked on the binary, under strace: cmd/edged's TestNoEgress.)
func TestTelemetryOff(t *testing.T) {
	if os.Getenv(telemetryChild) == "1" {
		telemetryChildMain(t)
		return
	}
	ortBackend(t) // skips (or fails under EDGED_REQUIRE_ORT=1) without a library
	root := t.TempDir()
	dirs := map[string]string{}
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"} {
		dirs[k] = filepath.Join(root, strings.ToLower(k))
		if err := os.Mkdir(dirs[k], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTelemetryOff$", "-test.count=1")
	if w := os.Getenv("EDGED_EXEC_WRAPPER"); w != "" { // make test-arm64: the child is an arm64 file too
		cmd = exec.Command(w, os.Args[0], "-test.run=^TestTelemetryOff$", "-test.count=1")
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := dirs[k]; ours || slices.Contains(CIVariables, k) || k == EnvDisableTelemetry || k == "ORT_RUNNING_UNIT_TESTS" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, d := range dirs {
		cmd.Env = append(cmd.Env, k+"="+d)
	}
	lib, _ := filepath.Abs(filepath.Join("..", "..", "third_party", "onnxruntime", runtime.GOARCH, Soname))
	if os.Getenv(EnvLibrary) == "" && isFile(lib) {
		cmd.Env = append(cmd.Env, EnvLibrary+"="+lib)
	}
	cmd.Env = append(cmd.Env, telemetryChild+"=1", EnvDisableTelemetry+"=0")
	cmd.Dir = dirs["HOME"]
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for k, d := range dirs {
		var found []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if p != d {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Errorf("%s (%s) is not empty after loading ONNX Runtime: %s", k, d, strings.Join(found, ", "))
		}
	}
}

// telemetryChildMain is the child of TestTelemetryOff.
func telemetryChildMain(t *testing.T) {
	if v := os.Getenv(EnvDisableTelemetry); v != "1" {
		t.Fatalf("%s=%q after the package was initialised; want 1", EnvDisableTelemetry, v)
	}
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.Load(context.Background(), demomodel.Default, trt.LoadOptions{Name: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for range 10 {
		if err := e.Infer(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
