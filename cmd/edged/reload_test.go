package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/sensorstest"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt/demomodel"
)

// records reads a daemon's socket in the background and keeps every
// record, so a test can wait for what it expects at its own pace.
type records struct {
	mu   sync.Mutex
	recs []stream.Decoded
	err  error
	c    *stream.Client
}

func readRecords(t *testing.T, sock string) *records {
	t.Helper()
	var c *stream.Client
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if c, err = stream.Dial(context.Background(), sock, nil); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := &records{c: c}
	go func() {
		var m stream.Message
		for {
			err := c.Next(&m)
			r.mu.Lock()
			if err != nil {
				r.err = err
				r.mu.Unlock()
				return
			}
			if m.Missed != 0 && r.err == nil {
				r.err = fmt.Errorf("%d records missed before seq %d", m.Missed, m.Rec.Seq)
			}
			r.recs = append(r.recs, m.Rec)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close() })
	return r
}

// len is how many records arrived so far.
func (r *records) len() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.recs) }

// since returns the records from index i on.
func (r *records) since(i int) []stream.Decoded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stream.Decoded(nil), r.recs[i:]...)
}

// wait waits until pred holds for the records from index from on, and
// returns the index of the record that made it hold.
func (r *records) wait(t *testing.T, what string, from int, pred func(stream.Decoded) bool) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		for i := from; i < len(r.recs); i++ {
			if pred(r.recs[i]) {
				r.mu.Unlock()
				return i
			}
		}
		from = len(r.recs)
		err := r.err
		r.mu.Unlock()
		if err != nil {
			fatalf(t, "waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			fatalf(t, "timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// results waits for n results of pipeline from index from on.
func (r *records) results(t *testing.T, pipeline string, from, n int) []stream.Decoded {
	t.Helper()
	var out []stream.Decoded
	r.wait(t, fmt.Sprintf("%d results of %s", n, pipeline), from, func(d stream.Decoded) bool {
		if d.Type == "result" && d.Pipeline == pipeline {
			out = append(out, d)
		}
		return len(out) >= n
	})
	return out
}

func isStatus(event string) func(stream.Decoded) bool {
	return func(d stream.Decoded) bool { return d.Type == "status" && d.Event == event }
}

// httpGet returns the status code of GET path on edged's metrics server
// at a unix: address.
func httpGet(t *testing.T, sock, path string) int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://edged" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// sendLine connects to the socket as a plain peer would and writes one
// request line.
func sendLine(t *testing.T, sock, line string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let it be read before the peer goes
}

// alive fails the test when the daemon has exited.
func (d *daemon) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-d.done:
		d.done <- err
		t.Fatalf("edged exited (%v)", err)
	default:
	}
}

