package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/edged-dev/edged/bench/internal/onnxmodel"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
)

// Manifest is inputs.json.
type Manifest struct {
	Version     int     `json:"version"`
	Seed        uint64  `json:"seed"`
	Model       string  `json:"model"`
	ModelSHA256 string  `json:"model_sha256"`
	InputName   string  `json:"input_name"`
	OutputName  string  `json:"output_name"`
	InputSize   int     `json:"input_size"`
	Inputs      []Input `json:"inputs"`
}

// Input is one replay file.
type Input struct {
	Name   string `json:"name"` // kind-WxH
	Kind   string `json:"kind"` // noisy | flat
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Format string `json:"format"`
	Frames int    `json:"frames"`
	Path   string `json:"path"` // relative to the manifest
	Bytes  int64  `json:"bytes"`
}

func main() {
	out := flag.String("o", "bin/bench-inputs", "output folder")
	n := flag.Int("n", 16, "frames per replay file")
	seed := flag.Uint64("seed", 1, "seed of the noisy frames, the flat colours and the model weights")
	sizes := flag.String("sizes", "1920x1080,3840x2160", "frame sizes, comma-separated WxH")
	kinds := flag.String("kinds", "noisy,flat", "frame kinds, comma-separated (noisy, flat; mjpeg: natural-looking scenes as a camera's MJPEG, quality 85)")
	inSize := flag.Int("input-size", onnxmodel.Size, "model input width and height")
	flag.Parse()
	if err := run(*out, *n, *seed, *sizes, *kinds, *inSize); err != nil {
		fmt.Fprintln(os.Stderr, "benchgen:", err)
		os.Exit(1)
	}
}

func run(out string, n int, seed uint64, sizes, kinds string, inSize int) error {
	if n < 1 {
		return fmt.Errorf("-n %d: at least one frame", n)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// A stale manifest must not describe files being rewritten.
	if err := os.Remove(filepath.Join(out, "inputs.json")); err != nil && !os.IsNotExist(err) {
		return err
	}
	model, err := onnxmodel.Build(onnxmodel.Options{Size: inSize, Seed: seed})
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "model.onnx"), func(f *os.File) error { _, err := f.Write(model); return err }); err != nil {
		return err
	}
	sum := sha256.Sum256(model)
	m := Manifest{Version: 1, Seed: seed, Model: "model.onnx", ModelSHA256: hex.EncodeToString(sum[:]),
		InputName: onnxmodel.InputName, OutputName: onnxmodel.OutputName, InputSize: inSize}
	for _, size := range strings.Split(sizes, ",") {
		w, h, err := parseSize(size)
		if err != nil {
			return err
		}
		for _, kind := range strings.Split(kinds, ",") {
			kind = strings.TrimSpace(kind)
			if kind != "noisy" && kind != "flat" && kind != "mjpeg" {
				return fmt.Errorf("frame kind %q (want noisy, flat or mjpeg)", kind)
			}
			format := "YUYV"
			if kind == "mjpeg" {
				format = "MJPEG"
			}
			in := Input{Name: fmt.Sprintf("%s-%dx%d", kind, w, h), Kind: kind, Width: w, Height: h, Format: format, Frames: n}
			in.Path = in.Name + ".edgedraw"
			path := filepath.Join(out, in.Path)
			if err := writeFile(path, func(f *os.File) error { return writeFrames(f, in, seed) }); err != nil {
				return err
			}
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			in.Bytes = st.Size()
			m.Inputs = append(m.Inputs, in)
			fmt.Printf("wrote %s (%d frames, %.0f MB)\n", path, n, float64(in.Bytes)/1e6)
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	manifest := filepath.Join(out, "inputs.json")
	if err := writeFile(manifest, func(f *os.File) error { _, err := f.Write(append(b, '\n')); return err }); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %s\n", filepath.Join(out, "model.onnx"), manifest)
	return nil
}

func parseSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || w < 2 || h < 1 || w%2 != 0 || w > 16384 || h > 16384 {
		return 0, 0, fmt.Errorf("size %q: want WxH with an even width up to 16384", s)
	}
	return w, h, nil
}

