package onnx_test

import (
	"errors"
	"strings"
	"testing"

	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
	"github.com/edged-dev/edged/trt/onnx"
)

// ultralyticsModel is a ModelProto with the metadata_props an Ultralytics
// detection export writes (the graph is a stand-in: ReadMetadata skips it).
func ultralyticsModel(extra ...pb.Msg) []byte {
	m := pb.Msg(nil).Varint(pb.ModelIRVersion, 8).Str(pb.ModelProducerName, "pytorch").Str(pb.ModelProducerVersion, "2.5.1").
		Bytes(pb.ModelGraph, pb.Msg(nil).Str(pb.GraphName, "main_graph"))
	for _, e := range []pb.Msg{
		pb.Entry("description", "Ultralytics YOLO11n model trained on coco.yaml"),
		pb.Entry("author", "Ultralytics"),
		pb.Entry("version", "8.3.40"),
		pb.Entry("stride", "32"),
		pb.Entry("task", "detect"),
		pb.Entry("batch", "1"),
		pb.Entry("imgsz", "[640, 640]"),
		pb.Entry("names", "{0: 'person', 1: 'bicycle', 2: \"it's\"}"),
		pb.Entry("args", "{'batch': 1, 'half': False, 'dynamic': False, 'simplify': True, 'opset': None, 'nms': False}"),
		pb.Entry("channels", "3"),
	} {
		m = m.Bytes(pb.ModelMetadataProps, e)
	}
	for _, e := range extra {
		m = m.Bytes(pb.ModelMetadataProps, e)
	}
	return m
}

func TestReadMetadata(t *testing.T) {
	md, err := onnx.ReadMetadata(ultralyticsModel())
	if err != nil {
		t.Fatal(err)
	}
	if md.From != trt.FromONNXProps || md.Producer != "Ultralytics 8.3.40" || md.Task != trt.TaskDetect ||
		md.Stride != 32 || md.Batch != 1 || md.Channels != 3 || md.End2End || len(md.Problems) > 0 {
		t.Errorf("%+v", md)
	}
	if got := strings.Join(md.ClassNames(), "|"); got != "person|bicycle|it's" {
		t.Errorf("names %q", got)
	}
	if len(md.Imgsz) != 2 || md.Imgsz[0] != 640 || md.Imgsz[1] != 640 {
		t.Errorf("imgsz %v", md.Imgsz)
	}

	// end2end and pose keys; a broken value is a problem, not an error.
	md, err = onnx.ReadMetadata(ultralyticsModel(pb.Entry("end2end", "True"), pb.Entry("kpt_shape", "[17, 3]"),
		pb.Entry("imgsz", "[640, 'x']")))
	if err != nil {
		t.Fatal(err)
	}
	if !md.End2End || len(md.KptShape) != 2 || md.KptShape[0] != 17 || len(md.Problems) != 1 || md.Imgsz != nil {
		t.Errorf("%+v", md)
	}

	// The demo model has metadata_props of its own, none of them known;
	// its producer is the ONNX producer.
	demo, err := demomodel.Variant(0)
	if err != nil {
		t.Fatal(err)
	}
	md, err = onnx.ReadMetadata(demo)
	if err != nil || md == nil || md.Task != "" || md.Names != nil || !strings.HasPrefix(md.Producer, "edged") {
		t.Errorf("demo model: %+v %v", md, err)
	}
	if !strings.Contains(md.String(), "keys edged.labels, edged.variant") {
		t.Errorf("demo model: %s", md)
	}

	// No metadata_props: nil.
	md, err = onnx.ReadMetadata(pb.Msg(nil).Varint(pb.ModelIRVersion, 8).Bytes(pb.ModelGraph, pb.Msg(nil).Str(pb.GraphName, "g")))
	if md != nil || err != nil {
		t.Errorf("no props: %v %v", md, err)
	}
}

func TestReadMetadataBroken(t *testing.T) {
	good := ultralyticsModel()
	for _, n := range []int{1, 7, len(good) - 3} {
		if _, err := onnx.ReadMetadata(good[:n]); !errors.Is(err, trt.ErrEngineInvalid) {
			t.Errorf("cut to %d bytes: %v, want ErrEngineInvalid", n, err)
		}
	}
	if _, err := onnx.ReadMetadata([]byte{0x08, 0x08, 0x77}); !errors.Is(err, trt.ErrEngineInvalid) {
		t.Errorf("wire type 7: %v", err)
	}
}

func FuzzReadMetadata(f *testing.F) {
	f.Add(ultralyticsModel())
	f.Add(ultralyticsModel(pb.Entry("kpt_shape", "[17, 3]"), pb.Entry("end2end", "True")))
	f.Fuzz(func(t *testing.T, b []byte) {
		md, err := onnx.ReadMetadata(b)
		if err != nil && !errors.Is(err, trt.ErrEngineInvalid) {
			t.Fatalf("%v does not wrap ErrEngineInvalid", err)
		}
		_ = md.String()
	})
}
