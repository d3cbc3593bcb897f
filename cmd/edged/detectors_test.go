package main

import (
	"bufio"
	"bytes"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/edged-dev/edged/internal/onnxproto"
)

var updateDetectors = flag.Bool("update-detectors", false, "rewrite testdata/detectors/*.ndjson")

// The camera is 640x480, letterboxed into the models' 320x320 input:
// scale 2, 40 rows of padding above and below. A box at input (x, y) is at
// camera (2x, 2(y-40)).
const detW, detH = 320, 320

// detectorModel is one test model per format: ONNX models built by
// internal/onnxproto whose outputs are fixed tensors with known boxes, and
// the metadata_props an exporter writes.
type detectorModel struct {
	name  string
	outs  []pb.ConstOutput
	meta  [][2]string
	post  string // [[pipeline.postprocess]] tables; "" = none (the metadata's task decides)
	check []string
}

// rowsT lays box rows out attribute-major ([1, attrs, boxes]), padding
// with zero boxes up to n.
func rowsT(n int, rows ...[]float32) []float32 {
	a := len(rows[0])
	v := make([]float32, a*n)
	for b, r := range rows {
		for i, x := range r {
			v[i*n+b] = x
		}
	}
	return v
}

// rows lays box rows out box-major ([1, boxes, attrs]) padded to n.
func rows(n int, rs ...[]float32) []float32 {
	a := len(rs[0])
	v := make([]float32, a*n)
	for b, r := range rs {
		copy(v[b*a:], r)
	}
	return v
}

var ultralyticsDetect = [][2]string{
	{"description", "Ultralytics YOLO11n model trained on pets.yaml"}, {"author", "Ultralytics"}, {"version", "8.3.40"},
	{"stride", "32"}, {"task", "detect"}, {"batch", "1"}, {"imgsz", "[320, 320]"}, {"names", "{0: 'cat', 1: 'dog'}"},
	{"args", "{'batch': 1, 'half': False, 'dynamic': False, 'nms': False}"}, {"channels", "3"},
}

func withMeta(base [][2]string, kv ...[2]string) [][2]string {
	out := append([][2]string(nil), base...)
	for _, x := range kv {
		replaced := false
		for i := range out {
			if out[i][0] == x[0] {
				out[i], replaced = x, true
			}
		}
		if !replaced {
			out = append(out, x)
		}
	}
	return out
}

