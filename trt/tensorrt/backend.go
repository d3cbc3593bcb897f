//go:build tensorrt && cgo && linux

package tensorrt

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
	"github.com/edged-dev/edged/umem"
)

// HeaderVersion is the TensorRT version of the headers the shim was built
// against.
func HeaderVersion() plan.Version {
	var v C.edged_trt_version
	C.edged_trt_header_version(&v)
	return plan.Version{Major: int(v.major), Minor: int(v.minor), Patch: int(v.patch), Build: int(v.build)}
}

// errBufSize bounds the message a shim call returns.
const errBufSize = 4096

// Backend is one TensorRT runtime (an IRuntime with its own logger and
// error recorder) loading engines from plan files. It implements
// trt.Backend. Create one per model configuration: VersionCompatible is a
// property of the runtime.
type Backend struct {
	opts Options
	lib  Library

	mu       sync.Mutex
	rt       *C.edged_trt_runtime // freed when closed and no engine is left
	engines  int
	closed   bool
	pending  []LogRecord // records made on the Go side, drained first
	dlaCores int         // getNbDLACores of the runtime
}

var _ trt.Backend = (*Backend)(nil)

// New opens libnvinfer, checks that its version suits the headers the shim
// was built against, and creates a runtime.
func New(opts Options) (*Backend, error) {
	if opts.LogLevel == 0 {
		opts.LogLevel = SeverityWarning
	}
	if opts.LogCapacity <= 0 {
		opts.LogCapacity = 256
	}
	hdr := HeaderVersion()
	clib, lib, err := openLibrary(sonames(hdr.Major, opts.Library))
	if err != nil {
		return nil, err
	}
	warning, err := checkLibrary(lib, hdr)
	if err != nil {
		return nil, err
	}
	b := &Backend{opts: opts, lib: lib}
	if warning != "" {
		b.pending = append(b.pending, LogRecord{Severity: SeverityWarning, Message: warning})
	}
	notes, err := loadPlugins(opts, lib)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		b.pending = append(b.pending, LogRecord{Severity: SeverityWarning, Message: n})
	}
	copts := C.edged_trt_runtime_options{
		allow_host_code: 0,
		log_severity:    C.int32_t(opts.LogLevel - 1),
		log_capacity:    C.int32_t(opts.LogCapacity),
		dla_core:        -1,
	}
	if opts.VersionCompatible {
		copts.allow_host_code = 1
	}
	if opts.UseDLA {
		copts.dla_core = C.int32_t(opts.DLACore)
	}
	var errbuf [errBufSize]C.char
	err = b.onGPU(func() error {
		switch rc := C.edged_trt_runtime_new(&clib, &copts, &b.rt, &errbuf[0], errBufSize); rc {
		case C.EDGED_TRT_OK:
			b.dlaCores = int(C.edged_trt_runtime_dla_cores(b.rt))
			return nil
		case C.EDGED_TRT_NO_DLA:
			return fmt.Errorf("%w: tensorrt: %s; run the model on the GPU (dla_core = -1, an engine built without --useDLACore) "+
				"or on a DLA core this module has", ErrDLA, C.GoString(&errbuf[0]))
		default:
			return fmt.Errorf("%w: tensorrt: creating a TensorRT runtime from %s failed: %s", trt.ErrBackend, lib, C.GoString(&errbuf[0]))
		}
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// plugins is what this process loaded: plugin libraries are never
// unloaded (their creators stay registered with libnvinfer), and TensorRT's
// own are initialised once.
var plugins struct {
	mu       sync.Mutex
	libs     map[string]error // canonical path -> the result of loading it
	loaded   []string         // custom libraries loaded, in order
	standard string           // the standard library initialised, or why none was
	done     bool             // the standard library was dealt with
}

// loadPlugins loads opts.Plugins (each once per process), then, the first
// time a backend asks for them, TensorRT's standard plugins: before any
// engine is deserialised, in that order, as trtexec does for --plugins.
// It returns warnings for the log.
func loadPlugins(opts Options, lib Library) ([]string, error) {
	plugins.mu.Lock()
	defer plugins.mu.Unlock()
	if plugins.libs == nil {
		plugins.libs = map[string]error{}
	}
	limit := opts.MaxPluginBytes
	if limit <= 0 {
		limit = trt.DefaultMaxBytes
	}
	for _, p := range opts.Plugins {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrPlugin, p, err)
		}
		canon := abs
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			canon = r
		}
		if err, seen := plugins.libs[canon]; seen {
			if err != nil {
				return nil, err
			}
			continue
		}
		err = openPlugin(abs, limit, "")
		plugins.libs[canon] = err
		if err != nil {
			return nil, err
		}
		plugins.loaded = append(plugins.loaded, abs)
	}
	if plugins.done {
		return nil, nil
	}
	switch std := opts.StandardPlugins; std {
	case PluginsOff:
		return nil, nil
	case PluginsAuto, "":
		name := pluginSoname(lib.Version.Major)
		if strings.Contains(lib.Name, "/") {
			// A libnvinfer named by path ([gpu] tensorrt_library): its
			// plugin library beside it, where there is one.
			if p := filepath.Join(filepath.Dir(lib.Name), name); trt.CheckPluginFile(p, trt.DefaultMaxBytes) == nil {
				name = p
			}
		}
		err := openPlugin(name, 0, "initLibNvInferPlugins")
		plugins.done = true
		if errors.Is(err, errPluginNotFound) {
			plugins.standard = name + " is not installed"
			return []string{fmt.Sprintf("tensorrt: TensorRT's standard plugins are not available (%v); engines with "+
				"EfficientNMS_TRT, BatchedNMS_TRT or other standard plugin layers will not load: install TensorRT's "+
				"plugin library (libnvinfer-plugin%d on JetPack) or set [gpu] tensorrt_plugins to its path", err, lib.Version.Major)}, nil
		}
		if err != nil {
			return nil, err
		}
		plugins.standard = name + " (TensorRT's standard plugins)"
	default:
		err := openPlugin(std, limit, "initLibNvInferPlugins")
		if err != nil {
			return nil, err
		}
		plugins.done, plugins.standard = true, std+" (TensorRT's standard plugins)"
	}
	return nil, nil
}

