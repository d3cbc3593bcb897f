// Package demomodel generates edged's built-in demo model: a small ONNX
// network (a few KB, opset 13) whose outputs can be checked against the
// frame it was given.
//
// The model sees the demo scene of internal/demoscene, which
// sensors/synthetic draws (a white square moving over a background whose
// colour cycles through demoscene.Palette). Its
// input "image" is float32 [1,3,S,S] (RGB planes, values in [0,1], S = 64 by
// default). It reports
//
//   - "class" float32 [1,8]: a softmax over the palette, highest at the
//     background's palette index (or that index plus the variant, modulo 8,
//     for the permuted variants used to watch a hot reload);
//   - "centroid" float32 [1,2]: (x, y) of the square's centre relative to the
//     input width and height, in [0,1].
//
// Pixels whose darkest channel is above 0.75 belong to the square; the
// class is computed from the mean colour of the other pixels and the
// centroid from the mean position of the square's pixels.
//
// The protobuf is written by hand (the wire format needs only varints and
// length-delimited fields), so the bytes are deterministic and the package
// needs no protobuf or ONNX library. [Default] is the committed demo.onnx,
// which `go generate` rewrites from [Build]; a test keeps the two equal.
// Config `path = "builtin:demo"` loads [Default].
package demomodel
