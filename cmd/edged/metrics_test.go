package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMetricsListenClassified: a metrics address that is already in use is
// a runtime condition (exit 1, which systemd retries: the other process may
// go away), not a configuration error (exit 78, never retried); an address
// that cannot be right is a configuration error named by file, line,
// column and key, by run and by check alike.
func TestMetricsListenClassified(t *testing.T) {
	lib := needORT(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	addr := busy.Addr().String()
	cfg, _ := testConfig(t, dir, `metrics_listen = ""`, `metrics_listen = "`+addr+`"`)
	code, stderr := runBriefly(t, lib, "run", cfg)
	if code != 1 {
		t.Errorf("metrics address in use: exit %d, want 1\n%s", code, stderr)
	}
	if !strings.Contains(stderr, addr) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("the error does not name the address and the cause:\n%s", stderr)
	}

	for _, bad := range []string{"127.0.0.1:notaport", "127.0.0.1:70000", "unix:", ":"} {
		cfg, _ := testConfig(t, dir, `metrics_listen = ""`, `metrics_listen = "`+bad+`"`)
		text, _ := os.ReadFile(cfg)
		line := 1 + strings.Count(string(text[:strings.Index(string(text), "metrics_listen")]), "\n")
		want := fmt.Sprintf("%s:%d:1: daemon.metrics_listen: ", cfg, line)
		for _, sub := range []string{"run", "check"} {
			if code, stderr := runBriefly(t, lib, sub, cfg); code != 78 || !strings.Contains(stderr, want) {
				t.Errorf("%s with metrics_listen = %q: exit %d, want 78 and %q in:\n%s", sub, bad, code, want, stderr)
			}
		}
	}
}

// runBriefly runs edged SUB -config cfg, which must exit by itself within
// 30 s, and returns its exit code and stderr.
func runBriefly(t *testing.T, lib, sub, cfg string) (int, string) {
	t.Helper()
	cmd := edged(sub, "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("edged %s kept running:\n%s", sub, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}