// errPluginNotFound marks a standard plugin library that dlopen cannot
// find, which "auto" tolerates.
var errPluginNotFound = errors.New("not found")

// openPlugin checks a plugin file (limit > 0: a path from the
// configuration) and opens it; init names the function that registers its
// plugins, "" for a library whose static initialisers do.
func openPlugin(name string, limit int64, init string) error {
	if limit > 0 {
		if err := trt.CheckPluginFile(name, limit); err != nil {
			return fmt.Errorf("%w: %w", ErrPlugin, err)
		}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cinit *C.char
	if init != "" {
		cinit = C.CString(init)
		defer C.free(unsafe.Pointer(cinit))
	}
	var errbuf [2048]C.char
	var rc C.int
	func() {
		runtime.LockOSThread() // dlerror is per thread
		defer runtime.UnlockOSThread()
		rc = C.edged_trt_plugin_open(cname, cinit, C.edged_trt_plugin_logger(), &errbuf[0], C.size_t(len(errbuf)))
	}()
	msg := C.GoString(&errbuf[0])
	switch rc {
	case C.EDGED_TRT_LIB_OK:
		return nil
	case C.EDGED_TRT_LIB_NOT_FOUND:
		if limit == 0 {
			return fmt.Errorf("%w: %s", errPluginNotFound, msg)
		}
		return fmt.Errorf("%w: loading the plugin library %s failed: %s (built for another TensorRT, or a library it needs is missing?)", ErrPlugin, name, msg)
	}
	return fmt.Errorf("%w: %s", ErrPlugin, msg)
}

// pluginsLoaded describes the plugin libraries this process loaded, for
// the message of an engine whose plugin is missing.
func pluginsLoaded() string {
	plugins.mu.Lock()
	defer plugins.mu.Unlock()
	var parts []string
	if plugins.standard != "" {
		parts = append(parts, plugins.standard)
	} else {
		parts = append(parts, "TensorRT's standard plugins not loaded ([gpu] tensorrt_plugins = \"off\")")
	}
	if len(plugins.loaded) > 0 {
		parts = append(parts, "custom: "+strings.Join(plugins.loaded, ", "))
	}
	return strings.Join(parts, "; ")
}

// Plugins describes the plugin libraries this backend's engines can use,
// for edged check.
func (b *Backend) Plugins() string { return pluginsLoaded() }

// DLACores is the number of DLA cores TensorRT finds on this device
// (IRuntime::getNbDLACores).
func (b *Backend) DLACores() int { return b.dlaCores }

// DLACores reports how many DLA cores TensorRT finds on this device, for
// edged check, with a runtime made for the question (the library as New
// opens it).
func DLACores(library string) (int, error) {
	hdr := HeaderVersion()
	clib, lib, err := openLibrary(sonames(hdr.Major, library))
	if err != nil {
		return 0, err
	}
	if _, err := checkLibrary(lib, hdr); err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	copts := C.edged_trt_runtime_options{log_severity: C.int32_t(SeverityError - 1), log_capacity: 8, dla_core: -1}
	var rt *C.edged_trt_runtime
	var errbuf [errBufSize]C.char
	if rc := C.edged_trt_runtime_new(&clib, &copts, &rt, &errbuf[0], errBufSize); rc != C.EDGED_TRT_OK {
		return 0, fmt.Errorf("%w: tensorrt: creating a TensorRT runtime from %s failed: %s", trt.ErrBackend, lib, C.GoString(&errbuf[0]))
	}
	defer C.edged_trt_runtime_free(rt)
	return int(C.edged_trt_runtime_dla_cores(rt)), nil
}

// onGPU runs f through GPU.Do, on a thread with the primary context
// current; without a GPU (a backend that only reports its library) on a
// locked thread, where cudart would pick the primary context itself.
func (b *Backend) onGPU(f func() error) error {
	if b.opts.GPU != nil {
		return b.opts.GPU.Do(f)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return f()
}

// Name implements trt.Backend.
func (b *Backend) Name() string { return Name }

// Library reports the libnvinfer in use.
func (b *Backend) Library() Library { return b.lib }

// DrainLog appends the kept TensorRT log records to dst, oldest first, and
// returns it with the number of records dropped since the last drain.
func (b *Backend) DrainLog(dst []LogRecord) ([]LogRecord, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dst = append(dst, b.pending...)
	b.pending = b.pending[:0]
	var recs [32]C.edged_trt_log_record
	var total uint64
	for { // the plugin libraries' records (one logger for the process)
		var dropped C.uint64_t
		n := int(C.edged_trt_plugin_drain_log(&recs[0], C.int32_t(len(recs)), &dropped))
		total += uint64(dropped)
		for i := range n {
			dst = append(dst, LogRecord{Severity: Severity(recs[i].severity + 1), Message: C.GoString(&recs[i].msg[0])})
		}
		if n < len(recs) {
			break
		}
	}
	if b.rt == nil {
		return dst, total
	}
	for {
		var dropped C.uint64_t
		n := int(C.edged_trt_runtime_drain_log(b.rt, &recs[0], C.int32_t(len(recs)), &dropped))
		total += uint64(dropped)
		for i := range n {
			dst = append(dst, LogRecord{Severity: Severity(recs[i].severity + 1), Message: C.GoString(&recs[i].msg[0])})
		}
		if n < len(recs) {
			return dst, total
		}
	}
}

// Close releases the runtime once its last engine is closed. It is
// idempotent.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.freeLocked()
}

func (b *Backend) freeLocked() error {
	if !b.closed || b.engines > 0 || b.rt == nil {
		return nil
	}
	rt := b.rt
	b.rt = nil
	return b.onGPU(func() error {
		C.edged_trt_runtime_free(rt)
		return nil
	})
}

func (b *Backend) engineClosed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.engines--
	return b.freeLocked()
}

