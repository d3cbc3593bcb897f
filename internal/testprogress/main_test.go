package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReport runs `go test -json` on a module with a passing package, a
// failing one (a failing subtest that logged, a passing test that logged)
// and one that does not build, through the printer: one line per package
// as go test prints them, the failing test's whole output and nothing of
// the passing one's, the build error, and a false result.
func TestReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module m\n\ngo 1.22\n",
		"good/good.go":      "package good\n",
		"good/good_test.go": "package good\nimport \"testing\"\nfunc TestOK(t *testing.T) { t.Log(\"quiet please\") }\n",
		"bad/bad.go":        "package bad\n",
		"bad/bad_test.go": "package bad\nimport \"testing\"\nfunc TestOK(t *testing.T) { t.Log(\"quiet please\") }\n" +
			"func TestBroken(t *testing.T) {\n\tt.Log(\"before the subtests\")\n\tt.Run(\"sub\", func(t *testing.T) { t.Log(\"the sub's log\"); t.Error(\"the sub failed\") })\n}\n",
		"nobuild/x.go":      "package nobuild\nfunc f() { undefined() }\n",
		"nobuild/x_test.go": "package nobuild\nimport \"testing\"\nfunc TestX(t *testing.T) {}\n",
		"empty/e.go":        "package empty\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	// The module is built for this machine whatever the run around this
	// test cross-compiles for (make test-arm64 exports GOARCH, CC and
	// CGO_* and runs this binary under qemu: the inner test binaries
	// would be arm64 files the kernel cannot exec).
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOOS", "GOARCH", "CC", "CXX", "CGO_ENABLED", "CGO_CFLAGS", "CGO_CXXFLAGS", "CGO_LDFLAGS", "GOFLAGS", "GOWORK":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOWORK=off", "CGO_ENABLED=0")
	raw, _ := cmd.CombinedOutput()
	var out bytes.Buffer
	ok := run(bytes.NewReader(raw), &out, nil)
	got := out.String()
	if ok {
		t.Errorf("a failing run reported success:\n%s", got)
	}
	for _, want := range []string{"ok  \tm/good\t", "?   \tm/empty\t[no test files]", "FAIL\tm/bad\t",
		"before the subtests", "the sub's log", "the sub failed", "--- FAIL: TestBroken/sub", "undefined: undefined"} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"quiet please", "=== RUN", "\"Action\""} {
		if strings.Contains(got, not) {
			t.Errorf("the report holds %q:\n%s", not, got)
		}
	}
}

// TestHeartbeat: while a package runs and nothing was printed for the
// interval, the printer says which packages run and their oldest tests;
// a package that never finishes fails the run.
func TestHeartbeat(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	p := newPrinter(&out)
	p.now = func() time.Time { return now }
	p.last = now
	p.line([]byte(`{"Action":"start","Package":"m/slow"}`))
	p.line([]byte(`{"Action":"run","Package":"m/slow","Test":"TestLong"}`))
	now = now.Add(5 * time.Second)
	p.line([]byte(`{"Action":"run","Package":"m/slow","Test":"TestLonger"}`))
	p.heartbeat()
	if out.Len() != 0 {
		t.Fatalf("a heartbeat before the interval: %q", out.String())
	}
	now = now.Add(20 * time.Second)
	p.heartbeat()
	if want := "... still running: m/slow (25s, TestLong 25s, TestLonger 20s)\n"; out.String() != want {
		t.Fatalf("heartbeat %q, want %q", out.String(), want)
	}
	out.Reset()
	now = now.Add(10 * time.Second)
	p.heartbeat()
	if out.Len() != 0 {
		t.Fatalf("heartbeats closer than the interval: %q", out.String())
	}
	if p.end() || !strings.Contains(out.String(), "FAIL\tm/slow\t(no result") {
		t.Fatalf("an unfinished package: %q", out.String())
	}
}
