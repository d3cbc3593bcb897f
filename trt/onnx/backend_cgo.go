//go:build cgo && linux

package onnx

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
	ort "github.com/yalue/onnxruntime_go"
)

// env is ONNX Runtime's process-wide environment: onnxruntime_go keeps one,
// bound to the library it was initialised with.
var env struct {
	mu      sync.Mutex
	lib     string // canonical path of the loaded library; "" before the first New
	path    string // path as found
	version string
}

// New loads the ONNX Runtime library (once per process) and returns a
// backend. With o.Library empty it reuses a library already loaded, or
// searches as FindLibrary does. A second library in one process is an
// error: ONNX Runtime's environment is process-wide.
func New(o Options) (*Backend, error) {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.lib != "" && o.Library == "" {
		return &Backend{lib: env.path, version: env.version}, nil
	}
	lib, err := FindLibrary(o.Library)
	if err != nil {
		return nil, err
	}
	if a, err := filepath.Abs(lib); err == nil {
		lib = a
	}
	key := canonical(lib)
	if env.lib != "" {
		if key != env.lib {
			return nil, fmt.Errorf("%w: ONNX Runtime is already loaded from %s in this process, so %s cannot be loaded too; "+
				"configure one library (%s or $%s)", trt.ErrBackend, env.path, lib, ConfigKey, EnvLibrary)
		}
		return &Backend{lib: env.path, version: env.version}, nil
	}
	if ort.IsInitialized() {
		return nil, fmt.Errorf("%w: ONNX Runtime was initialised outside edged's onnx package", trt.ErrBackend)
	}
	// The telemetry switch must be in the environment before the library
	// creates its own (telemetry.go); init set it, this keeps it set.
	if err := telemetryOff(); err != nil {
		return nil, fmt.Errorf("%w: %w", trt.ErrBackend, err)
	}
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return nil, fmt.Errorf("%w: loading ONNX Runtime from %s: %w; edged needs ONNX Runtime 1.24 or newer (API 24) "+
			"built for linux/%s: run `make deps` or point %s / $%s at another copy",
			trt.ErrBackend, lib, err, runtime.GOARCH, ConfigKey, EnvLibrary)
	}
	// Events off as well: on its own this does not stop the uploader
	// (measured: telemetry.go), but a library that ignored the variable
	// would at least send nothing.
	if err := ort.DisableTelemetry(); err != nil {
		ort.DestroyEnvironment()
		return nil, fmt.Errorf("%w: ONNX Runtime from %s: switching its telemetry events off: %w", trt.ErrBackend, lib, err)
	}
	env.lib, env.path, env.version = key, lib, ort.GetVersion()
	return &Backend{lib: lib, version: env.version}, nil
}

func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}

