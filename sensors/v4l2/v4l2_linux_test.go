//go:build amd64 || arm64

package v4l2

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	sjpeg "github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

const waitLimit = 20 * time.Second

const byID = "usb-Fake_Camera_0001-video-index0"

// devTree builds a /dev fixture: video0 and a by-id symlink to it.
func devTree(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "video0"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "v4l", "by-id"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../video0", filepath.Join(root, "v4l", "by-id", byID)); err != nil {
		t.Fatal(err)
	}
	return root
}

type rig struct {
	t      testing.TB
	src    *Source
	pool   *sensorstest.Pool
	devs   []*fakeDev
	opened []string
	mu     sync.Mutex
}

// newRig makes a source on a fake device; every Start opens the next fake
// made by mk.
func newRig(t testing.TB, o Options, slots int, mk func() *fakeDev) *rig {
	t.Helper()
	if o.Width == 0 {
		o.Width, o.Height = 64, 48
	}
	if o.Device == "" {
		o.Device = byID
	}
	o.DevRoot = devTree(t)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	size := sensors.Format{Width: o.Width, Height: o.Height, Pixel: o.withDefaults().Pixel, Stride: 0}.FrameSize() + 4096
	pool, err := sensorstest.NewMmapPool(slots, size)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, src: s, pool: pool}
	s.open = func(path string) (device, error) {
		d := mk()
		if d.mem == nil {
			d.mem = poolMem(pool)
		}
		r.mu.Lock()
		r.devs = append(r.devs, d)
		r.opened = append(r.opened, path)
		r.mu.Unlock()
		return d, nil
	}
	t.Cleanup(func() {
		s.Close()
		if n := pool.Leased(); n != 0 {
			t.Errorf("%d slots still leased after Close", n)
		}
		if m := pool.Misuses(); len(m) > 0 {
			t.Errorf("slot misuse: %v", m)
		}
		pool.Close()
	})
	return r
}

func (r *rig) dev() *fakeDev {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.devs[len(r.devs)-1]
}

func (r *rig) start() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.src.Start(ctx, r.pool); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) next() sensors.Frame {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	f, err := r.src.Next(ctx)
	if err != nil {
		r.t.Fatalf("Next: %v (stats %+v)", err, r.src.Stats())
	}
	return f
}

func poolMem(p *sensorstest.Pool) func(uintptr, int) []byte {
	return func(addr uintptr, n int) []byte {
		for i := 0; i < p.Len(); i++ {
			if s := p.Slot(i); s.Addr() == addr {
				return s.Bytes()[:n]
			}
		}
		panic("fake camera: USERPTR address is not a pool slot")
	}
}

func yuyvCam() *fakeDev {
	return newFakeDev(fakeFmt{pix: sensors.YUYV, w: 64, h: 48, fps: []uint32{30, 15}}, fakeFmt{pix: sensors.MJPEG, w: 64, h: 48, fps: []uint32{30}})
}

