package stream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// Decoded is a record as a client reads it, in either encoding. Fields
// absent from a record keep their zero value; numbers written as null (NaN,
// infinities) decode as 0.
type Decoded struct {
	Type     string `json:"type"`
	V        int    `json:"v"`
	Seq      uint64 `json:"seq"`
	Device   string `json:"device,omitempty"`
	Pipeline string `json:"pipeline,omitempty"`
	FrameSeq uint64 `json:"frame_seq,omitempty"`
	TCapture int64  `json:"t_capture_ns,omitempty"`
	// CaptureClock: where a network camera's TCapture comes from
	// ("sender_report", "arrival"); "" for a local camera.
	CaptureClock string                   `json:"t_capture_clock,omitempty"`
	Engine       *DecodedEngine           `json:"engine,omitempty"`
	LatencyUs    *DecodedLatency          `json:"latency_us,omitempty"`
	Outputs      map[string]DecodedOutput `json:"outputs,omitempty"`
	Sensors      []DecodedSample          `json:"sensors,omitempty"`
	Truncated    bool                     `json:"truncated,omitempty"`
	Event        string                   `json:"event,omitempty"`
	Source       string                   `json:"source,omitempty"`
	Model        string                   `json:"model,omitempty"`
	Sink         string                   `json:"sink,omitempty"`
	File         string                   `json:"file,omitempty"`
	Reason       string                   `json:"reason,omitempty"`
	Error        string                   `json:"error,omitempty"`
	TNs          int64                    `json:"t_ns,omitempty"`
}

// DecodedEngine is a result's "engine" object.
type DecodedEngine struct {
	Name       string `json:"name"`
	Generation uint64 `json:"generation"`
	SHA256     string `json:"sha256"`
	Serving    string `json:"serving_sha256,omitempty"`
	Batch      int    `json:"batch,omitempty"` // frames of the inference (batched pipelines)
}

// DecodedLatency is a result's "latency_us" object.
type DecodedLatency struct {
	Fill   int64 `json:"fill"`
	Queue  int64 `json:"queue"`
	Batch  int64 `json:"batch,omitempty"` // the wait for the batch (batched pipelines)
	Pre    int64 `json:"pre"`
	Infer  int64 `json:"infer"`
	Post   int64 `json:"post"`
	Encode int64 `json:"encode"`
	Total  int64 `json:"total"`
}

// DecodedOutput is one entry of a result's "outputs" object.
type DecodedOutput struct {
	Shape      []int64            `json:"shape,omitempty"`
	Data       []float32          `json:"data,omitempty"`
	DType      string             `json:"dtype,omitempty"`
	Truncated  bool               `json:"truncated,omitempty"`
	Top        []DecodedClass     `json:"top,omitempty"`
	Detections []DecodedDetection `json:"detections,omitempty"`
}

// DecodedClass is one entry of a "top" list.
type DecodedClass struct {
	Index int     `json:"index"`
	Label string  `json:"label"`
	Score float32 `json:"score"`
}

// DecodedDetection is one entry of a "detections" list.
type DecodedDetection struct {
	Box       [4]float32  `json:"box"`
	Class     int         `json:"class"`
	Label     string      `json:"label"`
	Score     float32     `json:"score"`
	Keypoints [][]float32 `json:"keypoints,omitempty"`
}

// DecodedSample is one entry of a result's "sensors" list.
type DecodedSample struct {
	Sensor string             `json:"sensor"`
	Seq    uint64             `json:"seq"`
	TNs    int64              `json:"t_ns"`
	Kind   string             `json:"kind"`
	Values map[string]float64 `json:"values"`
}

// Framing tells a Decoder how records are delimited.
type Framing uint8

// Framings.
const (
	// FramingAuto is the socket stream: each record is either an NDJSON
	// line (first byte '{') or a length-prefixed CBOR map (first byte
	// 0x00), so a stream may switch encoding between records.
	FramingAuto Framing = iota
	// FramingNDJSON is lines only; a line that is not a record is counted
	// and skipped (serial "ndjson" format, capture files).
	FramingNDJSON
	// FramingCBOR is length-prefixed CBOR only (capture files of a socket).
	FramingCBOR
	// FramingSerial is COBS(CBOR ‖ CRC-32C) ‖ 0x00 frames (serial
	// "cobs-cbor" format); bad frames are counted and skipped.
	FramingSerial
)

// ParseFraming accepts "auto", "ndjson", "cbor" and "cobs-cbor".
func ParseFraming(s string) (Framing, error) {
	switch s {
	case "", "auto":
		return FramingAuto, nil
	case "ndjson", "json":
		return FramingNDJSON, nil
	case "cbor":
		return FramingCBOR, nil
	case "cobs-cbor", "cobs":
		return FramingSerial, nil
	}
	return 0, fmt.Errorf("stream: unknown framing %q (use auto, ndjson, cbor or cobs-cbor)", s)
}

