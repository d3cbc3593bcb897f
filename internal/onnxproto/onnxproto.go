package onnxproto

import (
	"encoding/binary"
	"math"
)

// Protobuf wire types.
const (
	wireVarint  = 0
	wireBytes   = 2
	wireFixed32 = 5
)

// ONNX field numbers.
const (
	// ModelProto
	ModelIRVersion       = 1
	ModelProducerName    = 2
	ModelProducerVersion = 3
	ModelDomain          = 4
	ModelModelVersion    = 5
	ModelDocString       = 6
	ModelGraph           = 7
	ModelOpsetImport     = 8
	ModelMetadataProps   = 14

	// OperatorSetIdProto
	OpsetDomain  = 1
	OpsetVersion = 2

	// StringStringEntryProto
	entryKey   = 1
	entryValue = 2

	// GraphProto
	GraphNode        = 1
	GraphName        = 2
	GraphInitializer = 5
	GraphDocString   = 10
	GraphInput       = 11
	GraphOutput      = 12

	// NodeProto
	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	// AttributeProto
	attrName = 1
	attrF    = 2
	attrI    = 3
	attrInts = 8
	attrType = 20

	// AttributeProto.AttributeType
	attrTypeFloat = 1
	attrTypeInt   = 2
	attrTypeInts  = 7

	// TensorProto
	tensorDims     = 1
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9

	// TensorProto.DataType
	DTFloat   = 1
	DTUint8   = 2
	DTInt8    = 3
	DTInt32   = 6
	DTInt64   = 7
	DTBool    = 9
	DTFloat16 = 10
	dtInt64   = DTInt64

	// ValueInfoProto
	valueName = 1
	valueType = 2

	// TypeProto / TypeProto.Tensor / TensorShapeProto / Dimension
	typeTensorType = 1
	tensorElemType = 1
	tensorShape    = 2
	shapeDim       = 1
	dimValue       = 1
	dimParam       = 2
)

// Msg is a protobuf message being written.
type Msg []byte

func (m Msg) tag(field, wire int) Msg {
	return binary.AppendUvarint(m, uint64(field)<<3|uint64(wire))
}

// Varint appends an int64/int32/enum field (two's complement for
// negatives, as protobuf does for int64).
func (m Msg) Varint(field int, v int64) Msg {
	return binary.AppendUvarint(m.tag(field, wireVarint), uint64(v))
}

// Bytes appends a length-delimited field: bytes or an embedded message.
func (m Msg) Bytes(field int, b []byte) Msg {
	m = binary.AppendUvarint(m.tag(field, wireBytes), uint64(len(b)))
	return append(m, b...)
}

// Str appends a string field.
func (m Msg) Str(field int, s string) Msg { return m.Bytes(field, []byte(s)) }

// Attr is a node attribute (FLOAT, INT or INTS).
type Attr struct {
	name string
	kind int
	f    float32
	i    int64
	ints []int64
}

// FloatAttr is a FLOAT attribute.
func FloatAttr(name string, v float32) Attr { return Attr{name: name, kind: attrTypeFloat, f: v} }

// IntAttr is an INT attribute.
func IntAttr(name string, v int64) Attr { return Attr{name: name, kind: attrTypeInt, i: v} }

// IntsAttr is an INTS attribute.
func IntsAttr(name string, v ...int64) Attr { return Attr{name: name, kind: attrTypeInts, ints: v} }

func (a Attr) encode() Msg {
	m := Msg(nil).Str(attrName, a.name)
	switch a.kind {
	case attrTypeFloat:
		m = binary.LittleEndian.AppendUint32(m.tag(attrF, wireFixed32), math.Float32bits(a.f))
	case attrTypeInt:
		m = m.Varint(attrI, a.i)
	case attrTypeInts:
		for _, v := range a.ints {
			m = m.Varint(attrInts, v)
		}
	}
	return m.Varint(attrType, int64(a.kind))
}

// Node is a graph node.
type Node struct {
	Op      string
	Name    string
	Inputs  []string
	Outputs []string
	Attrs   []Attr
}

// Encode writes the NodeProto.
func (n Node) Encode() Msg {
	var m Msg
	for _, s := range n.Inputs {
		m = m.Str(nodeInput, s)
	}
	for _, s := range n.Outputs {
		m = m.Str(nodeOutput, s)
	}
	m = m.Str(nodeName, n.Name).Str(nodeOpType, n.Op)
	for _, a := range n.Attrs {
		m = m.Bytes(nodeAttribute, a.encode())
	}
	return m
}

// Tensor is an initializer: a float32 or (Ints set) int64 constant stored
// as raw little-endian bytes.
type Tensor struct {
	Name   string
	Dims   []int64
	Floats []float32
	Ints   []int64
}

// Encode writes the TensorProto.
func (t Tensor) Encode() Msg {
	var m Msg
	for _, d := range t.Dims {
		m = m.Varint(tensorDims, d)
	}
	var raw []byte
	if t.Ints != nil {
		m = m.Varint(tensorDataType, dtInt64)
		for _, v := range t.Ints {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	} else {
		m = m.Varint(tensorDataType, DTFloat)
		raw = make([]byte, 0, 4*len(t.Floats))
		for _, v := range t.Floats {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
	}
	return m.Str(tensorName, t.Name).Bytes(tensorRawData, raw)
}

// ValueInfo describes a float32 graph input or output; a negative
// dimension is dynamic, named "batch".
func ValueInfo(name string, dims ...int64) Msg { return TypedValueInfo(name, DTFloat, dims...) }

// TypedValueInfo describes a graph input or output of element type elem
// (DTFloat, DTFloat16, DTInt32, ...); a negative dimension is dynamic,
// named "batch".
func TypedValueInfo(name string, elem int, dims ...int64) Msg {
	var shape Msg
	for _, d := range dims {
		if d < 0 {
			shape = shape.Bytes(shapeDim, Msg(nil).Str(dimParam, "batch"))
		} else {
			shape = shape.Bytes(shapeDim, Msg(nil).Varint(dimValue, d))
		}
	}
	tt := Msg(nil).Varint(tensorElemType, int64(elem)).Bytes(tensorShape, shape)
	typ := Msg(nil).Bytes(typeTensorType, tt)
	return Msg(nil).Str(valueName, name).Bytes(valueType, typ)
}

// Entry is a StringStringEntryProto (model metadata).
func Entry(k, v string) Msg { return Msg(nil).Str(entryKey, k).Str(entryValue, v) }
