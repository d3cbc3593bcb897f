//go:build cgo && linux

package tensorrt

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// writeSource writes a test library's source into a temporary folder.
func writeSource(t *testing.T, name, code string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildLib compiles src into a shared library named out with the system
// compiler, or skips the test when there is none.
func buildLib(t *testing.T, compiler, src, out string, args ...string) string {
	t.Helper()
	cc, err := exec.LookPath(compiler)
	if err != nil {
		t.Skipf("no %s to build the test library: %v", compiler, err)
	}
	path := filepath.Join(t.TempDir(), out)
	cmd := exec.Command(cc, append(append([]string{"-shared", "-fPIC", "-o", path}, args...), src)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", out, err, b)
	}
	return path
}
