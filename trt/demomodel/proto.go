package demomodel

// The model's identity in its ModelProto (written with internal/onnxproto).
const (
	irVersion       = 7  // the first IR version that opset 13 may use
	opset           = 13 // ai.onnx
	producerName    = "edged demomodel"
	producerVersion = "1"
)