// DecoderOptions configures a Decoder.
type DecoderOptions struct {
	Framing Framing
	// MaxRecord bounds one record in bytes (line, CBOR message or unstuffed
	// frame); larger input is an error (skipped where the framing allows).
	// Default: 16 MiB for the socket framings, 64 KiB for serial frames.
	MaxRecord int
	// FromStart says the stream starts at seq 1 (a socket connection), so a
	// first record with a higher seq reports the records missed before it.
	// Leave it false for serial ports and files joined mid-stream.
	FromStart bool
}

// DecoderStats counts what a Decoder saw.
type DecoderStats struct {
	Records     uint64 // records decoded
	Missed      uint64 // records lost, from seq gaps
	Gaps        uint64 // number of seq gaps
	Restarts    uint64 // seq went backwards (the sender restarted)
	CRCErrors   uint64 // serial frames with a bad CRC-32C
	FrameErrors uint64 // malformed frames or lines (bad COBS, too long, not a record)
}

// Message is one decoded record.
type Message struct {
	Encoding Encoding
	// Raw is the record as received (NDJSON line without its newline, or
	// the CBOR map). It is valid until the next call to Next.
	Raw []byte
	Rec Decoded
	// Missed is the number of records lost just before this one.
	Missed uint64
	// Restarted is set when seq went backwards: the sender restarted.
	Restarted bool

	json []byte // JSON's buffer
}

// JSON returns the record as one JSON object without a newline: Raw for
// NDJSON; for CBOR, Raw rewritten as JSON key by key, so that it reads as
// the NDJSON encoding of the same record does (every key the sender wrote,
// zero values included, such as the first frame's "frame_seq":0, and keys
// this version does not know). It is valid until the next call to Next.
func (m *Message) JSON() []byte {
	if m.Encoding == NDJSON {
		return m.Raw
	}
	if b, rest, err := appendCBORJSON(m.json[:0], m.Raw, 0); err == nil && len(rest) == 0 {
		m.json = b
		return b
	}
	b, err := json.Marshal(&m.Rec)
	if err != nil { // cannot happen for Decoded; keep the output a JSON object
		return []byte(`{"type":"error","error":"stream: re-encoding failed"}`)
	}
	return b
}

var cborDec = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		MaxNestedLevels:  16,
		MaxArrayElements: 1 << 22,
		MaxMapPairs:      1 << 16,
		DefaultMapType:   reflect.TypeOf(map[string]any(nil)),
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// DecodeCBOR decodes one CBOR record map into d.
func DecodeCBOR(b []byte, d *Decoded) error {
	*d = Decoded{}
	if err := cborDec.Unmarshal(b, d); err != nil {
		return fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if d.Type == "" {
		return fmt.Errorf("%w: no \"type\"", ErrFrame)
	}
	return nil
}

// DecodeJSON decodes one NDJSON record into d.
func DecodeJSON(b []byte, d *Decoded) error {
	*d = Decoded{}
	if err := json.Unmarshal(b, d); err != nil {
		return fmt.Errorf("%w: %w", ErrFrame, err)
	}
	if d.Type == "" {
		return fmt.Errorf("%w: no \"type\"", ErrFrame)
	}
	return nil
}

// Decoder reads records from a byte stream and tracks seq gaps.
type Decoder struct {
	br    *bufio.Reader
	opts  DecoderOptions
	buf   []byte
	acc   []byte
	st    DecoderStats
	last  uint64
	seen  bool
	first bool // serial: the first frame may be a partial one
}

// NewDecoder reads records from r.
func NewDecoder(r io.Reader, opts DecoderOptions) *Decoder {
	if opts.MaxRecord <= 0 {
		opts.MaxRecord = 16 << 20
		if opts.Framing == FramingSerial {
			opts.MaxRecord = 64 << 10
		}
	}
	return &Decoder{br: bufio.NewReaderSize(r, 64<<10), opts: opts, first: true}
}

// Stats returns the counts so far.
func (d *Decoder) Stats() DecoderStats { return d.st }

// Next decodes the next record into m. Skippable damage (bad serial frames,
// bad NDJSON lines) is counted and skipped; it returns io.EOF at the end of
// the input and an error wrapping ErrFrame when the stream cannot be
// resynchronised.
func (d *Decoder) Next(m *Message) error {
	for {
		err := d.next(m)
		if err == nil {
			d.track(m)
			return nil
		}
		if errors.Is(err, errSkip) {
			continue
		}
		return err
	}
}

var errSkip = errors.New("skip")

func (d *Decoder) track(m *Message) {
	d.st.Records++
	m.Missed, m.Restarted = 0, false
	seq := m.Rec.Seq
	switch {
	case !d.seen:
		if d.opts.FromStart && seq > 1 {
			m.Missed = seq - 1
		}
	case seq == d.last+1:
	case seq > d.last+1:
		m.Missed = seq - d.last - 1
	default:
		m.Restarted = true
		d.st.Restarts++
	}
	if m.Missed > 0 {
		d.st.Missed += m.Missed
		d.st.Gaps++
	}
	d.seen, d.last = true, seq
}

func (d *Decoder) next(m *Message) error {
	switch d.opts.Framing {
	case FramingSerial:
		return d.nextSerial(m)
	case FramingNDJSON:
		return d.nextLine(m, true)
	case FramingCBOR:
		return d.nextCBOR(m)
	}
	c, err := d.br.Peek(1)
	if err != nil {
		return err
	}
	switch c[0] {
	case '{':
		return d.nextLine(m, true)
	case 0:
		return d.nextCBOR(m)
	case '\n', '\r', ' ', '\t':
		d.br.ReadByte()
		return errSkip
	}
	d.st.FrameErrors++
	return fmt.Errorf("%w: unexpected byte 0x%02x at a record boundary (neither '{' nor a CBOR length)", ErrFrame, c[0])
}

// readDelimited returns the next run of bytes ending in delim (delimiter
// excluded). Runs longer than the record limit are discarded up to the next
// delimiter and counted. The result is valid until the next read.
func (d *Decoder) readDelimited(delim byte) ([]byte, error) {
	limit := d.opts.MaxRecord
	if d.opts.Framing == FramingSerial {
		limit = cobsMaxLen(d.opts.MaxRecord + 4)
	}
	d.acc = d.acc[:0]
	for {
		chunk, err := d.br.ReadSlice(delim)
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1]
			if len(d.acc) == 0 {
				if len(chunk) > limit {
					d.tooLong()
					continue
				}
				return chunk, nil
			}
			if len(d.acc)+len(chunk) > limit {
				d.tooLong()
				d.acc = d.acc[:0]
				continue
			}
			d.acc = append(d.acc, chunk...)
			return d.acc, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(d.acc)+len(chunk) <= limit {
				d.acc = append(d.acc, chunk...)
				continue
			}
			d.tooLong()
			d.acc = d.acc[:0]
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = d.br.ReadSlice(delim)
			}
			if err == nil {
				continue
			}
			return nil, err
		default:
			if err == io.EOF && len(d.acc)+len(chunk) > 0 {
				// The input ends without a delimiter.
				if d.opts.Framing == FramingSerial {
					if !d.first {
						d.st.FrameErrors++
					}
					return nil, err
				}
				d.acc = append(d.acc, chunk...)
				return d.acc, nil // last line without its newline
			}
			return nil, err
		}
	}
}