// Load implements trt.Backend: it checks the engine file, deserialises it
// and binds its tensors to memory from opts.Alloc. The returned engine is an
// *Engine.
func (b *Backend) Load(ctx context.Context, model []byte, opts trt.LoadOptions) (trt.Engine, error) {
	e, err := b.load(ctx, model, opts)
	if err != nil {
		name := opts.Name
		if name == "" {
			name = "(unnamed)"
		}
		return nil, fmt.Errorf("tensorrt: model %s: %w", name, err)
	}
	return e, nil
}

func (b *Backend) load(ctx context.Context, model []byte, opts trt.LoadOptions) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.opts.GPU == nil {
		return nil, fmt.Errorf("%w: no GPU given to the TensorRT backend (Options.GPU)", trt.ErrBackend)
	}
	if opts.Alloc == nil {
		return nil, fmt.Errorf("%w: no allocator for the engine's tensors (LoadOptions.Alloc)", trt.ErrBackend)
	}
	f, err := plan.Check(model, plan.Options{Library: b.lib.Version, VersionCompatible: b.opts.VersionCompatible})
	if err != nil {
		return nil, err
	}

	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, trt.ErrClosed
	}
	b.engines++ // keeps the runtime alive while this engine exists
	b.mu.Unlock()

	stream, err := b.opts.GPU.NewStream()
	if err != nil {
		b.engineClosed()
		return nil, fmt.Errorf("%w: creating a CUDA stream: %w", trt.ErrBackend, err)
	}
	e := &Engine{b: b, stream: stream, meta: f.Metadata, built: f.Built}
	e.attach, _ = stream.(Attacher)
	e.inferFn = e.infer // one method value, so Infer allocates nothing
	if err := b.onGPU(func() error { return e.build(f.Plan, opts) }); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Engine is one deserialised TensorRT engine with its execution context,