// writeFile writes path through a temporary file renamed into place.
func writeFile(path string, fill func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	err = f.Chmod(0o644)
	if err == nil {
		err = fill(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

// writeFrames records in.Frames frames. Every capture time is 0, so every
// delta is 0: replay plays the file without pacing (its fps = 0 keeps the
// recorded pace, which is none).
func writeFrames(f *os.File, in Input, seed uint64) error {
	if in.Kind == "mjpeg" {
		return writeMJPEG(f, in, seed)
	}
	format := sensors.Format{Width: in.Width, Height: in.Height, Pixel: sensors.YUYV}
	rec, err := replay.NewRecorder(f, format)
	if err != nil {
		return err
	}
	buf := make([]byte, format.FrameSize())
	for i := range in.Frames {
		// One stream per (seed, size, frame): files of other sizes or
		// lengths do not shift each other's frames.
		var key [32]byte
		le := binary.LittleEndian
		le.PutUint64(key[0:], seed)
		le.PutUint32(key[8:], uint32(in.Width))
		le.PutUint32(key[12:], uint32(in.Height))
		le.PutUint64(key[16:], uint64(i))
		copy(key[24:], in.Kind)
		rng := rand.NewChaCha8(key)
		if in.Kind == "noisy" {
			rng.Read(buf)
		} else {
			var c [4]byte // Y U Y V of one colour
			rng.Read(c[:])
			c[2] = c[0]
			for j := 0; j < len(buf); j += 4 {
				copy(buf[j:j+4], c[:])
			}
		}
		if err := rec.WriteFrame(buf, 0, 0); err != nil {
			return err
		}
	}
	return rec.Flush()
}

// writeMJPEG records frames as a UVC camera sends MJPEG: JPEG of quality
// 85 without Huffman tables (the decoder inserts the standard ones), of a
// natural-looking scene (smooth gradients, a moving disc and bar, sensor
// noise of a few levels), not of noise, which JPEG codes unlike a camera.
func writeMJPEG(f *os.File, in Input, seed uint64) error {
	format := sensors.Format{Width: in.Width, Height: in.Height, Pixel: sensors.MJPEG}
	rec, err := replay.NewRecorder(f, format)
	if err != nil {
		return err
	}
	w, h := in.Width, in.Height
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	var buf bytes.Buffer
	for i := range in.Frames {
		var key [32]byte
		binary.LittleEndian.PutUint64(key[0:], seed)
		binary.LittleEndian.PutUint64(key[8:], uint64(i))
		copy(key[16:], "mjpeg")
		rng := rand.New(rand.NewChaCha8(key))
		cx, cy, r := w/4+i*w/(2*in.Frames), h/2, h/5
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := [3]int{40 + 180*x/w, 30 + 200*y/h, 200 - 150*(x+y)/(w+h)}
				if dx, dy := x-cx, y-cy; dx*dx+dy*dy < r*r {
					c = [3]int{230, 40, 50}
				}
				if x > w*3/5 && x < w*4/5 && y > h/5+i*h/(4*in.Frames) && y < h*4/5 {
					c = [3]int{250, 250, 245}
				}
				o := 4 * (y*w + x)
				for k := range 3 {
					v := c[k] + rng.IntN(7) - 3
					img.Pix[o+k] = uint8(min(max(v, 0), 255))
				}
				img.Pix[o+3] = 255
			}
		}
		buf.Reset()
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
			return err
		}
		frame, err := withoutDHT(buf.Bytes())
		if err != nil {
			return err
		}
		if err := rec.WriteFrame(frame, 0, 0); err != nil {
			return err
		}
	}
	return rec.Flush()
}

// withoutDHT drops the DHT segments before the first SOS.
func withoutDHT(src []byte) ([]byte, error) {
	out := []byte{0xff, 0xd8}
	for i := 2; i+4 <= len(src); {
		m := src[i+1]
		if m == 0xda {
			return append(out, src[i:]...), nil
		}
		n := int(src[i+2])<<8 | int(src[i+3])
		if m != 0xc4 {
			out = append(out, src[i:i+2+n]...)
		}
		i += 2 + n
	}
	return nil, fmt.Errorf("benchgen: no SOS in an encoded frame")
}
