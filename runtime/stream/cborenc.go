package stream

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/edged-dev/edged/sensors"
)

type sensorSample = sensors.Sample

// sampleLen is the number of values of s, clamped to the array.
func sampleLen(s *sensorSample) int {
	return min(max(s.N, 0), sensors.MaxSampleValues)
}

// The CBOR encoding (RFC 8949) is a definite-length map with the same keys
// and values as the NDJSON encoding. Like NDJSON it is split so that the
// per-client sequence number can be spliced in:
//
//	head  map header, "type", kind, "v", 1, "seq"
//	seq   unsigned integer
//	body  the remaining pairs
//
// Floats are float32 (float64 for sensor values that do not fit float32
// exactly); NaN and infinities are written as null, as in NDJSON.

// CBOR major types, shifted into the top three bits.
const (
	cborUint   = 0 << 5
	cborNeg    = 1 << 5
	cborBytes  = 2 << 5
	cborText   = 3 << 5
	cborArray  = 4 << 5
	cborMap    = 5 << 5
	cborSimple = 7 << 5

	cborFalse   = cborSimple | 20
	cborTrue    = cborSimple | 21
	cborNull    = cborSimple | 22
	cborFloat32 = cborSimple | 26
	cborFloat64 = cborSimple | 27
)

func appendCBORHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= math.MaxUint8:
		return append(b, major|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, major|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, major|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendCBORInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendCBORHead(b, cborUint, uint64(v))
	}
	return appendCBORHead(b, cborNeg, uint64(-(v + 1)))
}

// appendCBORText writes s as a text string; invalid UTF-8 becomes U+FFFD
// (CBOR text must be valid UTF-8, and decoders check it).
func appendCBORText(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		b = appendCBORHead(b, cborText, uint64(len(s)))
		return append(b, s...)
	}
	n := 0
	for _, r := range s { // invalid bytes range as RuneError, 3 bytes each
		n += utf8.RuneLen(r)
	}
	b = appendCBORHead(b, cborText, uint64(n))
	for _, r := range s {
		b = utf8.AppendRune(b, r)
	}
	return b
}

func appendCBORFloat32(b []byte, f float32) []byte {
	if f != f || math.IsInf(float64(f), 0) {
		return append(b, cborNull)
	}
	return binary.BigEndian.AppendUint32(append(b, cborFloat32), math.Float32bits(f))
}

func appendCBORFloat64(b []byte, f float64) []byte {
	if f != f || math.IsInf(f, 0) {
		return append(b, cborNull)
	}
	if float64(float32(f)) == f {
		return binary.BigEndian.AppendUint32(append(b, cborFloat32), math.Float32bits(float32(f)))
	}
	return binary.BigEndian.AppendUint64(append(b, cborFloat64), math.Float64bits(f))
}

// Pre-encoded keys and kind names.
const (
	ckType    = "\x64type"
	ckV       = "\x61v"
	ckSeq     = "\x63seq"
	ckResult  = "\x66result"
	ckStatus  = "\x66status"
	ckError   = "\x65error"
	ckVersion = "\x01" // Version as a CBOR unsigned integer
)

// cborPairs is the number of map pairs of r's encoding at level.
func cborPairs(r *Record, level int) uint64 {
	var dev uint64
	if r.Device != "" {
		dev = 1
	}
	switch r.Kind {
	case KindResult:
		n := 9 + dev // type v seq [device] pipeline frame_seq t_capture_ns [t_capture_clock] engine latency_us outputs
		if r.CaptureClock != "" {
			n++
		}
		if r.Source != "" {
			n++
		}
		if len(r.Sensors) > 0 && level < levelNoLists {
			n++
		}
		if level >= levelNoLists {
			n++
		}
		return n
	case KindError:
		return 5 + dev // type v seq [device] error t_ns
	}
	n := 5 + dev // type v seq [device] event t_ns
	if r.Pipeline != "" {
		n++
	}
	for _, f := range [...]string{r.Source, r.Model, r.Sink, r.File, r.Reason} {
		if f != "" {
			n++
		}
	}
	if r.Engine.Name != "" {
		n++
	}
	return n
}

// appendCBORHeadPart appends the map header and the pairs before the seq
// value (the "seq" key included).
func appendCBORHeadPart(b []byte, r *Record, level int) []byte {
	b = appendCBORHead(b, cborMap, cborPairs(r, level))
	b = append(b, ckType...)
	switch r.Kind {
	case KindResult:
		b = append(b, ckResult...)
	case KindError:
		b = append(b, ckError...)
	default:
		b = append(b, ckStatus...)
	}
	b = append(b, ckV...)
	b = append(b, ckVersion...)
	return append(b, ckSeq...)
}