var detectorModels = []detectorModel{
	{
		// YOLOv8/YOLO11 as Ultralytics exports it: [1, 4+C, N], the class
		// names and the task in metadata_props, no postprocess table.
		name: "yolov8",
		outs: []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat, Dims: []int64{1, 6, 32}, Values: rowsT(32,
			[]float32{160, 160, 64, 48, 0.9, 0.05}, // cat
			[]float32{162, 161, 64, 48, 0.6, 0.1},  // the same cat again: NMS drops it
			[]float32{80, 120, 40, 40, 0.1, 0.8},   // dog
			[]float32{200, 200, 10, 10, 0.1, 0.2},  // below the threshold
		)}},
		meta: ultralyticsDetect,
		check: []string{"model det: ONNX metadata_props: Ultralytics 8.3.40, task detect, 2 class names (cat, dog), imgsz 320x320, stride 32, batch 1",
			`pipeline p: output "output0": detections by default, as the model's ONNX metadata_props says task detect`,
			`pipeline p: output "output0": detections, format yolov8 (`, `pipeline p: output "output0": 2 labels from the model's ONNX metadata_props`},
	},
	{
		// YOLOv5/YOLOv7: [1, N, 5+C] rows with objectness; its exporter
		// writes stride and names only.
		name: "yolov5",
		outs: []pb.ConstOutput{{Name: "output", Type: pb.DTFloat, Dims: []int64{1, 32, 7}, Values: rows(32,
			[]float32{160, 160, 64, 48, 0.9, 1, 0},    // cat 0.9
			[]float32{80, 120, 40, 40, 0.5, 0.2, 0.9}, // dog 0.45
			[]float32{200, 200, 10, 10, 0.2, 1, 0},    // 0.2: below
		)}},
		meta:  [][2]string{{"stride", "32"}, {"names", "{0: 'cat', 1: 'dog'}"}},
		post:  "[[pipeline.postprocess]]\noutput = \"output\"\nkind = \"detections\"\n",
		check: []string{`output "output": detections, format yolov5 (the only format the output's shape fits)`},
	},
	{
		// YOLOv10/YOLO26 end-to-end, float16 output: final boxes, no NMS.
		name: "end2end",
		outs: []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat16, Dims: []int64{1, 16, 6}, Values: rows(16,
			[]float32{128, 136, 192, 184, 0.875, 0},
			[]float32{130, 138, 194, 186, 0.75, 0}, // overlaps the first: kept, the model did its own selection
			[]float32{60, 100, 100, 140, 0.5, 1},
		)}},
		meta:  withMeta(ultralyticsDetect, [2]string{"end2end", "True"}, [2]string{"description", "Ultralytics YOLO26n model"}),
		check: []string{`format end2end (ONNX metadata_props says end2end`},
	},
	{
		// TensorRT's EfficientNMS plugin's four outputs, as an ONNX model
		// with them as outputs: int32 counts and classes, float16 scores.
		name: "efficientnms",
		outs: []pb.ConstOutput{
			{Name: "num_dets", Type: pb.DTInt32, Dims: []int64{1, 1}, Values: []float32{2}},
			{Name: "det_boxes", Type: pb.DTFloat, Dims: []int64{1, 8, 4}, Values: rows(8, []float32{128, 136, 192, 184}, []float32{60, 100, 100, 140}, []float32{1, 2, 3, 4})},
			{Name: "det_scores", Type: pb.DTFloat16, Dims: []int64{1, 8}, Values: []float32{0.875, 0.5, 0.9, 0, 0, 0, 0, 0}},
			{Name: "det_classes", Type: pb.DTInt32, Dims: []int64{1, 8}, Values: []float32{0, 1, 1, 0, 0, 0, 0, 0}},
		},
		post:  "[[pipeline.postprocess]]\noutput = \"det_boxes\"\nkind = \"detections\"\nlabels = [\"cat\", \"dog\"]\n",
		check: []string{`output "det_boxes": detections, format efficientnms (the EfficientNMS plugin's four outputs), reading "num_dets", "det_scores", "det_classes" with it`},
	},
	{
		// RT-DETR as Ultralytics exports it: [1, queries, 4+C], boxes as
		// fractions of the input.
		name: "rtdetr",
		outs: []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat, Dims: []int64{1, 16, 6}, Values: rows(16,
			[]float32{0.5, 0.5, 0.2, 0.15, 0.9, 0.05},
			[]float32{0.25, 0.375, 0.125, 0.125, 0.1, 0.7},
		)}},
		meta:  withMeta(ultralyticsDetect, [2]string{"description", "Ultralytics rtdetr-l model trained on pets.yaml"}),
		check: []string{`format rtdetr (ONNX metadata_props describes an RT-DETR model)`},
	},
	{
		// YOLOv8/YOLO11 pose: [1, 4+1+K×3, N], kpt_shape in the metadata.
		name: "keypoints",
		outs: []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat, Dims: []int64{1, 14, 32}, Values: rowsT(32,
			[]float32{160, 160, 64, 96, 0.9, 150, 130, 0.95, 170, 130, 0.9, 160, 190, 0.4},
			[]float32{161, 160, 64, 96, 0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // the same person: NMS drops it
		)}},
		meta: withMeta(ultralyticsDetect, [2]string{"task", "pose"}, [2]string{"names", "{0: 'person'}"}, [2]string{"kpt_shape", "[3, 3]"},
			[2]string{"description", "Ultralytics YOLO11n-pose model"}),
		check: []string{"task pose, 1 class names (person)", "keypoints 3x3", `output "output0": keypoints, format yolov8`},
	},
	{
		// Outputs of every other element type, sent raw.
		name: "raw_types",
		outs: []pb.ConstOutput{
			{Name: "half", Type: pb.DTFloat16, Dims: []int64{1, 3}, Values: []float32{0.5, -2, 1024}},
			{Name: "counts", Type: pb.DTInt64, Dims: []int64{1, 2}, Values: []float32{7, 16777216}},
			{Name: "ids", Type: pb.DTInt32, Dims: []int64{1, 2}, Values: []float32{-3, 42}},
			{Name: "small", Type: pb.DTInt8, Dims: []int64{1, 2}, Values: []float32{-128, 127}},
			{Name: "bytes", Type: pb.DTUint8, Dims: []int64{1, 2}, Values: []float32{0, 255}},
			{Name: "mask", Type: pb.DTBool, Dims: []int64{1, 3}, Values: []float32{1, 0, 1}},
		},
	},
}

