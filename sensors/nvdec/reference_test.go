package nvdec

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/avcodec"
	"github.com/edged-dev/edged/sensors/h26x"
	"github.com/edged-dev/edged/sensors/h26x/h26xtest"
)

// A reference is what libavcodec decodes of a stream, small enough to carry
// to a machine without libavcodec (the GPU machine has none): per picture
// its id, size, the SHA-256 of its NV12 bytes, and the means of its 16x16
// luma blocks and 8x8 blocks of each chroma plane, so NVDEC's pictures can
// be compared exactly and, where they differ, within a tolerance.
type reference struct {
	Stream string    `json:"stream"`
	Codec  string    `json:"codec"`
	Frames []summary `json:"frames"`
}

type summary struct {
	ID     uint64 `json:"id"`
	W, H   int
	SHA256 string `json:"sha256"`
	Blocks []byte `json:"blocks"` // luma blocks, then U, then V
}

// summarize describes one NV12 picture of format f.
func summarize(id uint64, b []byte, f sensors.Format) summary {
	sum := sha256.Sum256(b[:f.FrameSize()])
	s := summary{ID: id, W: f.Width, H: f.Height, SHA256: fmt.Sprintf("%x", sum)}
	line := f.LineBytes()
	block := func(plane []byte, w, h, step, off, size int) {
		for by := 0; by < h; by += size {
			for bx := 0; bx < w; bx += size {
				total, n := 0, 0
				for y := by; y < min(by+size, h); y++ {
					for x := bx; x < min(bx+size, w); x++ {
						total += int(plane[y*line+x*step+off])
						n++
					}
				}
				s.Blocks = append(s.Blocks, byte((total+n/2)/n))
			}
		}
	}
	block(b, f.Width, f.Height, 1, 0, 16)
	c := b[line*f.Height:]
	cw, ch := (f.Width+1)/2, (f.Height+1)/2
	block(c, cw, ch, 2, 0, 8)
	block(c, cw, ch, 2, 1, 8)
	return s
}

// compare says how pictures differ from a reference: worst is the largest
// difference of a block mean; exact counts identical pictures.
func compare(ref, got []summary) (exact, worst int, err error) {
	if len(ref) != len(got) {
		return 0, 0, fmt.Errorf("%d pictures, the reference has %d", len(got), len(ref))
	}
	for i := range ref {
		r, g := ref[i], got[i]
		if r.ID != g.ID || r.W != g.W || r.H != g.H || len(r.Blocks) != len(g.Blocks) {
			return exact, worst, fmt.Errorf("picture %d: id %d %dx%d, the reference's id %d %dx%d", i, g.ID, g.W, g.H, r.ID, r.W, r.H)
		}
		if r.SHA256 == g.SHA256 {
			exact++
			continue
		}
		for j := range r.Blocks {
			worst = max(worst, absDiff(int(r.Blocks[j]), int(g.Blocks[j])))
		}
	}
	return exact, worst, nil
}

func absDiff(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}

func readReference(path string) (*reference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var r reference
	return &r, json.NewDecoder(z).Decode(&r)
}

func writeReference(path string, r *reference) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	z := gzip.NewWriter(f)
	if err := json.NewEncoder(z).Encode(r); err != nil {
		f.Close()
		return err
	}
	if err := z.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// codecOfFile is a stream file's codec by its extension.
func codecOfFile(name string) (h26x.Codec, bool) {
	switch filepath.Ext(name) {
	case ".h264":
		return h26x.H264, true
	case ".h265", ".hevc":
		return h26x.H265, true
	}
	return 0, false
}

// referenceOf decodes a stream file with libavcodec (one thread: pictures
// in order, nothing held back) into its reference.
func referenceOf(t testing.TB, path string) *reference {
	t.Helper()
	c, _ := codecOfFile(path)
	aus := readAUs(t, path, c)
	d, err := avcodec.Open(c, avcodec.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := &reference{Stream: filepath.Base(path), Codec: c.String()}
	take := func() {
		for {
			id, f, ok, err := d.Receive()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !ok {
				return
			}
			buf := make([]byte, f.FrameSize())
			if _, err := d.Write(buf); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			r.Frames = append(r.Frames, summarize(id, buf, f))
		}
	}
	for i, au := range aus {
		if err := d.Send(au, uint64(i)); err != nil {
			t.Fatalf("%s: access unit %d: %v", path, i, err)
		}
		take()
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	take()
	return r
}

// referencePath is where a stream's reference lies: beside it, or for the
// repository's sample streams in testdata/.
func referencePath(stream string) string {
	if strings.HasPrefix(stream, filepath.Join("..", "h26x", "testdata")) {
		return filepath.Join("testdata", strings.TrimSuffix(filepath.Base(stream), filepath.Ext(stream))+".ref.json.gz")
	}
	return strings.TrimSuffix(stream, filepath.Ext(stream)) + ".ref.json.gz"
}

// sampleStreams are the repository's streams the GPU test always decodes.
var sampleStreams = []string{"h264_170x100.h264", "h265_170x100.h265", "h264_96x64.h264"}

// streams are the sample streams and every stream file in
// $EDGED_NVDEC_STREAMS (a folder: the 1080p streams carried to the GPU
// machine with their references).
func streams(t testing.TB) []string {
	var out []string
	for _, s := range sampleStreams {
		out = append(out, filepath.Join("..", "h26x", "testdata", s))
	}
	if dir := os.Getenv("EDGED_NVDEC_STREAMS"); dir != "" {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if _, ok := codecOfFile(e.Name()); ok {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

func readAUs(t testing.TB, path string, c h26x.Codec) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return h26xtest.SplitAccessUnits(b, c)
}

// TestReferencesAreLibavcodecs: the references in testdata/ are what
// libavcodec decodes of the sample streams now (skips without libavcodec;
// EDGED_REQUIRE_LIBAVCODEC=1 fails instead). With
// EDGED_NVDEC_WRITE_REFERENCES=1 it writes them instead, for the sample
// streams and every stream in $EDGED_NVDEC_STREAMS (beside each stream).
func TestReferencesAreLibavcodecs(t *testing.T) {
	if _, _, err := avcodec.Load(""); err != nil {
		if os.Getenv("EDGED_REQUIRE_LIBAVCODEC") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	write := os.Getenv("EDGED_NVDEC_WRITE_REFERENCES") == "1"
	for _, s := range streams(t) {
		ref := referenceOf(t, s)
		path := referencePath(s)
		if write {
			if err := writeReference(path, ref); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d pictures -> %s", s, len(ref.Frames), path)
			continue
		}
		have, err := readReference(path)
		if err != nil {
			t.Fatalf("%s: %v (EDGED_NVDEC_WRITE_REFERENCES=1 writes it)", s, err)
		}
		if exact, _, err := compare(have.Frames, ref.Frames); err != nil || exact != len(ref.Frames) {
			t.Errorf("%s: %s is not libavcodec's decode (%d of %d exact, %v)", s, path, exact, len(ref.Frames), err)
		}
	}
}
