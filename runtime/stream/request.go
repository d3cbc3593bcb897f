package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Client requests: a client may write one JSON object per line to the
// socket, at most MaxRequestLine bytes including the newline:
//
//	{"subscribe":{"pipelines":["front"],"encoding":"cbor"}}
//	{"reload":"engines"}

// MaxRequestLine bounds one client request line, newline included. Longer
// input gets an error record and the connection is closed.
const MaxRequestLine = 4096

// Limits inside a subscribe request.
const (
	maxSubscribePipelines = 64
	maxPipelineName       = 256
)

// ErrRequest wraps every reason a client request is refused.
var ErrRequest = errors.New("stream: bad request")

// requestHelp is appended to every request error so a person knows what is
// accepted.
const requestHelp = `send one line such as {"subscribe":{"pipelines":["name"],"encoding":"ndjson"}} or {"reload":"engines"}`

// Subscription selects what a client receives.
type Subscription struct {
	// Pipelines lists the pipelines whose results and status events the
	// client wants. nil means all; an empty non-nil list means none (the
	// client still gets status events not tied to a pipeline, and replies).
	Pipelines []string
	// Encoding of the records that follow; 0 keeps the current one.
	Encoding Encoding
}

// ControlRequest is a request that acts on the daemon.
type ControlRequest struct {
	// Reload names what to reload; "engines" re-checks every model file
	// now, as SIGHUP does for engines.
	Reload string
}

// request is one parsed client line: exactly one of the two is set.
// Request is one line a client sent: a subscription or a control request
// (exactly one of them is set).
type Request struct {
	Subscribe *Subscription
	Control   *ControlRequest
}

type wireRequest struct {
	Subscribe *struct {
		Pipelines *[]string `json:"pipelines"`
		Encoding  string    `json:"encoding"`
	} `json:"subscribe"`
	Reload *string `json:"reload"`
}

// ParseRequest parses one request line (without its newline). It never
// keeps a reference to line. Every error wraps ErrRequest and says what a
// client may send instead.
func ParseRequest(line []byte) (Request, error) {
	if len(line) >= MaxRequestLine {
		return Request{}, fmt.Errorf("%w: longer than %d bytes; %s", ErrRequest, MaxRequestLine-1, requestHelp)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var w wireRequest
	if err := dec.Decode(&w); err != nil {
		return Request{}, fmt.Errorf("%w: %s; %s", ErrRequest, jsonProblem(err), requestHelp)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, fmt.Errorf("%w: more than one JSON value on the line; %s", ErrRequest, requestHelp)
	}
	switch {
	case w.Subscribe != nil && w.Reload != nil:
		return Request{}, fmt.Errorf("%w: \"subscribe\" and \"reload\" in one request; send them on separate lines", ErrRequest)
	case w.Subscribe != nil:
		s := &Subscription{}
		if w.Subscribe.Encoding != "" {
			enc, err := ParseEncoding(w.Subscribe.Encoding)
			if err != nil {
				return Request{}, fmt.Errorf("%w: encoding %q (use \"ndjson\" or \"cbor\")", ErrRequest, w.Subscribe.Encoding)
			}
			s.Encoding = enc
		}
		if p := w.Subscribe.Pipelines; p != nil {
			if len(*p) > maxSubscribePipelines {
				return Request{}, fmt.Errorf("%w: %d pipelines (at most %d)", ErrRequest, len(*p), maxSubscribePipelines)
			}
			s.Pipelines = make([]string, 0, len(*p))
			for _, name := range *p {
				if name == "" || len(name) > maxPipelineName {
					return Request{}, fmt.Errorf("%w: pipeline name must be 1 to %d bytes", ErrRequest, maxPipelineName)
				}
				s.Pipelines = append(s.Pipelines, name)
			}
		}
		return Request{Subscribe: s}, nil
	case w.Reload != nil:
		if *w.Reload != "engines" {
			return Request{}, fmt.Errorf("%w: cannot reload %q (only \"engines\" is supported)", ErrRequest, truncate(*w.Reload, 64))
		}
		return Request{Control: &ControlRequest{Reload: *w.Reload}}, nil
	}
	return Request{}, fmt.Errorf("%w: empty request; %s", ErrRequest, requestHelp)
}

// jsonProblem describes a decoding error without echoing large input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not JSON (at byte %d)", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("wrong type for %q", truncate(te.Field, 64))
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return "incomplete JSON"
	}
	return truncate(err.Error(), 128)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// AppendRequest appends the subscribe request line for s (with its newline).
func (s *Subscription) AppendRequest(b []byte) []byte {
	type sub struct {
		Pipelines *[]string `json:"pipelines,omitempty"`
		Encoding  string    `json:"encoding,omitempty"`
	}
	var w struct {
		Subscribe sub `json:"subscribe"`
	}
	if s.Pipelines != nil {
		p := s.Pipelines
		w.Subscribe.Pipelines = &p
	}
	if s.Encoding != 0 {
		w.Subscribe.Encoding = s.Encoding.String()
	}
	j, _ := json.Marshal(&w) // cannot fail for these types
	return append(append(b, j...), '\n')
}
