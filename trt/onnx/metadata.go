package onnx

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/edged-dev/edged/trt"
)

// ModelProto and StringStringEntryProto field numbers.
const (
	fieldProducerName    = 2
	fieldProducerVersion = 3
	fieldMetadataProps   = 14
	fieldEntryKey        = 1
	fieldEntryValue      = 2
)

// maxProps bounds the metadata entries read; exporters write about a
// dozen.
const maxProps = 1024

// ReadMetadata returns what an ONNX model's metadata_props say about it,
// decoded as trt.DecodeMetadata does (Ultralytics and YOLOv5 write
// str(value) there: names as "{0: 'person', ...}"), or nil when the model
// has no metadata_props. It reads the top-level fields of the ModelProto
// only (the graph is skipped, not parsed), needs no ONNX Runtime, and a
// value it cannot read becomes one of the result's Problems instead of an
// error: the model runs without its metadata. An error means the bytes
// are not a ModelProto; it wraps trt.ErrEngineInvalid.
func ReadMetadata(model []byte) (*trt.Metadata, error) {
	if len(model) >= 8 && string(model[4:8]) == "ORTM" {
		return nil, nil // an ONNX Runtime format model keeps no metadata_props
	}
	props := map[string]any{}
	var producer, producerVersion string
	err := fields(model, func(field uint64, b []byte) error {
		switch field {
		case fieldProducerName:
			producer = string(b)
		case fieldProducerVersion:
			producerVersion = string(b)
		case fieldMetadataProps:
			if len(props) == maxProps {
				return fmt.Errorf("more than %d metadata_props entries", maxProps)
			}
			var k, v string
			err := fields(b, func(f uint64, s []byte) error {
				switch f {
				case fieldEntryKey:
					k = string(s)
				case fieldEntryValue:
					v = string(s)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("a metadata_props entry: %w", err)
			}
			props[k] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: onnx: reading the model's metadata: %w", trt.ErrEngineInvalid, err)
	}
	if len(props) == 0 {
		return nil, nil
	}
	md, _ := trt.DecodeMetadata(trt.FromONNXProps, props) // problems are kept in md.Problems
	if md.Producer == "" {
		md.Producer = strings.TrimSpace(producer + " " + producerVersion)
	}
	return md, nil
}

// fields calls f with the number and bytes of every length-delimited
// field of the protobuf message b, in order; varint and fixed-width
// fields are skipped. It fails on a malformed message.
func fields(b []byte, f func(field uint64, value []byte) error) error {
	for off := 0; off < len(b); {
		tag, n := binary.Uvarint(b[off:])
		if n <= 0 || tag>>3 == 0 {
			return fmt.Errorf("byte %d is not a protobuf field", off)
		}
		off += n
		field, wire := tag>>3, tag&7
		switch wire {
		case 0:
			if _, n = binary.Uvarint(b[off:]); n <= 0 {
				return fmt.Errorf("field %d at byte %d has a malformed value", field, off)
			}
			off += n
		case 1, 5:
			w := map[uint64]int{1: 8, 5: 4}[wire]
			if len(b)-off < w {
				return fmt.Errorf("field %d at byte %d is cut short", field, off)
			}
			off += w
		case 2:
			l, n := binary.Uvarint(b[off:])
			if n <= 0 || l > uint64(len(b)-off-n) {
				return fmt.Errorf("field %d at byte %d has a length past the end", field, off)
			}
			off += n
			if err := f(field, b[off:off+int(l)]); err != nil {
				return err
			}
			off += int(l)
		default:
			return fmt.Errorf("field %d at byte %d has wire type %d", field, off, wire)
		}
	}
	return nil
}
