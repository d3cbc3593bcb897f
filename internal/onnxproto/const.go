package onnxproto

// ConstOutput is one output of a ConstModel: fixed values of a shape and
// element type.
type ConstOutput struct {
	Name   string
	Type   int // DTFloat, DTFloat16, DTInt32, DTInt64, DTInt8, DTUint8, DTBool
	Dims   []int64
	Values []float32 // converted to Type by a Cast (truncating, as ONNX does)
}

// ConstModel returns an ONNX model (opset 17) with one float32 image input
// [1, 3, h, w] and outputs of fixed values: each is its values plus zero
// times the sum of the input (so ONNX Runtime keeps the input and runs a
// graph per inference), cast to its element type. meta becomes the
// model's metadata_props, in order (key, value pairs). Tests use it for
// detector outputs with known boxes in each format edged reads.
func ConstModel(input string, h, w int64, outs []ConstOutput, meta ...[2]string) []byte {
	var nodes []Node
	consts := []Tensor{
		{Name: "zero", Dims: []int64{1}, Floats: []float32{0}},
		{Name: "axes_chw", Dims: []int64{3}, Ints: []int64{1, 2, 3}},
	}
	nodes = append(nodes,
		Node{Op: "ReduceSum", Name: "input_sum", Inputs: []string{input, "axes_chw"}, Outputs: []string{"input_sum"}, Attrs: []Attr{IntAttr("keepdims", 0)}},
		Node{Op: "Mul", Name: "nothing", Inputs: []string{"input_sum", "zero"}, Outputs: []string{"nothing"}},
	)
	for _, o := range outs {
		consts = append(consts, Tensor{Name: o.Name + "_values", Dims: o.Dims, Floats: o.Values})
		sum := o.Name
		if o.Type != DTFloat {
			sum = o.Name + "_float"
		}
		nodes = append(nodes, Node{Op: "Add", Name: sum, Inputs: []string{o.Name + "_values", "nothing"}, Outputs: []string{sum}})
		if o.Type != DTFloat {
			nodes = append(nodes, Node{Op: "Cast", Name: o.Name, Inputs: []string{sum}, Outputs: []string{o.Name}, Attrs: []Attr{IntAttr("to", int64(o.Type))}})
		}
	}
	var g Msg
	for _, n := range nodes {
		g = g.Bytes(GraphNode, n.Encode())
	}
	g = g.Str(GraphName, "const_outputs")
	for _, c := range consts {
		g = g.Bytes(GraphInitializer, c.Encode())
	}
	g = g.Bytes(GraphInput, ValueInfo(input, 1, 3, h, w))
	for _, o := range outs {
		g = g.Bytes(GraphOutput, TypedValueInfo(o.Name, o.Type, o.Dims...))
	}
	m := Msg(nil).Varint(ModelIRVersion, 8).Str(ModelProducerName, "edged-test").
		Bytes(ModelGraph, g).
		Bytes(ModelOpsetImport, Msg(nil).Str(OpsetDomain, "").Varint(OpsetVersion, 17))
	for _, kv := range meta {
		m = m.Bytes(ModelMetadataProps, Entry(kv[0], kv[1]))
	}
	return m
}

// ShapedValueInfo describes a graph input or output of element type elem
// whose dimension i is dims[i], or, where dims[i] < 0, dynamic and named
// params[i] ("" or missing: unnamed).
func ShapedValueInfo(name string, elem int, dims []int64, params []string) Msg {
	var shape Msg
	for i, d := range dims {
		switch {
		case d >= 0:
			shape = shape.Bytes(shapeDim, Msg(nil).Varint(dimValue, d))
		case i < len(params) && params[i] != "":
			shape = shape.Bytes(shapeDim, Msg(nil).Str(dimParam, params[i]))
		default:
			shape = shape.Bytes(shapeDim, nil)
		}
	}
	tt := Msg(nil).Varint(tensorElemType, int64(elem)).Bytes(tensorShape, shape)
	return Msg(nil).Str(valueName, name).Bytes(valueType, Msg(nil).Bytes(typeTensorType, tt))
}

// IdentityModel returns an ONNX model (opset 17) whose one output,
// "output", is its one input, "input", of element type elem and shape
// dims (dynamic where negative, named by params: the output's dimensions
// are named alike). Tests use it for models with huge or dynamic inputs.
func IdentityModel(elem int, dims []int64, params []string) []byte {
	g := Msg(nil).Bytes(GraphNode, Node{Op: "Identity", Name: "same", Inputs: []string{"input"}, Outputs: []string{"output"}}.Encode()).
		Str(GraphName, "identity").
		Bytes(GraphInput, ShapedValueInfo("input", elem, dims, params)).
		Bytes(GraphOutput, ShapedValueInfo("output", elem, dims, params))
	return Msg(nil).Varint(ModelIRVersion, 8).Str(ModelProducerName, "edged-test").
		Bytes(ModelGraph, g).
		Bytes(ModelOpsetImport, Msg(nil).Str(OpsetDomain, "").Varint(OpsetVersion, 17))
}