// stream and tensors. It implements trt.Engine and trt.Sharer: Share makes
// another Engine on the same ICudaEngine (deserialised once) with an
// execution context, stream and tensors of its own; the ICudaEngine is
// deleted with the last of them.
type Engine struct {
	b      *Backend
	stream Stream
	attach Attacher
	meta   *plan.Metadata
	built  plan.Version

	mu      sync.Mutex // Infer against Close
	inferFn func() error
	h       *C.edged_trt_engine
	inputs  []*trt.Tensor
	outputs []*trt.Tensor
	bufs    []umem.Buffer
	devMem  int64
	closed  bool
	errbuf  [errBufSize]C.char
	bat     batching // LoadOptions.Batch > 0 (batch_cgo.go)
	// cur is the tensors of the batch SetBatch chose (nil: inputs and
	// outputs), read by Inputs and Outputs: another goroutine (a memory
	// estimate, a reload) may read them while the engine's user sets the
	// batch.
	cur atomic.Pointer[batchSet]
}

var _ trt.Engine = (*Engine)(nil)

func (e *Engine) msg() string { return C.GoString(&e.errbuf[0]) }

// Share implements trt.Sharer: one more execution context on e's
// ICudaEngine, on a stream of its own, its tensors shaped and allocated
// by opts (Shapes, Image, Batch, Alloc) as Load does. TensorRT lets
// contexts of one engine run at the same time on different streams.
func (e *Engine) Share(ctx context.Context, opts trt.LoadOptions) (trt.Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := e.b
	if opts.Alloc == nil {
		return nil, fmt.Errorf("%w: no allocator for the engine's tensors (LoadOptions.Alloc)", trt.ErrBackend)
	}
	e.mu.Lock() // e's handle stays while the new one is made from it
	defer e.mu.Unlock()
	if e.closed {
		return nil, trt.ErrClosed
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, trt.ErrClosed
	}
	b.engines++
	b.mu.Unlock()
	stream, err := b.opts.GPU.NewStream()
	if err != nil {
		b.engineClosed()
		return nil, fmt.Errorf("%w: creating a CUDA stream: %w", trt.ErrBackend, err)
	}
	n := &Engine{b: b, stream: stream, meta: e.meta, built: e.built}
	n.attach, _ = stream.(Attacher)
	n.inferFn = n.infer
	err = b.onGPU(func() error {
		cname := C.CString(opts.Name)
		defer C.free(unsafe.Pointer(cname))
		switch rc := C.edged_trt_engine_share(e.h, C.uintptr_t(stream.Handle()), cname, &n.h, &n.errbuf[0], errBufSize); rc {
		case C.EDGED_TRT_OK:
		case C.EDGED_TRT_NO_MEMORY:
			return fmt.Errorf("%w: %s", trt.ErrMemory, n.msg())
		default:
			return fmt.Errorf("%w: %s", trt.ErrBackend, n.msg())
		}
		return n.setup(opts)
	})
	if err != nil {
		n.Close()
		name := opts.Name
		if name == "" {
			name = "(unnamed)"
		}
		return nil, fmt.Errorf("tensorrt: model %s: %w", name, err)
	}
	return n, nil
}

