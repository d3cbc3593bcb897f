package stream

import (
	"slices"
	"strconv"
	"strings"
)

// Limits of the one-line rendering.
const (
	textMaxDetections = 5
	textMaxValues     = 8
)

// AppendText appends a one-line, human-readable rendering of m (without a
// newline), as edged tail prints it. A seq gap before m is shown first.
func AppendText(b []byte, m *Message) []byte {
	r := &m.Rec
	if m.Missed > 0 {
		b = append(b, "[lost "...)
		b = strconv.AppendUint(b, m.Missed, 10)
		b = append(b, "] "...)
	}
	if m.Restarted {
		b = append(b, "[stream restarted] "...)
	}
	switch r.Type {
	case "result":
		b = appendResultText(b, r)
	case "status":
		b = appendStatusText(b, r)
	case "error":
		b = append(b, "error #"...)
		b = strconv.AppendUint(b, r.Seq, 10)
		b = append(b, ": "...)
		b = appendText(b, r.Error)
	default:
		b = append(b, "unknown record type "...)
		b = strconv.AppendQuote(b, r.Type)
	}
	return b
}

// appendResultText appends a result record's line after the lost and
// restarted marks.
func appendResultText(b []byte, r *Decoded) []byte {
	b = append(b, "result #"...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, ' ')
	b = appendText(b, r.Pipeline)
	if r.Source != "" {
		b = append(b, '/')
		b = appendText(b, r.Source)
	}
	b = append(b, " frame "...)
	b = strconv.AppendUint(b, r.FrameSeq, 10)
	b = append(b, " t="...)
	b = appendSeconds(b, r.TCapture)
	if e := r.Engine; e != nil {
		b = appendEngineText(b, e)
	}
	if l := r.LatencyUs; l != nil {
		b = appendLatencyText(b, l)
	}
	names := make([]string, 0, len(r.Outputs))
	for k := range r.Outputs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		b = append(b, " | "...)
		b = appendText(b, k)
		b = append(b, ':')
		b = appendOutputText(b, r.Outputs[k])
	}
	if len(r.Sensors) > 0 {
		b = append(b, " | sensors:"...)
		for _, s := range r.Sensors {
			b = append(b, ' ')
			b = appendText(b, s.Sensor)
			b = append(b, '#')
			b = strconv.AppendUint(b, s.Seq, 10)
		}
	}
	if r.Truncated {
		b = append(b, " | (outputs omitted: record too large)"...)
	}
	return b
}

// appendLatencyText appends a result's latency: the total, then its
// stages.
func appendLatencyText(b []byte, l *DecodedLatency) []byte {
	b = append(b, " latency "...)
	b = appendMillis(b, l.Total)
	b = append(b, " ("...)
	// Stages that took no time (fill of a camera frame) are left out.
	if l.Fill > 0 {
		b = append(b, "fill "...)
		b = appendMillis(b, l.Fill)
		b = append(b, ' ')
	}
	if l.Queue > 0 {
		b = append(b, "queue "...)
		b = appendMillis(b, l.Queue)
		b = append(b, ' ')
	}
	if l.Batch > 0 {
		b = append(b, "batch "...)
		b = appendMillis(b, l.Batch)
		b = append(b, ' ')
	}
	b = append(b, "pre "...)
	b = appendMillis(b, l.Pre)
	b = append(b, " infer "...)
	b = appendMillis(b, l.Infer)
	b = append(b, " post "...)
	b = appendMillis(b, l.Post)
	if l.Encode > 0 {
		b = append(b, " encode "...)
		b = appendMillis(b, l.Encode)
	}
	b = append(b, ')')
	return b
}

// appendStatusText appends a status record's line after the lost and
// restarted marks.
func appendStatusText(b []byte, r *Decoded) []byte {
	b = append(b, "status #"...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, ' ')
	b = appendText(b, r.Event)
	if r.Pipeline != "" {
		b = append(b, " pipeline="...)
		b = appendText(b, r.Pipeline)
	}
	// model=, sink= and file= name what engine, sink and
	// configuration events are about; source= repeats it in records
	// of this version, and is said only when it names something else.
	for _, kv := range [...]struct{ k, v string }{{" model=", r.Model}, {" sink=", r.Sink}, {" file=", r.File}} {
		if kv.v != "" {
			b = append(b, kv.k...)
			b = appendText(b, kv.v)
		}
	}
	if r.Source != "" && r.Source != r.Model && r.Source != r.Sink && r.Source != r.File {
		b = append(b, " source="...)
		b = appendText(b, r.Source)
	}
	if e := r.Engine; e != nil {
		b = appendEngineText(b, e)
	}
	if r.Reason != "" {
		b = append(b, ": "...)
		b = appendText(b, r.Reason)
	}
	return b
}

