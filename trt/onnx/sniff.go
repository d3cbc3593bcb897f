package onnx

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/edged-dev/edged/trt"
)

// modelProtoFields are the fields of ONNX's ModelProto with their protobuf
// wire types (0 varint, 2 length-delimited).
var modelProtoFields = map[uint64]uint64{
	1:  0, // ir_version
	2:  2, // producer_name
	3:  2, // producer_version
	4:  2, // domain
	5:  0, // model_version
	6:  2, // doc_string
	7:  2, // graph
	8:  2, // opset_import
	14: 2, // metadata_props
	20: 2, // training_info
	25: 2, // functions
	26: 2, // configuration
}

// maxField bounds the field numbers accepted at the top level: ModelProto's
// go up to 26; random bytes read as a tag are mostly far larger.
const maxField = 1 << 12

// Sniff implements trt.Sniffer. An ONNX model is a protobuf ModelProto (or
// an ONNX Runtime format model, "ORTM" at byte 4). Sniff walks the
// top-level fields in head: the first must be a ModelProto field, every
// one must have a valid wire type, no length may run past the end of the
// file, and a file read whole must have a graph. Junk, a file of zeros and most truncated files fail; a file
// that passes may still be refused by ONNX Runtime.
func (*Backend) Sniff(head []byte, size int64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: onnx: not a complete .onnx model (copy or export it again): %s", trt.ErrEngineInvalid, fmt.Sprintf(format, args...))
	}
	whole := int64(len(head)) == size
	switch {
	case size == 0:
		return fmt.Errorf("%w: onnx: the file is empty: it was probably still being written, or the export failed; write models to a temporary name and rename them into place", trt.ErrEngineInvalid)
	case len(head) >= 8 && string(head[4:8]) == "ORTM":
		return nil
	}
	off, graph := 0, false
	for first := true; off < len(head); first = false {
		tag, n := binary.Uvarint(head[off:])
		if n == 0 && !whole {
			return nil // the tag runs past the bytes sniffed
		}
		field, wire := tag>>3, tag&7
		if n <= 0 || field == 0 || field > maxField {
			return bad("byte %d (%s) is not a protobuf field%s", off, quoteStart(head[off:]), hint(head, first))
		}
		if want, ok := modelProtoFields[field]; first && (!ok || want != wire) {
			return bad("it starts with protobuf field %d (wire type %d), which an ONNX ModelProto does not have%s", field, wire, hint(head, true))
		}
		off += n
		graph = graph || field == 7 && wire == 2
		var skip uint64
		switch wire {
		case 0:
			_, n = binary.Uvarint(head[off:])
			if n == 0 && !whole {
				return nil
			}
			if n <= 0 {
				return bad("field %d at byte %d has a malformed value", field, off-1)
			}
			off += n
			continue
		case 1:
			skip = 8
		case 5:
			skip = 4
		case 2:
			l, n := binary.Uvarint(head[off:])
			if n == 0 && !whole {
				return nil
			}
			if n <= 0 {
				return bad("field %d at byte %d has a malformed length", field, off-1)
			}
			off += n
			skip = l
		default:
			return bad("field %d at byte %d has wire type %d, which ONNX does not use%s", field, off-1, wire, hint(head, first))
		}
		if skip > uint64(size-int64(off)) {
			return bad("field %d at byte %d needs %d more bytes, but the file ends after %d: truncated?", field, off, skip, size-int64(off))
		}
		off += int(min(skip, uint64(len(head)-off)))
	}
	if whole && !graph {
		return bad("it has no graph (field 7): truncated?")
	}
	return nil
}

func quoteStart(b []byte) string { return fmt.Sprintf("%q", b[:min(len(b), 8)]) }

// hint names what a file that is not ONNX most likely is.
func hint(b []byte, first bool) string {
	if !first {
		return ""
	}
	switch {
	case bytes.HasPrefix(b, []byte("version https://git-lfs")):
		return " (a Git LFS pointer: run git lfs pull to fetch the real file)"
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return " (a zip archive, such as a PyTorch .pt checkpoint: export it to ONNX first)"
	case bytes.HasPrefix(b, []byte("ftrt")) || len(b) > 4 && b[4] == '{':
		return " (it looks like a TensorRT engine: give it the .engine extension or set backend = \"tensorrt\")"
	}
	return fmt.Sprintf(" (it starts with %s)", quoteStart(b))
}
