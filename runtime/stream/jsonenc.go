package stream

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The NDJSON encoding of a record is split in three parts so that the
// per-client sequence number can be spliced in without re-encoding:
//
//	jsonHead(kind)  `{"type":"result","v":1,"seq":`
//	seq digits      `42`
//	body            `,"pipeline":"front",...}` + "\n"
//
// Everything is appended by hand with strconv; nothing allocates once the
// destination buffer has grown to the record's size.

const (
	jsonHeadResult = `{"type":"result","v":1,"seq":`
	jsonHeadStatus = `{"type":"status","v":1,"seq":`
	jsonHeadError  = `{"type":"error","v":1,"seq":`
)

func jsonHead(k Kind) string {
	switch k {
	case KindResult:
		return jsonHeadResult
	case KindError:
		return jsonHeadError
	}
	return jsonHeadStatus
}

// Summary levels applied when a record is larger than a sink's limit.
const (
	levelFull    = iota // everything
	levelNoRaw          // raw outputs keep their shape, data is dropped ("truncated":true)
	levelNoLists        // outputs and sensors dropped, record marked "truncated":true
	levelCount
)

// appendJSONBody appends everything after the seq digits, including the
// closing brace and the newline.
func appendJSONBody(b []byte, r *Record, level int) []byte {
	if r.Device != "" {
		b = append(b, `,"device":`...)
		b = appendJSONString(b, r.Device)
	}
	switch r.Kind {
	case KindResult:
		b = append(b, `,"pipeline":`...)
		b = appendJSONString(b, r.Pipeline)
		if r.Source != "" {
			b = append(b, `,"source":`...)
			b = appendJSONString(b, r.Source)
		}
		b = append(b, `,"frame_seq":`...)
		b = strconv.AppendUint(b, r.FrameSeq, 10)
		b = append(b, `,"t_capture_ns":`...)
		b = strconv.AppendInt(b, r.TCaptureNs, 10)
		if r.CaptureClock != "" {
			b = append(b, `,"t_capture_clock":`...)
			b = appendJSONString(b, r.CaptureClock)
		}
		b = appendJSONEngine(b, &r.Engine)
		b = append(b, `,"outputs":{`...)
		if level < levelNoLists {
			for i := range r.Outputs {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONOutput(b, &r.Outputs[i], level)
			}
		}
		b = append(b, '}')
		if len(r.Sensors) > 0 && level < levelNoLists {
			b = append(b, `,"sensors":[`...)
			for i := range r.Sensors {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONSample(b, &r.Sensors[i])
			}
			b = append(b, ']')
		}
		if level >= levelNoLists {
			b = append(b, `,"truncated":true`...)
		}
		// Last, so that Encode covers the encoding of everything above.
		b = appendJSONLatency(b, r)
	case KindError:
		b = append(b, `,"error":`...)
		b = appendJSONString(b, r.Reason)
		b = append(b, `,"t_ns":`...)
		b = strconv.AppendInt(b, r.TNs, 10)
	default:
		b = append(b, `,"event":`...)
		b = appendJSONString(b, r.Event)
		if r.Pipeline != "" {
			b = append(b, `,"pipeline":`...)
			b = appendJSONString(b, r.Pipeline)
		}
		if r.Source != "" {
			b = append(b, `,"source":`...)
			b = appendJSONString(b, r.Source)
		}
		if r.Model != "" {
			b = append(b, `,"model":`...)
			b = appendJSONString(b, r.Model)
		}
		if r.Sink != "" {
			b = append(b, `,"sink":`...)
			b = appendJSONString(b, r.Sink)
		}
		if r.File != "" {
			b = append(b, `,"file":`...)
			b = appendJSONString(b, r.File)
		}
		if r.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, r.Reason)
		}
		if r.Engine.Name != "" {
			b = appendJSONEngine(b, &r.Engine)
		}
		b = append(b, `,"t_ns":`...)
		b = strconv.AppendInt(b, r.TNs, 10)
	}
	return append(b, '}', '\n')
}

