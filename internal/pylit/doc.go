// Package pylit reads the Python literals that model exporters write as
// text: Ultralytics and YOLOv5 store their metadata in an ONNX model's
// metadata_props as str(value), so class names arrive as
// "{0: 'person', 1: 'bicycle'}" and an input size as "[640, 640]".
//
// It understands what repr() of the exporters' values produces: None,
// True, False, integers, floats, strings in single or double quotes (with
// Python's escapes), lists, tuples and dicts, nested up to [MaxDepth]. It
// evaluates nothing.
package pylit
