//go:build cgo && linux

package tensorrt

import (
	"errors"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
)

func TestProbeNoLibrary(t *testing.T) {
	// Names that cannot exist: the error lists each with dlopen's reason.
	names := []string{"libedged-test-missing.so.10", "/nonexistent/libnvinfer.so.8"}
	_, _, err := openLibrary(names)
	if !errors.Is(err, trt.ErrBackend) {
		t.Fatalf("want trt.ErrBackend, got %v", err)
	}
	for _, want := range append(names, "cannot open shared object file", "libnvinfer10", "tensorrt_library") {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	// The default names, on a machine without TensorRT.
	l, err := Probe("")
	if err == nil {
		t.Skipf("this machine has %s", l)
	}
	for _, want := range []string{"libnvinfer.so.10", "libnvinfer.so.8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

const libBothSymbols = `#include <stdint.h>
void* createInferRuntime_INTERNAL(void* logger, int32_t version) { (void)logger; (void)version; return 0; }
int32_t getInferLibVersion(void) { return 100300; }
`

const libVersionOnly = `#include <stdint.h>
int32_t getInferLibVersion(void) { return 100300; }
`

func TestProbeLibrary(t *testing.T) {
	good := buildLib(t, writeSource(t, "good.c", libBothSymbols), "libnvinfer.so.10")
	l, err := Probe(good)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != good || l.Version != (plan.Version{Major: 10, Minor: 3}) {
		t.Errorf("Probe = %+v", l)
	}

	bad := buildLib(t, writeSource(t, "bad.c", libVersionOnly), "libnotnvinfer.so")
	_, err = Probe(bad)
	if !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), "does not export createInferRuntime_INTERNAL") {
		t.Errorf("library without the runtime symbol: %v", err)
	}

	// A missing first name falls through to the next.
	_, l, err = openLibrary([]string{"libedged-test-missing.so.10", good})
	if err != nil || l.Name != good {
		t.Errorf("fallback: %+v %v", l, err)
	}
}
