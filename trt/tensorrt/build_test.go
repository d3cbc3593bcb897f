//go:build cgo && linux

package tensorrt

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// buildLib compiles src into a shared library named out with the C
// compiler ($CC, else cc), or skips the test when there is none or it builds
// for another architecture (a cross-built test binary under qemu).
func buildLib(t *testing.T, src, out string) string {
	t.Helper()
	compiler := os.Getenv("CC")
	if compiler == "" {
		compiler = "cc"
	}
	cc, err := exec.LookPath(compiler)
	if err != nil {
		t.Skipf("no %s to build the test library: %v", compiler, err)
	}
	path := filepath.Join(t.TempDir(), out)
	cmd := exec.Command(cc, "-shared", "-fPIC", "-o", path, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", out, err, b)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, ok := elfMachine[runtime.GOARCH]; ok && f.Machine != m {
		t.Skipf("%s builds for %v, this test runs on %s", compiler, f.Machine, runtime.GOARCH)
	}
	return path
}