// TestSIGHUPWithTornModelKeepsServing is issue 10's first finding through
// the binary: the model file is torn in place (rejected, the engine in
// memory serves), then SIGHUP brings a changed configuration. The reload
// succeeds without reading the torn file: the engine in memory carries
// over (generation 1, same SHA-256), results keep coming, /readyz says
// ready, the watchdog stays fed, and a peer's {"reload":"engines"} and a
// second SIGHUP are answered (engine_unchanged: the file is unchanged
// since its rejection) instead of crashing the daemon.
func TestSIGHUPWithTornModelKeepsServing(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	model, metrics := filepath.Join(dir, "demo.onnx"), filepath.Join(dir, "metrics.sock")
	v0, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, v0, 0o644); err != nil {
		t.Fatal(err)
	}
	edits := []string{`path = "builtin:demo" `, `path = "` + model + `" `, `metrics_listen = ""`, `metrics_listen = "unix:` + metrics + `"`}
	cfg, sock := testConfig(t, dir, edits...)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=400000")
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	first := r.results(t, "demo", 0, 1)[0]

	// The model file torn in place: rejected, the engine in memory serves.
	if err := os.WriteFile(model, v0[:300], 0o644); err != nil {
		t.Fatal(err)
	}
	rejected := r.wait(t, "engine_rejected", 0, isStatus("engine_rejected"))

	// A changed configuration: only the camera's rate.
	testConfig(t, dir, append(edits, "fps = 30.0", "fps = 20.0")...)
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, d, "configuration reloaded")
	if strings.Contains(d.stderr.String(), "restoring the previous one") {
		t.Fatal("the new configuration failed to start")
	}
	reloaded := r.wait(t, "config_reloaded", rejected, isStatus("config_reloaded"))
	for _, res := range r.results(t, "demo", reloaded, 20) {
		if res.Engine == nil || *res.Engine != *first.Engine {
			t.Fatalf("frame %d on engine %+v after the reload, want the one in memory, %+v", res.FrameSeq, res.Engine, first.Engine)
		}
	}
	if code := httpGet(t, metrics, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d after the reload", code)
	}
	pings := count(n.all(), "WATCHDOG=1")
	time.Sleep(time.Second)
	if count(n.all(), "WATCHDOG=1") <= pings {
		t.Error("no WATCHDOG=1 after the reload")
	}

	// A peer asks for an engine re-check: the torn file, unchanged since
	// its rejection, is said to be so (issue 19: it was judged again and
	// rejected a second time, after the same wait).
	stillRejected := func(d stream.Decoded) bool {
		return isStatus("engine_unchanged")(d) && strings.Contains(d.Reason, "unchanged since it was rejected") && strings.Contains(d.Reason, "generation 1 (")
	}
	from := r.len()
	sendLine(t, sock, `{"reload":"engines"}`)
	r.wait(t, "engine_unchanged after the peer's request", from, stillRejected)
	d.alive(t)
	// And SIGHUP once more (unchanged: engines re-checked).
	from = r.len()
	d.cmd.Process.Signal(syscall.SIGHUP)
	r.wait(t, "engine_unchanged after the second SIGHUP", from, stillRejected)
	r.results(t, "demo", from, 10)
	d.alive(t)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestSIGHUPKeepsUnchangedPipelines is issue 10's second finding through
