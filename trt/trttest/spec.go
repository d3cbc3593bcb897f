package trttest

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edged-dev/edged/trt"
)

// Header is the first line of every fake model file.
const Header = "trttest-model v1"

// Spec describes a fake model.
type Spec struct {
	// Inputs and Outputs default to one float32 input "x" [1,3,4,4] and
	// one float32 output "y" [1,4] when both are empty.
	Inputs, Outputs []trt.TensorSpec
	// Value is written to every output element by Infer.
	Value float32
	// NaN or Inf replace the first element of every float32 output.
	NaN, Inf bool
	// LoadError makes Load fail with trt.ErrEngineInvalid and this text;
	// VersionError makes it fail with trt.ErrVersion.
	LoadError    string
	VersionError bool
	// Delay makes Load take this long (it honours ctx).
	Delay time.Duration
	// InferError makes Infer fail.
	InferError bool
	// ShortOutput allocates every output buffer one element short.
	ShortOutput bool
	// Reshape makes the first output grow by one element along its last
	// dimension after the first Infer.
	Reshape bool
	// Pad adds a padding line of this many bytes (to make large files).
	Pad int
}

// DefaultInputs and DefaultOutputs are the signature of a Spec without
// tensors.
var (
	DefaultInputs  = []trt.TensorSpec{{Name: "x", Type: trt.Float32, Shape: []int64{1, 3, 4, 4}}}
	DefaultOutputs = []trt.TensorSpec{{Name: "y", Type: trt.Float32, Shape: []int64{1, 4}}}
)

func (s Spec) tensors() (in, out []trt.TensorSpec) {
	if len(s.Inputs) == 0 && len(s.Outputs) == 0 {
		return DefaultInputs, DefaultOutputs
	}
	return s.Inputs, s.Outputs
}

// Signature is the signature an engine loaded from s has (before
// LoadOptions.Shapes resolve dynamic dimensions).
func (s Spec) Signature() trt.Signature {
	in, out := s.tensors()
	return trt.Signature{Inputs: in, Outputs: out}
}

// Bytes renders s as a model file.
func (s Spec) Bytes() []byte {
	var b bytes.Buffer
	b.WriteString(Header + "\n")
	in, out := s.tensors()
	for _, t := range in {
		fmt.Fprintf(&b, "in %s %s %s\n", t.Name, t.Type, dims(t.Shape))
	}
	for _, t := range out {
		fmt.Fprintf(&b, "out %s %s %s\n", t.Name, t.Type, dims(t.Shape))
	}
	fmt.Fprintf(&b, "value %s\n", strconv.FormatFloat(float64(s.Value), 'g', -1, 32))
	flag := func(on bool, name string) {
		if on {
			b.WriteString(name + "\n")
		}
	}
	flag(s.NaN, "nan")
	flag(s.Inf, "inf")
	flag(s.VersionError, "version-error")
	flag(s.InferError, "infer-error")
	flag(s.ShortOutput, "short-output")
	flag(s.Reshape, "reshape")
	if s.LoadError != "" {
		fmt.Fprintf(&b, "load-error %s\n", s.LoadError)
	}
	if s.Delay > 0 {
		fmt.Fprintf(&b, "delay %s\n", s.Delay)
	}
	if s.Pad > 0 {
		b.WriteString("pad ")
		b.Write(bytes.Repeat([]byte{'.'}, s.Pad))
		b.WriteByte('\n')
	}
	b.WriteString("end\n")
	return b.Bytes()
}

func dims(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	return strings.Join(parts, ",")
}