func TestUserptrCaptureNoCopy(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 6, yuyvCam)
	r.start()
	if st := r.src.Stats(); st.Mode != MemoryUserptr || st.ModeReason != "" || st.Device != filepath.Join(r.src.opts.DevRoot, "video0") {
		t.Fatalf("stats %+v: want userptr on the resolved node", st)
	}
	f0 := r.src.Format()
	if f0.Width != 64 || f0.Height != 48 || f0.Pixel != sensors.YUYV || f0.Stride != 0 || f0.FPS != 30 {
		t.Fatalf("format %v", f0)
	}
	base := sensors.Now() / 1000 * 1000 // V4L2 timestamps have µs resolution
	for i := 0; i < 5; i++ {
		r.dev().push(event{tsNs: base + int64(i)*33_000_000})
	}
	for i := 0; i < 5; i++ {
		f := r.next()
		if f.Seq != uint64(i) || f.TCapture != base+int64(i)*33_000_000 || f.BytesUsed != 64*48*2 || f.Flags != 0 {
			t.Fatalf("frame %d: seq %d t %d (want %d) bytes %d flags %#x", i, f.Seq, f.TCapture, base+int64(i)*33_000_000, f.BytesUsed, f.Flags)
		}
		if d := f.Data(); d[0] != byte(i) || d[len(d)-1] != byte(i) {
			t.Fatalf("frame %d: data starts %d", i, d[0])
		}
		// The camera wrote the pool slot itself.
		if _, ok := f.Slot.(*sensorstest.PoolSlot); !ok {
			t.Fatalf("frame slot is %T, not the pool's", f.Slot)
		}
		f.Slot.Release()
	}
	if st := r.src.Stats(); st.Frames != 5 || st.Starts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMmapFallbackWhenUserptrRefused(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, func() *fakeDev {
		d := yuyvCam()
		d.refuseUserptr = true
		return d
	})
	r.start()
	st := r.src.Stats()
	if st.Mode != MemoryMmap || !strings.Contains(st.ModeReason, "REQBUFS") {
		t.Fatalf("stats %+v: want mmap because REQBUFS refused USERPTR", st)
	}
	r.dev().push(event{}, event{})
	for i := 0; i < 2; i++ {
		f := r.next()
		if f.Flags&sensors.FlagCopied == 0 || f.Data()[0] != byte(i) || f.BytesUsed != 64*48*2 {
			t.Fatalf("frame %d: flags %#x data %d", i, f.Flags, f.Data()[0])
		}
		f.Slot.Release()
	}
}

func TestMmapFallbackWhenQbufRejected(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, func() *fakeDev {
		d := yuyvCam()
		d.rejectQbuf = true
		return d
	})
	r.start()
	if st := r.src.Stats(); st.Mode != MemoryMmap || !strings.Contains(st.ModeReason, "QBUF") {
		t.Fatalf("stats %+v", st)
	}
	if r.pool.Leased() != 0 {
		t.Fatalf("%d slots kept after the failed USERPTR attempt", r.pool.Leased())
	}
	r.dev().push(event{})
	r.next().Slot.Release()
}

// offsetPool hands out slots that start 16 bytes into page-aligned memory.
type offsetPool struct{ *sensorstest.Pool }
type offsetSlot struct{ sensors.Slot }

func (s offsetSlot) Bytes() []byte { return s.Slot.Bytes()[16:] }
func (p offsetPool) Get(ctx context.Context) (sensors.Slot, error) {
	s, err := p.Pool.Get(ctx)
	if err != nil {
		return nil, err
	}
	return offsetSlot{s}, nil
}

func TestUnalignedSlotsUseMmap(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, yuyvCam)
	if err := r.src.Start(context.Background(), offsetPool{r.pool}); err != nil {
		t.Fatal(err)
	}
	if st := r.src.Stats(); st.Mode != MemoryMmap || !strings.Contains(st.ModeReason, "page-aligned") {
		t.Fatalf("stats %+v", st)
	}
	r.dev().push(event{})
	r.next().Slot.Release()
}

func TestUserptrOnlyRefusesFallback(t *testing.T) {
	r := newRig(t, Options{Name: "front", Memory: MemoryUserptr}, 4, func() *fakeDev {
		d := yuyvCam()
		d.refuseUserptr = true
		return d
	})
	err := r.src.Start(context.Background(), r.pool)
	if !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "memory = userptr") {
		t.Fatalf("Start: %v", err)
	}
	if !r.dev().closed {
		t.Fatal("device left open after a failed Start")
	}
}