func (d *Decoder) tooLong() {
	d.st.FrameErrors++
	d.first = false
}

func (d *Decoder) nextLine(m *Message, skipBad bool) error {
	line, err := d.readDelimited('\n')
	if err != nil {
		return err
	}
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return errSkip
	}
	if err := DecodeJSON(line, &m.Rec); err != nil {
		d.st.FrameErrors++
		if skipBad {
			return errSkip
		}
		return err
	}
	m.Encoding, m.Raw = NDJSON, line
	return nil
}

func (d *Decoder) nextCBOR(m *Message) error {
	var hdr [4]byte
	if _, err := io.ReadFull(d.br, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			d.st.FrameErrors++
		}
		return err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n > d.opts.MaxRecord || n > MaxCBORMessage || n == 0 {
		d.st.FrameErrors++
		return fmt.Errorf("%w: CBOR message length %d (limit %d)", ErrFrame, n, min(d.opts.MaxRecord, MaxCBORMessage))
	}
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	d.buf = d.buf[:n]
	if _, err := io.ReadFull(d.br, d.buf); err != nil {
		d.st.FrameErrors++
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if err := DecodeCBOR(d.buf, &m.Rec); err != nil {
		d.st.FrameErrors++
		return err
	}
	m.Encoding, m.Raw = CBOR, d.buf
	return nil
}

func (d *Decoder) nextSerial(m *Message) error {
	raw, err := d.readDelimited(0)
	if err != nil {
		return err
	}
	first := d.first
	d.first = false
	if len(raw) == 0 {
		return errSkip // bare delimiter (sent after every (re)open)
	}
	if cap(d.buf) < len(raw) {
		d.buf = make([]byte, len(raw))
	}
	d.buf = append(d.buf[:0], raw...)
	dec, err := decodeCOBS(d.buf)
	if err == nil {
		dec, err = unframe(dec)
	}
	if err == nil {
		err = DecodeCBOR(dec, &m.Rec)
	}
	if err != nil {
		// The very first frame may be the tail of one sent before we
		// started listening: not an error on the line.
		if !first {
			if errors.Is(err, ErrCRC) {
				d.st.CRCErrors++
			} else {
				d.st.FrameErrors++
			}
		}
		return errSkip
	}
	m.Encoding, m.Raw = CBOR, dec
	return nil
}
