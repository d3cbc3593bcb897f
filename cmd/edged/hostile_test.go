package main

import (
	"context"
	binenc "encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/internal/procfs"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/sensorstest"
	"github.com/edged-dev/edged/umem"
)

// Hostile inputs through the real binary, under systemd's conditions (a
// fake NOTIFY_SOCKET with WATCHDOG_USEC of 15 s, as the unit sets): sizes
// an input declares, waits a recording asks for, sources that fail as
// soon as they start.

// replayConfig writes a configuration replaying path (a recording or an
// image folder) through the built-in model to a socket, with /metrics on
// a Unix socket; source adds keys to the source, daemon to [daemon].
func replayConfig(t *testing.T, dir, path, source, daemon string) (cfg, sock, metrics string) {
	t.Helper()
	sock, metrics = filepath.Join(dir, "edged.sock"), filepath.Join(dir, "metrics.sock")
	text := fmt.Sprintf(`[daemon]
metrics_listen = "unix:%s"
%s
[[source]]
name = "cam"
kind = "replay"
path = %q
%s
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam"
model = "demo"
sinks = ["local"]
[[sink]]
name = "local"
kind = "socket"
path = %q
`, metrics, daemon, path, source, sock)
	cfg = filepath.Join(dir, "edged.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, sock, metrics
}

const watchdog15s = "WATCHDOG_USEC=15000000"

// TestHostileImagesInAReplayedFolder: PNGs of a few hundred bytes that
// declare 65535x65535, 30000x30000 and 16000x16000 16-bit RGBA, and junk,
// among the images of a looping 64x48 folder. Before, only the first
// image's size was checked: image/png allocated what the header declared
// ("fatal error: runtime: out of memory" within a second, exit 2, a crash
// loop under Restart=always; 7 GB and 2 GB peaks for the smaller ones).
// Now every image's header is compared with the folder's size before it is
// decoded: the bad ones are skipped and counted
// (edged_frames_dropped_total{reason="corrupt"}), the log names one of
// them, the good ones keep producing results pass after pass, the
// watchdog keeps being fed and edged's peak RSS stays far below one
// declared image.
func TestHostileImagesInAReplayedFolder(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	imgs := filepath.Join(dir, "frames")
	os.Mkdir(imgs, 0o755)
	for i, c := range []color.RGBA{{200, 30, 30, 255}, {30, 170, 40, 255}, {30, 60, 200, 255}} {
		img := image.NewRGBA(image.Rect(0, 0, 64, 48))
		for p := 0; p < len(img.Pix); p += 4 {
			img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = c.R, c.G, c.B, 255
		}
		f, err := os.Create(filepath.Join(imgs, fmt.Sprintf("%02d.png", 2*i)))
		if err != nil {
			t.Fatal(err)
		}
		png.Encode(f, img)
		f.Close()
	}
	for name, b := range map[string][]byte{
		"01-65535.png": sensorstest.PNGClaiming(65535, 65535),
		"03-30000.png": sensorstest.PNGClaiming(30000, 30000),
		"05-16000.png": sensorstest.PNGClaiming(16000, 16000),
		"06-junk.jpg":  []byte("\xff\xd8 not really"),
	} {
		if err := os.WriteFile(filepath.Join(imgs, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, sock, metrics := replayConfig(t, dir, imgs, "loop = true\nfps = 100.0", "")
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, watchdog15s)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	// 7 files a pass: 60 results are 20 passes over the bad images.
	res := r.results(t, "p", 0, 60)
	if last := res[len(res)-1].FrameSeq; last < 59 {
		t.Errorf("last frame_seq %d", last)
	}
	waitLog(t, d, "frame skipped")
	log := d.stderr.String()
	if !strings.Contains(log, "is a 65535x65535 PNG; the folder's images are 64x48") && !strings.Contains(log, "is a 30000x30000 PNG") &&
		!strings.Contains(log, "is a 16000x16000 PNG") && !strings.Contains(log, "06-junk.jpg") {
		t.Errorf("the log does not name a skipped image:\n%s", log)
	}
	if got := scrape(t, metrics, `edged_frames_dropped_total{pipeline="p",reason="corrupt"}`); got < 20*4-4 {
		t.Errorf("edged_frames_dropped_total{reason=\"corrupt\"} = %v after 20 passes of 4 bad images", got)
	}
	if strings.Count(log, "frame skipped") > 2 {
		t.Errorf("skips are logged more than once per 10 s:\n%s", log)
	}
	m, err := procfs.ReadMem(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if peak := int64(m.HWM) << 10; peak > 512<<20 {
		t.Errorf("edged's peak RSS is %d MiB", peak>>20)
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// recordWithGap writes a recording of frames 64x48 YUYV frames 10 ms apart
// followed by one frame gap ns after the last (raw: the Recorder only
// writes gaps it measured).
func recordWithGap(t *testing.T, path string, frames int, gap int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	format := sensors.Format{Width: 64, Height: 48, Pixel: sensors.YUYV}
	w, err := replay.NewRecorder(f, format)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, format.FrameSize())
	for i := range frames {
		if err := w.WriteFrame(frame, int64(i)*int64(10*time.Millisecond), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var rec [16]byte
	binenc.LittleEndian.PutUint32(rec[0:], uint32(len(frame)))
	binenc.LittleEndian.PutUint64(rec[8:], uint64(gap))
	f.Write(rec[:])
	f.Write(frame)
}

// TestRecordedPauseIsNotAStall: a recording whose next frame comes an hour
// later (or INT64_MAX ns later: a damaged delta). Before, after the frames
// before it the capture loop, waiting inside Next for the recorded time,
// was judged stalled: STATUS=STALLED, no more WATCHDOG=1, /livez 503, and
// under systemd a restart, the same stall, again. A source that waits by
// design (sensors.Pacer) is progress: the pings go on, /livez stays 200,
// the capture loop's progress age stays small, and SIGTERM ends the wait.
func TestRecordedPauseIsNotAStall(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	hour, forever := filepath.Join(dir, "hour.edgedraw"), filepath.Join(dir, "max.edgedraw")
	recordWithGap(t, hour, 3, int64(time.Hour))
	recordWithGap(t, forever, 3, math.MaxInt64)
	sock, metrics := filepath.Join(dir, "edged.sock"), filepath.Join(dir, "metrics.sock")
	var b strings.Builder
	fmt.Fprintf(&b, "[daemon]\nmetrics_listen = \"unix:%s\"\nstall_timeout = \"1s\"\n", metrics)
	for i, path := range []string{hour, forever} {
		fmt.Fprintf(&b, "[[source]]\nname = \"cam%d\"\nkind = \"replay\"\npath = %q\nloop = true\n", i, path)
		fmt.Fprintf(&b, "[[pipeline]]\nname = \"p%d\"\nsource = \"cam%d\"\nmodel = \"demo\"\nsinks = [\"local\"]\n", i, i)
	}
	fmt.Fprintf(&b, "[[model]]\nname = \"demo\"\npath = \"builtin:demo\"\n[[sink]]\nname = \"local\"\nkind = \"socket\"\npath = %q\n", sock)
	cfg := filepath.Join(dir, "edged.toml")
	os.WriteFile(cfg, []byte(b.String()), 0o644)
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=400000")
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	// The three frames before the gap may have gone before a client could
	// come: wait for the capture loops to be inside the gap instead.
	deadline := time.Now().Add(30 * time.Second)
	for scrape(t, metrics, `edged_frames_captured_total{pipeline="p0",source="cam0"}`) < 3 || scrape(t, metrics, `edged_frames_captured_total{pipeline="p1",source="cam1"}`) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the three frames before the gap were not captured")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // past one stall timeout inside the gap
	pings := count(n.all(), "WATCHDOG=1")
	time.Sleep(1500 * time.Millisecond) // pings every 200 ms
	msgs := n.all()
	if after := count(msgs, "WATCHDOG=1"); after < pings+4 {
		t.Errorf("watchdog pings stopped in a recorded pause: %d, then %d 1.5 s later", pings, after)
	}
	for _, m := range msgs {
		if strings.HasPrefix(m, "STATUS=STALLED") {
			t.Errorf("judged stalled: %q", m)
		}
	}
	if code := httpGet(t, metrics, "/livez"); code != 200 {
		t.Errorf("/livez %d during a recorded pause", code)
	}
	for _, p := range []string{"p0", "p1"} {
		if age := scrape(t, metrics, `edged_pipeline_progress_age_seconds{pipeline="`+p+`",loop="capture"}`); age < 0 || age > 0.5 {
			t.Errorf("%s: capture progress age %v s in a recorded pause", p, age)
		}
	}
	if strings.Contains(d.stderr.String(), "pipeline stalled") {
		t.Errorf("log says stalled:\n%s", d.stderr.String())
	}
	if code, took := d.stop(t); code != 0 || took > scaled(3*time.Second) {
		t.Errorf("exit %d after %v", code, took)
	}
}

// recordFrames writes a recording of n w×h YUYV frames 10 ms apart to
// path, in place (the same inode when it exists, as an editor or cp does).
func recordFrames(t *testing.T, path string, w, h, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	format := sensors.Format{Width: w, Height: h, Pixel: sensors.YUYV}
	rec, err := replay.NewRecorder(f, format)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, format.FrameSize())
	for i := range n {
		if err := rec.WriteFrame(frame, int64(i)*int64(10*time.Millisecond), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
}

// cpuTime is the CPU time process pid has used (user + system).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): state is
	// field 3, utime 14 and stime 15, in clock ticks (USER_HZ, 100).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// TestReplacedRecordingBacksOff: a looping recording overwritten in place
// by one of larger frames than its slots hold. Before, the source started,
// failed on its first frame and was started again at once: 384,721
// restarts in 10 s, 10 CPU-seconds, 150 MB of log, 835,000 status records
// to one client. Every restart path backs off now: a start that fails and
// a run that ends soon after its start both grow the delay (100 ms doubling
// to 2 s), the client gets a handful of status records for the whole
// episode (source_down, and no source_up until the source runs again),
// the log says it at most once per 10 s, and when the recording is put
// back results flow again.
func TestReplacedRecordingBacksOff(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "cam.edgedraw")
	recordFrames(t, rec, 64, 48, 10)
	cfg, sock, metrics := replayConfig(t, dir, rec, "loop = true", "")
	n := newNotifySocket(t)
	d := start(t, lib, cfg, sock, "NOTIFY_SOCKET="+n.path, watchdog15s)
	n.waitFor(t, "READY=1", 30*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	r := readRecords(t, sock)
	r.results(t, "p", 0, 5)
	starts0 := scrape(t, metrics, `edged_source_starts_total{source="cam"}`)
	logged := len(d.stderr.String())
	cpu0 := cpuTime(t, d.cmd.Process.Pid)
	from := r.len()

	recordFrames(t, rec, 128, 96, 10) // four times the slot
	// Past one 10 s log window and one 2 s delay: the second "start
	// failed" line, which says how many attempts were not logged, is out.
	const watch = 13 * time.Second
	time.Sleep(watch)

	starts := scrape(t, metrics, `edged_source_starts_total{source="cam"}`) - starts0
	cpu := cpuTime(t, d.cmd.Process.Pid) - cpu0
	status, downs := 0, 0
	for _, rec := range r.since(from) {
		if rec.Type == "status" {
			status++
			if rec.Event == "source_down" {
				downs++
			}
		}
	}
	log := d.stderr.String()[logged:]
	t.Logf("in %v: %v source starts, %d status records (%d source_down), %d bytes of log, %v of CPU\n%s", watch, starts, status, downs, len(log), cpu, log)
	// Start refuses frames the slots cannot hold; were it to start, the
	// first frame would fail: either way at most about 12 attempts in 13 s
	// (100 ms doubling to 2 s, each from its upper half).
	if starts > 12 {
		t.Errorf("%v source starts in %v", starts, watch)
	}
	attempts := 1
	if m := regexp.MustCompile(`source start failed; retrying.* suppressed=(\d+)`).FindStringSubmatch(log); m != nil {
		n, _ := strconv.Atoi(m[1])
		attempts += n + 1
	} else {
		t.Errorf("no second \"source start failed\" line with a suppressed count after 10 s:\n%s", log)
	}
	if attempts < 4 || attempts > 14 {
		t.Errorf("%d start attempts in %v", attempts, watch)
	}
	if downs != 1 || status > 2 {
		t.Errorf("%d status records (%d source_down) for one episode:\n%v", status, downs, r.since(from))
	}
	if lines := strings.Count(log, "\n"); lines > 4 {
		t.Errorf("%d log lines in %v:\n%s", lines, watch, log)
	}
	if !strings.Contains(log, "do not fit the slots of 6144 bytes") {
		t.Errorf("the log does not say why:\n%s", log)
	}
	if cpu > 2*time.Second {
		t.Errorf("%v of CPU in %v", cpu, watch)
	}

	// The recording put back (same frame size as the slots): results again.
	at := r.len()
	recordFrames(t, rec, 64, 48, 10)
	r.results(t, "p", at, 5)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// runAndCheck runs `edged run` and `edged check` on cfg (each must exit by
// itself within 60 s) and returns their exit codes and output.
func runAndCheck(t *testing.T, lib, cfg string) (run int, runOut string, check int, checkOut string) {
	t.Helper()
	out := func(sub string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := edged(sub, "-config", cfg)
		cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
		cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
		b, _ := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("edged %s kept running:\n%s", sub, b)
		}
		return cmd.ProcessState.ExitCode(), string(b)
	}
	// check first: were it to pass a configuration run cannot hold, run
	// would try to allocate it.
	check, checkOut = out("check")
	run, runOut = out("run")
	return run, runOut, check, checkOut
}

// TestTensorMemoryIsCounted: four (or, on a larger machine, as many as it
// takes) pipelines on a model with a dynamic input, preprocess.width and
// height 16384: each engine binds a 3 GiB input and, its output named like
// the input's dimensions, a 3 GiB output. Before, the memory check counted
// the 200-byte model file twice ("16.4 MiB needed"), check said runnable
// and the daemon went to 12.1 GiB of RSS. Now check and run refuse it
// before anything is allocated, exit 78 (this machine can never hold it),
// naming pipeline[i].preprocess.width and the tensors' sizes.
func TestTensorMemoryIsCounted(t *testing.T) {
	lib := needORT(t)
	mi, err := umem.ReadMeminfo("")
	if err != nil || mi.MemAvailable == 0 {
		t.Skipf("no MemAvailable: %v", err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "dynamic.onnx")
	os.WriteFile(model, onnxproto.IdentityModel(onnxproto.DTFloat, []int64{1, 3, -1, -1}, []string{"", "", "height", "width"}), 0o644)
	k := max(4, int(mi.MemTotal/(6<<30))+1)
	var b strings.Builder
	fmt.Fprintf(&b, "[[source]]\nname = \"cam\"\nkind = \"synthetic\"\nwidth = 64\nheight = 48\n\n[[model]]\nname = \"big\"\npath = %q\n\n", model)
	for i := range k {
		fmt.Fprintf(&b, "[[pipeline]]\nname = \"p%d\"\nsource = \"cam\"\nmodel = \"big\"\nsinks = [\"local\"]\n[pipeline.preprocess]\nwidth = 16384\nheight = 16384\n\n", i)
	}
	fmt.Fprintf(&b, "[[sink]]\nname = \"local\"\nkind = \"socket\"\npath = %q\n", filepath.Join(dir, "s.sock"))
	cfg := filepath.Join(dir, "big.toml")
	os.WriteFile(cfg, []byte(b.String()), 0o644)
	want := `pipeline[0].preprocess.width: pipeline "p0": the engine binds tensors of 6.00 GiB (model "big": input input[1 3 16384 16384] 3.00 GiB, output output[1 3 16384 16384] 3.00 GiB)`
	run, runOut, check, checkOut := runAndCheck(t, lib, cfg)
	if check != 78 || !strings.Contains(checkOut, want) || !strings.Contains(checkOut, "this machine can never hold it") {
		t.Fatalf("check: exit %d, want 78 and %q:\n%s", check, want, checkOut)
	}
	if run != 78 || !strings.Contains(runOut, want) {
		t.Fatalf("run: exit %d, want 78 and %q:\n%s", run, want, runOut)
	}
}

// TestStartFailuresAreClassified: the exit status of a start that fails
// says who must act — 78 when a person must change something, 1 when the
// machine may get there by itself — and check says the same as run.
// Before: a model declaring a dimension of 2^31 (3 TiB of tensors) with no
// last-good copy exited 1 (a restart every 2 s forever), a socket path
// taken by a regular file exited 1 and check called it ok, and check
// called a missing recording ok while run exited 78.
func TestStartFailuresAreClassified(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.onnx")
	os.WriteFile(huge, onnxproto.IdentityModel(onnxproto.DTFloat, []int64{1, 3, 1 << 31, 64}, nil), 0o644)
	taken := filepath.Join(dir, "taken.sock")
	os.WriteFile(taken, []byte("not a socket"), 0o644)
	live := filepath.Join(dir, "live.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, c := range []struct {
		name       string
		edits      []string
		run, check int
		say        string
	}{
		{"a model needing 3 TiB", []string{`path = "builtin:demo" `, fmt.Sprintf("path = %q ", huge)}, 78, 78, "model[0].path: pipeline \"demo\": the engine binds tensors of 3.00 TiB"},
		{"a socket path taken by a file", []string{`path = "` + filepath.Join(dir, "edged.sock") + `" # `, `path = "` + taken + `" # `}, 78, 78, "is a regular file"},
		{"a missing recording", []string{`kind = "synthetic" `, `kind = "replay"` + "\npath = \"" + filepath.Join(dir, "gone.edgedraw") + "\"\n#"}, 78, 78, "gone.edgedraw"},
		{"another process on the socket", []string{`path = "` + filepath.Join(dir, "edged.sock") + `" # `, `path = "` + live + `" # `}, 1, 0, "another process is listening"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := testConfig(t, dir, c.edits...)
			run, runOut, check, checkOut := runAndCheck(t, lib, cfg)
			if check != c.check || !strings.Contains(checkOut, c.say) {
				t.Errorf("check: exit %d, want %d and %q:\n%s", check, c.check, c.say, checkOut)
			}
			if run != c.run || !strings.Contains(runOut, c.say) {
				t.Errorf("run: exit %d, want %d and %q:\n%s", run, c.run, c.say, runOut)
			}
		})
	}
}
