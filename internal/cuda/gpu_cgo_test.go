//go:build cgo && linux

package cuda

import (
	"os"
	"testing"
)

// The built-in name table agrees with the driver's cuGetErrorName for
// every code from 0 to 1000. It runs wherever a CUDA driver loads, and
// skips without one unless EDGED_REQUIRE_GPU=1.
func TestGPUErrorTableMatchesDriver(t *testing.T) {
	drv, err := Load()
	if err == nil {
		if r := drv.Init(); r != Success {
			err = r
		}
	}
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_GPU") == "1" {
			t.Fatalf("no CUDA driver: %v", err)
		}
		t.Skipf("no CUDA driver (set EDGED_REQUIRE_GPU=1 to fail instead): %v", err)
	}
	known, textDiffs := 0, 0
	for r := Result(0); r <= 1000; r++ {
		name, ok := drv.ErrorName(r)
		mine, have := resultTable[r]
		switch {
		case ok && !have:
			t.Errorf("driver knows %d = %s; the built-in table does not", r, name)
		case ok && mine.name != name:
			t.Errorf("code %d: table says %s, driver says %s", r, mine.name, name)
		case !ok && have:
			t.Logf("code %d (%s) is unknown to this driver", r, mine.name)
		}
		if ok {
			known++
			if text, _ := drv.ErrorText(r); have && mine.text != text {
				// Texts may change between drivers; the driver's is used when loaded.
				t.Logf("code %d: built-in text %q, driver text %q", r, mine.text, text)
				textDiffs++
			}
		}
	}
	t.Logf("driver knows %d codes; table has %d; %d texts differ", known, len(resultTable), textDiffs)
}