func TestDropsCorruptAndShortFrames(t *testing.T) {
	for _, mem := range []string{MemoryUserptr, MemoryMmap} {
		t.Run(mem, func(t *testing.T) {
			r := newRig(t, Options{Name: "front", Memory: mem}, 6, yuyvCam)
			r.start()
			r.dev().push(event{}, event{kind: evError}, event{kind: evShort}, event{seqSkip: 5}, event{})
			want := []uint64{0, 8, 9} // driver sequences 0, (1 corrupt, 2 short), 3+5 skipped, 9
			for _, w := range want {
				f := r.next()
				if f.Seq != w {
					t.Fatalf("Seq %d, want %d", f.Seq, w)
				}
				f.Slot.Release()
			}
			if st := r.src.Stats(); st.Corrupt != 1 || st.Short != 1 || st.Frames != 3 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestTimestampUnknownStampedAtDequeue(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, yuyvCam)
	r.start()
	before := sensors.Now()
	r.dev().push(event{unknown: true, tsNs: 12345})
	f := r.next()
	defer f.Slot.Release()
	if f.TCapture < before || f.TCapture > sensors.Now() {
		t.Fatalf("TCapture %d not stamped at dequeue (after %d)", f.TCapture, before)
	}
}

func TestUnplugAndRestart(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 6, yuyvCam)
	r.start()
	r.dev().push(event{})
	f := r.next()
	held := f // the consumer still holds this frame across the unplug
	errc := make(chan error, 1)
	go func() {
		_, err := r.src.Next(context.Background())
		errc <- err
	}()
	r.dev().push(event{kind: evUnplug})
	select {
	case err := <-errc:
		if !errors.Is(err, sensors.ErrDeviceGone) {
			t.Fatalf("after unplug: %v", err)
		}
		if !strings.Contains(err.Error(), "video0") {
			t.Errorf("error %q does not name the device", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("unplug not detected")
	}
	if _, err := r.src.Next(context.Background()); !errors.Is(err, sensors.ErrDeviceGone) {
		t.Fatalf("second Next after unplug: %v", err)
	}
	if err := r.src.Close(); err != nil {
		t.Fatalf("Close after unplug: %v", err)
	}
	old := r.dev()
	if !old.closed || r.pool.Leased() != 1 {
		t.Fatalf("after Close: device closed %v, %d slots leased (want only the held frame)", old.closed, r.pool.Leased())
	}
	held.Slot.Release()

	// Replug: Start re-resolves and re-initialises everything.
	r.start()
	if len(r.devs) != 2 || r.dev().count(vidiocSFmt) != 1 || r.dev().count(vidiocReqbufs) < 1 {
		t.Fatal("Start after unplug did not re-initialise a fresh device")
	}
	r.dev().push(event{})
	f = r.next()
	if f.Seq != 1 {
		t.Fatalf("first frame after reconnect has Seq %d, want 1 (continuing)", f.Seq)
	}
	f.Slot.Release()
	if st := r.src.Stats(); st.Gone != 1 || st.Starts != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestEIOIsFatal(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, yuyvCam)
	r.start()
	r.dev().push(event{kind: evEIO})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := r.src.Next(ctx); !errors.Is(err, sensors.ErrDeviceGone) {
		t.Fatalf("EIO: %v", err)
	}
}

func TestStallRestartsThenGivesUp(t *testing.T) {
	r := newRig(t, Options{Name: "front", PollTimeout: 5 * time.Millisecond, RestartAfter: 2, GiveUpAfter: 5}, 6, yuyvCam)
	r.start()
	r.dev().push(event{}) // one frame, then silence
	r.next().Slot.Release()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := r.src.Next(ctx)
	if !errors.Is(err, sensors.ErrDeviceGone) || !strings.Contains(err.Error(), "no frame") {
		t.Fatalf("stalled camera: %v", err)
	}
	st := r.src.Stats()
	if st.Timeouts != 5 || st.Restarts != 2 {
		t.Fatalf("stats %+v: want 5 timeouts and 2 restarts", st)
	}
	if n := r.dev().count(vidiocStreamon); n != 3 {
		t.Fatalf("STREAMON %d times, want 3", n)
	}
}

// TestSourceContract: a Next waiting on a camera that sends nothing wakes
// on cancel and on Close, with no slot left leased
// (sensorstest.CheckSource); then the device is torn down.
func TestSourceContract(t *testing.T) {
	for _, mem := range []string{MemoryUserptr, MemoryMmap} {
		t.Run(mem, func(t *testing.T) {
			r := newRig(t, Options{Name: "front", Memory: mem, PollTimeout: time.Hour}, 6, yuyvCam)
			r.start()
			sensorstest.CheckSource(t, sensorstest.SourceCase{Source: r.src, Pool: r.pool, Pacing: true})
			d := r.dev()
			if !d.closed || d.streaming {
				t.Fatalf("teardown: closed %v streaming %v", d.closed, d.streaming)
			}
			if mem == MemoryMmap && (d.mmaps == 0 || d.unmapped != d.mmaps) {
				t.Fatalf("unmapped %d of %d mappings", d.unmapped, d.mmaps)
			}
		})
	}
}

func TestPoolStarvationWaitsThenRecovers(t *testing.T) {
	// Exactly as many slots as buffers: once the consumer holds them all
	// nothing is queued and Next must wait for a release, not poll an
	// empty queue.
	r := newRig(t, Options{Name: "front", Buffers: 2}, 2, yuyvCam)
	r.start()
	r.dev().push(event{}, event{}, event{})
	a, b := r.next(), r.next()
	got := make(chan sensors.Frame, 1)
	go func() {
		f, err := r.src.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- f
	}()
	a.Slot.Release()
	select {
	case f := <-got:
		if f.Seq != 2 {
			t.Fatalf("Seq %d", f.Seq)
		}
		f.Slot.Release()
	case <-time.After(waitLimit):
		t.Fatal("no frame after a slot came back")
	}
	b.Slot.Release()
}

func TestFormatErrors(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		mk   func() *fakeDev
		want error
		text string
	}{
		{"pixel", Options{Pixel: sensors.NV12}, yuyvCam, sensors.ErrFormat, "YUYV 64x48@30/15"},
		{"size", Options{Width: 1280, Height: 720}, yuyvCam, sensors.ErrFormat, "offers 64x48"},
		{"caps", Options{}, func() *fakeDev { d := yuyvCam(); d.caps = capVideoCapture; return d }, ErrNotCapture, "capabilities"},
		{"missing", Options{Device: "usb-Other-video-index0"}, yuyvCam, sensors.ErrNotFound, "usb-Other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Name = "cam-" + c.name
			r := newRig(t, c.o, 2, c.mk)
			err := r.src.Start(context.Background(), r.pool)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), c.o.Name) {
				t.Fatalf("Start: %v; want %v mentioning %q and the source name", err, c.want, c.text)
			}
			r.mu.Lock()
			for _, d := range r.devs {
				if !d.closed {
					t.Error("device left open after a failed Start")
				}
			}
			r.mu.Unlock()
		})
	}
}

