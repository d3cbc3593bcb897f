package streamtest

import (
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
)

var imuNames = []string{"ax", "ay", "az", "gx", "gy", "gz"}

// BenchRecord is a typical detection result: 10 boxes, a top-3 list and two
// sensor samples.
func BenchRecord() *stream.Record {
	r := &stream.Record{
		Kind: stream.KindResult, Device: "jetson-01", Pipeline: "front", FrameSeq: 123456, TCaptureNs: 987654321012,
		Engine:  stream.EngineRef{Name: "yolo-v8n", Generation: 3, SHA256: "ab12cd34ef56"},
		Latency: stream.Latency{Pre: 410, Infer: 12800, Post: 95, Total: 13400},
	}
	dets := make([]stream.Detection, 10)
	for i := range dets {
		f := float32(i)
		dets[i] = stream.Detection{Box: [4]float32{10.5 + f, 20.25 * f, 110.125 + f, 220.75}, Class: i % 3, Label: "person", Score: 0.9 - f/20}
	}
	r.Outputs = []stream.Output{
		{Name: "objects", Kind: stream.OutputDetections, Detections: dets},
		{Name: "scene", Kind: stream.OutputClasses, Classes: []stream.Class{{Index: 2, Label: "green", Score: 0.9}, {Index: 0, Label: "red", Score: 0.07}, {Index: 1, Label: "blue", Score: 0.03}}},
	}
	r.Sensors = []sensors.Sample{
		{Sensor: "imu", Seq: 99, TMono: 987654000000, Kind: "imu", Names: imuNames,
			Values: [sensors.MaxSampleValues]float64{0.01, -0.02, 9.81, 0.001, 0, -0.5}, N: 6},
		{Sensor: "gps", Seq: 7, TMono: 987000000000, Kind: "gga", Names: []string{"lat", "lon"},
			Values: [sensors.MaxSampleValues]float64{52.520008, 13.404954}, N: 2},
	}
	return r
}

// Result is a small classification result of pipeline for frame: one
// class, the frame number in the capture stamp.
func Result(pipeline string, frame uint64) *stream.Record {
	return &stream.Record{Kind: stream.KindResult, Pipeline: pipeline, FrameSeq: frame, TCaptureNs: int64(frame) * 1000,
		Engine:  stream.EngineRef{Name: "demo", Generation: 1, SHA256: "abc"},
		Outputs: []stream.Output{{Name: "top", Kind: stream.OutputClasses, Classes: []stream.Class{{Index: int(frame % 3), Label: "c", Score: 0.5}}}}}
}
