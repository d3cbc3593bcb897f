//go:build tensorrt && cgo && linux

package tensorrt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
)

// pluginPlan is a fake plan whose deserialisation needs the plugins named.
func pluginPlan(names ...string) []byte {
	body := "tensor in x 0 0 1,4\ntensor out y 0 0 1,4\n"
	for _, n := range names {
		body += "flag plugin=" + n + "\n"
	}
	return fakePlan(10, 3, body)
}

func logText(b *Backend) string {
	lines, _ := drain(b)
	return strings.Join(lines, "\n")
}

// TestFakeCustomPlugin: an engine with a custom plugin layer fails to
// deserialise, naming the plugin and what to set, until the model's
// plugins load the library that registers it.
func TestFakeCustomPlugin(t *testing.T) {
	_, custom := fakePluginLibraries(t)
	b, _ := newBackend(t, Options{})
	_, err := b.Load(context.Background(), pluginPlan("YoloLayer_TRT"), trt.LoadOptions{Name: "yolo", Alloc: cpuAlloc{}})
	if !errors.Is(err, ErrPlugin) || !errors.Is(err, trt.ErrEngineInvalid) || trt.RejectReason(err) != trt.ReasonInvalid {
		t.Fatalf("without the plugin library: %v", err)
	}
	for _, want := range []string{"the engine uses the TensorRT plugin YoloLayer_TRT (version 1), which no loaded plugin library registers",
		`plugins = ["/path/to/lib.so"]`, "Cannot find plugin: YoloLayer_TRT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	withPlugin, _ := newBackend(t, Options{Plugins: []string{custom}, LogLevel: SeverityInfo})
	e, err := withPlugin.Load(context.Background(), pluginPlan("YoloLayer_TRT"), trt.LoadOptions{Name: "yolo", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if log := logText(withPlugin); !strings.Contains(log, "plugins registered: ") || !strings.Contains(log, "YoloLayer_TRT") {
		t.Errorf("log: %s", log)
	}
	if !strings.Contains(withPlugin.Plugins(), "custom: "+custom) {
		t.Errorf("Plugins() = %q", withPlugin.Plugins())
	}
	// The same library for a second model is not loaded again (the
	// registry would count a duplicate registration).
	again, _ := newBackend(t, Options{Plugins: []string{custom}})
	e, err = again.Load(context.Background(), pluginPlan("YoloLayer_TRT"), trt.LoadOptions{Name: "yolo2", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// TestFakePluginFileChecked: plugin files are checked before dlopen.
func TestFakePluginFileChecked(t *testing.T) {
	_, custom := fakePluginLibraries(t)
	dir := t.TempDir()
	data, err := os.ReadFile(custom)
	if err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "libopen.so")
	os.WriteFile(open, data, 0o644)
	os.Chmod(open, 0o666)
	text := filepath.Join(dir, "libtext.so")
	os.WriteFile(text, []byte("not a library"), 0o644)
	for _, tc := range []struct{ path, want string }{
		{open, "chmod go-w"},
		{text, "not an ELF shared object"},
		{filepath.Join(dir, "missing.so"), "no such file"},
	} {
		_, err := New(Options{Library: fakeLibrary(t), GPU: &fakeGPU{}, Plugins: []string{tc.path}})
		if !errors.Is(err, ErrPlugin) || !errors.Is(err, trt.ErrPluginFile) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrPlugin saying %q", tc.path, err, tc.want)
		}
	}
}

// TestFakePluginsInAFreshProcess runs the process-wide parts (TensorRT's
// standard plugins are initialised once per process) in child processes
// of this test binary, whose first backend is the one under test.
func TestFakePluginsInAFreshProcess(t *testing.T) {
	if mode := os.Getenv("EDGED_PLUGIN_CHILD"); mode != "" {
		pluginChild(t, mode)
		return
	}
	fakeLibrary(t) // skip here, not in the children, without headers
	for _, mode := range []string{"order", "off", "auto-missing"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestFakePluginsInAFreshProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "EDGED_PLUGIN_CHILD="+mode, "EDGED_FAKE_NVINFER="+fakeLibrary(t))
			out, err := cmd.CombinedOutput()
			if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
				t.Fatalf("child %s: %v\n%s", mode, err, out)
			}
		})
	}
}