func TestStrideAndRate(t *testing.T) {
	r := newRig(t, Options{Name: "front", FPS: 14}, 4, func() *fakeDev {
		d := yuyvCam()
		d.padLines = 32
		return d
	})
	r.start()
	f := r.src.Format()
	if f.Stride != 64*2+32 || f.FPS != 15 {
		t.Fatalf("format %+v: want stride 160 and the 15 fps the driver snapped to", f)
	}
	r.dev().push(event{})
	fr := r.next()
	defer fr.Slot.Release()
	if fr.BytesUsed != 160*48 {
		t.Fatalf("BytesUsed %d, want %d", fr.BytesUsed, 160*48)
	}
}

func TestMJPEGDecodedToRGB24(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			img.Set(x, y, color.RGBA{30, 170, 40, 255})
		}
	}
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Options{Name: "mjpg", Pixel: sensors.MJPEG}, 4, yuyvCam)
	r.start()
	if f := r.src.Format(); f.Pixel != sensors.RGB24 || r.src.Mode() != MemoryMmap {
		t.Fatalf("format %v mode %s: want RGB24 frames from MMAP", f, r.src.Mode())
	}
	r.dev().push(event{data: []byte("not a jpeg")}, event{data: jb.Bytes()[:len(jb.Bytes())/2]}, event{data: jb.Bytes()})
	f := r.next()
	defer f.Slot.Release()
	d := f.Data()
	if f.BytesUsed != 64*48*3 || f.Flags&sensors.FlagCopied == 0 {
		t.Fatalf("bytes %d flags %#x", f.BytesUsed, f.Flags)
	}
	if d[0] < 20 || d[0] > 40 || d[1] < 160 || d[1] > 180 || d[2] < 30 || d[2] > 50 {
		t.Fatalf("decoded pixel %v, want about 30,170,40", d[:3])
	}
	if st := r.src.Stats(); st.Decode != 2 || f.Seq != 2 {
		t.Fatalf("stats %+v seq %d: the bad and the truncated JPEG must be dropped and counted", st, f.Seq)
	}
	// The engine input is 16x12: frames are decoded at 1/4.
	if line := r.src.SetDecodeTarget(16, 12, "stretch"); !strings.Contains(line, "1/4") {
		t.Errorf("SetDecodeTarget: %q", line)
	}
	r.dev().push(event{data: jb.Bytes()})
	g := r.next()
	defer g.Slot.Release()
	if want := (sensors.Format{Width: 16, Height: 12, Pixel: sensors.RGB24, FPS: g.Format.FPS, Downscale: 4}); g.Format != want || g.BytesUsed != 16*12*3 || r.src.Format() != want {
		t.Fatalf("scaled frame %v, %d bytes; source format %v", g.Format, g.BytesUsed, r.src.Format())
	}
	if d := g.Data(); d[0] < 20 || d[0] > 40 || d[1] < 160 || d[1] > 180 {
		t.Fatalf("scaled pixel %v", d[:3])
	}
}