// Weights implements trt.Sharer: the ICudaEngine's shared handle.
func (e *Engine) Weights() any { return e.weights() }

// build runs on a locked thread with the context current.
func (e *Engine) build(p []byte, opts trt.LoadOptions) error {
	cname := C.CString(opts.Name)
	defer C.free(unsafe.Pointer(cname))
	// TensorRT reads the plan only during the call, so the Go bytes are
	// passed as they are (no copy: on a Jetson they share DRAM with the GPU).
	rc := C.edged_trt_engine_new(e.b.rt, unsafe.Pointer(unsafe.SliceData(p)), C.size_t(len(p)), C.uintptr_t(e.stream.Handle()), cname, &e.h,
		&e.errbuf[0], errBufSize)
	switch rc {
	case C.EDGED_TRT_OK:
	case C.EDGED_TRT_BAD_ENGINE:
		return deserializeError(e.msg(), pluginsLoaded())
	case C.EDGED_TRT_NO_MEMORY:
		return fmt.Errorf("%w: %s", trt.ErrMemory, e.msg())
	default:
		return fmt.Errorf("%w: %s", trt.ErrBackend, e.msg())
	}
	return e.setup(opts)
}

// setup reads the engine's I/O tensors, fixes the input shapes in the
// handle's execution context and binds every tensor to memory from
// opts.Alloc. It runs on a locked thread with the context current.
func (e *Engine) setup(opts trt.LoadOptions) error {
	e.devMem = int64(C.edged_trt_engine_device_memory(e.h))

	var ins, outs []tensorDesc
	n := int(C.edged_trt_engine_nb_io(e.h))
	for i := range n {
		var t C.edged_trt_tensor
		if C.edged_trt_engine_tensor(e.h, C.int32_t(i), &t, &e.errbuf[0], errBufSize) != C.EDGED_TRT_OK {
			return fmt.Errorf("%w: %s", trt.ErrEngineInvalid, e.msg())
		}
		d := tensorDesc{
			Name:       C.GoString(t.name),
			Mode:       int32(t.mode),
			DType:      int32(t.dtype),
			Format:     int32(t.format),
			FormatDesc: C.GoString(&t.format_desc[0]),
			Location:   int32(t.location),
			ShapeIO:    t.shape_io != 0,
			Dims:       dims64(t.dims[:], t.nbdims),
		}
		if d.Mode == ioModeInput {
			if t.has_profile != 0 {
				d.Min, d.Opt, d.Max = dims64(t.min[:], t.nbdims), dims64(t.opt[:], t.nbdims), dims64(t.max[:], t.nbdims)
			}
			ins = append(ins, d)
		} else {
			outs = append(outs, d)
		}
	}
	if len(outs) == 0 {
		return fmt.Errorf("%w: the engine has no outputs", trt.ErrEngineInvalid)
	}
	if err := unknownShapes(opts.Shapes, ins); err != nil {
		return err
	}
	if bd, err := batchDimOf(ins); err == nil {
		e.bat.dim = bd
	} else if opts.Batch > 0 {
		return err
	}
	runs := 0
	if opts.Batch > 0 {
		var err error
		if runs, err = e.bat.dim.Fits(opts.Batch); err != nil {
			return fmt.Errorf("%w; rebuild the engine with trtexec --maxShapes=%s:%dx... (or set a smaller batch)", err, ins[0].Name, opts.Batch)
		}
	}
	for i, d := range ins {
		dt, err := d.check()
		if err != nil {
			return err
		}
		shape, err := d.resolveInput(opts.Shapes, opts.Image, i == 0, runs)
		if err != nil {
			return err
		}
		if err := e.setShape(d, shape); err != nil {
			return err
		}
		if err := e.bind(&e.inputs, d.Name, dt, shape, opts.Alloc); err != nil {
			return err
		}
	}
	for _, d := range outs {
		dt, err := d.check()
		if err != nil {
			return err
		}
		shape, err := e.contextShape(d.Name)
		if err != nil {
			return err
		}
		if err := e.bind(&e.outputs, d.Name, dt, shape, opts.Alloc); err != nil {
			return err
		}
	}
	if opts.Batch > 0 {
		return e.planBatches(ins, opts.Batch)
	}
	return nil
}

