package trt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeMetadataJSON(t *testing.T) {
	var v map[string]any
	raw := `{"author": "Ultralytics", "version": "8.3.40", "task": "pose", "stride": 32, "batch": 1,
		"imgsz": [480, 640], "names": {"0": "person"}, "kpt_shape": [17, 3], "end2end": false,
		"args": {"batch": 1, "nms": true}, "channels": 3, "date": "2025-01-01"}`
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	m, errs := DecodeMetadata(FromEngineHeader, v)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := &Metadata{
		From: FromEngineHeader, Producer: "Ultralytics 8.3.40", Task: TaskPose, Names: map[int]string{0: "person"},
		Imgsz: []int{480, 640}, Stride: 32, Batch: 1, Channels: 3, End2End: true, KptShape: []int{17, 3},
		Keys: []string{"args", "author", "batch", "channels", "date", "end2end", "imgsz", "kpt_shape", "names", "stride", "task", "version"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %+v\nwant %+v", m, want)
	}
	if s := m.String(); s != "Ultralytics engine header: Ultralytics 8.3.40, task pose, 1 class names (person), imgsz 640x480, stride 32, batch 1, end-to-end (outputs final boxes), keypoints 17x3" {
		t.Errorf("String = %q", s)
	}
}

// The ONNX exporters write str(value); so do tools that copy those into
// an engine header.
func TestDecodeMetadataPythonText(t *testing.T) {
	m, errs := DecodeMetadata(FromONNXProps, map[string]any{
		"names":   "{0: 'person', 1: \"O'Neil\", 2: 'car'}",
		"imgsz":   "[640, 640]",
		"stride":  "32",
		"batch":   "1",
		"end2end": "True",
		"task":    "detect",
		"args":    "{'batch': 1, 'half': False, 'nms': False, 'fraction': 1.0}",
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := strings.Join(m.ClassNames(), "|"); got != "person|O'Neil|car" {
		t.Errorf("names %q", got)
	}
	if m.Stride != 32 || m.Batch != 1 || !m.End2End || m.Task != TaskDetect || !reflect.DeepEqual(m.Imgsz, []int{640, 640}) {
		t.Errorf("%+v", m)
	}
	// YOLOv5 wrote a list of names.
	m, errs = DecodeMetadata(FromONNXProps, map[string]any{"names": "['a', 'b']", "stride": "[8, 16, 32]"})
	if len(errs) > 0 || strings.Join(m.ClassNames(), ",") != "a,b" || m.Stride != 32 {
		t.Errorf("%+v %v", m, errs)
	}
}

func TestDecodeMetadataProblems(t *testing.T) {
	m, errs := DecodeMetadata(FromONNXProps, map[string]any{
		"names":     "{0: 'a', 'x': 'b'}",
		"imgsz":     "[640, -1]",
		"stride":    "big",
		"kpt_shape": "[17, 4]",
		"end2end":   "1",
		"task":      "detect",
	})
	if len(errs) != 5 || len(m.Problems) != 5 {
		t.Fatalf("errors %v, problems %v", errs, m.Problems)
	}
	if m.Names != nil || m.Imgsz != nil || m.Stride != 0 || m.KptShape != nil || m.End2End || m.Task != TaskDetect {
		t.Errorf("bad values were kept: %+v", m)
	}
	for _, want := range []string{`key names: class index "x"`, "key imgsz", `key stride: "big" is not a Python literal`, "key kpt_shape", "key end2end"} {
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Error(), want)
		}
		if !found {
			t.Errorf("no error says %q: %v", want, errs)
		}
	}
	if !strings.Contains(m.String(), "ignored: end2end") {
		t.Errorf("String does not list the problems: %s", m)
	}
}

func TestClassNamesGaps(t *testing.T) {
	m := &Metadata{Names: map[int]string{0: "a", 2: "c"}}
	if m.ClassNames() != nil {
		t.Error("names with a gap gave a list")
	}
	if !strings.Contains(m.String(), "2 class names (indices not 0..1)") {
		t.Error(m.String())
	}
	var none *Metadata
	if none.ClassNames() != nil || none.String() != "no metadata" {
		t.Error("nil metadata")
	}
}

type metaEngine struct {
	Engine
	m *Metadata
}

func (e metaEngine) Metadata() *Metadata { return e.m }

func TestMetadataOf(t *testing.T) {
	m := &Metadata{Task: TaskDetect}
	if MetadataOf(metaEngine{m: m}) != m {
		t.Error("MetadataOf did not ask the engine")
	}
	if MetadataOf(struct{ Engine }{}) != nil {
		t.Error("an engine without metadata has some")
	}
}