func appendOutputText(b []byte, o DecodedOutput) []byte {
	switch {
	case len(o.Detections) > 0 || (o.Shape == nil && o.Top == nil && o.Detections != nil):
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(len(o.Detections)), 10)
		b = append(b, " detections"...)
		for i, d := range o.Detections {
			if i == textMaxDetections {
				b = append(b, ", …"...)
				break
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabelScore(b, d.Label, d.Class, d.Score)
			b = append(b, " ["...)
			for j, v := range d.Box {
				if j > 0 {
					b = append(b, ' ')
				}
				b = strconv.AppendFloat(b, float64(v), 'f', 0, 32)
			}
			b = append(b, ']')
			if n := len(d.Keypoints); n > 0 {
				b = append(b, " +"...)
				b = strconv.AppendInt(b, int64(n), 10)
				b = append(b, " keypoints"...)
			}
		}
	case len(o.Top) > 0:
		for i, c := range o.Top {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabelScore(b, c.Label, c.Index, c.Score)
		}
	case o.Shape != nil:
		b = append(b, " ["...)
		for i, d := range o.Shape {
			if i > 0 {
				b = append(b, 'x')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, ']')
		for i, v := range o.Data {
			if i == textMaxValues {
				b = append(b, " …"...)
				break
			}
			b = append(b, ' ')
			b = strconv.AppendFloat(b, float64(v), 'g', 4, 32)
		}
		if o.DType != "" {
			b = append(b, " ("...)
			b = append(b, o.DType...)
			b = append(b, ')')
		}
		if o.Truncated {
			b = append(b, " (truncated)"...)
		}
	default:
		b = append(b, " (empty)"...)
	}
	return b
}

// appendText writes s with control characters made visible, so one record
// stays on one line.
func appendText(b []byte, s string) []byte {
	if !strings.ContainsFunc(s, isControl) {
		return append(b, s...)
	}
	for _, r := range s {
		if isControl(r) {
			b = strconv.AppendQuoteRuneToASCII(b, r)
			continue
		}
		b = append(b, string(r)...)
	}
	return b
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' }

// appendSeconds writes monotonic nanoseconds as seconds with milliseconds.
func appendSeconds(b []byte, ns int64) []byte {
	return append(strconv.AppendFloat(b, float64(ns)/1e9, 'f', 3, 64), 's')
}

func appendMillis(b []byte, us int64) []byte {
	return append(strconv.AppendFloat(b, float64(us)/1e3, 'f', 2, 64), "ms"...)
}

// appendEngineText appends " engine NAME gN SHA", or, for a status about
// content that is not serving, " engine NAME gN SERVING serving (file SHA)".
func appendEngineText(b []byte, e *DecodedEngine) []byte {
	b = append(b, " engine "...)
	b = appendText(b, e.Name)
	b = append(b, " g"...)
	b = strconv.AppendUint(b, e.Generation, 10)
	if e.Serving != "" {
		b = append(b, ' ')
		b = appendText(b, e.Serving)
		b = append(b, " serving (file "...)
		if e.SHA256 == "" {
			b = append(b, "not read whole"...)
		} else {
			b = appendText(b, e.SHA256)
		}
		return append(b, ')')
	}
	if e.SHA256 != "" {
		b = append(b, ' ')
		b = appendText(b, e.SHA256)
	}
	if e.Batch > 0 {
		b = append(b, " batch "...)
		b = strconv.AppendInt(b, int64(e.Batch), 10)
	}
	return b
}

// appendLabelScore appends " LABEL 0.93", the index standing in for a
// missing label.
func appendLabelScore(b []byte, label string, index int, score float32) []byte {
	b = append(b, ' ')
	if label != "" {
		b = appendText(b, label)
	} else {
		b = strconv.AppendInt(b, int64(index), 10)
	}
	b = append(b, ' ')
	return strconv.AppendFloat(b, float64(score), 'f', 2, 32)
}
