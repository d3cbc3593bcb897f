package preview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// scene draws frame i: a dark grey background and a bright square that
// moves 8 pixels a frame; it returns the square (camera pixels).
func scene(i, w, h int) ([]byte, [4]float32) {
	rgb := make([]byte, 3*w*h)
	x0, y0 := 40+8*(i%16), h/4
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := rgb[3*(y*w+x):]
			p[0], p[1], p[2] = 40, 50, 60
			if x >= x0 && x < x0+120 && y >= y0 && y < y0+120 {
				p[0], p[1], p[2] = 230, 230, 220
			}
		}
	}
	return rgb, [4]float32{float32(x0), float32(y0), float32(x0 + 120), float32(y0 + 120)}
}

// camera is a pipeline as the tap sees it: frames of scene in format pf
// at about 200 fps, each with a detection of the square (or none when
// bare), handed over through Due, Copy and Finish.
type camera struct {
	t    *Tap
	f    sensors.Format
	bare bool

	mu     sync.Mutex
	frames map[int][]byte
	copied int
	boxes  map[uint64][4]float32
	stop   chan struct{}
	done   chan struct{}
}

func newCamera(t *testing.T, tap *Tap, pf sensors.PixelFormat, w, h int) *camera {
	c := &camera{t: tap, f: sensors.Format{Width: w, Height: h, Pixel: pf}, boxes: map[uint64][4]float32{},
		stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(c.close)
	return c
}

// frame is frame i of the camera: one of 16 drawn once, copied into a
// buffer of its own (which run zeroes after Copy).
func (c *camera) frame(i int) ([]byte, [4]float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frames == nil {
		c.frames = map[int][]byte{}
	}
	k := i % 16
	rgb, box := scene(k, c.f.Width, c.f.Height)
	if c.frames[k] == nil {
		out := rgb
		if c.f.Pixel != sensors.RGB24 {
			out = make([]byte, pixconv.RawSize(c.f))
			if _, err := pixconv.FromRGB24(out, c.f, rgb, 3*c.f.Width); err != nil {
				panic(err)
			}
		}
		c.frames[k] = out
	}
	return append([]byte(nil), c.frames[k]...), box
}

func (c *camera) run() {
	go func() {
		defer close(c.done)
		rec := stream.Record{Kind: stream.KindResult, Pipeline: "p", Engine: stream.EngineRef{Name: "m", Generation: 3, SHA256: "abcd1234"},
			Outputs: []stream.Output{{Name: "det", Kind: stream.OutputDetections, Detections: make([]stream.Detection, 1)}}}
		for i := 0; ; i++ {
			select {
			case <-c.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := frameNow()
			if !c.t.Due(now) {
				continue
			}
			data, box := c.frame(i)
			if !c.t.Copy(now, Frame{Seq: uint64(i), TCapture: now, Format: c.f, Data: data}) {
				continue
			}
			for j := range data {
				data[j] = 0 // the slot is reused at once
			}
			c.mu.Lock()
			c.copied++
			c.boxes[uint64(i)] = box
			c.mu.Unlock()
			if c.bare {
				c.t.Finish(uint64(i), nil, "test")
				continue
			}
			rec.FrameSeq = uint64(i)
			rec.Outputs[0].Detections[0] = stream.Detection{Box: box, Class: 0, Label: "square", Score: 0.9}
			c.t.Finish(uint64(i), &rec, "")
		}
	}()
}

func (c *camera) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
		<-c.done
	}
}

func (c *camera) box(seq uint64) [4]float32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.boxes[seq]
}

func newHub(t *testing.T, s Settings) (*Hub, *httptest.Server) {
	h := New(Options{Settings: s, Status: func() Status {
		return Status{Device: "test", Pipelines: []Pipeline{{Name: "p", State: "running", Sources: []Source{{Name: "cam0", Up: true}}}}}
	}})
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(func() { h.Close(); srv.Close() })
	return h, srv
}

