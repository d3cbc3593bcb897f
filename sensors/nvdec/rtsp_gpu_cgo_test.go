//go:build cgo && linux

package nvdec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/rtsp"
	"github.com/edged-dev/edged/sensors/rtsp/rtsptest"
	"github.com/edged-dev/edged/umem"
)

// umemPool lends umem's frame slots to a source, as runtime's pipeline
// does.
type umemPool struct{ p *umem.Pool }

func (a umemPool) Get(ctx context.Context) (sensors.Slot, error) {
	s, err := a.p.Get(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// TestGPURTSPIntoUmemSlots: the daemon's path for a network camera on a
// discrete GPU: sensors/rtsp plays a stream (gortsplib's server in this
// process, paced at 30 fps over TCP), NVDEC decodes it and writes every
// picture device to device into umem's frame slots (managed, mapped and
// pinned memory, each a run), and every delivered frame is one of the
// pictures libavcodec decodes of the stream, byte for byte. The stream is
// h264_1080p30_gop30.h264 from $EDGED_NVDEC_STREAMS when it is there, else
// the 170x100 sample.
func TestGPURTSPIntoUmemSlots(t *testing.T) {
	needNVDEC(t)
	stream := filepath.Join("..", "h26x", "testdata", "h264_170x100.h264")
	if dir := os.Getenv("EDGED_NVDEC_STREAMS"); dir != "" {
		if p := filepath.Join(dir, "h264_1080p30_gop30.h264"); fileExists(p) {
			stream = p
		}
	}
	ref, err := readReference(referencePath(stream))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]bool{}
	for _, f := range ref.Frames {
		sums[f.SHA256] = true
	}
	aus := readAUs(t, stream, h26x.H264)
	fs, err := rtsptest.StartFileServer(rtsptest.FileOptions{Codec: h26x.H264, AUs: aus})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	size := sensors.Format{Width: ref.Frames[0].W, Height: ref.Frames[0].H, Pixel: sensors.NV12}.FrameSize()
	for _, st := range []umem.Strategy{umem.StrategyManaged, umem.StrategyMapped, umem.StrategyPinned} {
		pl, err := umem.Open(umem.Options{Strategy: st})
		if err != nil {
			t.Fatalf("umem %s: %v", st, err)
		}
		pool, err := umem.NewPool(pl.Alloc, 6, size)
		if err != nil {
			t.Fatalf("umem %s: %v", st, err)
		}
		var desc string
		src, err := rtsp.New(rtsp.Options{Name: "cam", URL: fs.URL, Transport: rtsp.TransportTCP,
			Decoder: func(c h26x.Codec, params []byte) (rtsp.Decoder, error) {
				d, err := Open(c, Options{Params: params})
				if err != nil {
					return nil, err
				}
				desc = d.Describe()
				return d, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := src.Start(ctx, umemPool{pool}); err != nil {
			t.Fatalf("%s: Start: %v", st, err)
		}
		good, skipped := 0, 0
		for good < 60 {
			f, err := src.Next(ctx)
			if errors.Is(err, sensors.ErrSkipped) {
				skipped++
				continue
			}
			if err != nil {
				t.Fatalf("%s: after %d frames: %v", st, good, err)
			}
			slot := f.Slot.(*umem.Slot)
			if slot.Device() == 0 {
				t.Fatalf("%s: a slot without a device address", st)
			}
			if s := summarize(0, slot.Bytes(), f.Format); !sums[s.SHA256] {
				t.Fatalf("%s: frame %d is none of libavcodec's pictures of the stream", st, f.Seq)
			}
			f.Slot.Release()
			good++
		}
		cancel()
		src.Close()
		pool.Close()
		pl.Close()
		if !strings.HasPrefix(desc, "NVDEC") {
			t.Errorf("%s: decoder %q", st, desc)
		}
		t.Logf("%s slots: %d frames, each one of libavcodec's pictures, %d skipped; %s", st, good, skipped, src.Stats().Transport)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