// Load implements trt.Backend. It creates an ONNX Runtime session for
// model, allocates every input and output from opts.Alloc (host memory
// when nil) and binds the session to those buffers. Dynamic input
// dimensions are taken from opts.Shapes; dynamic output dimensions are
// learnt from one inference on zeroed inputs. Threads defaults to 1.
//
// Errors: a model ONNX Runtime cannot load wraps trt.ErrEngineInvalid with
// its message; a missing shape names the tensor.
func (b *Backend) Load(ctx context.Context, model []byte, opts trt.LoadOptions) (trt.Engine, error) {
	if b == nil || b.lib == "" {
		return nil, fmt.Errorf("%w: onnx: backend not initialised (create it with onnx.New)", trt.ErrBackend)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = "model"
	}
	if len(model) == 0 {
		return nil, fmt.Errorf("%w: onnx: model %q is empty (0 bytes)", trt.ErrEngineInvalid, name)
	}
	inInfo, outInfo, err := ort.GetInputOutputInfoWithONNXData(model)
	if err != nil {
		// ONNX Runtime's own words (a protobuf parse error) last.
		return nil, fmt.Errorf("%w: ONNX Runtime %s cannot load model %q (is it a complete .onnx file? copy or export it again): %s",
			trt.ErrEngineInvalid, b.version, name, unwrapORT(err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	meta, err := ReadMetadata(model)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	in, _, err := batchInputs(name, inInfo, opts.Batch)
	if err != nil {
		return nil, err
	}
	if _, err := specs(name, "input", in, opts.Shapes, opts.Image); err != nil {
		return nil, err // before the session is created
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("%w: onnx: session options: %w", trt.ErrBackend, err)
	}
	defer so.Destroy()
	threads := opts.Threads
	if threads <= 0 {
		threads = 1
	}
	if err := errors.Join(so.SetIntraOpNumThreads(threads), so.SetInterOpNumThreads(1)); err != nil {
		return nil, fmt.Errorf("%w: onnx: session options: %w", trt.ErrBackend, err)
	}
	// With more than one thread, the pool's threads block between
	// inferences instead of spinning: spinning is ONNX Runtime's default,
	// and on the dev VM (2 cores, eight cameras batched on 2 threads) it
	// cost 0.7-0.8 ms of CPU a result (3.5-3.7 against 2.8-2.9 ms) taken
	// from the pipelines' preprocessing; an edge box also pays it in power.
	if threads > 1 {
		if err := so.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			return nil, fmt.Errorf("%w: onnx: session options: %w", trt.ErrBackend, err)
		}
	}
	ss := &session{name: name, meta: meta, in: inInfo, out: outInfo}
	ins, outs := make([]string, len(inInfo)), make([]string, len(outInfo))
	for i, t := range inInfo {
		ins[i] = t.Name
	}
	for i, t := range outInfo {
		outs[i] = t.Name
	}
	ss.s, err = ort.NewDynamicAdvancedSessionWithONNXData(model, ins, outs, so)
	if err != nil {
		return nil, fmt.Errorf("%w: onnx: model %q: creating the session: %s", trt.ErrEngineInvalid, name, unwrapORT(err))
	}
	e, err := ss.engine(ctx, opts)
	if err != nil {
		ss.unused()
		return nil, err
	}
	return e, nil
}

// session is one ONNX Runtime session: the model's weights, loaded once
// and shared by the engines Share makes. ONNX Runtime allows concurrent
// Run calls on one session; each engine runs it through its own I/O
// binding, bound once to its own tensors.
type session struct {
	name     string
	meta     *trt.Metadata
	in, out  []ort.InputOutputInfo // as the model declares them
	mu       sync.Mutex            // refs
	refs     int                   // engines open
	s        *ort.DynamicAdvancedSession
	released bool
}

// engine makes one more engine on the session: it allocates every input
// and output from opts.Alloc (host memory when nil) and binds them. Dynamic
// input dimensions are taken from opts.Shapes or opts.Image; dynamic output
// dimensions are learnt from one inference on zeroed inputs.
func (ss *session) engine(ctx context.Context, opts trt.LoadOptions) (_ *engine, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := ss.name
	e := &engine{name: name, meta: ss.meta, sess: ss}
	in, bat, err := batchInputs(name, ss.in, opts.Batch)
	if err != nil {
		return nil, err
	}
	e.bat = bat
	inSpecs, err := specs(name, "input", in, opts.Shapes, opts.Image)
	if err != nil {
		return nil, err
	}
	if want := opts.Want.Inputs; len(want) > 0 && !slices.EqualFunc(inSpecs, want, trt.TensorSpec.Equal) {
		// Before anything is allocated: a replacement may declare inputs
		// of any size.
		return nil, fmt.Errorf("%w: onnx: model %q has inputs %s, the pipeline's engine %s", trt.ErrSignature, name, trt.Signature{Inputs: inSpecs}, trt.Signature{Inputs: want})
	}
	outSpecs, err := specs(name, "output", ss.out, nil, nil)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	if ss.released {
		ss.mu.Unlock()
		return nil, trt.ErrClosed
	}
	ss.refs++ // the session lives while this engine is being made
	ss.mu.Unlock()
	alloc := opts.Alloc
	if alloc == nil {
		alloc = umem.NewHost()
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	for _, s := range inSpecs {
		if err := e.add(alloc, s, &e.inputs, &e.inValues); err != nil {
			return nil, err
		}
	}
	if dynamic(outSpecs) {
		if outSpecs, err = probeOutputs(name, ss.s, e.inValues, outSpecs); err != nil {
			return nil, err
		}
	}
	for _, s := range outSpecs {
		if err := e.add(alloc, s, &e.outputs, &e.outValues); err != nil {
			return nil, err
		}
	}
	if e.binding, err = ss.s.CreateIoBinding(); err != nil {
		return nil, fmt.Errorf("%w: onnx: model %q: creating an I/O binding: %w", trt.ErrBackend, name, err)
	}
	for i, s := range inSpecs {
		if err := e.binding.BindInput(s.Name, e.inValues[i]); err != nil {
			return nil, fmt.Errorf("%w: onnx: model %q: binding input %s: %w", trt.ErrBackend, name, s, err)
		}
	}
	for i, s := range outSpecs {
		if err := e.binding.BindOutput(s.Name, e.outValues[i]); err != nil {
			return nil, fmt.Errorf("%w: onnx: model %q: binding output %s: %w", trt.ErrBackend, name, s, err)
		}
	}
	if err := e.planBatches(); err != nil {
		return nil, err
	}
	return e, nil
}

// unused destroys the session when no engine holds it (a Load whose first
// engine failed).
func (ss *session) unused() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.refs == 0 && !ss.released {
		ss.released = true
		ss.s.Destroy()
	}
}

// release ends one engine's hold on the session, destroying it after the
// last one.
func (ss *session) release() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.refs--
	if ss.refs > 0 || ss.released {
		return nil
	}
	ss.released = true
	return ss.s.Destroy()
}

// unwrapORT drops onnxruntime_go's generic prefixes, keeping ONNX
// Runtime's own message.
func unwrapORT(err error) string {
	msg := err.Error()
	for _, p := range []string{"Error creating temporary session: ", "Error creating C session: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

var elemTypes = map[ort.TensorElementDataType]trt.DataType{
	ort.TensorElementDataTypeFloat:   trt.Float32,
	ort.TensorElementDataTypeFloat16: trt.Float16,
	ort.TensorElementDataTypeInt8:    trt.Int8,
	ort.TensorElementDataTypeUint8:   trt.Uint8,
	ort.TensorElementDataTypeInt32:   trt.Int32,
	ort.TensorElementDataTypeInt64:   trt.Int64,
	ort.TensorElementDataTypeBool:    trt.Bool,
}

func ortType(d trt.DataType) ort.TensorElementDataType {
	for k, v := range elemTypes {
		if v == d {
			return k
		}
	}
	return ort.TensorElementDataTypeUndefined
}

// specs converts ONNX Runtime's I/O description, fixing dynamic dimensions
// from shapes (inputs only).
func specs(model, kind string, info []ort.InputOutputInfo, shapes map[string][]int64, image *trt.ImageShape) ([]trt.TensorSpec, error) {
	if len(info) == 0 {
		return nil, fmt.Errorf("%w: onnx: model %q has no %ss", trt.ErrEngineInvalid, model, kind)
	}
	out := make([]trt.TensorSpec, len(info))
	for i, in := range info {
		if in.OrtValueType != ort.ONNXTypeTensor {
			return nil, fmt.Errorf("%w: onnx: model %q %s %q is a %s; edged supports tensors only",
				trt.ErrEngineInvalid, model, kind, in.Name, in.OrtValueType)
		}
		dt, ok := elemTypes[in.DataType]
		if !ok {
			return nil, fmt.Errorf("%w: onnx: model %q %s %q has element type %s; edged supports float32, float16, int8, uint8, int32, int64 and bool",
				trt.ErrEngineInvalid, model, kind, in.Name, in.DataType)
		}
		s := trt.TensorSpec{Name: in.Name, Type: dt, Shape: append([]int64(nil), in.Dimensions...)}
		if s.Elements() < 0 && kind == "input" {
			want := shapes[in.Name]
			if want == nil {
				want = image.Resolve(in.Name, i == 0, s.Shape)
			}
			if err := fix(model, kind, &s, want); err != nil {
				return nil, err
			}
		}
		if s.Elements() == 0 {
			return nil, fmt.Errorf("%w: onnx: model %q %s %s has no elements", trt.ErrEngineInvalid, model, kind, s)
		}
		out[i] = s
	}
	return out, nil
}

// fix fills the dynamic dimensions of s from want.
func fix(model, kind string, s *trt.TensorSpec, want []int64) error {
	kind = fmt.Sprintf("%s %q (%s)", kind, s.Name, s)
	if want == nil {
		return fmt.Errorf("%w: onnx: model %q %s has dynamic dimensions (?): set preprocess.width and preprocess.height (and preprocess.input if it is not the first input) in the pipeline's configuration",
			trt.ErrSignature, model, kind)
	}
	if len(want) != len(s.Shape) {
		return fmt.Errorf("%w: onnx: model %q %s has %d dimensions; the configured shape %v has %d",
			trt.ErrSignature, model, kind, len(s.Shape), want, len(want))
	}
	for i, d := range s.Shape {
		switch {
		case want[i] <= 0:
			return fmt.Errorf("%w: onnx: model %q %s: configured shape %v has dimension %d = %d; dimensions must be positive",
				trt.ErrSignature, model, kind, want, i, want[i])
		case d >= 0 && d != want[i]:
			return fmt.Errorf("%w: onnx: model %q %s: configured shape %v differs in dimension %d, which the model fixes to %d",
				trt.ErrSignature, model, kind, want, i, d)
		}
	}
	s.Shape = append(s.Shape[:0], want...)
	return nil
}

func dynamic(ss []trt.TensorSpec) bool {
	for _, s := range ss {
		if s.Elements() < 0 {
			return true
		}
	}
	return false
}

func names(ss []trt.TensorSpec) []string {
	n := make([]string, len(ss))
	for i, s := range ss {
		n[i] = s.Name
	}
	return n
}

// probeOutputs runs the session once on the (zeroed) input tensors and
// returns the output specs with the shapes ONNX Runtime produced.
func probeOutputs(model string, s *ort.DynamicAdvancedSession, inValues []ort.Value, out []trt.TensorSpec) ([]trt.TensorSpec, error) {
	vals := make([]ort.Value, len(out))
	defer func() {
		for _, v := range vals {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err := s.Run(inValues, vals); err != nil {
		return nil, fmt.Errorf("%w: onnx: model %q has dynamic output shapes and a probe inference failed: %s",
			trt.ErrEngineInvalid, model, unwrapORT(err))
	}
	res := make([]trt.TensorSpec, len(out))
	for i, v := range vals {
		res[i] = trt.TensorSpec{Name: out[i].Name, Type: out[i].Type, Shape: []int64(v.GetShape())}
		if res[i].Elements() <= 0 {
			return nil, fmt.Errorf("%w: onnx: model %q output %s is empty on a probe inference; edged needs fixed output shapes",
				trt.ErrEngineInvalid, model, res[i])
		}
	}
	return res, nil
}

// engine is one user of a session: its umem tensors and the I/O binding
// that binds them.
type engine struct {
	name                string
	meta                *trt.Metadata
	sess                *session
	inputs, outputs     []*trt.Tensor
	inValues, outValues []ort.Value

	mu      sync.Mutex // serialises Infer and Close
	closed  bool
	binding *ort.IoBinding
	bat     batching // LoadOptions.Batch (batch_cgo.go)
	// cur is the tensors of the batch SetBatch chose (nil: inputs and
	// outputs), read by Inputs and Outputs: another goroutine (a memory
	// estimate, a reload) may read them while the engine's user sets the
	// batch.
	cur atomic.Pointer[batchSet]
}

// Share implements trt.Sharer: another engine on the same session, with
// tensors of its own shaped by opts (Image, Shapes, Alloc, Want).
func (e *engine) Share(ctx context.Context, opts trt.LoadOptions) (trt.Engine, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, trt.ErrClosed
	}
	ne, err := e.sess.engine(ctx, opts)
	if err != nil {
		return nil, err
	}
	return ne, nil
}

// Weights implements trt.Sharer: the session.
func (e *engine) Weights() any { return e.sess }

// add allocates the memory of one tensor and wraps it in an ORT tensor that
// uses that memory in place.
func (e *engine) add(alloc umem.Allocator, s trt.TensorSpec, ts *[]*trt.Tensor, vals *[]ort.Value) error {
	n := int(s.Bytes())
	buf, err := alloc.Alloc(n)
	if err != nil {
		return fmt.Errorf("%w: onnx: model %q tensor %s (%d bytes): %w", trt.ErrMemory, e.name, s, n, err)
	}
	*ts = append(*ts, &trt.Tensor{TensorSpec: s, Buf: buf})
	host, err := buf.Host()
	if err != nil {
		return fmt.Errorf("%w: model %q tensor %s: ONNX Runtime runs on the CPU and needs host-accessible memory, "+
			"but the %s allocator gave %s memory: %w", trt.ErrBackend, e.name, s, alloc.Strategy(), buf.Kind(), err)
	}
	v, err := ort.NewCustomDataTensor(ort.NewShape(s.Shape...), host[:n:n], ortType(s.Type))
	if err != nil {
		return fmt.Errorf("%w: onnx: model %q tensor %s: %w", trt.ErrBackend, e.name, s, err)
	}
	*vals = append(*vals, v)
	return nil
}

func (e *engine) Backend() string { return BackendName }
func (e *engine) Inputs() []*trt.Tensor {
	if s := e.cur.Load(); s != nil {
		return s.inputs
	}
	return e.inputs
}

func (e *engine) Outputs() []*trt.Tensor {
	if s := e.cur.Load(); s != nil {
		return s.outputs
	}
	return e.outputs
}
func (e *engine) String() string { return "onnxruntime engine " + e.name }

// Metadata is what the model's metadata_props say (ReadMetadata), or nil.
func (e *engine) Metadata() *trt.Metadata { return e.meta }

// Infer runs the session on the bound tensors. It allocates nothing.
func (e *engine) Infer(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return trt.ErrClosed
	}
	if err := e.sess.s.RunWithBinding(e.binding); err != nil {
		return fmt.Errorf("onnx: model %q: %w", e.name, err)
	}
	return nil
}

// Close releases the I/O binding, the ORT tensors and their memory, and
// the session when no other engine shares it. It waits for an Infer in
// progress and is idempotent.
func (e *engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	errs := []error{e.freeBatches()}
	if e.binding != nil {
		errs = append(errs, e.binding.Destroy())
	}
	for _, v := range e.inValues {
		errs = append(errs, v.Destroy())
	}
	for _, v := range e.outValues {
		errs = append(errs, v.Destroy())
	}
	for _, t := range slices.Concat(e.inputs, e.outputs) {
		errs = append(errs, t.Buf.Release())
	}
	errs = append(errs, e.sess.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("onnx: closing model %q: %w", e.name, err)
	}
	return nil
}