// appendCBORBody appends the pairs after the seq value.
func appendCBORBody(b []byte, r *Record, level int) []byte {
	if r.Device != "" {
		b = appendCBORText(b, "device")
		b = appendCBORText(b, r.Device)
	}
	switch r.Kind {
	case KindResult:
		b = appendCBORText(b, "pipeline")
		b = appendCBORText(b, r.Pipeline)
		if r.Source != "" {
			b = appendCBORText(b, "source")
			b = appendCBORText(b, r.Source)
		}
		b = appendCBORText(b, "frame_seq")
		b = appendCBORHead(b, cborUint, r.FrameSeq)
		b = appendCBORText(b, "t_capture_ns")
		b = appendCBORInt(b, r.TCaptureNs)
		if r.CaptureClock != "" {
			b = appendCBORText(b, "t_capture_clock")
			b = appendCBORText(b, r.CaptureClock)
		}
		b = appendCBOREngine(b, &r.Engine)
		b = appendCBORText(b, "outputs")
		if level >= levelNoLists {
			b = appendCBORHead(b, cborMap, 0)
		} else {
			b = appendCBORHead(b, cborMap, uint64(len(r.Outputs)))
			for i := range r.Outputs {
				b = appendCBOROutput(b, &r.Outputs[i], level)
			}
		}
		if len(r.Sensors) > 0 && level < levelNoLists {
			b = appendCBORText(b, "sensors")
			b = appendCBORHead(b, cborArray, uint64(len(r.Sensors)))
			for i := range r.Sensors {
				b = appendCBORSample(b, &r.Sensors[i])
			}
		}
		if level >= levelNoLists {
			b = appendCBORText(b, "truncated")
			b = append(b, cborTrue)
		}
		// Last, so that Encode covers the encoding of everything above.
		b = appendCBORLatency(b, r)
	case KindError:
		b = appendCBORText(b, "error")
		b = appendCBORText(b, r.Reason)
		b = appendCBORText(b, "t_ns")
		b = appendCBORInt(b, r.TNs)
	default:
		b = appendCBORText(b, "event")
		b = appendCBORText(b, r.Event)
		if r.Pipeline != "" {
			b = appendCBORText(b, "pipeline")
			b = appendCBORText(b, r.Pipeline)
		}
		if r.Source != "" {
			b = appendCBORText(b, "source")
			b = appendCBORText(b, r.Source)
		}
		if r.Model != "" {
			b = appendCBORText(b, "model")
			b = appendCBORText(b, r.Model)
		}
		if r.Sink != "" {
			b = appendCBORText(b, "sink")
			b = appendCBORText(b, r.Sink)
		}
		if r.File != "" {
			b = appendCBORText(b, "file")
			b = appendCBORText(b, r.File)
		}
		if r.Reason != "" {
			b = appendCBORText(b, "reason")
			b = appendCBORText(b, r.Reason)
		}
		if r.Engine.Name != "" {
			b = appendCBOREngine(b, &r.Engine)
		}
		b = appendCBORText(b, "t_ns")
		b = appendCBORInt(b, r.TNs)
	}
	return b
}

func appendCBOROutput(b []byte, o *Output, level int) []byte {
	b = appendCBORText(b, o.Name)
	switch o.Kind {
	case OutputRaw:
		trunc := o.Truncated || level >= levelNoRaw
		n := uint64(2)
		if trunc {
			n++
		}
		if o.DType != "" {
			n++
		}
		b = appendCBORHead(b, cborMap, n)
		b = appendCBORText(b, "shape")
		b = appendCBORHead(b, cborArray, uint64(len(o.Shape)))
		for _, d := range o.Shape {
			b = appendCBORInt(b, d)
		}
		b = appendCBORText(b, "data")
		if level >= levelNoRaw {
			b = appendCBORHead(b, cborArray, 0)
		} else {
			b = appendCBORHead(b, cborArray, uint64(len(o.Data)))
			for _, v := range o.Data {
				b = appendCBORFloat32(b, v)
			}
		}
		if o.DType != "" {
			b = appendCBORText(b, "dtype")
			b = appendCBORText(b, o.DType)
		}
		if trunc {
			b = appendCBORText(b, "truncated")
			b = append(b, cborTrue)
		}
	case OutputClasses:
		b = appendCBORHead(b, cborMap, 1)
		b = appendCBORText(b, "top")
		b = appendCBORHead(b, cborArray, uint64(len(o.Classes)))
		for i := range o.Classes {
			c := &o.Classes[i]
			b = appendCBORHead(b, cborMap, 3)
			b = appendCBORText(b, "index")
			b = appendCBORInt(b, int64(c.Index))
			b = appendCBORText(b, "label")
			b = appendCBORText(b, c.Label)
			b = appendCBORText(b, "score")
			b = appendCBORFloat32(b, c.Score)
		}
	case OutputDetections:
		b = appendCBORHead(b, cborMap, 1)
		b = appendCBORText(b, "detections")
		b = appendCBORHead(b, cborArray, uint64(len(o.Detections)))
		for i := range o.Detections {
			d := &o.Detections[i]
			dims := o.KeypointDims
			kp := dims > 0 && len(d.Keypoints) >= dims
			if kp {
				b = appendCBORHead(b, cborMap, 5)
			} else {
				b = appendCBORHead(b, cborMap, 4)
			}
			b = appendCBORText(b, "box")
			b = appendCBORHead(b, cborArray, 4)
			for _, v := range d.Box {
				b = appendCBORFloat32(b, v)
			}
			b = appendCBORText(b, "class")
			b = appendCBORInt(b, int64(d.Class))
			b = appendCBORText(b, "label")
			b = appendCBORText(b, d.Label)
			b = appendCBORText(b, "score")
			b = appendCBORFloat32(b, d.Score)
			if kp {
				b = appendCBORText(b, "keypoints")
				b = appendCBORHead(b, cborArray, uint64(len(d.Keypoints)/dims))
				for k := 0; k+dims <= len(d.Keypoints); k += dims {
					b = appendCBORHead(b, cborArray, uint64(dims))
					for _, v := range d.Keypoints[k : k+dims] {
						b = appendCBORFloat32(b, v)
					}
				}
			}
		}
	default:
		b = appendCBORHead(b, cborMap, 0)
	}
	return b
}