// detectorConfig writes a configuration running model for a 640x480
// synthetic camera, letterboxed, with post-processing post.
func detectorConfig(t *testing.T, dir, model, post string) (cfg, sock string) {
	t.Helper()
	sock = filepath.Join(dir, "edged.sock")
	text := `[daemon]
device_id = "test"
[[source]]
name = "cam0"
kind = "synthetic"
width = 640
height = 480
fps = 30.0
[[model]]
name = "det"
path = "` + model + `"
[[pipeline]]
name = "p"
source = "cam0"
model = "det"
sinks = ["local"]
[pipeline.preprocess]
resize = "letterbox"
` + post + `
[[sink]]
name = "local"
kind = "socket"
path = "` + sock + `"
`
	cfg = filepath.Join(dir, "edged.toml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, sock
}

// volatile are the parts of a result that change from frame to frame.
var volatile = regexp.MustCompile(`"(seq|frame_seq|t_capture_ns)":-?\d+|"latency_us":\{[^}]*\}`)

// blank zeroes a result's seq, frame_seq and t_capture_ns and empties its
// latency_us.
func blank(rec []byte) []byte {
	return volatile.ReplaceAllFunc(rec, func(m []byte) []byte {
		if bytes.HasPrefix(m, []byte(`"latency_us"`)) {
			return []byte(`"latency_us":{}`)
		}
		return append(m[:bytes.IndexByte(m, ':')+1], '0')
	})
}

// firstResult reads the socket's first result record as sent.
func firstResult(t *testing.T, sock string) []byte {
	t.Helper()
	var c net.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading the socket: %v", err)
		}
		if bytes.HasPrefix(line, []byte(`{"type":"result"`)) {
			return line
		}
	}
}

// TestDetectorFormatsEndToEnd runs one ONNX model per detector format
// (and one with outputs of every other element type) through the real
// binary and ONNX Runtime, with the camera letterboxed into the model's
// input, and compares the first result with testdata/detectors/NAME.ndjson
// (seq, times and latencies blanked): boxes in camera pixels, labels from
// the models' metadata, keypoints, raw values with their types. edged
// check says what it found in the metadata and how it reads each output.
func TestDetectorFormatsEndToEnd(t *testing.T) {
	lib := needORT(t)
	for _, m := range detectorModels {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			model := filepath.Join(dir, m.name+".onnx")
			if err := os.WriteFile(model, pb.ConstModel("images", detH, detW, m.outs, m.meta...), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, sock := detectorConfig(t, dir, model, m.post)
			out, code := runCheck(t, lib, cfg)
			if code != 0 {
				t.Fatalf("edged check exit %d:\n%s", code, out)
			}
			for _, w := range m.check {
				if !strings.Contains(out, w) {
					t.Errorf("edged check does not say %q:\n%s", w, out)
				}
			}
			d := start(t, lib, cfg, sock)
			got := blank(firstResult(t, sock))
			if code, _ := d.stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM", code)
			}
			golden := filepath.Join("testdata", "detectors", m.name+".ndjson")
			if *updateDetectors {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestDetectorFormatsEndToEnd -update-detectors to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("result differs from %s:\n got %s\nwant %s", golden, got, want)
			}
		})
	}
}

// TestAmbiguousDetectorRefused: a [1, 300, 6] output with nothing else to
// go by is end-to-end boxes or a two-class YOLOv8 (or more): edged check
// and edged run refuse it at the table's position, naming the readings,
// instead of guessing; format = "end2end" makes it run.
func TestAmbiguousDetectorRefused(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "e2e.onnx")
	outs := []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat, Dims: []int64{1, 300, 6}, Values: rows(300, []float32{10, 50, 20, 60, 0.9, 1})}}
	if err := os.WriteFile(model, pb.ConstModel("images", detH, detW, outs), 0o644); err != nil {
		t.Fatal(err)
	}
	post := "[[pipeline.postprocess]]\noutput = \"output0\"\nkind = \"detections\"\n"
	cfg, sock := detectorConfig(t, dir, model, post)
	out, code := runCheck(t, lib, cfg)
	if code != exitConfig {
		t.Fatalf("edged check exit %d, want %d:\n%s", code, exitConfig, out)
	}
	for _, w := range []string{cfg + ":19:1: pipeline[0].postprocess[0].format: model \"det\" output output0:float32[1,300,6]: postprocess: the output format is ambiguous: it can be read as end2end (300 final boxes",
		"or as yolov8 (300 boxes of cx, cy, w, h and 2 class scores)", `set format = "end2end" (or another) for it`} {
		if !strings.Contains(out, w) {
			t.Errorf("edged check does not say %q:\n%s", w, out)
		}
	}
	d := start(t, lib, cfg, sock)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatal("edged run did not refuse the configuration")
	}
	if c := d.cmd.ProcessState.ExitCode(); c != exitConfig || !strings.Contains(d.stderr.String(), "the output format is ambiguous") {
		t.Fatalf("edged run exit %d:\n%s", c, d.stderr.String())
	}
	cfg, _ = detectorConfig(t, dir, model, post+"format = \"end2end\"\n")
	if out, code := runCheck(t, lib, cfg); code != 0 || !strings.Contains(out, `format end2end (format = "end2end" in the configuration)`) {
		t.Fatalf("with format = \"end2end\": exit %d\n%s", code, out)
	}
}
