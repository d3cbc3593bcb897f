package runtime

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/edged-dev/edged/internal/metrictest"
)

// gatherText is the daemon's registry in the Prometheus text format, as
// /metrics serves it by default.
func gatherText(tb testing.TB, d *daemon) string {
	mfs, err := d.reg.Gather()
	if err != nil {
		tb.Errorf("gathering metrics: %v", err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			tb.Errorf("encoding %s: %v", mf.GetName(), err)
		}
	}
	return b.String()
}

// stageSums reads, from a scrape, the sum of pipeline's stages in
// edged_stage_seconds and that of edged_latency_seconds, and whether every
// histogram counted the same results (the stages add up to the latency
// only then); each, if not nil, gets every stage's count.
func stageSums(t testing.TB, mfs map[string]*dto.MetricFamily, pipeline string, stages []string, each func(stage string, count uint64)) (sum, total float64, same bool) {
	t.Helper()
	lat := metrictest.Series(mfs, "edged_latency_seconds", "pipeline", pipeline)
	if lat == nil || lat.Histogram == nil {
		t.Fatalf("no histogram edged_latency_seconds{pipeline=%q}", pipeline)
	}
	n := lat.Histogram.GetSampleCount()
	same = true
	for _, stage := range stages {
		m := metrictest.Series(mfs, "edged_stage_seconds", "pipeline", pipeline, "stage", stage)
		if m == nil || m.Histogram == nil {
			t.Fatalf("no histogram edged_stage_seconds{pipeline=%q,stage=%q}", pipeline, stage)
		}
		if each != nil {
			each(stage, m.Histogram.GetSampleCount())
		}
		same = same && m.Histogram.GetSampleCount() == n
		sum += m.Histogram.GetSampleSum()
	}
	return sum, lat.Histogram.GetSampleSum(), same
}

// documentedMetrics reads the metric table of docs/OPERATIONS.md: every
// name in the first column, with the type in the second.
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	text, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(text), "### Metrics\n")
	if !ok {
		t.Fatal(`docs/OPERATIONS.md has no "### Metrics" section`)
	}
	out := map[string]string{}
	name := regexp.MustCompile("`(edged_[a-z0-9_]+)`")
	for _, line := range strings.Split(table, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.Contains(cols[1], "`edged_") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cols[1], -1) {
			out[m[1]] = strings.TrimSpace(cols[2])
		}
	}
	if len(out) < 20 {
		t.Fatalf("docs/OPERATIONS.md lists only %d metrics: %v", len(out), out)
	}
	return out
}

