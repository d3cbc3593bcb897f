package stream

import (
	"math"

	"github.com/edged-dev/edged/sensors"
)

var imuNames = []string{"ax", "ay", "az", "gx", "gy", "gz"}

// sampleRecords are the representative records of the golden files.
func sampleRecords() []struct {
	name string
	rec  Record
} {
	return []struct {
		name string
		rec  Record
	}{
		{"result_classes", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "front", FrameSeq: 1234, TCaptureNs: 987654321012,
			Engine:  EngineRef{Name: "demo", Generation: 3, SHA256: "ab12cd34ef56"},
			Latency: Latency{Pre: 410, Infer: 2800, Post: 95, Total: 3400},
			Outputs: []Output{
				{Name: "background", Kind: OutputClasses, Classes: []Class{
					{Index: 2, Label: "green", Score: 0.9375},
					{Index: 0, Label: "red", Score: 0.05},
				}},
				{Name: "centroid", Kind: OutputRaw, Shape: []int64{1, 2}, Data: []float32{0.25, 0.75}},
			},
		}},
		{"result_detections", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "dock cam \"A\"", FrameSeq: 1 << 40, TCaptureNs: 5,
			Engine:  EngineRef{Name: "yolo-v8n", Generation: 1, SHA256: "0123456789ab"},
			Latency: Latency{Pre: 1200, Infer: 15000, Post: 800, Total: 17000},
			Outputs: []Output{{Name: "objects", Kind: OutputDetections, Detections: []Detection{
				{Box: [4]float32{10.5, 20, 110.25, 220}, Class: 0, Label: "person", Score: 0.91},
				{Box: [4]float32{-3, 0, 640, 480}, Class: 62, Label: "tv\tmonitor", Score: 0.3},
			}}},
			Sensors: []sensors.Sample{
				{Sensor: "imu", Seq: 99, TMono: 987654000000, Kind: "imu", Names: imuNames,
					Values: [sensors.MaxSampleValues]float64{0.01, -0.02, 9.81, 0.001, 0, -0.5}, N: 6},
				{Sensor: "gps", Seq: 7, TMono: 987000000000, Kind: "gga",
					Values: [sensors.MaxSampleValues]float64{52.520008, 13.404954}, N: 2},
			},
		}},
		{"result_raw", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "raw", FrameSeq: 0, TCaptureNs: -1,
			Engine: EngineRef{Name: "ünïcode", Generation: 18446744073709551615, SHA256: ""},
			Outputs: []Output{{Name: "logits", Kind: OutputRaw, Shape: []int64{1, 1000}, Truncated: true,
				Data: []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -0.5, 1e-7, 3.4e38, 16777216, 1}}},
		}},
		{"status_engine_reloaded", Record{
			Kind: KindStatus, Device: "jetson-01", Event: "engine_reloaded", Pipeline: "front", Source: "demo", Model: "demo",
			Engine: EngineRef{Name: "demo", Generation: 4, SHA256: "ab12cd34ef56"}, TNs: 1000000000,
		}},
		{"status_engine_rejected", Record{
			Kind: KindStatus, Device: "jetson-01", Event: "engine_rejected", Source: "yolo",
			Reason: "warm-up produced NaN in \"output0\"\nkeeping generation 3 \u2028 \x01 bad:\xff\xfe", TNs: 2,
		}},
		{"status_config_reloaded", Record{Kind: KindStatus, Device: "jetson-01", Event: "config_reloaded", TNs: 3}},
		{"error_max_clients", Record{Kind: KindError, Device: "jetson-01", Reason: "stream: too many clients (64); close another client or raise max_clients", TNs: 4}},
		// Added with keypoints and the element types of raw outputs (after the
		// others, so the numbering of tail.txt stays as it was).
		{"result_raw_types", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "types", FrameSeq: 2, TCaptureNs: 10,
			Engine: EngineRef{Name: "efficientnms", Generation: 1, SHA256: "00ff00ff00ff"},
			Outputs: []Output{
				{Name: "num_dets", Kind: OutputRaw, Shape: []int64{1, 1}, DType: "int32", Data: []float32{3}},
				{Name: "mask", Kind: OutputRaw, Shape: []int64{1, 3}, DType: "bool", Data: []float32{1, 0, 1}},
				{Name: "half", Kind: OutputRaw, Shape: []int64{1, 2}, DType: "float16", Data: []float32{0.5, 65504}},
			},
		}},
		{"result_keypoints", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "pose", FrameSeq: 3, TCaptureNs: 11,
			Engine:  EngineRef{Name: "yolo11n-pose", Generation: 2, SHA256: "abcdefabcdef"},
			Latency: Latency{Pre: 300, Infer: 9000, Post: 120, Total: 9500},
			Outputs: []Output{{Name: "output0", Kind: OutputDetections, KeypointDims: 3, Detections: []Detection{
				{Box: [4]float32{100, 50, 180, 300}, Class: 0, Label: "person", Score: 0.88,
					Keypoints: []float32{140, 70, 0.97, 150, 68, 0.5, 0, 0, 0.01}},
				{Box: [4]float32{300, 40, 360, 280}, Class: 0, Label: "person", Score: 0.4,
					Keypoints: []float32{330, 60, 0.9, 335, 58, 0.8, 320, 61, 0.2}},
			}}},
		}},
		{"status_engine_pending", Record{
			Kind: KindStatus, Device: "jetson-01", Event: "engine_pending", Pipeline: "front", Source: "demo", Model: "demo",
			Reason: "invalid: demo.onnx was written in place just now and is not a usable model yet; it is judged at 12:00:10 (in 9.6s), when it has been left alone, unless it changes again; generation 4 (ab12cd34ef56) keeps serving. Details: onnx: not a complete .onnx model (copy or export it again): it starts with protobuf field 13 (wire type 2), which an ONNX ModelProto does not have (it starts with \"junk\\n\")",
			Engine: EngineRef{Name: "demo", Generation: 4, SHA256: "5d41402abc4b", Serving: "ab12cd34ef56"}, TNs: 1100000000,
		}},
		{"status_sink_down", Record{Kind: KindStatus, Device: "jetson-01", Event: "sink_down", Source: "cloud", Sink: "cloud",
			Reason: "mqtt sink \"cloud\" (mqtts://broker.example:8883): connection refused", TNs: 5}},
		{"status_config_rejected", Record{Kind: KindStatus, Device: "jetson-01", Event: "config_rejected", Source: "/etc/edged/edged.toml", File: "/etc/edged/edged.toml",
			Reason: "/etc/edged/edged.toml:31:1: source[0].fsp: unknown key; did you mean \"fps\"? (every key is listed in configs/edged.toml)", TNs: 6}},
		{"result_network_camera", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "dock", FrameSeq: 9, TCaptureNs: 987654321012, CaptureClock: "sender_report",
			Engine:  EngineRef{Name: "demo", Generation: 1, SHA256: "ab12cd34ef56"},
			Latency: Latency{Pre: 410, Infer: 2800, Post: 95, Total: 3400},
			Outputs: []Output{{Name: "centroid", Kind: OutputRaw, Shape: []int64{1, 2}, Data: []float32{0.25, 0.75}}},
		}},
		// A batched pipeline's record: its camera, the frames of its
		// inference, the wait for the batch as a stage.
		{"result_batched", Record{
			Kind: KindResult, Device: "jetson-01", Pipeline: "yard", Source: "cam2", FrameSeq: 417, TCaptureNs: 987654321012,
			Engine:  EngineRef{Name: "demo", Generation: 2, SHA256: "ab12cd34ef56", Batch: 4},
			Latency: Latency{Queue: 3, Batch: 1800, Pre: 410, Infer: 5200, Post: 95, Total: 7508},
			Outputs: []Output{{Name: "background", Kind: OutputClasses, Classes: []Class{{Index: 2, Label: "green", Score: 0.9375}}}},
		}},
	}
}

