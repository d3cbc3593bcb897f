// Command gen writes the built-in demo model (or a variant) to a file. It is
// run by `go generate ./trt/demomodel` to refresh demo.onnx:
//
//	go run ./trt/demomodel/gen -o trt/demomodel/demo.onnx
package main