// Parse reads a model file written by Spec.Bytes. Every failure wraps
// trt.ErrEngineInvalid, as a real backend's would for a foreign file.
func Parse(b []byte) (Spec, error) {
	var s Spec
	if len(b) == 0 {
		return s, fmt.Errorf("%w: empty file", trt.ErrEngineInvalid)
	}
	if !bytes.HasSuffix(b, []byte("\nend\n")) {
		return s, fmt.Errorf("%w: no end line (truncated?)", trt.ErrEngineInvalid)
	}
	lines := strings.Split(string(b[:len(b)-len("end\n")]), "\n")
	lines = lines[:len(lines)-1] // the text before "end\n" ends in '\n'
	if len(lines) == 0 || lines[0] != Header {
		return s, fmt.Errorf("%w: bad magic, want %q", trt.ErrEngineInvalid, Header)
	}
	haveValue := false
	for n, line := range lines[1:] {
		key, arg, _ := strings.Cut(line, " ")
		bad := func(why string) error {
			return fmt.Errorf("%w: line %d %q: %s", trt.ErrEngineInvalid, n+2, trimLine(line), why)
		}
		switch key {
		case "in", "out":
			t, err := parseTensor(arg)
			if err != nil {
				return Spec{}, bad(err.Error())
			}
			if key == "in" {
				s.Inputs = append(s.Inputs, t)
			} else {
				s.Outputs = append(s.Outputs, t)
			}
		case "value":
			v, err := strconv.ParseFloat(arg, 32)
			if err != nil || haveValue {
				return Spec{}, bad("want one float value")
			}
			s.Value, haveValue = float32(v), true
		case "nan", "inf", "version-error", "infer-error", "short-output", "reshape":
			if arg != "" {
				return Spec{}, bad("takes no argument")
			}
			switch key {
			case "nan":
				s.NaN = true
			case "inf":
				s.Inf = true
			case "version-error":
				s.VersionError = true
			case "infer-error":
				s.InferError = true
			case "short-output":
				s.ShortOutput = true
			case "reshape":
				s.Reshape = true
			}
		case "load-error":
			if arg == "" {
				return Spec{}, bad("needs a message")
			}
			s.LoadError = arg
		case "delay":
			d, err := time.ParseDuration(arg)
			if err != nil || d < 0 || d > time.Minute {
				return Spec{}, bad("want a duration up to 1m")
			}
			s.Delay = d
		case "pad":
			s.Pad = len(arg)
		default:
			return Spec{}, bad("unknown directive")
		}
	}
	if !haveValue {
		return Spec{}, fmt.Errorf("%w: no value line", trt.ErrEngineInvalid)
	}
	if len(s.Outputs) == 0 && len(s.Inputs) > 0 || len(s.Inputs) == 0 && len(s.Outputs) > 0 {
		return Spec{}, fmt.Errorf("%w: want inputs and outputs, or neither", trt.ErrEngineInvalid)
	}
	if len(s.Inputs) == 0 {
		s.Inputs = append([]trt.TensorSpec(nil), DefaultInputs...)
		s.Outputs = append([]trt.TensorSpec(nil), DefaultOutputs...)
	}
	return s, nil
}

func trimLine(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// maxElements bounds a fake tensor so a fuzzed file cannot ask for
// gigabytes.
const maxElements = 1 << 20

func parseTensor(arg string) (trt.TensorSpec, error) {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return trt.TensorSpec{}, fmt.Errorf("want NAME TYPE DIMS")
	}
	t := trt.TensorSpec{Name: f[0], Type: -1}
	for d := trt.Float32; d <= trt.Bool; d++ {
		if d.String() == f[1] {
			t.Type = d
		}
	}
	if t.Type < 0 {
		return trt.TensorSpec{}, fmt.Errorf("unknown type %q", f[1])
	}
	elems := int64(1)
	for _, p := range strings.Split(f[2], ",") {
		d, err := strconv.ParseInt(p, 10, 64)
		if err != nil || d < -1 || d == 0 || d > maxElements {
			return trt.TensorSpec{}, fmt.Errorf("bad dimension %q", p)
		}
		if d > 0 {
			elems *= d
			if elems > maxElements {
				return trt.TensorSpec{}, fmt.Errorf("more than %d elements", maxElements)
			}
		}
		t.Shape = append(t.Shape, d)
	}
	return t, nil
}