func pluginChild(t *testing.T, mode string) {
	std, custom := fakePluginLibraries(t)
	ctx := context.Background()
	switch mode {
	case "order":
		// A model's custom plugins first, then TensorRT's standard ones,
		// then the engine: the registry shows that order.
		b, _ := newBackend(t, Options{Plugins: []string{custom}, StandardPlugins: std, LogLevel: SeverityInfo})
		e, err := b.Load(ctx, pluginPlan("YoloLayer_TRT", "EfficientNMS_TRT"), trt.LoadOptions{Name: "m", Alloc: cpuAlloc{}})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		log := logText(b)
		for _, want := range []string{"fake plugins: initLibNvInferPlugins call 1",
			"plugins registered: YoloLayer_TRT,EfficientNMS_TRT,BatchedNMS_TRT"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
		if i, j := strings.Index(log, "initLibNvInferPlugins call 1"), strings.Index(log, "deserializing with"); i < 0 || j < i {
			t.Errorf("the standard plugins were not initialised before the first deserialisation:\n%s", log)
		}
		// A second backend does not initialise them again.
		c, _ := newBackend(t, Options{StandardPlugins: std, LogLevel: SeverityInfo})
		e, err = c.Load(ctx, pluginPlan("EfficientNMS_TRT"), trt.LoadOptions{Name: "m2", Alloc: cpuAlloc{}})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		if log := logText(c); strings.Contains(log, "call 2") {
			t.Errorf("initialised twice:\n%s", log)
		}
		if !strings.Contains(c.Plugins(), std+" (TensorRT's standard plugins)") {
			t.Errorf("Plugins() = %q", c.Plugins())
		}
	case "off":
		b, _ := newBackend(t, Options{StandardPlugins: PluginsOff})
		_, err := b.Load(ctx, pluginPlan("EfficientNMS_TRT"), trt.LoadOptions{Name: "nms", Alloc: cpuAlloc{}})
		if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), `TensorRT's standard plugins not loaded ([gpu] tensorrt_plugins = "off")`) ||
			!strings.Contains(err.Error(), "EfficientNMS_TRT (version 1)") {
			t.Fatalf("%v", err)
		}
	case "auto-missing":
		// A libnvinfer with no libnvinfer_plugin beside it or installed:
		// "auto" says so and goes on; the engine that needs one names it.
		lib := filepath.Join(t.TempDir(), "libnvinfer.so.10")
		data, err := os.ReadFile(fakeLibrary(t))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(lib, data, 0o755)
		b, err := New(Options{Library: lib, GPU: &fakeGPU{}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if log := logText(b); !strings.Contains(log, "TensorRT's standard plugins are not available") ||
			!strings.Contains(log, "libnvinfer-plugin10") {
			t.Errorf("no warning: %s", log)
		}
		_, err = b.Load(ctx, pluginPlan("BatchedNMS_TRT"), trt.LoadOptions{Name: "nms", Alloc: cpuAlloc{}})
		if !errors.Is(err, ErrPlugin) || !strings.Contains(err.Error(), "libnvinfer_plugin.so.10 is not installed") {
			t.Fatalf("%v", err)
		}
	}
}

// TestFakeDLA: the DLA core is set on the runtime before deserialisation,
// a core the device lacks is refused, and an engine built for a DLA core
// does not load on the GPU runtime.
func TestFakeDLA(t *testing.T) {
	t.Setenv("EDGED_FAKE_DLA_CORES", "2")
	ctx := context.Background()
	dlaPlan := func(core string) []byte {
		return fakePlan(10, 3, "tensor in x 0 0 1,4\ntensor out y 0 0 1,4\nflag dla="+core+"\n")
	}
	b, _ := newBackend(t, Options{UseDLA: true, DLACore: 1, LogLevel: SeverityInfo})
	if b.DLACores() != 2 {
		t.Errorf("DLACores = %d", b.DLACores())
	}
	e, err := b.Load(ctx, dlaPlan("1"), trt.LoadOptions{Name: "dla", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	log := logText(b)
	if i, j := strings.Index(log, "setDLACore(1) with 2 DLA cores"), strings.Index(log, "deserializing with DLA core 1"); i < 0 || j < i {
		t.Errorf("setDLACore did not come before the deserialisation:\n%s", log)
	}
	if n, err := DLACores(fakeLibrary(t)); n != 2 || err != nil {
		t.Errorf("DLACores() = %d, %v", n, err)
	}

	// The engine built for core 1 on a runtime for core 0, and on the GPU.
	for _, opts := range []Options{{UseDLA: true, DLACore: 0}, {}} {
		r, _ := newBackend(t, opts)
		_, err := r.Load(ctx, dlaPlan("1"), trt.LoadOptions{Name: "dla", Alloc: cpuAlloc{}})
		if !errors.Is(err, ErrDLA) || !errors.Is(err, trt.ErrEngineInvalid) || !strings.Contains(err.Error(), "dla_core = N") {
			t.Errorf("%+v: %v", opts, err)
		}
	}

	// A core the device does not have.
	_, err = New(Options{Library: fakeLibrary(t), GPU: &fakeGPU{}, UseDLA: true, DLACore: 2})
	if !errors.Is(err, ErrDLA) || !strings.Contains(err.Error(), "DLA core 2 requested (dla_core), but this device has 2 DLA cores (0 to 1)") {
		t.Errorf("core 2 of 2: %v", err)
	}
	t.Setenv("EDGED_FAKE_DLA_CORES", "0")
	_, err = New(Options{Library: fakeLibrary(t), GPU: &fakeGPU{}, UseDLA: true, DLACore: 0})
	if !errors.Is(err, ErrDLA) || !strings.Contains(err.Error(), "TensorRT finds no DLA cores on this device") {
		t.Errorf("no DLA: %v", err)
	}
}

// TestFakeHalfAndInt32Outputs: engines built with --outputIOFormats=fp16
// (and plugins such as EfficientNMS) have float16 and int32 outputs; they
// are bound and read.
func TestFakeHalfAndInt32Outputs(t *testing.T) {
	b, _ := newBackend(t, Options{})
	body := "tensor in x 0 0 1,4\ntensor out yh 1 0 1,4\ntensor out yi 3 0 1,4\n"
	e, err := b.Load(context.Background(), fakePlan(10, 3, body), trt.LoadOptions{Name: "types", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	copy(e.Inputs()[0].Float32(), []float32{0, 0.5, 1.25, 3})
	if err := e.Infer(context.Background()); err != nil {
		t.Fatal(err)
	}
	outs := e.Outputs()
	if outs[0].Type != trt.Float16 || outs[1].Type != trt.Int32 {
		t.Fatalf("outputs %v", trt.SignatureOf(e))
	}
	for i, want := range [][]float32{{1, 2, 3.5, 7}, {1, 2, 3, 7}} {
		got := outs[i].ReadFloat32(make([]float32, 4))
		for k := range want {
			if got[k] != want[k] {
				t.Errorf("%s: %v, want %v", outs[i].TensorSpec, got, want)
				break
			}
		}
	}
}

// TestFakeUltralyticsEngine: an engine exported by Ultralytics (4-byte
// length, JSON metadata, plan) passes the sniffer, loads (the fake sees
// the plan, from its "ftrt" magic on) and reports its metadata.
func TestFakeUltralyticsEngine(t *testing.T) {
	meta := `{"author": "Ultralytics", "version": "8.3.40", "task": "detect", "stride": 32, "batch": 1, ` +
		`"imgsz": [640, 640], "names": {"0": "person", "1": "car"}, "end2end": true, "args": {"nms": false}}`
	var file bytes.Buffer
	binary.Write(&file, binary.LittleEndian, int32(len(meta)))
	file.WriteString(meta)
	file.Write(fakePlan(10, 3, "tensor in images 0 0 1,3,8,8\ntensor out output0 0 0 1,300,6\n"))
	data := file.Bytes()
	b, _ := newBackend(t, Options{})
	if err := b.Sniff(data[:min(len(data), trt.SniffBytes)], int64(len(data))); err != nil {
		t.Fatalf("Sniff: %v", err)
	}
	if err := b.Sniff(data[:40], int64(len(data))+1000); err != nil {
		t.Fatalf("Sniff of the first 40 bytes: %v", err)
	}
	if err := b.Sniff(data[:20], 20); !errors.Is(err, trt.ErrEngineInvalid) {
		t.Errorf("a wrapped file cut short passed: %v", err)
	}
	e, err := b.Load(context.Background(), data, trt.LoadOptions{Name: "yolo26", Alloc: cpuAlloc{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	md := trt.MetadataOf(e)
	if md == nil || md.From != trt.FromEngineHeader || md.Task != trt.TaskDetect || strings.Join(md.ClassNames(), ",") != "person,car" ||
		!md.End2End || md.Imgsz[0] != 640 || md.Producer != "Ultralytics 8.3.40" {
		t.Errorf("metadata %+v", md)
	}
}
