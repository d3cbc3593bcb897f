package trt

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/edged-dev/edged/internal/pylit"
)

// Where metadata was read from (Metadata.From).
const (
	FromEngineHeader = "Ultralytics engine header"
	FromONNXProps    = "ONNX metadata_props"
)

// Tasks a model's metadata may name (Metadata.Task), as Ultralytics spells
// them.
const (
	TaskDetect   = "detect"
	TaskSegment  = "segment"
	TaskClassify = "classify"
	TaskPose     = "pose"
	TaskOBB      = "obb"
)

// Metadata is what a model file says about itself: the JSON header of an
// Ultralytics TensorRT engine, or an ONNX model's metadata_props (the
// Ultralytics and YOLOv5 exporters write the same keys there). Every field
// is optional; a backend that read none returns nil.
type Metadata struct {
	// From names the source: FromEngineHeader or FromONNXProps.
	From string
	// Producer is "author version" ("Ultralytics 8.3.40"), or the ONNX
	// producer_name and producer_version when there is no author.
	Producer string
	// Description is the exporter's description of the model.
	Description string
	// Task is detect, segment, classify, pose, obb or empty.
	Task string
	// Names maps class indices to class names.
	Names map[int]string
	// Imgsz is the input size the model was exported for, [height, width].
	Imgsz []int
	// Stride is the model's largest stride in pixels, 0 when absent.
	Stride int
	// Batch is the batch size the model was exported for, 0 when absent.
	Batch int
	// Channels is the number of input channels, 0 when absent.
	Channels int
	// End2End: the model outputs final detections, [batch, max_det, 6 +
	// extra] as x1, y1, x2, y2, score, class (YOLOv10 and YOLO26
	// "end2end" heads, or an export with nms=True).
	End2End bool
	// KptShape is a pose model's [keypoints, values per keypoint] (the
	// values being x, y and, with 3, a visibility score).
	KptShape []int
	// Keys lists every key the source had, sorted.
	Keys []string
	// Problems lists keys edged knows whose values it could not read; they
	// are left out of the fields above.
	Problems []string
}

// ClassNames returns the class names ordered by index, or nil when the
// indices are not exactly 0..n-1.
func (m *Metadata) ClassNames() []string {
	if m == nil || len(m.Names) == 0 {
		return nil
	}
	out := make([]string, len(m.Names))
	for i := range out {
		n, ok := m.Names[i]
		if !ok {
			return nil
		}
		out[i] = n
	}
	return out
}

// String is a one-line summary for logs and edged check.
func (m *Metadata) String() string {
	if m == nil {
		return "no metadata"
	}
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	if m.Producer != "" {
		add("%s", m.Producer)
	}
	producer := len(parts)
	if m.Task != "" {
		add("task %s", m.Task)
	}
	if n := len(m.Names); n > 0 {
		names := m.ClassNames()
		switch {
		case names == nil:
			add("%d class names (indices not 0..%d)", n, n-1)
		case n <= 4:
			add("%d class names (%s)", n, strings.Join(names, ", "))
		default:
			add("%d class names (%s, …)", n, strings.Join(names[:3], ", "))
		}
	}
	if len(m.Imgsz) == 2 {
		add("imgsz %dx%d", m.Imgsz[1], m.Imgsz[0])
	}
	if m.Stride > 0 {
		add("stride %d", m.Stride)
	}
	if m.Batch > 0 {
		add("batch %d", m.Batch)
	}
	if m.End2End {
		add("end-to-end (outputs final boxes)")
	}
	if len(m.KptShape) == 2 {
		add("keypoints %dx%d", m.KptShape[0], m.KptShape[1])
	}
	if len(parts) == producer { // nothing edged uses: say what is there
		add("keys %s", strings.Join(m.Keys, ", "))
	}
	s := m.From + ": " + strings.Join(parts, ", ")
	if len(m.Problems) > 0 {
		s += "; ignored: " + strings.Join(m.Problems, "; ")
	}
	return s
}

// MetadataOf returns the metadata of the file e was loaded from, or nil
// when its backend read none (engines report it with a Metadata method).
func MetadataOf(e Engine) *Metadata {
	if m, ok := e.(interface{ Metadata() *Metadata }); ok {
		return m.Metadata()
	}
	return nil
}

// DecodeMetadata reads the keys the Ultralytics and YOLOv5 exporters
// write from values as decoded from their source: JSON values
// (encoding/json into any) for an engine header, Python literals
// (internal/pylit) for ONNX metadata_props. It returns the metadata and
// one error per known key whose value it could not read (that key is left
// out); unknown keys are only listed in Keys.
func DecodeMetadata(from string, values map[string]any) (*Metadata, []error) {
	m := &Metadata{From: from}
	var errs []error
	fail := func(key string, err error) {
		errs = append(errs, fmt.Errorf("key %s: %w", key, err))
		m.Problems = append(m.Problems, fmt.Sprintf("%s (%v)", key, err))
	}
	for k := range values {
		m.Keys = append(m.Keys, k)
	}
	slices.Sort(m.Keys)
	for _, k := range m.Keys {
		v := values[k]
		var err error
		if s, ok := v.(string); ok && structured[k] {
			// ONNX metadata_props hold str(value); tools that copy them
			// into an engine header keep the strings (Ultralytics reads
			// both).
			if v, err = pylit.Parse(s); err != nil {
				fail(k, fmt.Errorf("%q is not a Python literal", clip(s)))
				continue
			}
		}
		switch k {
		case "task":
			m.Task, err = text(v)
		case "description":
			m.Description, err = text(v)
		case "names":
			m.Names, err = names(v)
		case "imgsz":
			m.Imgsz, err = imgsz(v)
		case "stride":
			m.Stride, err = largest(v)
		case "batch":
			m.Batch, err = count(v)
		case "channels":
			m.Channels, err = count(v)
		case "end2end":
			var b bool
			b, err = flag(v)
			m.End2End = m.End2End || b
		case "args":
			// An export with nms=True ends in an NMS of its own.
			if nms, ok := lookup(v, "nms"); ok {
				var b bool
				if b, err = flag(nms); err == nil {
					m.End2End = m.End2End || b
				}
			}
		case "kpt_shape":
			m.KptShape, err = kptShape(v)
		default:
			continue
		}
		if err != nil {
			fail(k, err)
		}
	}
	author, _ := text(values["author"])
	version, _ := text(values["version"])
	m.Producer = strings.TrimSpace(author + " " + version)
	return m, errs
}

