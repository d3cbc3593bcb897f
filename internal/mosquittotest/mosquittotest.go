package mosquittotest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// Path returns the broker binary: $EDGED_MOSQUITTO, the Debian paths,
// else the one on PATH. Without one the test is skipped, unless
// EDGED_REQUIRE_MOSQUITTO=1 (CI), which makes its absence a failure.
func Path(t testing.TB) string {
	t.Helper()
	if p := Lookup(); p != "" {
		return p
	}
	if os.Getenv("EDGED_REQUIRE_MOSQUITTO") == "1" {
		t.Fatal("mosquitto not found, and EDGED_REQUIRE_MOSQUITTO=1 (apt-get install mosquitto)")
	}
	t.Skip("mosquitto not installed (apt-get install mosquitto); EDGED_REQUIRE_MOSQUITTO=1 makes this a failure")
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Lookup returns the broker binary as Path finds it, or "" when there is
// none (for a test that runs without a broker too).
func Lookup() string {
	for _, p := range []string{os.Getenv("EDGED_MOSQUITTO"), "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	return ""
}
