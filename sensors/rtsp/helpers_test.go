package rtsp

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

// cpuDecoder is libavcodec (skipping the test without it, unless
// EDGED_REQUIRE_LIBAVCODEC=1).
func cpuDecoder(t testing.TB) NewDecoder {
	t.Helper()
	if _, _, err := avcodec.Load(""); err != nil {
		if os.Getenv("EDGED_REQUIRE_LIBAVCODEC") == "1" {
			t.Fatalf("%v, and EDGED_REQUIRE_LIBAVCODEC=1", err)
		}
		t.Skipf("%v; EDGED_REQUIRE_LIBAVCODEC=1 makes this a failure", err)
	}
	return func(c h26x.Codec, params []byte) (Decoder, error) {
		d, err := avcodec.Open(c, avcodec.Options{Threads: 1, Params: params})
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

var samples = map[h26x.Codec]string{h26x.H264: "../h26x/testdata/h264_170x100.h264", h26x.H265: "../h26x/testdata/h265_170x100.h265"}

// sample reads a committed stream and what libavcodec decodes each of its
// access units to (sha256 of the NV12 picture → index).
func sample(t testing.TB, c h26x.Codec, dec NewDecoder) ([][]byte, map[[32]byte]int) {
	t.Helper()
	aus, err := h26xtest.ReadAccessUnits(samples[c], c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dec(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sums := map[[32]byte]int{}
	i := 0
	for k, au := range aus {
		if err := d.Send(au, uint64(k)); err != nil {
			t.Fatal(err)
		}
		for {
			_, f, ok, err := d.Receive()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			b := make([]byte, f.FrameSize())
			d.Write(b)
			sums[sha256.Sum256(b)] = i
			i++
		}
	}
	return aus, sums
}

// fileServer serves a committed stream; stopped at the end of the test.
func fileServer(t testing.TB, o rtsptest.FileOptions) *rtsptest.FileServer {
	t.Helper()
	fs, err := rtsptest.StartFileServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	return fs
}

// open makes and starts a source on a heap pool of slots of slot bytes.
func open(t testing.TB, o Options, slots, slot int) (*Source, *sensorstest.Pool, error) {
	t.Helper()
	if o.Name == "" {
		o.Name = "cam"
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Second
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	pool := sensorstest.NewHeapPool(slots, slot)
	t.Cleanup(func() { s.Close(); pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s, pool, s.Start(ctx, pool)
}

// nextFrame is Next with a deadline, skipping ErrSkipped (counted).
func nextFrame(t testing.TB, s *Source, d time.Duration) (sensors.Frame, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	skipped := 0
	for {
		f, err := s.Next(ctx)
		if errors.Is(err, sensors.ErrSkipped) {
			skipped++
			continue
		}
		return f, skipped, err
	}
}

func sha256Of(f sensors.Frame) [32]byte { return sha256.Sum256(f.Data()) }

func itoa(n int) string { return strconv.Itoa(n) }
