package trt

// SniffBytes is how many leading bytes of a model file a Sniffer sees.
const SniffBytes = 64 << 10

// Sniffer is implemented by a Backend that can tell from the first bytes
// of a file whether it can be a model for it (a protobuf ModelProto, a
// TensorRT plan header). The reloader (trt/reload) asks it before it reads a file
// whole, so junk of any size costs one small read.
type Sniffer interface {
	// Sniff looks at head, the first min(size, SniffBytes) bytes of a
	// file of size bytes. It returns nil when the file may be a model for
	// the backend, else an error wrapping ErrEngineInvalid. It must not
	// keep head.
	Sniff(head []byte, size int64) error
}