// TestMetricsEndpoint scrapes /metrics of a running daemon as Prometheus
// does: the text format parsed by expfmt (every edged_ family documented,
// with its documented type; latencies are histograms that count the
// frames), OpenMetrics and protobuf by content negotiation (native
// histogram buckets), and promtool's lint when promtool is installed.
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
	get := func(path, accept string) (int, http.Header, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://edged"+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, b
	}
	scrape := func() ([]byte, map[string]*dto.MetricFamily) {
		t.Helper()
		code, h, body := get("/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d\n%s", code, body)
		}
		if ct := h.Get("Content-Type"); expfmt.ResponseFormat(h).FormatType() != expfmt.TypeTextPlain {
			t.Errorf("/metrics without Accept: Content-Type %q, want the text format", ct)
		}
		p := expfmt.NewTextParser(pmodel.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("parsing /metrics: %v\n%s", err, body)
		}
		return body, mfs
	}
	value := func(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
		t.Helper()
		m := metrictest.Series(mfs, name, labels...)
		switch {
		case m == nil:
			t.Fatalf("no %s %q", name, labels)
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
		t.Fatalf("%s %q is neither a counter nor a gauge", name, labels)
		return 0
	}

	text, mfs := scrape()
	docs := documentedMetrics(t)
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "edged_") {
			continue
		}
		want, ok := docs[name]
		if !ok {
			t.Errorf("%s is not in the metric table of docs/OPERATIONS.md", name)
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != want {
			t.Errorf("%s is a %s, docs/OPERATIONS.md says %s", name, got, want)
		}
	}
	// What this daemon (one pipeline on a synthetic camera, the built-in
	// model, a sink of the test's own) must show, by type.
	for _, want := range []struct {
		name string
		typ  dto.MetricType
	}{
		{"edged_build_info", dto.MetricType_GAUGE}, {"edged_ready", dto.MetricType_GAUGE},
		{"edged_goroutines", dto.MetricType_GAUGE}, {"edged_open_fds", dto.MetricType_GAUGE},
		{"edged_system_memory_available_bytes", dto.MetricType_GAUGE},
		{"edged_frames_captured_total", dto.MetricType_COUNTER}, {"edged_frames_dropped_total", dto.MetricType_COUNTER},
		{"edged_results_total", dto.MetricType_COUNTER}, {"edged_inference_errors_total", dto.MetricType_COUNTER},
		{"edged_preprocess_errors_total", dto.MetricType_COUNTER},
		{"edged_latency_seconds", dto.MetricType_HISTOGRAM}, {"edged_inference_seconds", dto.MetricType_HISTOGRAM},
		{"edged_stage_seconds", dto.MetricType_HISTOGRAM},
		{"edged_pipeline_progress_age_seconds", dto.MetricType_GAUGE}, {"edged_source_up", dto.MetricType_GAUGE},
		{"edged_source_starts_total", dto.MetricType_COUNTER}, {"edged_engine_info", dto.MetricType_GAUGE},
		{"edged_pool_slots", dto.MetricType_GAUGE},
		// client_golang's collectors: the Go runtime, the process, the build.
		{"go_goroutines", dto.MetricType_GAUGE}, {"go_gc_duration_seconds", dto.MetricType_SUMMARY},
		{"process_resident_memory_bytes", dto.MetricType_GAUGE}, {"process_open_fds", dto.MetricType_GAUGE},
		{"process_cpu_seconds_total", dto.MetricType_COUNTER}, {"go_build_info", dto.MetricType_GAUGE},
	} {
		if mf := mfs[want.name]; mf == nil {
			t.Errorf("no %s", want.name)
		} else if mf.GetType() != want.typ {
			t.Errorf("%s is a %s, want %s", want.name, mf.GetType(), want.typ)
		}
	}
	if t.Failed() {
		t.Fatalf("/metrics:\n%s", text)
	}

	r1 := value(mfs, "edged_results_total", "pipeline", "demo")
	if r1 < 50 {
		t.Errorf("edged_results_total %v, want at least 50", r1)
	}
	if c := value(mfs, "edged_frames_captured_total", "pipeline", "demo", "source", "cam0"); c < r1 {
		t.Errorf("edged_frames_captured_total %v < edged_results_total %v", c, r1)
	}
	if value(mfs, "edged_ready") != 1 || value(mfs, "edged_source_up", "source", "cam0") != 1 {
		t.Error("edged_ready or edged_source_up is not 1")
	}
	if g, fds := value(mfs, "edged_goroutines"), value(mfs, "edged_open_fds"); g < 5 || fds < 3 {
		t.Errorf("edged_goroutines %v, edged_open_fds %v", g, fds)
	}
	if v := value(mfs, "edged_build_info", "version", Version, "go", goruntime.Version(), "arch", goruntime.GOARCH); v != 1 {
		t.Errorf("edged_build_info %v", v)
	}
	value(mfs, "edged_engine_info", "pipeline", "demo", "model", "demo", "generation", "1", "sha256", "0085b3a424d0", "backend", "onnxruntime")
	// Every stage of every result, and the stages add up to the latency
	// (they are differences of the same stamps). A scrape may fall between
	// a frame's latency and its stages, and one frame on a loaded machine
	// can take many times the mean, so the sums are compared in a scrape
	// where every histogram counted the same frames (one of up to 50).
	stages := func(mfs map[string]*dto.MetricFamily) (sum, total float64, same bool) {
		t.Helper()
		return stageSums(t, mfs, "demo", []string{"fill", "queue", "pre", "infer", "post"}, func(stage string, c uint64) {
			if float64(c) < r1-1 {
				t.Errorf("edged_stage_seconds{stage=%q}: count %v after %v results", stage, c, r1)
			}
		})
	}
	stageSum, total, same := stages(mfs)
	for i := 0; !same && i < 50; i++ {
		_, m := scrape()
		stageSum, total, same = stages(m)
	}
	if !same {
		t.Errorf("in 50 scrapes the stage histograms never counted the frames the latency histogram did")
	} else if math.Abs(stageSum-total) > 1e-9*total+1e-9 {
		t.Errorf("the stages sum to %v s, the latency to %v s", stageSum, total)
	}
	for _, name := range []string{"edged_latency_seconds", "edged_inference_seconds"} {
		m := metrictest.Series(mfs, name, "pipeline", "demo")
		if m == nil || m.Histogram == nil {
			t.Fatalf("no histogram %s{pipeline=\"demo\"}", name)
		}
		h := m.Histogram
		// Results are counted before the histograms observe them: the
		// histograms may lag edged_results_total by the frame in flight.
		if n := float64(h.GetSampleCount()); n < r1-1 || h.GetSampleSum() <= 0 {
			t.Errorf("%s: count %v, sum %v after %v results", name, n, h.GetSampleSum(), r1)
		}
		if mean := h.GetSampleSum() / float64(h.GetSampleCount()); mean <= 0 || mean > 1 {
			t.Errorf("%s: mean %v s", name, mean)
		}
		var prev uint64
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() < prev {
				t.Errorf("%s: buckets not cumulative at le=%v", name, b.GetUpperBound())
			}
			prev = b.GetCumulativeCount()
		}
		if len(h.Bucket) != len(latencyBuckets)+1 { // the parser adds +Inf
			t.Errorf("%s: %d buckets, want %d", name, len(h.Bucket), len(latencyBuckets)+1)
		}
	}
	if !bytes.Contains(text, []byte("# TYPE edged_latency_seconds histogram\n")) ||
		!bytes.Contains(text, []byte(`edged_latency_seconds_bucket{pipeline="demo",le="+Inf"}`)) {
		t.Error("edged_latency_seconds is not exposed as a histogram with buckets")
	}

	sink.waitResults(t, int(r1)+20, 30*time.Second)
	_, mfs2 := scrape()
	if r2 := value(mfs2, "edged_results_total", "pipeline", "demo"); r2 <= r1 {
		t.Errorf("edged_results_total did not grow: %v -> %v", r1, r2)
	}

	// OpenMetrics when asked for.
	code, h, om := get("/metrics", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	if code != 200 || expfmt.ResponseFormat(h).FormatType() != expfmt.TypeOpenMetrics ||
		!strings.HasPrefix(h.Get("Content-Type"), "application/openmetrics-text") {
		t.Errorf("Accept: application/openmetrics-text: %d, Content-Type %q", code, h.Get("Content-Type"))
	}
	if !bytes.HasSuffix(om, []byte("# EOF\n")) || !bytes.Contains(om, []byte("# TYPE edged_results counter\n")) ||
		!bytes.Contains(om, []byte("# TYPE edged_latency_seconds histogram\n")) {
		t.Errorf("not OpenMetrics:\n%s", om)
	}

	// Protobuf when asked for, as Prometheus does for native histograms.
	code, h, pb := get("/metrics", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	if code != 200 || expfmt.ResponseFormat(h).FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("Accept: protobuf: %d, Content-Type %q", code, h.Get("Content-Type"))
	}
	dec := expfmt.NewDecoder(bytes.NewReader(pb), expfmt.ResponseFormat(h))
	native := 0
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if mf.GetName() != "edged_latency_seconds" && mf.GetName() != "edged_inference_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			if h := m.Histogram; h != nil && h.GetSchema() == 3 && len(h.PositiveSpan) > 0 && h.GetZeroThreshold() > 0 {
				native++
			}
		}
	}
	if native != 2 {
		t.Errorf("%d native histograms (schema 3, factor 1.09) in the protobuf scrape, want 2", native)
	}

	t.Run("promtool", func(t *testing.T) { promtoolCheck(t, text) })

	if c, _, _ := get("/readyz", ""); c != 200 {
		t.Errorf("/readyz %d", c)
	}
	if c, _, _ := get("/livez", ""); c != 200 {
		t.Errorf("/livez %d", c)
	}
}

// promtoolCheck runs `promtool check metrics` (its parser and its lint) on
// a scrape. Without promtool it skips, unless EDGED_REQUIRE_PROMTOOL is set
// (CI installs Debian's prometheus package, which has it).
func promtoolCheck(t *testing.T, scrape []byte) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("EDGED_REQUIRE_PROMTOOL") != "" {
			t.Fatalf("EDGED_REQUIRE_PROMTOOL is set: %v", err)
		}
		t.Skipf("promtool is not installed (Debian: apt-get install prometheus): %v", err)
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if len(bytes.TrimSpace(out)) > 0 {
		t.Logf("promtool check metrics:\n%s", out)
	}
}