func dims64(d []C.int64_t, nb C.int32_t) []int64 {
	out := make([]int64, int(nb))
	for i := range out {
		out[i] = int64(d[i])
	}
	return out
}

func (e *Engine) setShape(d tensorDesc, shape []int64) error {
	dynamic := false
	for _, v := range d.Dims {
		dynamic = dynamic || v < 0
	}
	if !dynamic {
		return nil
	}
	cname := C.CString(d.Name)
	defer C.free(unsafe.Pointer(cname))
	var cd [C.EDGED_TRT_MAX_DIMS]C.int64_t
	for i, v := range shape {
		cd[i] = C.int64_t(v)
	}
	if C.edged_trt_set_input_shape(e.h, cname, C.int32_t(len(shape)), &cd[0], &e.errbuf[0], errBufSize) != C.EDGED_TRT_OK {
		return fmt.Errorf("%w: %s", trt.ErrSignature, e.msg())
	}
	return nil
}

func (e *Engine) contextShape(name string) ([]int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cd [C.EDGED_TRT_MAX_DIMS]C.int64_t
	var nb C.int32_t
	if C.edged_trt_context_shape(e.h, cname, &nb, &cd[0], &e.errbuf[0], errBufSize) != C.EDGED_TRT_OK {
		return nil, fmt.Errorf("%w: %s", trt.ErrEngineInvalid, e.msg())
	}
	shape := dims64(cd[:], nb)
	for _, v := range shape {
		if v < 0 {
			return nil, fmt.Errorf("%w: output %q has shape %s even with every input shape set (a data-dependent "+
				"output); edged needs outputs whose shape follows from the inputs", trt.ErrEngineInvalid, name, dimsString(shape))
		}
	}
	return shape, nil
}

