//go:build !tensorrt || !cgo || !linux

package tensorrt

import (
	"context"
	"fmt"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/plan"
)

// HeaderVersion is the TensorRT version of the headers the shim was built
// against; zero in builds without the tensorrt tag.
func HeaderVersion() plan.Version { return plan.Version{} }

// errNotBuilt explains a build without TensorRT, naming the library the
// machine has when there is one.
func errNotBuilt(library string) error {
	found := ""
	if l, err := Probe(library); err == nil {
		found = fmt.Sprintf(" (this machine has %s)", l)
	}
	return fmt.Errorf("%w: tensorrt: edged was built without TensorRT%s; build it with CGO_ENABLED=1 and -tags tensorrt "+
		"against the TensorRT headers (on a Jetson: go build -tags tensorrt ./cmd/edged), or run the model's .onnx file "+
		"with ONNX Runtime", trt.ErrBackend, found)
}

// Backend stands in for the TensorRT backend in builds without it; New
// never returns one.
type Backend struct{}

var _ trt.Backend = (*Backend)(nil)

// New reports that this edged was built without TensorRT.
func New(opts Options) (*Backend, error) { return nil, errNotBuilt(opts.Library) }

// Name implements trt.Backend.
func (*Backend) Name() string { return Name }

// Library reports the libnvinfer in use: none.
func (*Backend) Library() Library { return Library{} }

// Load implements trt.Backend.
func (*Backend) Load(context.Context, []byte, trt.LoadOptions) (trt.Engine, error) {
	return nil, errNotBuilt("")
}

// Plugins describes the plugin libraries loaded: none.
func (*Backend) Plugins() string { return "" }

// DLACores is the number of DLA cores: unknown without TensorRT.
func (*Backend) DLACores() int { return 0 }

// DLACores reports that this edged cannot ask TensorRT about DLA cores.
func DLACores(library string) (int, error) { return 0, errNotBuilt(library) }

// DrainLog returns dst: there is no TensorRT log.
func (*Backend) DrainLog(dst []LogRecord) ([]LogRecord, uint64) { return dst, 0 }

// Close does nothing.
func (*Backend) Close() error { return nil }