// appendJSONLatency appends a result's `,"latency_us":{...}`, measuring
// Encode and Total now; a result of a batched pipeline has its "batch"
// stage.
func appendJSONLatency(b []byte, r *Record) []byte {
	l := r.latencyNow()
	b = append(b, `,"latency_us":{"fill":`...)
	b = strconv.AppendInt(b, l.Fill, 10)
	b = append(b, `,"queue":`...)
	b = strconv.AppendInt(b, l.Queue, 10)
	if r.Engine.Batch > 0 {
		b = append(b, `,"batch":`...)
		b = strconv.AppendInt(b, l.Batch, 10)
	}
	b = append(b, `,"pre":`...)
	b = strconv.AppendInt(b, l.Pre, 10)
	b = append(b, `,"infer":`...)
	b = strconv.AppendInt(b, l.Infer, 10)
	b = append(b, `,"post":`...)
	b = strconv.AppendInt(b, l.Post, 10)
	b = append(b, `,"encode":`...)
	b = strconv.AppendInt(b, l.Encode, 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, l.Total, 10)
	b = append(b, '}')
	return b
}

func appendJSONOutput(b []byte, o *Output, level int) []byte {
	b = appendJSONString(b, o.Name)
	b = append(b, ':', '{')
	switch o.Kind {
	case OutputRaw:
		b = append(b, `"shape":[`...)
		for i, d := range o.Shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"data":[`...)
		if level < levelNoRaw {
			for i, v := range o.Data {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONFloat32(b, v)
			}
		}
		b = append(b, ']')
		if o.DType != "" {
			b = append(b, `,"dtype":`...)
			b = appendJSONString(b, o.DType)
		}
		if o.Truncated || level >= levelNoRaw {
			b = append(b, `,"truncated":true`...)
		}
	case OutputClasses:
		b = append(b, `"top":[`...)
		for i := range o.Classes {
			c := &o.Classes[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(c.Index), 10)
			b = append(b, `,"label":`...)
			b = appendJSONString(b, c.Label)
			b = append(b, `,"score":`...)
			b = appendJSONFloat32(b, c.Score)
			b = append(b, '}')
		}
		b = append(b, ']')
	case OutputDetections:
		b = append(b, `"detections":[`...)
		for i := range o.Detections {
			d := &o.Detections[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"box":[`...)
			for j, v := range d.Box {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONFloat32(b, v)
			}
			b = append(b, `],"class":`...)
			b = strconv.AppendInt(b, int64(d.Class), 10)
			b = append(b, `,"label":`...)
			b = appendJSONString(b, d.Label)
			b = append(b, `,"score":`...)
			b = appendJSONFloat32(b, d.Score)
			if dims := o.KeypointDims; dims > 0 && len(d.Keypoints) >= dims {
				b = append(b, `,"keypoints":[`...)
				for k := 0; k+dims <= len(d.Keypoints); k += dims {
					if k > 0 {
						b = append(b, ',')
					}
					b = append(b, '[')
					for x, v := range d.Keypoints[k : k+dims] {
						if x > 0 {
							b = append(b, ',')
						}
						b = appendJSONFloat32(b, v)
					}
					b = append(b, ']')
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendJSONSample(b []byte, s *sensorSample) []byte {
	b = append(b, `{"sensor":`...)
	b = appendJSONString(b, s.Sensor)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
	b = append(b, `,"t_ns":`...)
	b = strconv.AppendInt(b, s.TMono, 10)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, s.Kind)
	b = append(b, `,"values":{`...)
	n := sampleLen(s)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if i < len(s.Names) {
			b = appendJSONString(b, s.Names[i])
		} else {
			b = append(b, '"')
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, '"')
		}
		b = append(b, ':')
		b = appendJSONFloat64(b, s.Values[i])
	}
	return append(b, '}', '}')
}

// appendJSONFloat32 writes the shortest decimal that reads back as the same
// float32. JSON has no NaN or infinity: they are written as null.
func appendJSONFloat32(b []byte, f float32) []byte {
	if f != f || math.IsInf(float64(f), 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, float64(f), 'g', -1, 32)
}

func appendJSONFloat64(b []byte, f float64) []byte {
	if f != f || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string. Quotes, backslashes and
// control characters are escaped, invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped so the line is also safe to paste into JavaScript.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONEngine appends `,"engine":{...}`.
func appendJSONEngine(b []byte, e *EngineRef) []byte {
	b = append(b, `,"engine":{"name":`...)
	b = appendJSONString(b, e.Name)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, e.Generation, 10)
	b = append(b, `,"sha256":`...)
	b = appendJSONString(b, e.SHA256)
	if e.Serving != "" {
		b = append(b, `,"serving_sha256":`...)
		b = appendJSONString(b, e.Serving)
	}
	if e.Batch > 0 {
		b = append(b, `,"batch":`...)
		b = strconv.AppendInt(b, int64(e.Batch), 10)
	}
	return append(b, '}')
}