// TestMJPEGNoAllocs: with libjpeg-turbo, an MJPEG frame is decoded into
// its slot without a Go allocation, at full and at reduced scale.
func TestMJPEGNoAllocs(t *testing.T) {
	if _, err := sjpeg.New(sjpeg.Options{Backend: sjpeg.TurboJPEG}); err != nil {
		t.Skip(err)
	}
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, image.NewRGBA(image.Rect(0, 0, 64, 48)), nil); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Options{Name: "mjpg", Pixel: sensors.MJPEG, JPEG: sjpeg.Options{Backend: sjpeg.TurboJPEG}}, 6, func() *fakeDev {
		d := yuyvCam()
		d.auto, d.autoData = true, jb.Bytes()
		return d
	})
	r.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, target := range []int{0, 16} {
		r.src.SetDecodeTarget(target, target, "stretch")
		n := sensorstest.Mallocs(200, func() {
			f, err := r.src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f.Slot.Release()
		})
		if n != 0 {
			t.Errorf("target %d: %v allocations in 200 frames, want 0", target, n)
		}
	}
	if st := r.src.Stats(); st.Decode != 0 || r.src.Format().Downscale != 2 {
		t.Errorf("stats %+v, format %v", st, r.src.Format())
	}
}

func TestResolveByPathAndName(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 2, yuyvCam)
	r.start()
	want := filepath.Join(r.src.opts.DevRoot, "video0")
	if r.opened[0] != want {
		t.Fatalf("opened %s, want %s", r.opened[0], want)
	}
	r.src.Close()
	// A full path through the by-id link works the same.
	r.src.opts.Device = filepath.Join(r.src.opts.DevRoot, "v4l", "by-id", byID)
	r.start()
	if r.opened[1] != want {
		t.Fatalf("opened %s, want %s", r.opened[1], want)
	}
}

func TestStatsWhileStreaming(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 4, func() *fakeDev { d := yuyvCam(); d.auto = true; return d })
	r.start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			_ = r.src.Stats()
			_ = r.src.Format()
		}
	}()
	for i := 0; i < 200; i++ {
		r.next().Slot.Release()
	}
	<-done
}

