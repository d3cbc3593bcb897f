package preprocess

import "errors"

// Errors returned by this package, wrapped with details.
var (
	// ErrUnsupported is returned for options, pixel formats or tensor
	// layouts the package does not handle.
	ErrUnsupported = errors.New("preprocess: unsupported")
	// ErrFrame is returned for a frame that does not match its format
	// (too few bytes, a bad size or stride).
	ErrFrame = errors.New("preprocess: bad frame")
	// ErrTensor is returned for an output buffer smaller than the tensor.
	ErrTensor = errors.New("preprocess: tensor too small")
	// ErrClosed is returned by Run after Close.
	ErrClosed = errors.New("preprocess: closed")
)
