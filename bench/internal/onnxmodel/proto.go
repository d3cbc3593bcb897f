package onnxmodel

import (
	"encoding/binary"
	"math"
)

// A minimal protobuf writer for the ONNX messages the benchmark model needs
// (field numbers of onnx/onnx.proto). trt/demomodel has its own, unexported
// copy; this one adds nothing to edged's packages.

const (
	wireVarint = 0
	wireBytes  = 2

	// ModelProto
	modelIRVersion    = 1
	modelProducerName = 2
	modelGraph        = 7
	modelOpsetImport  = 8
	modelDocString    = 6

	// OperatorSetIdProto
	opsetDomain  = 1
	opsetVersion = 2

	// GraphProto
	graphNode        = 1
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12

	// NodeProto
	nodeInput     = 1
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	// AttributeProto
	attrName     = 1
	attrI        = 3
	attrInts     = 8
	attrType     = 20
	attrTypeInt  = 2
	attrTypeInts = 7

	// TensorProto
	tensorDims     = 1
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9
	dtFloat        = 1

	// ValueInfoProto, TypeProto, TensorShapeProto
	valueName      = 1
	valueType      = 2
	typeTensorType = 1
	tensorElemType = 1
	tensorShape    = 2
	shapeDim       = 1
	dimValue       = 1
)

type msg []byte

func (m msg) tag(field, wire int) msg {
	return binary.AppendUvarint(m, uint64(field)<<3|uint64(wire))
}

func (m msg) varint(field int, v int64) msg {
	return binary.AppendUvarint(m.tag(field, wireVarint), uint64(v))
}

func (m msg) bytes(field int, b []byte) msg {
	m = binary.AppendUvarint(m.tag(field, wireBytes), uint64(len(b)))
	return append(m, b...)
}

func (m msg) str(field int, s string) msg { return m.bytes(field, []byte(s)) }

type attr struct {
	name string
	ints []int64 // len 1 and scalar: an INT attribute
	one  bool
}

func intAttr(name string, v int64) attr     { return attr{name: name, ints: []int64{v}, one: true} }
func intsAttr(name string, v ...int64) attr { return attr{name: name, ints: v} }

func (a attr) encode() msg {
	m := msg(nil).str(attrName, a.name)
	if a.one {
		return m.varint(attrI, a.ints[0]).varint(attrType, attrTypeInt)
	}
	for _, v := range a.ints {
		m = m.varint(attrInts, v)
	}
	return m.varint(attrType, attrTypeInts)
}

type node struct {
	op, name string
	inputs   []string
	attrs    []attr
}

func (n node) encode() msg {
	var m msg
	for _, s := range n.inputs {
		m = m.str(nodeInput, s)
	}
	m = m.str(nodeOutput, n.name).str(nodeName, n.name).str(nodeOpType, n.op)
	for _, a := range n.attrs {
		m = m.bytes(nodeAttribute, a.encode())
	}
	return m
}

type tensor struct {
	name   string
	dims   []int64
	floats []float32
}

func (t tensor) encode() msg {
	var m msg
	for _, d := range t.dims {
		m = m.varint(tensorDims, d)
	}
	raw := make([]byte, 0, 4*len(t.floats))
	for _, v := range t.floats {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	return m.varint(tensorDataType, dtFloat).str(tensorName, t.name).bytes(tensorRawData, raw)
}

func valueInfo(name string, dims ...int64) msg {
	var shape msg
	for _, d := range dims {
		shape = shape.bytes(shapeDim, msg(nil).varint(dimValue, d))
	}
	tt := msg(nil).varint(tensorElemType, dtFloat).bytes(tensorShape, shape)
	return msg(nil).str(valueName, name).bytes(valueType, msg(nil).bytes(typeTensorType, tt))
}