// structured are the keys whose values are not text.
var structured = map[string]bool{
	"names": true, "imgsz": true, "stride": true, "batch": true, "channels": true,
	"end2end": true, "args": true, "kpt_shape": true,
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func text(v any) (string, error) {
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		return s, nil
	}
	return "", fmt.Errorf("want a string, got %s", kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any, *pylit.Dict:
		return "an object"
	}
	return "a number"
}

// integer reads a whole number from a JSON float64 or a Python int.
func integer(v any) (int, error) {
	switch n := v.(type) {
	case int64:
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return int(n), nil
		}
	case float64:
		if n == math.Trunc(n) && math.Abs(n) <= math.MaxInt32 {
			return int(n), nil
		}
	default:
		return 0, fmt.Errorf("want an integer, got %s", kindOf(v))
	}
	return 0, fmt.Errorf("%v is not an integer of at most 32 bits", v)
}

func count(v any) (int, error) {
	n, err := integer(v)
	if err == nil && n < 0 {
		err = fmt.Errorf("want a non-negative integer, got %d", n)
	}
	return n, err
}

// largest reads an integer or a list of them (some exporters write every
// stride); the largest counts.
func largest(v any) (int, error) {
	list, ok := v.([]any)
	if !ok {
		return count(v)
	}
	if len(list) == 0 {
		return 0, fmt.Errorf("an empty list")
	}
	best := 0
	for _, x := range list {
		n, err := count(x)
		if err != nil {
			return 0, err
		}
		best = max(best, n)
	}
	return best, nil
}

func flag(v any) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case nil:
		return false, nil
	}
	return false, fmt.Errorf("want true or false, got %s", kindOf(v))
}

// lookup returns key of an object (JSON) or a dict (Python).
func lookup(v any, key string) (any, bool) {
	switch d := v.(type) {
	case map[string]any:
		x, ok := d[key]
		return x, ok
	case *pylit.Dict:
		return d.Get(key)
	}
	return nil, false
}

// maxNames bounds the class names read: detectors have tens, Open Images
// 601, ImageNet-21k 21841.
const maxNames = 1 << 16

// names reads {"0": "person", ...} (JSON: what json.dumps makes of a
// Python dict with int keys), {0: 'person', ...} (Python) and a list.
func names(v any) (map[int]string, error) {
	out := map[int]string{}
	put := func(k any, name any) error {
		s, ok := name.(string)
		if !ok {
			return fmt.Errorf("class %v: want a name, got %s", k, kindOf(name))
		}
		var i int
		switch k := k.(type) {
		case int:
			i = k
		case int64:
			if k < 0 || k >= maxNames {
				return fmt.Errorf("class index %d is not between 0 and %d", k, maxNames-1)
			}
			i = int(k)
		case string:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= maxNames {
				return fmt.Errorf("class index %q is not an integer between 0 and %d", k, maxNames-1)
			}
			i = n
		default:
			return fmt.Errorf("class index %v is not an integer", k)
		}
		out[i] = s
		return nil
	}
	switch d := v.(type) {
	case nil:
		return nil, nil
	case []any:
		if len(d) > maxNames {
			return nil, fmt.Errorf("%d names, more than %d", len(d), maxNames)
		}
		for i, n := range d {
			if err := put(i, n); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first bad key is the same every time
		for _, k := range keys {
			if err := put(k, d[k]); err != nil {
				return nil, err
			}
		}
	case *pylit.Dict:
		for i, k := range d.Keys {
			if err := put(k, d.Values[i]); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("want an object of index to name or a list of names, got %s", kindOf(v))
	}
	return out, nil
}

// imgsz reads [height, width], [size] or size.
func imgsz(v any) ([]int, error) {
	var sz []int
	if list, ok := v.([]any); ok {
		for _, x := range list {
			n, err := integer(x)
			if err != nil {
				return nil, fmt.Errorf("want [height, width]: %w", err)
			}
			sz = append(sz, n)
		}
	} else {
		n, err := integer(v)
		if err != nil {
			return nil, fmt.Errorf("want [height, width] or one size: %w", err)
		}
		sz = []int{n}
	}
	if len(sz) == 1 {
		sz = []int{sz[0], sz[0]}
	}
	if len(sz) != 2 || sz[0] <= 0 || sz[1] <= 0 || sz[0] > 1<<16 || sz[1] > 1<<16 {
		return nil, fmt.Errorf("want two positive integers [height, width], got %v", sz)
	}
	return sz, nil
}

// kptShape reads [keypoints, 2 or 3].
func kptShape(v any) ([]int, error) {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return nil, fmt.Errorf("want [keypoints, values per keypoint], got %s", kindOf(v))
	}
	k, err := integer(list[0])
	if err != nil {
		return nil, err
	}
	d, err := integer(list[1])
	if err != nil {
		return nil, err
	}
	if k < 1 || k > 1024 || (d != 2 && d != 3) {
		return nil, fmt.Errorf("want [1..1024, 2 or 3], got [%d, %d]", k, d)
	}
	return []int{k, d}, nil
}