func appendCBORSample(b []byte, s *sensorSample) []byte {
	b = appendCBORHead(b, cborMap, 5)
	b = appendCBORText(b, "sensor")
	b = appendCBORText(b, s.Sensor)
	b = appendCBORText(b, "seq")
	b = appendCBORHead(b, cborUint, s.Seq)
	b = appendCBORText(b, "t_ns")
	b = appendCBORInt(b, s.TMono)
	b = appendCBORText(b, "kind")
	b = appendCBORText(b, s.Kind)
	b = appendCBORText(b, "values")
	n := sampleLen(s)
	b = appendCBORHead(b, cborMap, uint64(n))
	var digits [20]byte
	for i := 0; i < n; i++ {
		if i < len(s.Names) {
			b = appendCBORText(b, s.Names[i])
		} else {
			d := appendUintDigits(digits[:0], uint64(i))
			b = appendCBORHead(b, cborText, uint64(len(d)))
			b = append(b, d...)
		}
		b = appendCBORFloat64(b, s.Values[i])
	}
	return b
}

func appendUintDigits(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// appendCBORLatency appends a result's "latency_us" pair, measuring Encode
// and Total now; a result of a batched pipeline has its "batch" stage.
func appendCBORLatency(b []byte, r *Record) []byte {
	l := r.latencyNow()
	b = appendCBORText(b, "latency_us")
	stages := uint64(7)
	if r.Engine.Batch > 0 {
		stages++
	}
	b = appendCBORHead(b, cborMap, stages)
	b = appendCBORText(b, "fill")
	b = appendCBORInt(b, l.Fill)
	b = appendCBORText(b, "queue")
	b = appendCBORInt(b, l.Queue)
	if r.Engine.Batch > 0 {
		b = appendCBORText(b, "batch")
		b = appendCBORInt(b, l.Batch)
	}
	b = appendCBORText(b, "pre")
	b = appendCBORInt(b, l.Pre)
	b = appendCBORText(b, "infer")
	b = appendCBORInt(b, l.Infer)
	b = appendCBORText(b, "post")
	b = appendCBORInt(b, l.Post)
	b = appendCBORText(b, "encode")
	b = appendCBORInt(b, l.Encode)
	b = appendCBORText(b, "total")
	b = appendCBORInt(b, l.Total)
	return b
}

// appendCBOREngine appends the "engine" key and its map.
func appendCBOREngine(b []byte, e *EngineRef) []byte {
	b = appendCBORText(b, "engine")
	n := uint64(3)
	if e.Serving != "" {
		n++
	}
	if e.Batch > 0 {
		n++
	}
	b = appendCBORHead(b, cborMap, n)
	b = appendCBORText(b, "name")
	b = appendCBORText(b, e.Name)
	b = appendCBORText(b, "generation")
	b = appendCBORHead(b, cborUint, e.Generation)
	b = appendCBORText(b, "sha256")
	b = appendCBORText(b, e.SHA256)
	if e.Serving != "" {
		b = appendCBORText(b, "serving_sha256")
		b = appendCBORText(b, e.Serving)
	}
	if e.Batch > 0 {
		b = appendCBORText(b, "batch")
		b = appendCBORHead(b, cborUint, uint64(e.Batch))
	}
	return b
}
