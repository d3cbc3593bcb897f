package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/preview"
)

// unixClient is an HTTP client of the metrics listener at sock.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

func httpGet(t *testing.T, c *http.Client, path string) (*http.Response, []byte) {
	t.Helper()
	r, err := c.Get("http://edged" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

// TestPreviewOfTheDaemon: with [daemon] preview = true the metrics
// listener serves the demo pipeline's picture (a JPEG of the camera's
// 640x480, a newer one after it, naming the engine generation that
// computed its results), status.json (the pipeline running, its rate and
// latency, the engine, the camera up with its format, the board), and a
// stream; the stream's viewer keeps watching across a reload that
// rebuilds the pipeline (its pictures then start again at frame 0), and
// a reload that turns the preview off ends it.
func TestPreviewOfTheDaemon(t *testing.T) {
	backend := ortBackend(t)
	sink := newRecordingSink()
	sock := filepath.Join(t.TempDir(), "metrics.sock")
	edit := func(fps string) func(string) string {
		return func(s string) string {
			s = mustReplace(t, s, `metrics_listen = ""`, `metrics_listen = "unix:`+sock+`"`)
			s = mustReplace(t, s, "preview = false", "preview = true")
			return mustReplace(t, s, "fps = 30.0", "fps = "+fps)
		}
	}
	dd, ctx, _ := runDaemon(t, Options{Config: defaultConfig(t, edit("100.0")), Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 20, 30*time.Second)
	c := unixClient(sock)

	r, b := httpGet(t, c, "/preview/demo.jpg")
	if r.StatusCode != 200 {
		t.Fatalf("/preview/demo.jpg: %s %s", r.Status, b)
	}
	img, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds() != image.Rect(0, 0, 640, 480) {
		t.Fatalf("picture %v: %v", img.Bounds(), err)
	}
	gen := dd.d.currentGraph().pipelines[0].hot.Current()
	if want := fmt.Sprintf("demo %d %s", gen.Number, gen.SHAPrefix()); r.Header.Get("X-Edged-Engine") != want {
		t.Errorf("X-Edged-Engine %q, want %q", r.Header.Get("X-Edged-Engine"), want)
	}
	r2, b2 := httpGet(t, c, "/preview/demo/cam0.jpg?after="+r.Header.Get("X-Edged-Picture"))
	if r2.StatusCode != 200 || bytes.Equal(b, b2) {
		t.Errorf("the next picture: %s, same bytes: %v", r2.Status, bytes.Equal(b, b2))
	}

	time.Sleep(time.Second) // a window of latencies
	_, b = httpGet(t, c, "/status.json")
	var st preview.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pipelines) != 1 {
		t.Fatalf("status.json: %s", b)
	}
	p := st.Pipelines[0]
	if p.Name != "demo" || p.State != "running" || p.FPS < 20 || p.Latency == nil || p.Latency.P50ms <= 0 || p.Latency.P99ms < p.Latency.P50ms ||
		p.Engine == nil || p.Engine.Model != "demo" || p.Engine.Generation != gen.Number || p.Engine.SHA256 != gen.SHAPrefix() || p.Engine.Backend == "" ||
		len(p.Sources) != 1 || !p.Sources[0].Up || p.Sources[0].Format != "640x480 YUYV @100fps" || p.Sources[0].Picture != "/preview/demo/cam0.jpg" {
		t.Errorf("status.json: %s", b)
	}
	if st.Board == nil || st.Board.MemTotal == 0 || !st.Preview.Enabled || st.Preview.Encoder == "" {
		t.Errorf("status.json's board and preview: %s", b)
	}

	resp, err := c.Get("http://edged/preview/demo.mjpeg")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	mr := multipart.NewReader(resp.Body, params["boundary"])
	seqOf := func() (uint64, error) {
		part, err := mr.NextPart()
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, part)
		return strconv.ParseUint(part.Header.Get("X-Edged-Frame-Seq"), 10, 64)
	}
	before, err := seqOf()
	if err != nil {
		t.Fatal(err)
	}
	// A new camera rate rebuilds the pipeline: its frames start again.
	if err := dd.Reload(ctx, defaultConfig(t, edit("90.0"))); err != nil {
		t.Fatal(err)
	}
	restarted := false
	for i := 0; i < 50 && !restarted; i++ {
		seq, err := seqOf()
		if err != nil {
			t.Fatalf("the stream ended with the reload: %v", err)
		}
		restarted = seq < before
	}
	if !restarted {
		t.Error("no picture of the rebuilt pipeline on the stream")
	}
	off := func(s string) string { return mustReplace(t, edit("90.0")(s), "preview = true", "preview = false") }
	if err := dd.Reload(ctx, defaultConfig(t, off)); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := seqOf(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Error("turning the preview off did not end the stream")
	}
	if r, b := httpGet(t, c, "/preview/demo.jpg"); r.StatusCode != 404 {
		t.Errorf("preview off: %s %s", r.Status, b)
	}
}
