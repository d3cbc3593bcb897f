package tensorrt

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/umem"
)

func TestSonames(t *testing.T) {
	tests := []struct {
		built    int
		explicit string
		want     []string
	}{
		{10, "", []string{"libnvinfer.so.10", "libnvinfer.so.8"}},
		{8, "", []string{"libnvinfer.so.8", "libnvinfer.so.10"}},
		{11, "", []string{"libnvinfer.so.11", "libnvinfer.so.10", "libnvinfer.so.8"}},
		{0, "", []string{"libnvinfer.so.10", "libnvinfer.so.8"}},
		{10, "/opt/trt/libnvinfer.so.10", []string{"/opt/trt/libnvinfer.so.10"}},
	}
	for _, tc := range tests {
		if got := sonames(tc.built, tc.explicit); !slices.Equal(got, tc.want) {
			t.Errorf("sonames(%d, %q) = %v, want %v", tc.built, tc.explicit, got, tc.want)
		}
	}
}

func TestCheckLibrary(t *testing.T) {
	hdr := plan.Version{Major: 10, Minor: 3, Patch: 0, Build: 26}
	lib := func(maj, min int) Library {
		return Library{Name: "libnvinfer.so.x", Version: plan.Version{Major: maj, Minor: min}}
	}
	tests := []struct {
		lib     Library
		ok      bool
		warning bool
		want    string
	}{
		{lib(10, 3), true, false, ""},
		{lib(10, 8), true, true, "newer than"},
		{lib(10, 2), false, false, "older than the TensorRT 10.3.0.26 headers"},
		{lib(8, 6), false, false, "can only use TensorRT 10"},
		{lib(11, 1), false, false, "run an edged built for TensorRT 11"},
	}
	for _, tc := range tests {
		w, err := checkLibrary(tc.lib, hdr)
		if tc.ok != (err == nil) || tc.warning != (w != "") {
			t.Errorf("%v: warning %q, err %v", tc.lib, w, err)
			continue
		}
		msg := w
		if err != nil {
			msg = err.Error()
			if !errors.Is(err, trt.ErrBackend) {
				t.Errorf("%v: error does not wrap trt.ErrBackend", tc.lib)
			}
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %q does not contain %q", tc.lib, msg, tc.want)
		}
	}
}

func TestTensorCheck(t *testing.T) {
	base := tensorDesc{Name: "images", Mode: ioModeInput, DType: 0, Format: formatLinear, Dims: []int64{1, 3, 8, 8}}
	if dt, err := base.check(); err != nil || dt != trt.Float32 {
		t.Fatalf("linear float input: %v %v", dt, err)
	}
	for trtType, want := range map[int32]trt.DataType{0: trt.Float32, 1: trt.Float16, 2: trt.Int8, 3: trt.Int32, 4: trt.Bool, 5: trt.Uint8, 8: trt.Int64} {
		d := base
		d.DType = trtType
		if dt, err := d.check(); err != nil || dt != want {
			t.Errorf("TensorRT type %d: got %v %v, want %v", trtType, dt, err, want)
		}
	}
	bad := []struct {
		mut  func(*tensorDesc)
		want string
	}{
		{func(d *tensorDesc) { d.DType = 7 }, "kBF16"},
		{func(d *tensorDesc) { d.DType = 6 }, "kFP8"},
		{func(d *tensorDesc) { d.DType = 42 }, "value 42"},
		{func(d *tensorDesc) { d.Format = 2; d.FormatDesc = "Eight channel format" }, "kHWC8 (Eight channel format)"},
		{func(d *tensorDesc) { d.Location = 1 }, "shape tensor"},
		{func(d *tensorDesc) { d.ShapeIO = true }, "shape tensor"},
		{func(d *tensorDesc) { d.Mode = 0 }, "neither input nor output"},
	}
	for _, tc := range bad {
		d := base
		tc.mut(&d)
		_, err := d.check()
		if !errors.Is(err, trt.ErrEngineInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want ErrEngineInvalid containing %q, got %v", tc.want, err)
		}
	}
}

func TestResolveInput(t *testing.T) {
	dyn := tensorDesc{Name: "x", Mode: ioModeInput, Dims: []int64{-1, 3, -1, -1},
		Min: []int64{1, 3, 32, 32}, Opt: []int64{2, 3, 64, 64}, Max: []int64{8, 3, 640, 640}}
	static := tensorDesc{Name: "s", Mode: ioModeInput, Dims: []int64{1, 4}, Min: []int64{1, 4}, Opt: []int64{1, 4}, Max: []int64{1, 4}}
	noProfile := tensorDesc{Name: "n", Mode: ioModeInput, Dims: []int64{-1, 4}}
	tests := []struct {
		d      tensorDesc
		shapes map[string][]int64
		want   []int64
		err    string
	}{
		{dyn, nil, []int64{2, 3, 64, 64}, ""},
		{dyn, map[string][]int64{"x": {4, 3, 480, 640}}, []int64{4, 3, 480, 640}, ""},
		{dyn, map[string][]int64{"x": {9, 3, 64, 64}}, nil, "outside the engine's optimization profile (min [1,3,32,32], max [8,3,640,640])"},
		{dyn, map[string][]int64{"x": {1, 4, 64, 64}}, nil, "does not fit the engine's [?,3,?,?]"},
		{dyn, map[string][]int64{"x": {1, 3, 64}}, nil, "has 3 dimensions"},
		{dyn, map[string][]int64{"x": {0, 3, 64, 64}}, nil, "does not fit"},
		{static, nil, []int64{1, 4}, ""},
		{static, map[string][]int64{"s": {1, 4}}, []int64{1, 4}, ""},
		{static, map[string][]int64{"s": {2, 4}}, nil, "does not fit"},
		{noProfile, nil, nil, "no optimization profile"},
		{noProfile, map[string][]int64{"n": {5, 4}}, []int64{5, 4}, ""},
	}
	for _, tc := range tests {
		got, err := tc.d.resolveInput(tc.shapes, nil, true, 0)
		if tc.err != "" {
			if !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: want ErrSignature containing %q, got %v", tc.d.Name, tc.shapes, tc.err, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: got %v %v, want %v", tc.d.Name, tc.shapes, got, err, tc.want)
		}
	}
	// The result is a copy: changing it leaves the profile alone.
	got, _ := dyn.resolveInput(nil, nil, true, 0)
	got[0] = 99
	if dyn.Opt[0] != 2 {
		t.Error("resolveInput returned the profile's slice")
	}
}