// benchRecord is a typical detection result: 10 boxes, a top-3 list and two
// sensor samples.
func benchRecord() *Record {
	r := &Record{
		Kind: KindResult, Device: "jetson-01", Pipeline: "front", FrameSeq: 123456, TCaptureNs: 987654321012,
		Engine:  EngineRef{Name: "yolo-v8n", Generation: 3, SHA256: "ab12cd34ef56"},
		Latency: Latency{Pre: 410, Infer: 12800, Post: 95, Total: 13400},
	}
	dets := make([]Detection, 10)
	for i := range dets {
		f := float32(i)
		dets[i] = Detection{Box: [4]float32{10.5 + f, 20.25 * f, 110.125 + f, 220.75}, Class: i % 3, Label: "person", Score: 0.9 - f/20}
	}
	r.Outputs = []Output{
		{Name: "objects", Kind: OutputDetections, Detections: dets},
		{Name: "scene", Kind: OutputClasses, Classes: []Class{{Index: 2, Label: "green", Score: 0.9}, {Index: 0, Label: "red", Score: 0.07}, {Index: 1, Label: "blue", Score: 0.03}}},
	}
	r.Sensors = []sensors.Sample{
		{Sensor: "imu", Seq: 99, TMono: 987654000000, Kind: "imu", Names: imuNames,
			Values: [sensors.MaxSampleValues]float64{0.01, -0.02, 9.81, 0.001, 0, -0.5}, N: 6},
		{Sensor: "gps", Seq: 7, TMono: 987000000000, Kind: "gga", Names: []string{"lat", "lon"},
			Values: [sensors.MaxSampleValues]float64{52.520008, 13.404954}, N: 2},
	}
	return r
}

// result is a small classification result of pipeline for frame
// (streamtest.Result, for the sinks' tests).
func result(pipeline string, frame uint64) *Record {
	return &Record{Kind: KindResult, Pipeline: pipeline, FrameSeq: frame, TCaptureNs: int64(frame) * 1000,
		Engine:  EngineRef{Name: "demo", Generation: 1, SHA256: "abc"},
		Outputs: []Output{{Name: "top", Kind: OutputClasses, Classes: []Class{{Index: int(frame % 3), Label: "c", Score: 0.5}}}}}
}
