package serialsink

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestProbeSerial opens a pty as the serial sink would, and refuses a
// device that is not there or not a terminal.
func TestProbeSerial(t *testing.T) {
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	if err := Probe(Options{Device: slave.Name(), Baud: 115200}); err != nil {
		t.Errorf("pty: %v", err)
	}
	if err := Probe(Options{Device: filepath.Join(t.TempDir(), "ttyNone")}); err == nil || !strings.Contains(err.Error(), "ttyNone") {
		t.Errorf("missing device: %v", err)
	}
	if err := Probe(Options{Device: slave.Name(), Parity: "sometimes"}); err == nil {
		t.Error("bad parity accepted")
	}
}
