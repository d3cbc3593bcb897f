package tensorrt

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/umem"
)

// Name is the backend name reported by Backend.Name and Engine.Backend.
const Name = "tensorrt"

// ErrInference is wrapped by errors of Engine.Infer that TensorRT or CUDA
// reported.
var ErrInference = errors.New("tensorrt: inference failed")

// ErrDLA is wrapped when the DLA core a backend is asked for is not on the
// device (New, with Options.UseDLA).
var ErrDLA = errors.New("tensorrt: no such DLA core")

// ErrPlugin is wrapped when a plugin library cannot be loaded (New), and
// when an engine needs a plugin no library loaded registers (Load, beside
// trt.ErrEngineInvalid).
var ErrPlugin = errors.New("tensorrt: plugin")

// Values of Options.StandardPlugins besides a path.
const (
	PluginsAuto = "auto"
	PluginsOff  = "off"
)

// GPU is the CUDA device engines run on. UmemGPU adapts umem's device and
// worker to it.
type GPU interface {
	// Do runs f on an OS thread on which the device's primary context is
	// current (umem.Worker.Do). Every call into TensorRT runs inside Do.
	Do(f func() error) error
	// NewStream creates a non-blocking CUDA stream. The engine that asked
	// for it closes it after the engine is destroyed.
	NewStream() (Stream, error)
}

// Stream is a CUDA stream.
type Stream interface {
	// Handle is the CUstream, which is also the cudaStream_t TensorRT takes.
	Handle() uintptr
	// Synchronize waits for the work queued on the stream.
	Synchronize() error
	// Close destroys the stream.
	Close() error
}

// Attacher is implemented by streams that must own managed buffers while
// GPU work on them runs (umem's discipline on devices whose
// concurrentManagedAccess is 0). Infer attaches every I/O buffer before the
// enqueue and detaches it after the stream has been synchronised.
type Attacher interface {
	Attach(b umem.Buffer) error
	Detach(b umem.Buffer) error
}

// Severity is the severity of a TensorRT log record.
type Severity int

// Severities, most severe first (ILogger::Severity plus one, so that the
// zero value of Options.LogLevel means the default).
const (
	SeverityInternalError Severity = 1 + iota
	SeverityError
	SeverityWarning
	SeverityInfo
	SeverityVerbose
)

var severityNames = [...]string{"", "internal-error", "error", "warning", "info", "verbose"}

func (s Severity) String() string {
	if s > 0 && int(s) < len(severityNames) {
		return severityNames[s]
	}
	return fmt.Sprintf("Severity(%d)", int(s))
}

// LogRecord is one message of TensorRT's logger.
type LogRecord struct {
	Severity Severity
	Message  string
}

// Options configure a Backend.
type Options struct {
	// Library is the path or soname of libnvinfer. Empty tries
	// libnvinfer.so.<major of the headers>, then libnvinfer.so.10 and
	// libnvinfer.so.8 (the others only to name what was found).
	Library string
	// VersionCompatible accepts engines built with --versionCompatible
	// (the model's `version_compatible = true`): the header version check
	// follows the rules for such engines, and TensorRT may run host code
	// embedded in the engine, so set it only for engines you built.
	VersionCompatible bool
	// GPU makes the CUDA context current and creates the engines' streams;
	// Load needs it.
	GPU GPU
	// LogLevel keeps log records of this severity or more severe for
	// DrainLog; zero means SeverityWarning.
	LogLevel Severity
	// LogCapacity bounds the records kept between drains; zero means 256.
	LogCapacity int
	// Plugins are custom plugin libraries ([[model]] plugins) that the
	// engines' layers need. New loads each (once per process: a library
	// loaded by another backend is not loaded again) before TensorRT's own
	// plugins are initialised, when that has not happened in this process
	// yet, and always before any engine of this backend is deserialised.
	// Each file is checked first (trt.CheckPluginFile).
	Plugins []string
	// StandardPlugins is [gpu] tensorrt_plugins: PluginsAuto (or "")
	// loads libnvinfer_plugin.so.<major of the library> where it is
	// installed and calls its initLibNvInferPlugins, once per process,
	// before any engine is deserialised; PluginsOff loads nothing; any
	// other value is the path of the library to load instead.
	StandardPlugins string
	// UseDLA runs the engines on DLA core DLACore (IRuntime::setDLACore
	// before deserialisation); New fails with ErrDLA when the device
	// does not have it.
	UseDLA  bool
	DLACore int
	// MaxPluginBytes bounds a plugin file; zero means trt.DefaultMaxBytes.
	MaxPluginBytes int64
}

// Library identifies the libnvinfer a backend uses.
type Library struct {
	// Name is the soname or path that opened.
	Name string
	// Version is the library's version (getInferLibVersion; no build).
	Version plan.Version
}

