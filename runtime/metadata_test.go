package runtime

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt"
)

// namedDetector is a YOLOv8-layout model ([1, 6, 32]: 2 classes) whose
// metadata_props name its classes and its task, as an Ultralytics export's
// do; its one box is of class 1.
func namedDetector(names string) []byte {
	v := make([]float32, 6*32)
	for a, x := range []float32{16, 16, 8, 8, 0.1, 0.9} {
		v[a*32] = x
	}
	return pb.ConstModel("images", 32, 32, []pb.ConstOutput{{Name: "output0", Type: pb.DTFloat, Dims: []int64{1, 6, 32}, Values: v}},
		[2]string{"author", "Ultralytics"}, [2]string{"task", "detect"}, [2]string{"names", names})
}

func lastLabel(s *recordingSink) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.results) == 0 || len(s.results[len(s.results)-1].Outputs) == 0 {
		return ""
	}
	d := s.results[len(s.results)-1].Outputs[0].Detections
	if len(d) == 0 {
		return ""
	}
	return d[0].Label
}

// TestReloadTakesNewClassNames: the labels of a pipeline that sets none
// are the class names in its model file; a reload whose file names other
// classes serves them from its first result on, and one whose names do
// not fit the output (3 names, 2 classes) is rejected while the engine
// before it keeps serving.
func TestReloadTakesNewClassNames(t *testing.T) {
	backend := ortBackend(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "det.onnx")
	writeAtomic(t, model, namedDetector("{0: 'cat', 1: 'dog'}"))
	cfg, err := config.Parse("", []byte(`
[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 64
fps = 100.0
[[model]]
name = "det"
path = "`+model+`"
[[pipeline]]
name = "p"
source = "cam0"
model = "det"
sinks = ["s"]
[[sink]]
name = "s"
kind = "socket"
`))
	if err != nil {
		t.Fatal(err)
	}
	sink := newRecordingSink()
	_, _, stop := runDaemon(t, Options{Config: cfg, Factories: testFactories(t, sink, backend)})
	sink.waitResults(t, 1, 30*time.Second)
	if l := lastLabel(sink); l != "dog" {
		t.Fatalf("label %q, want dog (from the model's metadata)", l)
	}
	writeAtomic(t, model, namedDetector("{0: 'tabby', 1: 'terrier'}"))
	waitFor(t, 30*time.Second, func() bool { return latestGeneration(sink) == 2 })
	sink.mu.Lock()
	for _, r := range sink.results {
		if d := r.Outputs[0].Detections; r.Engine.Generation == 2 && (len(d) != 1 || d[0].Label != "terrier") {
			t.Errorf("generation 2 result %+v, want the label terrier", d)
		}
	}
	sink.mu.Unlock()

	writeAtomic(t, model, namedDetector("{0: 'a', 1: 'b', 2: 'c'}"))
	waitFor(t, 30*time.Second, func() bool { return hasStatus(sink, "engine_rejected") })
	var reason string
	sink.mu.Lock()
	for _, r := range sink.status {
		if r.Event == "engine_rejected" {
			reason = r.Reason
		}
	}
	sink.mu.Unlock()
	if !strings.Contains(reason, "yolov8 has 2 classes, but the model's ONNX metadata_props names 3; set labels") {
		t.Errorf("engine_rejected reason %q", reason)
	}
	n := len(sink.waitResults(t, 1, time.Second))
	rs := sink.waitResults(t, n+5, 30*time.Second)
	if last := rs[len(rs)-1]; last.Engine.Generation != 2 || last.Outputs[0].Detections[0].Label != "terrier" {
		t.Errorf("after the rejection: generation %d, %+v", last.Engine.Generation, last.Outputs[0].Detections)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// planConfig is a pipeline of model m with the postprocess tables post.
func planConfig(t *testing.T, pre, post string) (*config.Config, *config.Pipeline) {
	t.Helper()
	cfg, err := config.Parse("edged.toml", []byte(`
[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 64
[[model]]
name = "m"
path = "m.onnx"
[[pipeline]]
name = "p"
source = "cam0"
model = "m"
sinks = ["s"]
[pipeline.preprocess]
`+pre+`
`+post+`
[[sink]]
name = "s"
kind = "socket"
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, &cfg.Pipelines[0]
}

func sigOf(in []int64, outs ...trt.TensorSpec) trt.Signature {
	return trt.Signature{Inputs: []trt.TensorSpec{{Name: "images", Type: trt.Float32, Shape: in}}, Outputs: outs}
}

// TestPlanFromMetadata: what planEngine takes from a model's metadata and
// what it refuses.
func TestPlanFromMetadata(t *testing.T) {
	det := trt.TensorSpec{Name: "output0", Type: trt.Float16, Shape: []int64{1, 84, 8400}}
	names := map[int]string{}
	for i := range 80 {
		names[i] = fmt.Sprintf("c%d", i)
	}
	md := &trt.Metadata{From: trt.FromEngineHeader, Producer: "Ultralytics 8.3.40", Task: trt.TaskDetect, Names: names,
		Imgsz: []int{640, 640}, Stride: 32}

	// The task's default, labels from the names, no problem.
	cfg, pc := planConfig(t, "", "")
	p, err := planEngine(cfg, pc, sigOf([]int64{1, 3, 640, 640}, det), md)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.post) != 1 || p.post[0].opts.Kind != "detections" || p.post[0].opts.Format != "yolov8" || len(p.post[0].opts.Labels) != 80 ||
		p.post[0].opts.Labels[79] != "c79" || p.post[0].opts.ScoreThreshold != float32(config.DefaultScoreThreshold) {
		t.Errorf("%+v", p.post)
	}

	// A fixed input that is not the exported size: the export is broken.
	_, err = planEngine(cfg, pc, sigOf([]int64{1, 3, 480, 640}, det), md)
	if err == nil || !strings.Contains(err.Error(), `pipeline[0].model: model "m" has a 640x480 input, but its Ultralytics engine header says it was exported for 640x640 (imgsz)`) {
		t.Errorf("fixed input of another size: %v", err)
	}
	// A dynamic input set to another size runs, with a note; one that is
	// not a multiple of the stride gets another.
	cfg, pc = planConfig(t, "width = 320\nheight = 250", "")
	p, err = planEngine(cfg, pc, sigOf([]int64{1, 3, 250, 320}, det), md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Join(p.notes, "\n"); !strings.Contains(n, "exported for 640x640 (Ultralytics engine header imgsz) and runs at 320x250") ||
		!strings.Contains(n, "not a multiple of the model's stride 32") {
		t.Errorf("notes %q", p.notes)
	}

	// classify: top-k of the names.
	cls := trt.TensorSpec{Name: "output0", Type: trt.Float32, Shape: []int64{1, 3}}
	cfg, pc = planConfig(t, "", "")
	p, err = planEngine(cfg, pc, sigOf([]int64{1, 3, 64, 64}, cls), &trt.Metadata{From: trt.FromONNXProps, Task: trt.TaskClassify, Names: map[int]string{0: "a", 1: "b", 2: "c"}})
	if err != nil || len(p.post) != 1 || p.post[0].opts.Kind != "topk" || p.post[0].opts.K != 1 || p.post[0].opts.Labels[2] != "c" {
		t.Errorf("classify: %+v %v", p.post, err)
	}
	// A task whose default does not fit the output sends it raw and says so.
	p, err = planEngine(cfg, pc, sigOf([]int64{1, 3, 64, 64}, cls), &trt.Metadata{From: trt.FromONNXProps, Task: trt.TaskDetect})
	if err != nil || p.post[0].opts.Kind != "raw" || !strings.Contains(strings.Join(p.notes, "\n"), `output "output0": sent raw: the model's task suggests detections, but`) {
		t.Errorf("detect task on [1,3]: %+v %v %q", p.post, err, p.notes)
	}
	// Configured labels win over the names.
	cfg, pc = planConfig(t, "", "[[pipeline.postprocess]]\noutput = \"output0\"\nkind = \"topk\"\nlabels = [\"x\", \"y\", \"z\"]\n")
	p, err = planEngine(cfg, pc, sigOf([]int64{1, 3, 64, 64}, cls), &trt.Metadata{From: trt.FromONNXProps, Names: map[int]string{0: "a", 1: "b", 2: "c"}})
	if err != nil || p.post[0].opts.Labels[0] != "x" {
		t.Errorf("configured labels: %+v %v", p.post, err)
	}
}
