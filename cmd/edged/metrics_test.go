package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/edged-dev/edged/internal/metrictest"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt/demomodel"
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
		want := fmt.Sprintf("%s:%s: daemon.metrics_listen: ", cfg, valueAt(string(text), "metrics_listen = "))
		for _, sub := range []string{"run", "check"} {
			if code, stderr := runBriefly(t, lib, sub, cfg); code != 78 || !strings.Contains(stderr, want) {
				t.Errorf("%s with metrics_listen = %q: exit %d, want 78 and %q in:\n%s", sub, bad, code, want, stderr)
			}
		}
	}
}

// runBriefly runs edged SUB -config cfg, which must exit by itself within
// 30 s, and returns its exit code and stderr (for check, whose report is
// on stdout, stdout and stderr).
func runBriefly(t *testing.T, lib, sub, cfg string) (int, string) {
	t.Helper()
	cmd := edged(sub, "-config", cfg)
	cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if sub == "check" {
		cmd.Stdout = &stderr
	}
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

// TestMetricsOfTheBinary scrapes the real binary's /metrics after results,
// a socket client, a hot reload and a rejected model file, as Prometheus
// would: the text format through expfmt's parser (types, and counts that
// moved), OpenMetrics and protobuf by content negotiation, and promtool's
// lint (required when EDGED_REQUIRE_PROMTOOL is set, as in CI).
func TestMetricsOfTheBinary(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	v0, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	renameIn(t, model, v0, int64(len(v0)))
	cfg, sock, metrics := metricsConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
	d := start(t, lib, cfg, sock, "STATE_DIRECTORY=")
	recs := readRecords(t, sock)
	isResult := func(r stream.Decoded) bool { return r.Type == "result" }
	at := recs.wait(t, "a result", 0, isResult)

	v1, err := demomodel.Variant(1)
	if err != nil {
		t.Fatal(err)
	}
	renameIn(t, model, v1, int64(len(v1)))
	at = recs.wait(t, "engine_reloaded", at, func(r stream.Decoded) bool { return r.Event == "engine_reloaded" })
	junk := bytes.Repeat([]byte("junk"), 1024)
	renameIn(t, model, junk, int64(len(junk)))
	at = recs.wait(t, "engine_rejected", at, func(r stream.Decoded) bool { return r.Event == "engine_rejected" })
	recs.wait(t, "a result after the rejection", at, isResult)

	text, h, err := getMetrics(metrics, "")
	if err != nil {
		t.Fatal(err)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("default Content-Type %q, want the Prometheus text format", ct)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, text)
	}
	for name, want := range map[string]dto.MetricType{
		"edged_latency_seconds": dto.MetricType_HISTOGRAM, "edged_inference_seconds": dto.MetricType_HISTOGRAM,
		"edged_engine_reload_seconds": dto.MetricType_HISTOGRAM,
		"edged_results_total":         dto.MetricType_COUNTER, "edged_engine_reloads_total": dto.MetricType_COUNTER,
		"edged_engine_checks_total": dto.MetricType_COUNTER, "edged_sink_records_sent_total": dto.MetricType_COUNTER,
		"edged_stream_rejected_total": dto.MetricType_COUNTER, "edged_stream_disconnects_total": dto.MetricType_COUNTER,
		"edged_stream_clients": dto.MetricType_GAUGE, "edged_engine_info": dto.MetricType_GAUGE,
		"edged_engine_watch_polling": dto.MetricType_GAUGE, "edged_build_info": dto.MetricType_GAUGE,
		"go_goroutines": dto.MetricType_GAUGE, "process_resident_memory_bytes": dto.MetricType_GAUGE,
	} {
		if mf := mfs[name]; mf == nil || mf.GetType() != want {
			t.Errorf("%s: %v, want a %s", name, mf.GetType(), want)
		}
	}
	if t.Failed() {
		t.Fatalf("/metrics:\n%s", text)
	}
	for _, c := range []struct {
		series string
		min    float64
	}{
		{`edged_results_total{pipeline="demo"}`, 1},
		{`edged_engine_reloads_total{model="demo",result="ok"}`, 1},
		{`edged_engine_reloads_total{model="demo",result="invalid"}`, 1},
		{`edged_engine_checks_total{model="demo"}`, 2},
		{`edged_stream_clients{sink="local"}`, 1},
		{`edged_sink_records_sent_total{sink="local"}`, 1},
		{`edged_stream_rejected_total{reason="max_clients",sink="local"}`, 0},
		{`edged_engine_info{backend="onnxruntime",generation="2",model="demo",pipeline="demo",sha256="` + shortSHA(v1) + `"}`, 1},
	} {
		if v, err := sampleValue(mfs, c.series); err != nil || v < c.min {
			t.Errorf("%s = %v (%v), want at least %v", c.series, v, err, c.min)
		}
	}
	histCount := func(name string, labels ...string) uint64 {
		return metrictest.Series(mfs, name, labels...).GetHistogram().GetSampleCount()
	}
	if histCount("edged_latency_seconds", "pipeline", "demo") == 0 || histCount("edged_inference_seconds", "pipeline", "demo") == 0 {
		t.Error("the latency histograms counted no results")
	}
	if histCount("edged_engine_reload_seconds", "model", "demo", "result", "ok") == 0 ||
		histCount("edged_engine_reload_seconds", "model", "demo", "result", "invalid") == 0 {
		t.Errorf("edged_engine_reload_seconds did not time the reload and the rejection:\n%s", text)
	}

	om, h, err := getMetrics(metrics, "application/openmetrics-text; version=1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") || !bytes.HasSuffix(om, []byte("# EOF\n")) {
		t.Errorf("asked for OpenMetrics, got Content-Type %q:\n%s", ct, om)
	}
	pb, err := scrapeFamilies(metrics, "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	if err != nil {
		t.Fatal(err)
	}
	if mf := pb["edged_latency_seconds"]; mf == nil || len(mf.Metric) != 1 || mf.Metric[0].GetHistogram().GetSchema() != 3 {
		t.Errorf("no native histogram edged_latency_seconds in the protobuf scrape: %v", mf)
	}

	promtool(t, text)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

// shortSHA is the SHA-256 prefix edged shows for content.
func shortSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// promtool runs `promtool check metrics` (the exposition's parser and its
// lint: counters end in _total, base units, …) on a scrape. Without
// promtool it skips, unless EDGED_REQUIRE_PROMTOOL is set (CI installs
// Debian's prometheus package, which has it).
func promtool(t *testing.T, scrape []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("EDGED_REQUIRE_PROMTOOL is set: %v", err)
		}
		t.Skipf("promtool is not installed (Debian: apt-get install prometheus): %v", err)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\nthe scrape:\n%s", err, out, scrape)
	}
}

// TestMetricsOnlyGetAndHead: the metrics listener serves state to read.
// Every other method, on every path (/metrics, /livez, /readyz and paths
// it does not serve), is refused with 405 and "Allow: GET, HEAD", so a
// peer cannot mistake it for something that accepts writes; GET and HEAD
// still answer as before.
func TestMetricsOnlyGetAndHead(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	cfg, sock, metrics := metricsConfig(t, dir)
	d := start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_ready`, 1)
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", metrics)
		}}}
	do := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, "http://edged"+path, strings.NewReader("x=1"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/metrics", "/livez", "/readyz", "/", "/nothing-here"} {
		for _, m := range []string{"POST", "PUT", "DELETE", "TRACE", "PATCH", "OPTIONS", "CONNECTX"} {
			resp := do(m, path)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s, Allow %q; want 405 with Allow: GET, HEAD", m, path, resp.Status, resp.Header.Get("Allow"))
			}
		}
	}
	for _, path := range []string{"/metrics", "/livez", "/readyz"} {
		for _, m := range []string{"GET", "HEAD"} {
			if resp := do(m, path); resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %s, want 200", m, path, resp.Status)
			}
		}
	}
	if resp := do("GET", "/nothing-here"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %s, want 404", resp.Status)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