// smallBuffers gives every connection a small send buffer, so a viewer
// that reads nothing blocks the server's writes within a picture or two
// (loopback's buffers would otherwise take seconds of pictures).
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8192)
	}
	return c, err
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	r, err := http.Get(url)
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

func decode(t *testing.T, b []byte) *image.YCbCr {
	t.Helper()
	img, err := stdjpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a JPEG: %v", err)
	}
	return img.(*image.YCbCr)
}

func luma(img *image.YCbCr, x, y int) int { return int(img.Y[img.YOffset(x, y)]) }

// TestNothingPerFrameWhenNobodyWatches: without a viewer, Due is false
// and allocates nothing, whether the preview is on or off.
func TestNothingPerFrameWhenNobodyWatches(t *testing.T) {
	h, _ := newHub(t, Settings{Enabled: true})
	tap := h.Tap(Key{"p", "cam0"})
	if a := testing.AllocsPerRun(1000, func() {
		if tap.Due(frameNow()) {
			t.Fatal("due without a viewer")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per frame", a)
	}
	var none *Tap
	if none.Due(frameNow()) {
		t.Fatal("a nil tap is due")
	}
}

// TestJPEGPictures: /preview/p.jpg and /preview/p/cam0.jpg are JPEGs at
// most preview_width wide, of the camera's aspect; the picture changes
// from one to the next (?after=N) as the square moves; the box is drawn
// where the detection says: its border's pixels differ from the same
// frame undrawn, inside the box they do not; the camera's bytes are read
// only while Copy runs (the frame is zeroed right after, as a reused slot
// would be). For every pixel format.
func TestJPEGPictures(t *testing.T) {
	for _, pf := range []sensors.PixelFormat{sensors.YUYV, sensors.UYVY, sensors.NV12, sensors.RGB24, sensors.BGR24, sensors.GREY} {
		t.Run(pf.String(), func(t *testing.T) {
			h, srv := newHub(t, Settings{Enabled: true, FPS: 20, Width: 160})
			tap := h.Tap(Key{"p", "cam0"})
			cam := newCamera(t, tap, pf, 640, 360)
			cam.run()
			r, b := get(t, srv.URL+"/preview/p.jpg")
			if r.StatusCode != 200 || r.Header.Get("Content-Type") != "image/jpeg" {
				t.Fatalf("%s: %s", r.Status, b)
			}
			img := decode(t, b)
			if w, hh := img.Rect.Dx(), img.Rect.Dy(); w != 160 || hh != 90 {
				t.Fatalf("picture %dx%d, want 160x90 (640x360 at most 160 wide)", w, hh)
			}
			n, _ := strconv.ParseUint(r.Header.Get("X-Edged-Picture"), 10, 64)
			seq, _ := strconv.ParseUint(r.Header.Get("X-Edged-Frame-Seq"), 10, 64)
			r2, b2 := get(t, fmt.Sprintf("%s/preview/p/cam0.jpg?after=%d", srv.URL, n))
			if r2.StatusCode != 200 {
				t.Fatalf("%s: %s", r2.Status, b2)
			}
			if n2, _ := strconv.ParseUint(r2.Header.Get("X-Edged-Picture"), 10, 64); n2 <= n {
				t.Fatalf("?after=%d gave picture %d", n, n2)
			}
			if bytes.Equal(b, b2) {
				t.Fatal("two pictures of a moving square are the same")
			}
			if r.Header.Get("X-Edged-Engine") != "m 3 abcd1234" {
				t.Errorf("X-Edged-Engine %q", r.Header.Get("X-Edged-Engine"))
			}
			// The box, in picture pixels (1/4 of the camera's).
			box := cam.box(seq)
			x0, y0, x1, y1 := int(box[0]/4), int(box[1]/4), int(box[2]/4), int(box[3]/4)
			// The same frame without results.
			bare := New(Options{Settings: Settings{Enabled: true, Width: 160}})
			defer bare.Close()
			bt := bare.Tap(Key{"p", "cam0"})
			bt.want()
			data, _ := cam.frame(int(seq))
			now := frameNow()
			if !bt.Copy(now, Frame{Seq: seq, TCapture: now, Format: cam.f, Data: data}) {
				t.Fatal("copy refused")
			}
			bt.Finish(seq, nil, "")
			p, err := bt.next(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			undrawn := decode(t, p.JPEG)
			border, inside := 0, 0
			for x := x0 + 4; x < x1-4; x += 2 {
				border += abs(luma(img, x, y1-1) - luma(undrawn, x, y1-1)) // the bottom edge (the label is above the top)
				inside += abs(luma(img, x, (y0+y1)/2) - luma(undrawn, x, (y0+y1)/2))
			}
			for y := y0 + 4; y < y1-4; y += 2 {
				border += abs(luma(img, x0, y)-luma(undrawn, x0, y)) + abs(luma(img, x1-1, y)-luma(undrawn, x1-1, y))
			}
			nb := (x1-x0-8)/2 + 2*((y1-y0-8)/2)
			if border < 30*nb {
				t.Errorf("the box's border differs by %.1f on average from the undrawn frame, want a drawn line", float64(border)/float64(nb))
			}
			if inside > 4*(x1-x0-8)/2 {
				t.Errorf("inside the box the picture differs by %.1f on average from the undrawn frame", float64(inside)/float64((x1-x0-8)/2))
			}
		})
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TestMJPEGStream: a client parsing /preview/p.mjpeg with mime/multipart
// gets JPEG parts, each a newer picture than the last, at most
// preview_fps a second.
func TestMJPEGStream(t *testing.T) {
	h, srv := newHub(t, Settings{Enabled: true, FPS: 10})
	cam := newCamera(t, h.Tap(Key{"p", "cam0"}), sensors.YUYV, 640, 480)
	cam.run()
	r, err := http.Get(srv.URL + "/preview/p.mjpeg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/x-mixed-replace" {
		t.Fatalf("Content-Type %q: %v", r.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	// The rate is judged by the frames the pictures show (their capture
	// times, X-Edged-Capture-Ns), not by when the parts arrive: a first
	// picture encoded or read late on a loaded machine or under qemu
	// shortens the span of the arrivals while the pictures were paced
	// right. The tap copies a frame at most once per 1/preview_fps of
	// capture time, so every two pictures of the stream are at least that
	// far apart.
	interval := time.Second / 10
	var last uint64
	var lastCapture int64
	const parts = 8
	for i := 0; i < parts; i++ {
		part, err := mr.NextPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		capture, err := strconv.ParseInt(part.Header.Get("X-Edged-Capture-Ns"), 10, 64)
		if err != nil {
			t.Fatalf("part %d: X-Edged-Capture-Ns %q: %v", i, part.Header.Get("X-Edged-Capture-Ns"), err)
		}
		if i > 0 && time.Duration(capture-lastCapture) < interval {
			t.Errorf("part %d shows a frame captured %v after the previous picture's: faster than preview_fps = 10", i, time.Duration(capture-lastCapture))
		}
		lastCapture = capture
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		if cl, _ := strconv.Atoi(part.Header.Get("Content-Length")); cl != len(b) || part.Header.Get("Content-Type") != "image/jpeg" {
			t.Fatalf("part %d: Content-Length %q for %d bytes, Content-Type %q", i, part.Header.Get("Content-Length"), len(b), part.Header.Get("Content-Type"))
		}
		if img := decode(t, b); img.Rect.Dx() != 640 {
			t.Fatalf("part %d is %v", i, img.Rect)
		}
		n, _ := strconv.ParseUint(part.Header.Get("X-Edged-Picture"), 10, 64)
		if n <= last {
			t.Fatalf("part %d is picture %d after %d", i, n, last)
		}
		last = n
	}
}

// TestMJPEGPartEndsWithItsPicture: a stream's part is whole as soon as
// its picture is sent (the boundary follows it at once), not when the next
// picture comes: a client parsing the stream gets the only picture of a
// pipeline that processed one frame.
func TestMJPEGPartEndsWithItsPicture(t *testing.T) {
	h, srv := newHub(t, Settings{Enabled: true})
	tap := h.Tap(Key{"p", "cam0"})
	r, err := http.Get(srv.URL + "/preview/p.mjpeg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(r.Body, params["boundary"])
	data, _ := scene(7, 640, 480)
	now := frameNow()
	if !tap.Copy(now, Frame{Seq: 7, TCapture: now, Format: sensors.Format{Width: 640, Height: 480, Pixel: sensors.RGB24}, Data: data}) {
		t.Fatal("copy refused")
	}
	tap.Finish(7, nil, "")
	got := make(chan error, 1)
	go func() {
		part, err := mr.NextPart()
		if err == nil {
			var b []byte
			if b, err = io.ReadAll(part); err == nil {
				_, err = stdjpeg.Decode(bytes.NewReader(b))
			}
			if err == nil && part.Header.Get("X-Edged-Frame-Seq") != "7" {
				err = fmt.Errorf("frame_seq %q", part.Header.Get("X-Edged-Frame-Seq"))
			}
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the part did not end with its picture: a client waits for the next one")
	}
}

// TestViewersBeyondTheLimit: with preview_clients = 2, two streams watch
// and the third viewer (a stream or a picture) gets 503 with Retry-After;
// once one leaves, a viewer is let in again. A second picture has its own
// limit.
func TestViewersBeyondTheLimit(t *testing.T) {
	h, srv := newHub(t, Settings{Enabled: true, Clients: 2})
	cam := newCamera(t, h.Tap(Key{"p", "cam0"}), sensors.YUYV, 640, 480)
	cam.run()
	open := func() *http.Response {
		r, err := http.Get(srv.URL + "/preview/p.mjpeg")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := open(), open()
	defer b.Body.Close()
	for _, url := range []string{"/preview/p.mjpeg", "/preview/p/cam0.jpg"} {
		r, body := get(t, srv.URL+url)
		if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "preview_clients = 2") {
			t.Errorf("%s with 2 viewers of 2: %s %q", url, r.Status, body)
		}
	}
	a.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.Tap(Key{"p", "cam0"}).Viewers() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r, body := get(t, srv.URL+"/preview/p.jpg"); r.StatusCode != 200 {
		t.Errorf("after a viewer left: %s %q", r.Status, body)
	}
}

// TestSlowViewer: a viewer that reads nothing holds up neither the
// pipeline (its Copy and Finish go on at preview_fps) nor the other
// viewer, which gets every picture made meanwhile; it is cut off after
// the write timeout.
func TestSlowViewer(t *testing.T) {
	writeTimeout = 500 * time.Millisecond
	defer func() { writeTimeout = 10 * time.Second }()
	h, srv := newHub(t, Settings{Enabled: true, FPS: 30})
	tap := h.Tap(Key{"p", "cam0"})
	cam := newCamera(t, tap, sensors.RGB24, 640, 360)
	cam.run()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /preview/p.mjpeg HTTP/1.1\r\nHost: x\r\n\r\n")
	for tap.Viewers() == 0 {
		time.Sleep(time.Millisecond)
	}
	r, err := http.Get(srv.URL + "/preview/p.mjpeg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(r.Body, params["boundary"])
	var first, last uint64
	start := time.Now()
	for i := 0; i < 30; i++ {
		p, err := mr.NextPart()
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, p)
		last, _ = strconv.ParseUint(p.Header.Get("X-Edged-Picture"), 10, 64)
		if i == 0 {
			first = last
		}
	}
	t.Logf("the other viewer: pictures %d to %d in %s", first, last, time.Since(start))
	if last-first > 29+3 {
		t.Errorf("the other viewer missed %d of the pictures made", last-first-29)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tap.Viewers() > 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if v := tap.Viewers(); v != 1 {
		t.Errorf("%d viewers: the stalled one was not cut off", v)
	}
}

// TestRoutes: what each address answers, off and on; a pipeline with two
// cameras has a picture each and its bare name lists them; a picture whose
// pipeline left the configuration is gone, and its stream ends; HEAD
// answers without a body; the page and its assets are served with a
// policy that allows this origin only; status.json carries the daemon's
// status with the pictures' addresses.
func TestRoutes(t *testing.T) {
	h, srv := newHub(t, Settings{Enabled: false})
	h.Tap(Key{"p", "cam0"})
	for _, u := range []string{"/", "/status.json", "/preview/p.jpg"} {
		if r, b := get(t, srv.URL+u); r.StatusCode != 404 || !strings.Contains(string(b), "preview = true") {
			t.Errorf("off: %s: %s %q", u, r.Status, b)
		}
	}
	h.Configure(Settings{Enabled: true})
	for u, ct := range map[string]string{"/": "text/html", "/preview.js": "text/javascript", "/preview.css": "text/css", "/status.json": "application/json"} {
		r, b := get(t, srv.URL+u)
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), ct) || len(b) == 0 ||
			!strings.Contains(r.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %s %q %q", u, r.Status, r.Header.Get("Content-Type"), r.Header.Get("Content-Security-Policy"))
		}
	}
	if r, b := get(t, srv.URL+"/favicon.ico"); r.StatusCode != http.StatusNoContent || len(b) != 0 {
		t.Errorf("/favicon.ico: %s %q, want 204: a browser asks for it", r.Status, b)
	}
	_, b := get(t, srv.URL+"/status.json")
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Device != "test" || len(st.Pipelines) != 1 || st.Pipelines[0].Sources[0].Picture != "/preview/p/cam0.jpg" ||
		st.Pipelines[0].Sources[0].Stream != "/preview/p/cam0.mjpeg" || !st.Preview.Enabled || st.Preview.FPS != DefaultFPS {
		t.Errorf("status.json: %s", b)
	}
	h.Tap(Key{"q", "a"})
	h.Tap(Key{"q", "b"})
	for u, want := range map[string]string{
		"/preview/q.jpg":       "/preview/q/a.jpg, /preview/q/b.jpg",
		"/preview/x.jpg":       `no pipeline "x"`,
		"/preview/q/c.jpg":     "no picture q/c",
		"/preview/p.png":       "want /preview/<pipeline>.jpg",
		"/preview/p/cam0.webm": "want",
	} {
		if r, b := get(t, srv.URL+u); r.StatusCode != 404 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %s %q, want 404 with %q", u, r.Status, b, want)
		}
	}
	cam := newCamera(t, h.Tap(Key{"q", "b"}), sensors.GREY, 64, 48)
	cam.run()
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/preview/q/b.mjpeg", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/x-mixed-replace") {
		t.Errorf("HEAD of a stream: %v %v", r, err)
	}
	r, err := http.Get(srv.URL + "/preview/q/b.mjpeg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr := multipart.NewReader(r.Body, params["boundary"])
	if _, err := mr.NextPart(); err != nil {
		t.Fatal(err)
	}
	h.Keep([]Key{{"p", "cam0"}})
	done := make(chan error, 1)
	go func() {
		for {
			p, err := mr.NextPart()
			if err != nil {
				done <- err
				return
			}
			io.Copy(io.Discard, p)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a picture no longer kept did not end")
	}
	if r, b := get(t, srv.URL+"/preview/q/b.jpg"); r.StatusCode != 404 {
		t.Errorf("a picture no longer kept: %s %q", r.Status, b)
	}
}

// TestNoPicture: a pipeline that processes no frame answers 503 after the
// wait, saying so.
func TestNoPicture(t *testing.T) {
	h, srv := newHub(t, Settings{Enabled: true})
	h.Tap(Key{"p", "cam0"})
	start := time.Now()
	r, b := get(t, srv.URL+"/preview/p.jpg")
	if r.StatusCode != 503 || !strings.Contains(string(b), "processed no frame") || time.Since(start) < waitTimeout {
		t.Errorf("%s %q after %s", r.Status, b, time.Since(start))
	}
}