func TestUnknownShapes(t *testing.T) {
	ins := []tensorDesc{{Name: "images"}, {Name: "mask"}}
	if err := unknownShapes(map[string][]int64{"images": {1}}, ins); err != nil {
		t.Errorf("known name: %v", err)
	}
	err := unknownShapes(map[string][]int64{"image": {1}, "images": {1}}, ins)
	if !errors.Is(err, trt.ErrSignature) || !strings.Contains(err.Error(), `"image"`) || !strings.Contains(err.Error(), `"images", "mask"`) {
		t.Errorf("unknown name: %v", err)
	}
}

func TestDeserializeError(t *testing.T) {
	tests := []struct {
		msg  string
		is   error
		want string
	}{
		{"IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization assertion stdVersionRead == " +
			"kSERIALIZATION_VERSION failed.Version tag does not match. Note: Current Version: 237, Serialized Engine Version: 239)", trt.ErrVersion, "another version"},
		{"The engine plan file is not compatible with this version of TensorRT, expecting library version 8.2.4 got 8.2.3, please rebuild.", trt.ErrVersion, "trtexec"},
		{"The engine plan file is generated on an incompatible device, expecting compute 8.7 got compute 7.2, please rebuild.", trt.ErrEngineInvalid, "another GPU"},
		{"Serialization assertion sizeRead == static_cast<uint64_t>(mEnd - mCurrent) failed.Size specified in header does not match archive size", trt.ErrEngineInvalid, "truncated"},
		{"Serialization assertion magicTagRead == kMAGIC_TAG failed.Magic tag does not match", trt.ErrEngineInvalid, "not a TensorRT engine"},
		{"something new", trt.ErrEngineInvalid, "something new"},
		// TensorRT 8.x and 10.x texts of a missing plugin (issue reports:
		// Deci-AI/super-gradients#1816, laugh12321/TensorRT-YOLO#118).
		{"3: getPluginCreator could not find plugin: EfficientNMS_TRT version: 1; 1: [pluginV2Runner.cpp::load::303] Error Code 1: " +
			"Serialization (Serialization assertion creator failed.Cannot deserialize plugin since corresponding IPluginCreator not found in Plugin Registry)",
			ErrPlugin, "the TensorRT plugin EfficientNMS_TRT (version 1), which no loaded plugin library registers (none)"},
		{"IPluginRegistry::getPluginCreator: Error Code 4: API Usage Error (Cannot find plugin: EfficientIdxNMS_TRT, version: 1, namespace:.)",
			ErrPlugin, "plugin EfficientIdxNMS_TRT (version 1)"},
		{"Serialization assertion creator failed.Cannot deserialize plugin since corresponding IPluginCreator not found in Plugin Registry",
			ErrPlugin, "plugin (unnamed)"},
		{"DLA engine built for core 1", ErrDLA, "dla_core = N"},
	}
	for _, tc := range tests {
		err := deserializeError(tc.msg, "none")
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: got %v, want %v containing %q", tc.msg, err, tc.is, tc.want)
		}
	}
}

type addrBuffer struct {
	umem.Buffer
	addr uintptr
}

func (b addrBuffer) Device() uintptr { return b.addr }

func TestDeviceAddress(t *testing.T) {
	hb, err := umem.NewHost().Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Release()
	if _, err := deviceAddress(hb, "tensor x"); !errors.Is(err, trt.ErrBackend) || !strings.Contains(err.Error(), "no device address") {
		t.Errorf("host memory: %v", err)
	}
	if _, err := deviceAddress(addrBuffer{hb, 0x10080}, "tensor x"); err == nil || !strings.Contains(err.Error(), "256-byte") {
		t.Errorf("misaligned: %v", err)
	}
	if p, err := deviceAddress(addrBuffer{hb, 0x10100}, "tensor x"); err != nil || p != 0x10100 {
		t.Errorf("aligned: %#x %v", p, err)
	}
}

func TestSeverityString(t *testing.T) {
	if SeverityWarning.String() != "warning" || SeverityInternalError.String() != "internal-error" || Severity(0).String() != "Severity(0)" {
		t.Error("severity names")
	}
}
