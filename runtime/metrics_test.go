package runtime

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMetricsEndpoint(t *testing.T) {
	backend := ortBackend(t)
	sink := newRecordingSink()
	sockPath := filepath.Join(t.TempDir(), "metrics.sock")
	cfg := defaultConfig(t, func(s string) string {
		s = mustReplace(t, s, `metrics_listen = ""`, `metrics_listen = "unix:`+sockPath+`"`)
		return mustReplace(t, s, "fps = 30.0", "fps = 100.0")
	})
	runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 50, 30*time.Second)

	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sockPath)
	}}}
	get := func(path string) (int, string) {
		resp, err := client.Get("http://edged" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	value := func(text, series string) float64 {
		t.Helper()
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
		m := re.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no %s in:\n%s", series, text)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	code, text := get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	r1 := value(text, `edged_results_total{pipeline="demo"}`)
	if r1 < 50 {
		t.Errorf("results_total %v", r1)
	}
	if value(text, `edged_ready`) != 1 || value(text, `edged_source_up{source="cam0"}`) != 1 {
		t.Errorf("ready/source_up wrong:\n%s", text)
	}
	if g, fds := value(text, `edged_goroutines`), value(text, `edged_open_fds`); g < 5 || fds < 3 {
		t.Errorf("edged_goroutines %v, edged_open_fds %v", g, fds)
	}
	value(text, `edged_engine_info{pipeline="demo",model="demo",generation="1",sha256="0085b3a424d0",backend="onnxruntime"}`)
	if p50 := value(text, `edged_latency_seconds{pipeline="demo",quantile="0.5"}`); p50 <= 0 || p50 > 1 {
		t.Errorf("p50 latency %v", p50)
	}
	if !strings.Contains(text, "# TYPE edged_frames_captured_total counter") {
		t.Error("missing TYPE line")
	}
	sink.waitResults(t, int(r1)+20, 30*time.Second)
	_, text2 := get("/metrics")
	if r2 := value(text2, `edged_results_total{pipeline="demo"}`); r2 <= r1 {
		t.Errorf("results_total did not grow: %v -> %v", r1, r2)
	}
	if c, _ := get("/readyz"); c != 200 {
		t.Errorf("/readyz %d", c)
	}
	if c, _ := get("/livez"); c != 200 {
		t.Errorf("/livez %d", c)
	}
}