func (l Library) String() string { return fmt.Sprintf("%s (TensorRT %s)", l.Name, l.Version) }

// sonames lists the names New tries for a build against headers of major
// built (0 when built without TensorRT).
// pluginSoname is the standard plugin library for TensorRT major.
func pluginSoname(major int) string { return fmt.Sprintf("libnvinfer_plugin.so.%d", major) }

func sonames(built int, explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	var names []string
	for _, m := range []int{built, 10, 8} {
		if n := fmt.Sprintf("libnvinfer.so.%d", m); m > 0 && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// notFound explains that no library could be opened.
func notFound(names []string, detail string) error {
	return fmt.Errorf("%w: tensorrt: libnvinfer not found (tried %s: %s); install the TensorRT runtime "+
		"(package libnvinfer10 on JetPack 6, libnvinfer8 on JetPack 5), or set tensorrt_library under [gpu] "+
		"in the configuration to the library's path", trt.ErrBackend, strings.Join(names, ", "), detail)
}

// checkLibrary decides whether a shim compiled against headers hdr can use
// library lib: the same major, and a minor no older than the headers' (the
// shim may call methods the headers declare). A newer minor is allowed and
// returned as a warning.
func checkLibrary(lib Library, hdr plan.Version) (warning string, err error) {
	switch {
	case lib.Version.Major != hdr.Major:
		return "", fmt.Errorf("%w: tensorrt: %s, but this edged was built against TensorRT %s headers and can only use "+
			"TensorRT %d; run an edged built for TensorRT %d (build it on this device with go build -tags tensorrt), "+
			"or install TensorRT %d", trt.ErrBackend, lib, hdr, hdr.Major, lib.Version.Major, hdr.Major)
	case lib.Version.Minor < hdr.Minor:
		return "", fmt.Errorf("%w: tensorrt: %s is older than the TensorRT %s headers this edged was built against; "+
			"rebuild edged against this device's headers (go build -tags tensorrt on the device) or upgrade TensorRT",
			trt.ErrBackend, lib, hdr)
	case lib.Version.Minor > hdr.Minor:
		return fmt.Sprintf("tensorrt: %s is newer than the TensorRT %s headers this edged was built against; "+
			"it should be compatible, but rebuilding edged against it is safer", lib, hdr), nil
	}
	return "", nil
}

// TensorRT enum values (stable from 8.5 on).
const (
	ioModeInput  = 1
	ioModeOutput = 2
	formatLinear = 0
	locDevice    = 0
)

var trtTypeNames = map[int32]string{
	0: "kFLOAT", 1: "kHALF", 2: "kINT8", 3: "kINT32", 4: "kBOOL", 5: "kUINT8",
	6: "kFP8", 7: "kBF16", 8: "kINT64", 9: "kINT4", 10: "kFP4", 11: "kE8M0",
}

var trtFormatNames = map[int32]string{
	0: "kLINEAR", 1: "kCHW2", 2: "kHWC8", 3: "kCHW4", 4: "kCHW16", 5: "kCHW32", 6: "kDHWC8",
	7: "kCDHW32", 8: "kHWC", 9: "kDLA_LINEAR", 10: "kDLA_HWC4", 11: "kHWC16", 12: "kDHWC",
}

// dataType maps a TensorRT DataType to edged's.
func dataType(t int32) (trt.DataType, bool) {
	switch t {
	case 0:
		return trt.Float32, true
	case 1:
		return trt.Float16, true
	case 2:
		return trt.Int8, true
	case 3:
		return trt.Int32, true
	case 4:
		return trt.Bool, true
	case 5:
		return trt.Uint8, true
	case 8:
		return trt.Int64, true
	}
	return 0, false
}

// tensorDesc is what the engine says about one I/O tensor.
type tensorDesc struct {
	Name          string
	Mode          int32
	DType         int32
	Format        int32
	FormatDesc    string
	Location      int32
	ShapeIO       bool
	Dims          []int64 // -1 marks a dynamic dimension
	Min, Opt, Max []int64 // profile 0, inputs only
}

func dimsString(d []int64) string {
	s := make([]string, len(d))
	for i, v := range d {
		if v < 0 {
			s[i] = "?"
		} else {
			s[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(s, ",") + "]"
}

func nameOr(m map[int32]string, v int32) string {
	if n, ok := m[v]; ok {
		return n
	}
	return fmt.Sprintf("value %d", v)
}

// check refuses tensors edged cannot bind: non-linear formats, host
// (shape) tensors and element types without an edged equivalent.
func (d tensorDesc) check() (trt.DataType, error) {
	kind := "output"
	if d.Mode == ioModeInput {
		kind = "input"
	} else if d.Mode != ioModeOutput {
		return 0, fmt.Errorf("%w: tensor %q is neither input nor output (TensorIOMode %d)", trt.ErrEngineInvalid, d.Name, d.Mode)
	}
	if d.ShapeIO || d.Location != locDevice {
		return 0, fmt.Errorf("%w: %s %q is a shape tensor kept in host memory; edged binds only device tensors: "+
			"export the model with static shape inputs", trt.ErrEngineInvalid, kind, d.Name)
	}
	if d.Format != formatLinear {
		return 0, fmt.Errorf("%w: %s %q uses TensorRT format %s (%s); edged binds only linear tensors: rebuild with "+
			"trtexec --inputIOFormats=fp32:chw --outputIOFormats=fp32:chw (or fp16:chw)",
			trt.ErrEngineInvalid, kind, d.Name, nameOr(trtFormatNames, d.Format), d.FormatDesc)
	}
	dt, ok := dataType(d.DType)
	if !ok {
		return 0, fmt.Errorf("%w: %s %q has TensorRT type %s, which edged does not handle; rebuild with float32 or "+
			"float16 I/O (trtexec --inputIOFormats=fp32:chw --outputIOFormats=fp32:chw)",
			trt.ErrEngineInvalid, kind, d.Name, nameOr(trtTypeNames, d.DType))
	}
	return dt, nil
}

// resolveInput fixes the dynamic dimensions of an input: from shapes[name]
// when given, else from the pipeline's image size (image, for the input
// it names or the first), else the profile's opt shape. The result must
// lie within the profile's min and max. runs > 0 is the batch the engine
// is loaded for: a dynamic axis 0 is runs whatever else says.
func (d tensorDesc) resolveInput(shapes map[string][]int64, image *trt.ImageShape, first bool, runs int) ([]int64, error) {
	want, given := shapes[d.Name]
	if !given {
		if s := image.Resolve(d.Name, first, d.Dims); s != nil {
			want, given = s, true
		}
	}
	dynamic := slices.ContainsFunc(d.Dims, func(v int64) bool { return v < 0 })
	if !given {
		if !dynamic {
			return slices.Clone(d.Dims), nil
		}
		if len(d.Opt) != len(d.Dims) {
			return nil, fmt.Errorf("%w: input %q has dynamic shape %s and no optimization profile; set its shape for the model",
				trt.ErrSignature, d.Name, dimsString(d.Dims))
		}
		want = d.Opt
	}
	if runs > 0 && len(d.Dims) > 0 && d.Dims[0] < 0 && len(want) == len(d.Dims) {
		want = slices.Clone(want)
		want[0] = int64(runs)
	}
	if len(want) != len(d.Dims) {
		return nil, fmt.Errorf("%w: the shape %s set for input %q has %d dimensions, the engine's %s has %d",
			trt.ErrSignature, dimsString(want), d.Name, len(want), dimsString(d.Dims), len(d.Dims))
	}
	for i, v := range want {
		if v <= 0 || d.Dims[i] >= 0 && v != d.Dims[i] {
			return nil, fmt.Errorf("%w: the shape %s set for input %q does not fit the engine's %s",
				trt.ErrSignature, dimsString(want), d.Name, dimsString(d.Dims))
		}
		if len(d.Min) == len(want) && (v < d.Min[i] || v > d.Max[i]) {
			return nil, fmt.Errorf("%w: the shape %s set for input %q is outside the engine's optimization profile "+
				"(min %s, max %s); choose a shape within it or rebuild the engine with trtexec --minShapes/--maxShapes",
				trt.ErrSignature, dimsString(want), d.Name, dimsString(d.Min), dimsString(d.Max))
		}
	}
	return slices.Clone(want), nil
}

// unknownShapes reports names in shapes that are not inputs of the engine.
func unknownShapes(shapes map[string][]int64, inputs []tensorDesc) error {
	var bad []string
	for name := range shapes {
		if !slices.ContainsFunc(inputs, func(d tensorDesc) bool { return d.Name == name }) {
			bad = append(bad, fmt.Sprintf("%q", name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	names := make([]string, len(inputs))
	for i, d := range inputs {
		names[i] = fmt.Sprintf("%q", d.Name)
	}
	return fmt.Errorf("%w: shapes are set for %s, which the engine does not have as inputs (its inputs: %s)",
		trt.ErrSignature, strings.Join(bad, ", "), strings.Join(names, ", "))
}

// missingPlugin finds the plugin TensorRT could not find in its
// messages: "getPluginCreator could not find plugin: NAME version: V"
// (8.x) or "Cannot find plugin: NAME, version: V, namespace:..." (10.x).
var missingPlugin = regexp.MustCompile(`(?i)(?:could not find plugin|cannot find plugin):?\s*([A-Za-z0-9_.\-]+),?\s*(?:version:?\s*([A-Za-z0-9_.]+))?`)

// dlaWord finds a message about DLA.
var dlaWord = regexp.MustCompile(`(?i)\bdla\b`)

// deserializeError classifies TensorRT's deserialisation messages, which
// are matched loosely: their wording changes between versions. plugins
// says which plugin libraries were loaded, for a missing plugin's message.
func deserializeError(msg, plugins string) error {
	l := strings.ToLower(msg)
	has := func(s ...string) bool {
		return slices.ContainsFunc(s, func(x string) bool { return strings.Contains(l, x) })
	}
	if m := missingPlugin.FindStringSubmatch(msg); m != nil || has("iplugincreator not found", "plugin registry") {
		name, version := "(unnamed)", "?"
		if m != nil {
			name = m[1]
			if m[2] != "" {
				version = m[2]
			}
		}
		return fmt.Errorf("%w: %w: the engine uses the TensorRT plugin %s (version %s), which no loaded plugin library registers "+
			"(%s): load the library that provides it: TensorRT's own plugins (EfficientNMS_TRT, BatchedNMS_TRT, ...) with "+
			"[gpu] tensorrt_plugins = \"auto\" and libnvinfer_plugin installed, a custom one with the model's plugins = "+
			"[\"/path/to/lib.so\"]; TensorRT said: %s", trt.ErrEngineInvalid, ErrPlugin, name, version, plugins, msg)
	}
	if dlaWord.MatchString(msg) {
		return fmt.Errorf("%w: %w: TensorRT refused the engine on this runtime's DLA setting (%s); an engine built with trtexec "+
			"--useDLACore=N runs with dla_core = N for its model, one built for the GPU with dla_core = -1", trt.ErrEngineInvalid, ErrDLA, msg)
	}
	switch {
	case has("version tag does not match", "not compatible with this version", "expecting library version",
		"serialized engine version", "plan version"):
		return fmt.Errorf("%w: TensorRT refused the engine as built by another version (%s); rebuild it on this "+
			"device with trtexec --onnx=MODEL.onnx --saveEngine=MODEL.engine", trt.ErrVersion, msg)
	case has("incompatible device", "expecting compute"):
		return fmt.Errorf("%w: the engine was built for another GPU (%s); engines are specific to the GPU model: "+
			"rebuild it on this device with trtexec", trt.ErrEngineInvalid, msg)
	case has("size specified in header does not match", "archive size"):
		return fmt.Errorf("%w: the engine file is truncated (%s); copy or rebuild it", trt.ErrEngineInvalid, msg)
	case has("magic tag does not match", "magictag"):
		return fmt.Errorf("%w: the file is not a TensorRT engine (%s)", trt.ErrEngineInvalid, msg)
	}
	return fmt.Errorf("%w: %s; rebuild the engine on this device with trtexec", trt.ErrEngineInvalid, msg)
}

// deviceAddress checks that a buffer can be a TensorRT tensor address.
func deviceAddress(b umem.Buffer, what string) (uintptr, error) {
	p := b.Device()
	if p == 0 {
		return 0, fmt.Errorf("%w: %s: memory of kind %s has no device address, and TensorRT needs CUDA memory; "+
			"set memory under [gpu] to auto, managed, pinned, mapped or device", trt.ErrBackend, what, b.Kind())
	}
	if p%256 != 0 {
		return 0, fmt.Errorf("%w: %s: device address %#x is not 256-byte aligned, as TensorRT requires", trt.ErrBackend, what, p)
	}
	return p, nil
}

// batchDimOf is the batch dimension of an engine with inputs ins: axis 0
// of every input, dynamic (with profile 0's min, opt and max) or fixed
// alike in all of them.
func batchDimOf(ins []tensorDesc) (trt.BatchDim, error) {
	var bd trt.BatchDim
	for i, d := range ins {
		if len(d.Dims) == 0 {
			return bd, fmt.Errorf("%w: input %q is a scalar, with no batch dimension", trt.ErrBatch, d.Name)
		}
		var got trt.BatchDim
		switch {
		case d.Dims[0] >= 0:
			got = trt.BatchDim{Min: int(d.Dims[0]), Opt: int(d.Dims[0]), Max: int(d.Dims[0]), Fixed: true}
		case len(d.Min) > 0:
			got = trt.BatchDim{Min: int(d.Min[0]), Opt: int(d.Opt[0]), Max: int(d.Max[0])}
		default:
			return bd, fmt.Errorf("%w: input %q has a dynamic batch dimension and no optimization profile; rebuild the engine "+
				"with trtexec --minShapes/--optShapes/--maxShapes", trt.ErrBatch, d.Name)
		}
		if i > 0 && got != bd {
			return bd, fmt.Errorf("%w: input %q's first dimension (%s) is not input %q's (%s): edged batches axis 0 of every input",
				trt.ErrBatch, d.Name, got, ins[0].Name, bd)
		}
		bd = got
	}
	return bd, nil
}
