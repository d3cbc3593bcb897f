package stream

import "github.com/edged-dev/edged/sensors"

// Version is the schema version carried in every record as "v".
const Version = 1

// Kind tells results from status events.
type Kind uint8

// Record kinds.
const (
	KindResult Kind = iota + 1
	KindStatus
	// KindError is a per-client error record a sink writes itself (rejected
	// connection, bad request); Reason carries the message.
	KindError
)

// EventKeepalive is the status event a socket sink sends a client it has
// written nothing to for SocketOptions.Keepalive. Client.Next skips it.
const EventKeepalive = "keepalive"

func (k Kind) String() string {
	switch k {
	case KindResult:
		return "result"
	case KindStatus:
		return "status"
	case KindError:
		return "error"
	}
	return "unknown"
}

// Record is what pipelines publish to sinks. A publisher reuses one Record
// per pipeline: sinks encode it during Publish and keep no reference to it or
// to any slice inside it.
type Record struct {
	Kind Kind
	// Device identifies the edged instance ([daemon] device_id). The
	// daemon sets it on every record it publishes; it is written right
	// after seq, and left out only when empty.
	Device   string
	Pipeline string

	// Result fields.
	FrameSeq   uint64
	TCaptureNs int64 // CLOCK_MONOTONIC
	// CaptureClock says where a network camera's TCaptureNs comes from
	// ("sender_report": the camera's RTCP sender reports mapped to
	// CLOCK_MONOTONIC; "arrival": its first packet's arrival); "" (left
	// out of the record) for a local camera's own clock.
	CaptureClock string
	Engine       EngineRef
	Latency      Latency
	// TPostNs is when post-processing ended (CLOCK_MONOTONIC). When it is
	// set, a sink fills Latency.Encode and Latency.Total as it writes the
	// latency object, the last of the record: the encoding and hand-off
	// to that sink are part of what the record reports.
	TPostNs int64
	Outputs []Output
	Sensors []sensors.Sample

	// Status fields. Source is the camera or sensor an event is about
	// (and, on a result of a batched pipeline, the camera of its frame);
	// for engine, sink and configuration events it also carries the
	// model, the sink or the file, as records did before Model, Sink and
	// File (docs/PROTOCOL.md: kept for clients that read it there).
	Event  string // engine_reloaded, engine_rejected, source_down, source_up, ...
	Source string
	Model  string // the model of an engine event
	Sink   string // the sink of a sink event
	File   string // the configuration file of a config event
	Reason string
	TNs    int64 // CLOCK_MONOTONIC time of the event
}

// EngineRef identifies the engine generation that computed a result.
type EngineRef struct {
	Name       string
	Generation uint64
	SHA256     string // hex prefix
	// Serving is the hex prefix of the generation serving, for a status
	// record about content that is not serving (engine_rejected,
	// engine_pending: SHA256 is the file's); "" otherwise.
	Serving string
	// Batch is the number of frames of the inference that computed a
	// result of a batched pipeline (written as "batch", and the result's
	// latency gains its "batch" stage); 0 (left out) otherwise.
	Batch int
}

// Latency splits a result's latency in microseconds, stage by stage:
// Fill (the source writing the frame, where edged writes it: synthetic,
// replay; the driver's delivery for V4L2), Queue (waiting for the
// inference loop), Pre, Infer, Post, Encode (encoding and hand-off to the
// sink). Total runs from the capture time to the hand-off; each stage is
// the difference of its end and start truncated to microseconds, so the
// stages add up to Total exactly.
type Latency struct {
	Fill, Queue, Pre, Infer, Post, Encode, Total int64
	// Batch is a batched pipeline's wait for its batch, between Queue
	// and Pre: written (as "batch") when the engine's Batch is set.
	Batch int64
}

// clock is CLOCK_MONOTONIC in nanoseconds; tests replace it.
var clock = sensors.Now

// latencyNow is r.Latency with Encode and Total measured now, when
// TPostNs is set.
func (r *Record) latencyNow() Latency {
	l := r.Latency
	if r.TPostNs != 0 {
		now := clock() / 1000
		l.Encode = now - r.TPostNs/1000
		l.Total = now - r.TCaptureNs/1000
	}
	return l
}

// OutputKind selects which of Output's fields are meaningful.
type OutputKind uint8

// Output kinds.
const (
	OutputRaw        OutputKind = iota + 1 // Shape and Data
	OutputClasses                          // Classes (top-k)
	OutputDetections                       // Detections (after NMS)
)

// Output is one post-processed engine output.
type Output struct {
	Name  string
	Kind  OutputKind
	Shape []int64
	Data  []float32
	// DType is the element type of a raw output that is not float32
	// ("float16", "int32", "int64", "int8", "uint8", "bool"); Data holds
	// its values as float32 (integers exact up to 2^24). "" for float32.
	DType      string
	Truncated  bool // Data was capped; Shape is still the full shape
	Classes    []Class
	Detections []Detection
	// KeypointDims is 2 (x, y) or 3 (x, y, score) when the detections
	// carry keypoints, else 0.
	KeypointDims int
}

// Class is one entry of a top-k list.
type Class struct {
	Index int
	Label string
	Score float32
}

// Detection is one object box in input-image pixels (x1, y1, x2, y2).
type Detection struct {
	Box   [4]float32
	Class int
	Label string
	Score float32
	// Keypoints are a pose model's points in input-image pixels,
	// Output.KeypointDims values each (x, y[, score]); nil for boxes alone.
	Keypoints []float32
}