// bind allocates a tensor's memory and gives its address to the context.
func (e *Engine) bind(list *[]*trt.Tensor, name string, dt trt.DataType, shape []int64, alloc umem.Allocator) error {
	spec := trt.TensorSpec{Name: name, Type: dt, Shape: shape}
	n := max(spec.Bytes(), 256)
	buf, err := alloc.Alloc(int(n))
	if err != nil {
		return fmt.Errorf("%w: allocating %d bytes for tensor %q: %w", trt.ErrMemory, n, name, err)
	}
	e.bufs = append(e.bufs, buf)
	addr, err := deviceAddress(buf, fmt.Sprintf("tensor %q", name))
	if err != nil {
		return err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.edged_trt_set_address(e.h, cname, C.uintptr_t(addr), &e.errbuf[0], errBufSize) != C.EDGED_TRT_OK {
		return fmt.Errorf("%w: %s", trt.ErrBackend, e.msg())
	}
	*list = append(*list, &trt.Tensor{TensorSpec: spec, Buf: buf})
	return nil
}

// Backend implements trt.Engine.
func (e *Engine) Backend() string { return Name }

// Inputs implements trt.Engine.
func (e *Engine) Inputs() []*trt.Tensor {
	if s := e.cur.Load(); s != nil {
		return s.inputs
	}
	return e.inputs
}

// Outputs implements trt.Engine.
func (e *Engine) Outputs() []*trt.Tensor {
	if s := e.cur.Load(); s != nil {
		return s.outputs
	}
	return e.outputs
}

// Metadata is the Ultralytics metadata of a wrapped engine file, or nil.
func (e *Engine) Metadata() *plan.Metadata { return e.meta }

// Built is the TensorRT version that built the engine, from its header.
func (e *Engine) Built() plan.Version { return e.built }

// Stream is the CUDA stream the engine enqueues on. GPU preprocessing that
// writes the engine's inputs can run on it, so no extra synchronisation is
// needed (UmemStream gives the *umem.Stream behind it).
func (e *Engine) Stream() Stream { return e.stream }

// DeviceMemory is the activation memory of the execution context in bytes
// (weights not included), for memory budgets.
func (e *Engine) DeviceMemory() int64 { return e.devMem }

// Infer implements trt.Engine: on the GPU's thread it attaches the
// buffers to the engine's stream (when the stream is an Attacher), enqueues
// the engine, waits for the stream and detaches the buffers. It allocates
// nothing on the Go heap unless it fails.
func (e *Engine) Infer(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return trt.ErrClosed
	}
	return e.b.opts.GPU.Do(e.inferFn)
}

// infer runs on the GPU's thread.
func (e *Engine) infer() error {
	if e.attach != nil {
		for i, b := range e.bufs {
			if err := e.attach.Attach(b); err != nil {
				e.detach(i)
				return fmt.Errorf("%w: attaching a buffer to the stream: %w", ErrInference, err)
			}
		}
	}
	if err := e.applyBatch(); err != nil {
		e.detach(len(e.bufs))
		return err
	}
	rc := C.edged_trt_enqueue(e.h, C.uintptr_t(e.stream.Handle()), &e.errbuf[0], errBufSize)
	serr := e.stream.Synchronize() // also after a failed enqueue: part of it may be queued
	derr := e.detach(len(e.bufs))
	switch {
	case rc != C.EDGED_TRT_OK:
		return fmt.Errorf("%w: %s", ErrInference, e.msg())
	case serr != nil:
		return fmt.Errorf("%w: synchronising the stream: %w", ErrInference, serr)
	case derr != nil:
		return fmt.Errorf("%w: detaching a buffer from the stream: %w", ErrInference, derr)
	}
	return nil
}

// detach hands the first n buffers back to the host.
func (e *Engine) detach(n int) error {
	if e.attach == nil {
		return nil
	}
	var first error
	for _, b := range e.bufs[:n] {
		if err := e.attach.Detach(b); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close destroys the execution context and the engine, then the stream, and
// releases the tensors' memory. It waits for a running Infer and is
// idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if e.h != nil {
		h := e.h
		e.h = nil
		errs = append(errs, e.b.onGPU(func() error {
			C.edged_trt_engine_free(h)
			return nil
		}))
	}
	errs = append(errs, e.stream.Close())
	e.bat.free()
	for _, b := range e.bufs {
		errs = append(errs, b.Release())
	}
	e.inputs, e.outputs, e.bufs = nil, nil, nil
	e.cur.Store(nil)
	errs = append(errs, e.b.engineClosed())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tensorrt: closing engine: %w", err)
	}
	return nil
}

// weights identifies the ICudaEngine behind e's handle.
func (e *Engine) weights() uintptr {
	if e.h == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(C.edged_trt_engine_shared(e.h)))
}