func TestNoAllocsPerFrame(t *testing.T) {
	for _, mem := range []string{MemoryUserptr, MemoryMmap} {
		r := newRig(t, Options{Name: "front", Memory: mem}, 6, func() *fakeDev { d := yuyvCam(); d.auto = true; d.fill = false; return d })
		r.start()
		ctx, cancel := context.WithCancel(context.Background())
		n := sensorstest.Mallocs(200, func() {
			f, err := r.src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f.Slot.Release()
		})
		cancel()
		if n != 0 {
			t.Errorf("%s: %v allocations in 200 frames, want 0", mem, n)
		}
	}
}

func BenchmarkCapture(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1920, 1080}} {
		for _, mem := range []string{MemoryUserptr, MemoryMmap} {
			b.Run(mem+"/"+strings.Join([]string{itoa(size[0]), itoa(size[1])}, "x"), func(b *testing.B) {
				r := newRig(b, Options{Name: "bench", Memory: mem, Width: size[0], Height: size[1]}, 6, func() *fakeDev {
					d := newFakeDev(fakeFmt{pix: sensors.YUYV, w: size[0], h: size[1], fps: []uint32{30}})
					d.auto, d.fill = true, false
					return d
				})
				r.start()
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					f, err := r.src.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					f.Slot.Release()
				}
			})
		}
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func TestSlotSizeHintFitsPaddedDrivers(t *testing.T) {
	for _, c := range []struct {
		pix  sensors.PixelFormat
		w, h int
		pad  int
	}{
		{sensors.YUYV, 640, 480, 0}, {sensors.NV12, 1280, 720, 0}, {sensors.NV12, 1920, 1080, 128}, {sensors.GREY, 100, 50, 56},
	} {
		o := Options{Width: c.w, Height: c.h, Pixel: c.pix}
		padded := sensors.Format{Width: c.w, Height: c.h, Pixel: c.pix, Stride: c.pix.PackedLine(c.w) + c.pad}
		if h := SlotSizeHint(o); h < padded.FrameSize() || h%4096 != 0 {
			t.Errorf("%v pad %d: hint %d, need %d", padded, c.pad, h, padded.FrameSize())
		}
	}
	if h := SlotSizeHint(Options{Width: 64, Height: 48, Pixel: sensors.MJPEG}); h < 64*48*3 {
		t.Errorf("MJPEG hint %d", h)
	}
}

func TestProbe(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 1, yuyvCam)
	info, err := r.src.probe()
	if err != nil {
		t.Fatal(err)
	}
	if info.Card != "Fake Camera" || info.Driver != "fakevideo" || len(info.Formats) != 2 || info.Formats[1].Pixel != sensors.MJPEG || !info.Formats[1].Compressed {
		t.Fatalf("probe: %+v", info)
	}
	if got := info.Formats.String(); got != "YUYV 64x48@30/15; MJPEG 64x48@30" {
		t.Fatalf("offers %q", got)
	}
	if !r.dev().closed || r.dev().count(vidiocStreamon) != 0 {
		t.Fatal("probe must close the device without streaming")
	}
	if _, err := Probe(Options{Name: "x", Device: "nope", DevRoot: t.TempDir()}); !errors.Is(err, sensors.ErrNotFound) {
		t.Fatalf("probe of a missing camera: %v", err)
	}
}

// TestDriverSizeimageBounded: the frame size a driver reports sizes the
// buffers it allocates and the slots it needs; one far beyond what the
// format can take (1 GiB for 64x48 YUYV) is refused at Start, with the
// numbers, instead of being believed.
func TestDriverSizeimageBounded(t *testing.T) {
	r := newRig(t, Options{Name: "front"}, 2, func() *fakeDev {
		d := yuyvCam()
		d.extraSize = 1 << 30
		return d
	})
	err := r.src.Start(context.Background(), r.pool)
	if !errors.Is(err, sensors.ErrFormat) || !strings.Contains(err.Error(), "the driver reports frames of 1073747968 bytes for 64x48 YUYV") {
		t.Fatalf("Start: %v", err)
	}
	r2 := newRig(t, Options{Name: "front"}, 2, func() *fakeDev { // a little padding is fine
		d := yuyvCam()
		d.extraSize = 4096
		return d
	})
	r2.start()
}
