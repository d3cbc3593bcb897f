//go:build hil && tensorrt

package tensorrt

// Hardware-in-the-loop tests of TensorRT's plugins and of DLA, for a
// Jetson Orin (NX or AGX: the Orin Nano has no DLA). docs/HIL.md says how
// to build the engines. Environment, besides hil_test.go's:
//
//	EDGED_HIL_WRITE_NMS_ONNX  write the EfficientNMS test model here and stop (TestHILWriteNMSModel)
//	EDGED_HIL_NMS_ENGINE      engine trtexec built from that model (TestHILStandardPlugins)
//	EDGED_HIL_DLA_ENGINE      engine trtexec built from EDGED_HIL_ONNX with --useDLACore (TestHILDLA)
//	EDGED_HIL_DLA_CORE        the core it was built for (default 0)

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/demomodel"
)

// nmsModel is an ONNX model ending in TensorRT's EfficientNMS_TRT plugin:
// eight fixed boxes of two classes (made to depend on the image input),
// of which NMS keeps three: box 1 overlaps box 0 in class 0, box 3 is
// below the threshold.
func nmsModel() []byte {
	boxes := []float32{
		10, 10, 30, 30, // class 0, 0.9
		11, 11, 31, 31, // class 0, 0.8: suppressed by box 0
		40, 40, 60, 60, // class 1, 0.7
		5, 40, 15, 50, // 0.1 and 0.2: below 0.25
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	scores := []float32{0.9, 0.05, 0.8, 0.05, 0.1, 0.7, 0.1, 0.2, 0, 0, 0, 0, 0, 0, 0, 0}
	consts := []pb.Tensor{
		{Name: "zero", Dims: []int64{1}, Floats: []float32{0}},
		{Name: "axes", Dims: []int64{3}, Ints: []int64{1, 2, 3}},
		{Name: "boxes_c", Dims: []int64{1, 8, 4}, Floats: boxes},
		{Name: "scores_c", Dims: []int64{1, 8, 2}, Floats: scores},
	}
	nodes := []pb.Node{
		{Op: "ReduceSum", Name: "sum", Inputs: []string{"images", "axes"}, Outputs: []string{"sum"}, Attrs: []pb.Attr{pb.IntAttr("keepdims", 0)}},
		{Op: "Mul", Name: "nothing", Inputs: []string{"sum", "zero"}, Outputs: []string{"nothing"}},
		{Op: "Add", Name: "boxes", Inputs: []string{"boxes_c", "nothing"}, Outputs: []string{"boxes"}},
		{Op: "Add", Name: "scores", Inputs: []string{"scores_c", "nothing"}, Outputs: []string{"scores"}},
		{Op: "EfficientNMS_TRT", Name: "nms", Inputs: []string{"boxes", "scores"},
			Outputs: []string{"num_dets", "det_boxes", "det_scores", "det_classes"},
			Attrs: []pb.Attr{pb.IntAttr("background_class", -1), pb.IntAttr("box_coding", 0), pb.FloatAttr("iou_threshold", 0.45),
				pb.IntAttr("max_output_boxes", 8), pb.IntAttr("score_activation", 0),
				pb.FloatAttr("score_threshold", 0.25)}},
	}
	var g pb.Msg
	for _, n := range nodes {
		g = g.Bytes(pb.GraphNode, n.Encode())
	}
	g = g.Str(pb.GraphName, "efficientnms")
	for _, c := range consts {
		g = g.Bytes(pb.GraphInitializer, c.Encode())
	}
	g = g.Bytes(pb.GraphInput, pb.ValueInfo("images", 1, 3, 64, 64)).
		Bytes(pb.GraphOutput, pb.TypedValueInfo("num_dets", pb.DTInt32, 1, 1)).
		Bytes(pb.GraphOutput, pb.ValueInfo("det_boxes", 1, 8, 4)).
		Bytes(pb.GraphOutput, pb.ValueInfo("det_scores", 1, 8)).
		Bytes(pb.GraphOutput, pb.TypedValueInfo("det_classes", pb.DTInt32, 1, 8))
	return pb.Msg(nil).Varint(pb.ModelIRVersion, 8).Str(pb.ModelProducerName, "edged-hil").Bytes(pb.ModelGraph, g).
		Bytes(pb.ModelOpsetImport, pb.Msg(nil).Str(pb.OpsetDomain, "").Varint(pb.OpsetVersion, 17))
}

// TestHILWriteNMSModel writes the EfficientNMS model for trtexec.
func TestHILWriteNMSModel(t *testing.T) {
	p := os.Getenv("EDGED_HIL_WRITE_NMS_ONNX")
	if p == "" {
		t.Skip("EDGED_HIL_WRITE_NMS_ONNX is not set (see docs/HIL.md)")
	}
	if err := os.WriteFile(p, nmsModel(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: build it with trtexec --onnx=%s --saveEngine=nms.engine", p, p)
}

// TestHILStandardPlugins: an engine with the EfficientNMS_TRT layer loads
// with TensorRT's standard plugins ("auto"), its int32 and float outputs
// say what the model's boxes should give, and in a process with
// tensorrt_plugins = "off" it is refused naming the plugin.
func TestHILStandardPlugins(t *testing.T) {
	if os.Getenv("EDGED_HIL_NMS_ENGINE") == "" {
		t.Skip("EDGED_HIL_NMS_ENGINE is not set (see docs/HIL.md)")
	}
	if os.Getenv("EDGED_HIL_PLUGINS_OFF_CHILD") == "1" {
		h := setupHILOptions(t, Options{StandardPlugins: PluginsOff})
		_, err := h.b.Load(context.Background(), readEnvFile(t, "EDGED_HIL_NMS_ENGINE"), trt.LoadOptions{Name: "nms", Alloc: h.alloc})
		if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "EfficientNMS_TRT") {
			t.Fatalf("got %v, want ErrPlugin naming EfficientNMS_TRT", err)
		}
		t.Log(err)
		return
	}
	h := setupHILOptions(t, Options{StandardPlugins: PluginsAuto})
	t.Logf("plugins: %s", h.b.Plugins())
	e := h.load(t, h.b, readEnvFile(t, "EDGED_HIL_NMS_ENGINE"), "nms")
	defer e.Close()
	outs := e.Outputs()
	if len(outs) != 4 || outs[0].Type != trt.Int32 || outs[3].Type != trt.Int32 {
		t.Fatalf("outputs %v", trt.SignatureOf(e))
	}
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	num := outs[0].ReadFloat32(make([]float32, 1))
	boxes := outs[1].ReadFloat32(make([]float32, 32))
	scores := outs[2].ReadFloat32(make([]float32, 8))
	classes := outs[3].ReadFloat32(make([]float32, 8))
	if num == nil || num[0] != 2 || classes[0] != 0 || classes[1] != 1 || math.Abs(float64(scores[0]-0.9)) > 1e-3 || boxes[4] != 40 {
		t.Errorf("num_dets %v boxes %v scores %v classes %v; want 2 detections: class 0 at 10,10,30,30 (0.9), class 1 at 40,40,60,60", num, boxes, scores, classes)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHILStandardPlugins$", "-test.v")
	cmd.Env = append(os.Environ(), "EDGED_HIL_PLUGINS_OFF_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
		t.Fatalf("with tensorrt_plugins = \"off\": %v\n%s", err, out)
	}
}

// TestHILDLA: the DLA core count, an engine built for a DLA core
// (trtexec --useDLACore=N) running there against ONNX Runtime, and a core
// the module does not have refused.
func TestHILDLA(t *testing.T) {
	if os.Getenv("EDGED_HIL_DLA_ENGINE") == "" {
		t.Skip("EDGED_HIL_DLA_ENGINE is not set (see docs/HIL.md)")
	}
	n, err := DLACores(os.Getenv("EDGED_HIL_TRT_LIBRARY"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TensorRT finds %d DLA cores", n)
	if n == 0 {
		t.Skip("no DLA on this module (Orin Nano has none)")
	}
	core := envInt(t, "EDGED_HIL_DLA_CORE", 0)
	h := setupHILOptions(t, Options{UseDLA: true, DLACore: core})
	if h.b.DLACores() != n {
		t.Errorf("the backend's runtime finds %d DLA cores, the probe %d", h.b.DLACores(), n)
	}
	tol := envFloat(t, "EDGED_HIL_TOL", 0.25) // DLA runs fp16 or int8
	te := h.load(t, h.b, readEnvFile(t, "EDGED_HIL_DLA_ENGINE"), "dla")
	defer te.Close()
	oe := h.load(t, h.ort, readEnvFile(t, "EDGED_HIL_ONNX"), "onnx")
	defer oe.Close()
	ctx := context.Background()
	for i := range 32 {
		bg := mustFrame(t, te, i)
		mustFrame(t, oe, i)
		if err := te.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		if err := oe.Infer(ctx); err != nil {
			t.Fatal(err)
		}
		got, want := te.Outputs()[0].ReadFloat32(make([]float32, 64)), oe.Outputs()[0].Float32()
		for j := range want {
			if d := math.Abs(float64(got[j] - want[j])); math.IsNaN(float64(got[j])) || d > tol {
				t.Errorf("frame %d output %d: DLA %v, ONNX Runtime %v", i, j, got[j], want[j])
			}
		}
		if c, w := argmax(got[:len(want)]), demomodel.Expected(bg, envInt(t, "EDGED_HIL_VARIANT", 0)); c != w {
			t.Errorf("frame %d: class %d, want %d", i, c, w)
		}
	}
	_, err = New(Options{Library: os.Getenv("EDGED_HIL_TRT_LIBRARY"), GPU: h.gpu, UseDLA: true, DLACore: n})
	if !errors.Is(err, ErrDLA) {
		t.Errorf("DLA core %d of %d: %v, want ErrDLA", n, n, err)
	}
	t.Log(err)
}
