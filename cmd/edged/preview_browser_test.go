package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/edged-dev/edged/internal/onnxproto"
)

// browserTools returns node, the playwright-core package's folder and
// Chromium, skipping the test when one is missing unless
// EDGED_REQUIRE_CHROMIUM=1 (CI), which makes that a failure. Chromium is
// $EDGED_CHROMIUM, else chromium on $PATH (Debian's package); playwright-core
// is $EDGED_PLAYWRIGHT_CORE, else .cache/playwright/node_modules/playwright-core
// of the checkout (make playwright puts it there).
func browserTools(t *testing.T) (node, pwCore, chromium string) {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("EDGED_REQUIRE_CHROMIUM") == "1" {
		fail = t.Fatalf
	}
	if os.Getenv("EDGED_EXEC_WRAPPER") != "" {
		t.Skip("the browser test runs on the host architecture only (EDGED_EXEC_WRAPPER is set)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		fail("node not installed: %v; EDGED_REQUIRE_CHROMIUM=1 makes this a failure", err)
		return
	}
	chromium = os.Getenv("EDGED_CHROMIUM")
	if chromium == "" {
		chromium = "chromium"
	}
	if chromium, err = exec.LookPath(chromium); err != nil {
		fail("chromium not installed (apt-get install chromium): %v; EDGED_REQUIRE_CHROMIUM=1 makes this a failure", err)
		return
	}
	pwCore = os.Getenv("EDGED_PLAYWRIGHT_CORE")
	if pwCore == "" {
		pwCore, _ = filepath.Abs(filepath.Join("..", "..", ".cache", "playwright", "node_modules", "playwright-core"))
	}
	if _, err := os.Stat(filepath.Join(pwCore, "package.json")); err != nil {
		fail("playwright-core not installed (make playwright): %v; EDGED_REQUIRE_CHROMIUM=1 makes this a failure", err)
		return
	}
	return node, pwCore, chromium
}

// freePort is a TCP port on the loopback that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// browserReport is what preview-browser.cjs prints.
type browserReport struct {
	Pictures []struct {
		Src                            string
		Width, Height                  int
		First, Last, FirstSeq, LastSeq uint64
		Changed                        bool
	}
	Requests []string
	Errors   []string
	Text     string
}

// TestPreviewPageInChromium: the real binary with the live preview on
// (two pipelines: the demo classifier on cam0 and an end-to-end detector on
// cam1) and headless Chromium driven by playwright-core: the page at /
// loads, shows both pictures, each loads and then changes (a later picture
// with other pixels), the cards show rate, latency, engine and camera, and
// the page fetched nothing from anywhere else and logged no error. The
// screenshot is saved; EDGED_PREVIEW_SCREENSHOT=path copies it there (the
// one docs/OPERATIONS.md and the README show: docs/images/preview.png).
func TestPreviewPageInChromium(t *testing.T) {
	node, pwCore, chromium := browserTools(t)
	lib := needORT(t)
	// The failures are said again after the daemon's log (a cleanup that
	// runs last), where a CI summary's tail shows them.
	var failures []string
	errorf := func(format string, args ...any) {
		t.Helper()
		failures = append(failures, fmt.Sprintf(format, args...))
		t.Errorf(format, args...)
	}
	t.Cleanup(func() {
		for _, f := range failures {
			t.Logf("failed: %s", f)
		}
	})
	dir := t.TempDir()
	var det detectorModel
	for _, m := range detectorModels {
		if m.name == "end2end" {
			det = m
		}
	}
	model := filepath.Join(dir, "dock.onnx")
	if err := os.WriteFile(model, pb.ConstModel("images", detH, detW, det.outs, det.meta...), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cfg, sock := testConfig(t, dir, `metrics_listen = ""`, `metrics_listen = "`+addr+`"`,
		"preview = false", "preview = true", `device_id = ""`, `device_id = "dock-3"`)
	text, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text = append(text, `
[[source]]
name = "cam1"
kind = "synthetic"
width = 640
height = 480
fps = 30.0
seed = 7

[[model]]
name = "dock"
path = "`+model+`"

[[pipeline]]
name = "dock"
source = "cam1"
model = "dock"
sinks = ["local"]
[pipeline.preprocess]
resize = "letterbox"
`...)
	if err := os.WriteFile(cfg, text, 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, lib, cfg, sock)
	base := "http://" + addr + "/"
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := http.Get(base + "readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			errorf("edged not ready on %s: %v\n%s", addr, err, d.stderr.String())
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}

	shot := filepath.Join(dir, "preview.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	words := []string{"dock-3", "demo", "dock", "running", "fps", "p50", "p99", "gen 1", "cam0", "cam1", "up", "640x480 YUYV"}
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "preview-browser.cjs"), pwCore, chromium, base, "2", shot, strings.Join(words, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		errorf("node: %v\n%s%s", err, out, stderr.String())
		t.FailNow()
	}
	var rep browserReport
	if err := json.Unmarshal(out, &rep); err != nil {
		errorf("the driver's report: %v\n%s%s", err, out, stderr.String())
		t.FailNow()
	}
	for _, e := range rep.Errors {
		// A 503 (no picture in 3 s on a loaded machine) is a case the
		// page handles: it shows the reason and asks again.
		if strings.HasPrefix(e, "console: Failed to load resource: the server responded with a status of 503") {
			t.Logf("in the browser: %s", e)
			continue
		}
		errorf("in the browser: %s", e)
	}
	if len(rep.Pictures) != 2 {
		errorf("%d pictures on the page, want 2 (demo, dock): %s", len(rep.Pictures), out)
		t.FailNow()
	}
	for _, p := range rep.Pictures {
		t.Logf("%s: %dx%d, pictures %d..%d, frames %d..%d, changed %v", p.Src, p.Width, p.Height, p.First, p.Last, p.FirstSeq, p.LastSeq, p.Changed)
		if p.Width != 640 || p.Height != 480 || !p.Changed || p.LastSeq <= p.FirstSeq {
			errorf("%s did not load and change: %+v", p.Src, p)
		}
	}
	for _, u := range rep.Requests {
		if !strings.HasPrefix(u, base) && !strings.HasPrefix(u, "blob:"+strings.TrimSuffix(base, "/")) {
			errorf("the page fetched %s, not from edged", u)
		}
	}
	for _, w := range words {
		if !strings.Contains(strings.ToLower(rep.Text), strings.ToLower(w)) {
			errorf("the page does not say %q:\n%s", w, rep.Text)
		}
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		errorf("screenshot: %v", err)
		t.FailNow()
	}
	if img.Bounds().Dx() != 1280 {
		errorf("screenshot: %v, want 1280 wide", img.Bounds())
	}
	t.Logf("screenshot: %d bytes", len(b))
	if to := os.Getenv("EDGED_PREVIEW_SCREENSHOT"); to != "" {
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _ := d.stop(t); code != 0 {
		errorf("exit %d after SIGTERM", code)
	}
}
