package preview

import (
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/pixconv"
)

// frame1080p is a 1920x1080 YUYV frame of scene.
func frame1080p(b *testing.B) Frame {
	f := sensors.Format{Width: 1920, Height: 1080, Pixel: sensors.YUYV}
	rgb, _ := scene(3, 1920, 1080)
	data := make([]byte, pixconv.RawSize(f))
	if _, err := pixconv.FromRGB24(data, f, rgb, 3*1920); err != nil {
		b.Fatal(err)
	}
	return Frame{Format: f, Data: data}
}

// detections are 20 boxes with labels, as a busy detector reports.
func detections() *stream.Record {
	r := &stream.Record{Kind: stream.KindResult, Engine: stream.EngineRef{Name: "yolo", Generation: 1},
		Outputs: []stream.Output{{Kind: stream.OutputDetections, Detections: make([]stream.Detection, 20)}}}
	for i := range r.Outputs[0].Detections {
		r.Outputs[0].Detections[i] = stream.Detection{Box: [4]float32{float32(90 * i), 200, float32(90*i + 160), 700}, Class: i, Label: "person", Score: 0.8}
	}
	return r
}

// BenchmarkTapCopy is what a watched frame costs its pipeline, on the
// pipeline's goroutine: Copy (the rows a 640-wide picture of a 1080p YUYV
// frame shows) and Finish (20 detections), against copying the whole
// frame once (the baseline: a pipeline that copies every frame).
func BenchmarkTapCopy(b *testing.B) {
	f := frame1080p(b)
	rec := detections()
	b.Run("baseline-whole-frame-copy", func(b *testing.B) {
		dst := make([]byte, len(f.Data))
		b.SetBytes(int64(len(f.Data)))
		for b.Loop() {
			copy(dst, f.Data)
		}
	})
	b.Run("copy-and-finish", func(b *testing.B) {
		h := New(Options{Settings: Settings{Enabled: true}})
		defer h.Close()
		t := h.Tap(Key{"p", "cam0"})
		b.SetBytes(int64(len(f.Data)))
		b.ReportAllocs()
		for b.Loop() {
			if !t.Copy(0, f) {
				b.Fatal("not copied")
			}
			t.Finish(f.Seq, rec, "")
			t.state.Store(copyFree) // as the renderer would once it drew the frame
		}
	})
}

// BenchmarkPicture is what a picture costs the tap's renderer, off the
// pipeline's goroutine: converting the rows of a 1080p YUYV frame to a
// 640x360 picture, drawing 20 detections and the caption, and encoding it
// with libjpeg-turbo or, as the baseline, image/jpeg.
func BenchmarkPicture(b *testing.B) {
	f := frame1080p(b)
	rec := detections()
	for _, backend := range []string{jpeg.Std, jpeg.TurboJPEG} {
		b.Run(backend, func(b *testing.B) {
			if _, err := jpeg.NewEncoder(jpeg.EncoderOptions{Backend: backend}); err != nil {
				b.Skip(err)
			}
			h := New(Options{Settings: Settings{Enabled: true}, Encoder: jpeg.EncoderOptions{Backend: backend}})
			defer h.Close()
			t := h.Tap(Key{"p", "cam0"})
			var r renderer
			defer r.close()
			b.ReportAllocs()
			var size int
			for b.Loop() {
				t.Copy(0, f)
				t.Finish(f.Seq, rec, "")
				p, err := r.render(t)
				if err != nil {
					b.Fatal(err)
				}
				size = len(p.JPEG)
			}
			b.ReportMetric(float64(size), "jpeg-bytes")
		})
	}
}

// BenchmarkViewers is what a picture costs to hand to 1 and 4 viewers of
// its MJPEG stream (HTTP over loopback, the viewers' reading in this
// process too): per picture published until every viewer has read it.
func BenchmarkViewers(b *testing.B) {
	f := frame1080p(b)
	for _, n := range []int{1, 4} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			h := New(Options{Settings: Settings{Enabled: true, Clients: n}})
			defer h.Close()
			t := h.Tap(Key{"p", "cam0"})
			var r renderer
			defer r.close()
			t.Copy(0, f)
			t.Finish(f.Seq, detections(), "")
			pic, err := r.render(t)
			if err != nil {
				b.Fatal(err)
			}
			mux := http.NewServeMux()
			h.Register(mux)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			got := make(chan struct{}, 64*n)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/preview/p.mjpeg", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					mr := multipart.NewReader(resp.Body, Boundary)
					for {
						part, err := mr.NextPart()
						if err != nil {
							return
						}
						io.Copy(io.Discard, part)
						got <- struct{}{}
					}
				}()
			}
			for t.Viewers() < n {
				time.Sleep(time.Millisecond)
			}
			b.SetBytes(int64(len(pic.JPEG) * n))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := *pic
				p.Taken = frameNow() // as a picture just made
				t.publish(&p)
				for j := 0; j < n; j++ {
					<-got
				}
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}