// the binary: with two pipelines on two cameras, a SIGHUP that changes
// only one camera's rate restarts that camera alone. The other pipeline
// runs on untouched: every frame, in order, across the reload (frame_seq
// goes on), on its first engine; the changed one keeps its engine too
// (generation 1, same SHA-256).
func TestSIGHUPKeepsUnchangedPipelines(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	second := []string{
		"[[model]]", "[[source]]\nname = \"cam1\"\nkind = \"synthetic\"\nwidth = 160\nheight = 120\nfps = 60.0\nseed = 5\n\n[[model]]",
		"[[sink]]", "[[pipeline]]\nname = \"side\"\nsource = \"cam1\"\nmodel = \"demo\"\nsinks = [\"local\"]\nschedule = \"queue\"\n\n[[sink]]",
	}
	cfg, sock := testConfig(t, dir, second...)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	demo := r.results(t, "demo", 0, 10)
	side := r.results(t, "side", 0, 10)

	testConfig(t, dir, append(second, "fps = 30.0", "fps = 25.0")...)
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, d, "configuration reloaded")
	reloaded := r.wait(t, "config_reloaded", 0, isStatus("config_reloaded"))
	after := r.results(t, "demo", reloaded, 10)
	if after[0].FrameSeq >= demo[len(demo)-1].FrameSeq {
		t.Errorf("demo's frame_seq went on (%d after %d): its camera was not restarted with the new rate", after[0].FrameSeq, demo[len(demo)-1].FrameSeq)
	}
	for _, res := range after {
		if *res.Engine != *demo[0].Engine {
			t.Fatalf("demo after the reload: engine %+v, want %+v carried over", res.Engine, demo[0].Engine)
		}
	}
	r.results(t, "side", reloaded, 30)
	var all []stream.Decoded
	for _, res := range r.since(0) {
		if res.Type == "result" && res.Pipeline == "side" {
			all = append(all, res)
		}
	}
	for i, res := range all {
		if i > 0 && res.FrameSeq != all[i-1].FrameSeq+1 {
			t.Fatalf("side: frame %d followed by %d: the unchanged pipeline was restarted or lost frames", all[i-1].FrameSeq, res.FrameSeq)
		}
		if *res.Engine != *side[0].Engine {
			t.Fatalf("side: frame %d on engine %+v, want %+v", res.FrameSeq, res.Engine, side[0].Engine)
		}
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestFailedRestoreWithholdsWatchdog: a reload whose new configuration
// cannot start (the camera it names is not there) and whose previous one
// cannot be restored either (the recording it replayed was deleted). The
// daemon stays up for its sinks but says it cannot serve: STATUS=FAILED
// with the reasons, no more WATCHDOG=1 (systemd restarts it), /readyz and
// /livez fail, and a peer's {"reload":"engines"} or another SIGHUP cannot
// crash it. SIGTERM still stops it cleanly.
func TestFailedRestoreWithholdsWatchdog(t *testing.T) {
	lib := needORT(t)
	n := newNotifySocket(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "cam.edgedraw")
	{
		src, err := synthetic.New(synthetic.Options{Width: 160, Height: 120, Pixel: sensors.YUYV, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		pool := sensorstest.NewHeapPool(4, src.Format().FrameSize())
		if err := src.Start(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(rec)
		if err != nil {
			t.Fatal(err)
		}
		w, err := replay.NewRecorder(f, src.Format())
		if err != nil {
			t.Fatal(err)
		}
		for range 30 {
			fr, err := src.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(fr); err != nil {
				t.Fatal(err)
			}
			fr.Slot.Release()
		}
		w.Flush()
		f.Close()
		src.Close()
	}
	sock, metrics := filepath.Join(dir, "edged.sock"), filepath.Join(dir, "metrics.sock")
	text := func(source string) string {
		return fmt.Sprintf(`[daemon]
metrics_listen = "unix:%s"
%s
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "demo"
source = "cam"
model = "demo"
sinks = ["local"]
[[sink]]
name = "local"
kind = "socket"
path = %q
`, metrics, source, sock)
	}
	cfg := filepath.Join(dir, "edged.toml")
	if err := os.WriteFile(cfg, []byte(text(fmt.Sprintf("[[source]]\nname = \"cam\"\nkind = \"replay\"\npath = %q\nloop = true\nfps = 30.0\n", rec))), 0o644); err != nil {
		t.Fatal(err)
	}
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=200000")
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	r.results(t, "demo", 0, 5)

	// The camera moves to a V4L2 device that is not there, and the
	// recording goes away.
	missing := filepath.Join(dir, "no-such-camera")
	if err := os.WriteFile(cfg, []byte(text(fmt.Sprintf("[[source]]\nname = \"cam\"\nkind = \"v4l2\"\ndevice = %q\nwidth = 160\nheight = 120\n", missing))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(rec); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	n.waitFor(t, "STATUS=FAILED", 30*time.Second, func(m []string) bool {
		for _, s := range m {
			if strings.HasPrefix(s, "STATUS=FAILED: pipeline demo cannot run") {
				return true
			}
		}
		return false
	})
	waitLog(t, d, "reload failed")
	if n := strings.Count(d.stderr.String(), "pipeline stopped for the new configuration"); n != 1 {
		t.Errorf("the pipeline was stopped %d times, want once (the restore found it stopped)", n)
	}
	time.Sleep(300 * time.Millisecond) // a ping already under way
	pings := count(n.all(), "WATCHDOG=1")
	time.Sleep(time.Second) // 10 watchdog periods
	if after := count(n.all(), "WATCHDOG=1"); after != pings {
		t.Errorf("WATCHDOG=1 still sent while no pipeline serves (%d -> %d)", pings, after)
	}
	for _, path := range []string{"/readyz", "/livez"} {
		if code := httpGet(t, metrics, path); code != http.StatusServiceUnavailable {
			t.Errorf("%s: %d, want 503 while no pipeline serves", path, code)
		}
	}
	sendLine(t, sock, `{"reload":"engines"}`)
	d.alive(t)
	d.cmd.Process.Signal(syscall.SIGHUP) // retries, fails again
	time.Sleep(time.Second)
	d.alive(t)
	if count(n.all(), "WATCHDOG=1") != pings {
		t.Error("WATCHDOG=1 sent again after the second SIGHUP")
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
}

// TestJunkModelSaysWhatHappens is issue 19's third finding through the
// binary, the README's demo: `echo junk > demo.onnx` looked dead for 10 s,
// then gave a 400-character reason starting with protobuf field numbers,
// in a record whose engine (the serving generation beside the junk's
// hash) read as if generation 2 had arrived; `edged reload` then judged
// the unchanged file again and sent a second engine_rejected 8 s later.
// Now engine_pending comes at once (the reason, and when the file will be
// judged), the rejection's reason starts with what to do and that
// generation 1 keeps serving (the backend's words last), both records
// name the serving engine (serving_sha256) apart from the file's hash and
// the model in "model", and `edged reload` answers at once that the file
// is unchanged since its rejection.
func TestJunkModelSaysWhatHappens(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "demo.onnx")
	v0, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, v0, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, sock := testConfig(t, dir, `path = "builtin:demo" `, `path = "`+model+`" `)
	d := start(t, lib, cfg, sock)
	r := readRecords(t, sock)
	serving := r.results(t, "demo", 0, 1)[0].Engine.SHA256

	// echo junk > demo.onnx: written in place.
	f, err := os.OpenFile(model, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("junk\n")
	f.Close()
	written := time.Now()
	i := r.wait(t, "engine_pending", 0, isStatus("engine_pending"))
	pending := r.since(i)[0]
	if waited := time.Since(written); waited > 3*time.Second {
		t.Errorf("engine_pending came %v after the write", waited)
	}
	if !strings.HasPrefix(pending.Reason, "invalid: demo.onnx was written in place just now and is not a usable model yet; it is judged at ") ||
		!strings.Contains(pending.Reason, "; generation 1 ("+serving+") keeps serving. Details: onnx: not a complete .onnx model") {
		t.Errorf("engine_pending reason: %q", pending.Reason)
	}
	waitLog(t, d, `msg="model file refused for now: it was just written in place; judged when it has been left alone" model=demo`)

	i = r.wait(t, "engine_rejected", i, isStatus("engine_rejected"))
	rejected := r.since(i)[0]
	if waited := time.Since(written); waited < 8*time.Second {
		t.Errorf("engine_rejected came %v after an in-place write, before the grace ran out", waited)
	}
	head := "invalid: demo.onnx is not a usable model file: copy or export it again; generation 1 (" + serving + ") keeps serving. Details: "
	if !strings.HasPrefix(rejected.Reason, head) || strings.Index(rejected.Reason, "protobuf field") < len(head) {
		t.Errorf("engine_rejected reason does not start with what to do and what serves, details after:\n%q", rejected.Reason)
	}
	for _, rec := range []stream.Decoded{pending, rejected} {
		e := rec.Engine
		if rec.Model != "demo" || rec.Source != "demo" || e == nil || e.Generation != 1 || e.Serving != serving || e.SHA256 == serving {
			t.Errorf("%s: model %q, source %q, engine %+v: want model and source demo, generation 1 serving %s, the file's hash apart", rec.Event, rec.Model, rec.Source, e, serving)
		}
	}

	// edged reload: answered at once, not judged again.
	from := r.len()
	asked := time.Now()
	if out, errOut, code := runCmd(t, 30*time.Second, "reload", "-socket", sock); code != 0 {
		t.Fatalf("edged reload: exit %d: %s%s", code, out, errOut)
	}
	i = r.wait(t, "engine_unchanged after edged reload", from, isStatus("engine_unchanged"))
	if took := time.Since(asked); took > scaled(3*time.Second) {
		t.Errorf("engine_unchanged came %v after edged reload", took)
	}
	if u := r.since(i)[0]; !strings.HasPrefix(u.Reason, "invalid: demo.onnx is unchanged since it was rejected") || !strings.Contains(u.Reason, "It was rejected because: onnx: not a complete .onnx model") {
		t.Errorf("engine_unchanged reason: %q", u.Reason)
	}
	time.Sleep(time.Second)
	for _, rec := range r.since(from) {
		if rec.Event == "engine_rejected" || rec.Event == "engine_pending" {
			t.Errorf("edged reload judged the unchanged file again: %s %q", rec.Event, rec.Reason)
		}
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
