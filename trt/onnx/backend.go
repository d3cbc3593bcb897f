package onnx

// BackendName is what Backend.Name and Engine.Backend report.
const BackendName = "onnxruntime"

// Options configure New.
type Options struct {
	// Library is the ONNX Runtime shared library configured by the user
	// (config key daemon.onnxruntime_lib); "" searches as FindLibrary does.
	Library string
}

// Backend loads ONNX models with ONNX Runtime. It implements trt.Backend.
type Backend struct {
	lib     string
	version string
}

// Name implements trt.Backend.
func (*Backend) Name() string { return BackendName }

// Library is the path of the ONNX Runtime library in use.
func (b *Backend) Library() string { return b.lib }

// Version is the ONNX Runtime version string, e.g. "1.30.0".
func (b *Backend) Version() string { return b.version }
