package demomodel

import (
	"encoding/binary"
	"math"
)

// A minimal protobuf writer for the few ONNX messages the demo model needs.
// Field numbers are those of onnx/onnx.proto (IR version 7 and later).

// Protobuf wire types.
const (
	wireVarint = 0
	wireBytes  = 2
)

// ONNX field numbers.
const (
	// ModelProto
	modelIRVersion       = 1
	modelProducerName    = 2
	modelProducerVersion = 3
	modelDomain          = 4
	modelModelVersion    = 5
	modelDocString       = 6
	modelGraph           = 7
	modelOpsetImport     = 8
	modelMetadataProps   = 14

	// OperatorSetIdProto
	opsetDomain  = 1
	opsetVersion = 2

	// StringStringEntryProto
	entryKey   = 1
	entryValue = 2

	// GraphProto
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphDocString   = 10
	graphInput       = 11
	graphOutput      = 12

	// NodeProto
	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	// AttributeProto
	attrName = 1
	attrI    = 3
	attrInts = 8
	attrType = 20

	// AttributeProto.AttributeType
	attrTypeInt  = 2
	attrTypeInts = 7

	// TensorProto
	tensorDims     = 1
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9

	// TensorProto.DataType
	dtFloat = 1
	dtInt64 = 7

	// ValueInfoProto
	valueName = 1
	valueType = 2

	// TypeProto / TypeProto.Tensor / TensorShapeProto / Dimension
	typeTensorType  = 1
	tensorElemType  = 1
	tensorShape     = 2
	shapeDim        = 1
	dimValue        = 1
	dimParam        = 2
	irVersion       = 7  // the first IR version that opset 13 may use
	opset           = 13 // ai.onnx
	producerName    = "edged demomodel"
	producerVersion = "1"
)

// msg is a protobuf message being written.
type msg []byte

func (m msg) tag(field, wire int) msg {
	return binary.AppendUvarint(m, uint64(field)<<3|uint64(wire))
}

// varint appends an int64/int32/enum field (two's complement for negatives,
// as protobuf does for int64).
func (m msg) varint(field int, v int64) msg {
	return binary.AppendUvarint(m.tag(field, wireVarint), uint64(v))
}

func (m msg) bytes(field int, b []byte) msg {
	m = binary.AppendUvarint(m.tag(field, wireBytes), uint64(len(b)))
	return append(m, b...)
}

func (m msg) str(field int, s string) msg { return m.bytes(field, []byte(s)) }

// A node attribute.
type attr struct {
	name string
	kind int
	i    int64
	ints []int64
}

func intAttr(name string, v int64) attr     { return attr{name: name, kind: attrTypeInt, i: v} }
func intsAttr(name string, v ...int64) attr { return attr{name: name, kind: attrTypeInts, ints: v} }
func (a attr) encode() msg {
	m := msg(nil).str(attrName, a.name)
	switch a.kind {
	case attrTypeInt:
		m = m.varint(attrI, a.i)
	case attrTypeInts:
		for _, v := range a.ints {
			m = m.varint(attrInts, v)
		}
	}
	return m.varint(attrType, int64(a.kind))
}

// A graph node.
type node struct {
	op      string
	name    string
	inputs  []string
	outputs []string
	attrs   []attr
}

func (n node) encode() msg {
	var m msg
	for _, s := range n.inputs {
		m = m.str(nodeInput, s)
	}
	for _, s := range n.outputs {
		m = m.str(nodeOutput, s)
	}
	m = m.str(nodeName, n.name).str(nodeOpType, n.op)
	for _, a := range n.attrs {
		m = m.bytes(nodeAttribute, a.encode())
	}
	return m
}

// An initializer: a float32 or int64 constant stored as raw little-endian
// bytes.
type tensor struct {
	name   string
	dims   []int64
	floats []float32
	ints   []int64
}

func (t tensor) encode() msg {
	var m msg
	for _, d := range t.dims {
		m = m.varint(tensorDims, d)
	}
	var raw []byte
	if t.ints != nil {
		m = m.varint(tensorDataType, dtInt64)
		for _, v := range t.ints {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	} else {
		m = m.varint(tensorDataType, dtFloat)
		for _, v := range t.floats {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
	}
	return m.str(tensorName, t.name).bytes(tensorRawData, raw)
}

// valueInfo describes a float32 graph input or output; a negative
// dimension is dynamic, named "batch".
func valueInfo(name string, dims ...int64) msg {
	var shape msg
	for _, d := range dims {
		if d < 0 {
			shape = shape.bytes(shapeDim, msg(nil).str(dimParam, "batch"))
		} else {
			shape = shape.bytes(shapeDim, msg(nil).varint(dimValue, d))
		}
	}
	tt := msg(nil).varint(tensorElemType, dtFloat).bytes(tensorShape, shape)
	typ := msg(nil).bytes(typeTensorType, tt)
	return msg(nil).str(valueName, name).bytes(valueType, typ)
}

func entry(k, v string) msg { return msg(nil).str(entryKey, k).str(entryValue, v) }
