package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/internal/regfile"
)

// ErrInvalid marks every configuration problem; edged exits with status 78
// (EX_CONFIG) for errors that wrap it.
var ErrInvalid = errors.New("configuration error")

// BuiltinPrefix marks model paths that name a model compiled into edged.
const BuiltinPrefix = "builtin:"

// Config is the whole configuration file. Its zero values are the
// documented defaults, filled in by Load (see configs/edged.toml).
type Config struct {
	Daemon    Daemon     `toml:"daemon"`
	GPU       GPU        `toml:"gpu"`
	Sources   []Source   `toml:"source"`
	Models    []Model    `toml:"model"`
	Pipelines []Pipeline `toml:"pipeline"`
	Sinks     []Sink     `toml:"sink"`

	// File is the path the configuration was read from ("" for the
	// embedded default); relative paths inside it are resolved against
	// its directory.
	File string `toml:"-"`

	idx   *keyIndex // where each key is written, for later problems
	files *files    // what was read of the files it names (files.go)
}

// Daemon is the [daemon] table.
type Daemon struct {
	LogLevel       string   `toml:"log_level"`
	LogFormat      string   `toml:"log_format"`
	StateDir       string   `toml:"state_dir"`
	MetricsListen  string   `toml:"metrics_listen"`
	StopTimeout    Duration `toml:"stop_timeout"`
	StallTimeout   Duration `toml:"stall_timeout"`
	OnnxRuntimeLib string   `toml:"onnxruntime_lib"`
	MaxModelBytes  int64    `toml:"max_model_bytes"`
	// DeviceID names this edged instance in every record ("device") and
	// in MQTT topics; "" = /etc/machine-id, else the host name (chosen by
	// the daemon at start).
	DeviceID string `toml:"device_id"`
	// Sysfs, Procfs and Rootfs are where the board's health is read
	// (runtime/board): /sys, /proc and / unless a container mounts the
	// host's elsewhere.
	Sysfs  string `toml:"sysfs"`
	Procfs string `toml:"procfs"`
	Rootfs string `toml:"rootfs"`
	// Preview serves the live preview (the page on /, pictures on
	// /preview/...) on metrics_listen, at most PreviewFPS pictures a
	// second per camera, PreviewWidth pixels wide, to PreviewClients
	// viewers of each picture at a time.
	Preview        bool    `toml:"preview"`
	PreviewFPS     float64 `toml:"preview_fps"`
	PreviewWidth   int     `toml:"preview_width"`
	PreviewClients int     `toml:"preview_clients"`
}

// GPU is the [gpu] table.
type GPU struct {
	Device          int    `toml:"device"`
	Memory          string `toml:"memory"`
	Strict          bool   `toml:"strict"`
	TensorRTLibrary string `toml:"tensorrt_library"`
	// TensorRTPlugins is "auto" (libnvinfer_plugin.so.<major>, TensorRT's
	// standard plugins, loaded and initialised before any engine is
	// deserialised, where it is installed), "off", or the path of the
	// library to use instead.
	TensorRTPlugins string `toml:"tensorrt_plugins"`
	NVRTCLibrary    string `toml:"nvrtc_library"`   // NVRTC for the preprocessing kernels; "" = search
	NVJPEGLibrary   string `toml:"nvjpeg_library"`  // nvJPEG for MJPEG cameras; "" = search
	NVJPEGHardware  *bool  `toml:"nvjpeg_hardware"` // batches on the JPEG engines where the GPU has them; default true
}

// Source is one [[source]]: the keys of every source kind. Which are the
// keys of a kind, their defaults and their checks are the kind's package's
// (kinds.go); name, kind and optional are every kind's.
type Source struct {
	Name     string `toml:"name"`
	Kind     string `toml:"kind"`
	Device   string `toml:"device"`
	Optional bool   `toml:"optional"`

	// Cameras that make their own frames.
	Width   int     `toml:"width"`
	Height  int     `toml:"height"`
	Format  string  `toml:"format"`
	FPS     float64 `toml:"fps"`
	Buffers int     `toml:"buffers"`
	IO      string  `toml:"io"`

	Seed   int64 `toml:"seed"`
	Period int   `toml:"period"`

	Path    string `toml:"path"`
	Loop    bool   `toml:"loop"`
	FreeRun bool   `toml:"free_run"`

	// Sensors.
	Baud     int      `toml:"baud"`
	Protocol string   `toml:"protocol"`
	Columns  []string `toml:"columns"`
	RingSize int      `toml:"ring"`

	// Network cameras: the size and codec come from the stream.
	URL          string   `toml:"url"`
	Username     string   `toml:"username"`
	PasswordFile string   `toml:"password_file"`
	Transport    string   `toml:"transport"`
	Decoder      string   `toml:"decoder"`
	Timeout      Duration `toml:"timeout"`
}

// Model is one [[model]].
type Model struct {
	Name              string `toml:"name"`
	Path              string `toml:"path"`
	Backend           string `toml:"backend"` // auto | onnx | tensorrt
	Reload            *bool  `toml:"reload"`
	Threads           int    `toml:"threads"`
	VersionCompatible bool   `toml:"version_compatible"`
	// Plugins are custom TensorRT plugin libraries the engine's layers
	// need, loaded before it is deserialised.
	Plugins []string `toml:"plugins"`
	// DLACore runs the engine on a DLA core (Jetson Orin and Xavier): -1
	// (the default) the GPU, 0 or 1 the DLA core the engine was built for.
	DLACore *int `toml:"dla_core"`
}

// DLA returns the DLA core the model runs on, -1 for the GPU.
func (m *Model) DLA() int {
	if m.DLACore == nil {
		return -1
	}
	return *m.DLACore
}

// ReloadEnabled reports whether the model file is watched (default true).
func (m *Model) ReloadEnabled() bool { return m.Reload == nil || *m.Reload }

// Builtin reports whether the model is compiled into edged, and its name.
func (m *Model) Builtin() (string, bool) {
	return strings.CutPrefix(m.Path, BuiltinPrefix)
}

// Pipeline is one [[pipeline]].
type Pipeline struct {
	Name   string `toml:"name"`
	Source string `toml:"source"`
	// Sources makes a batched pipeline: several cameras into one engine,
	// their frames run together (instead of Source).
	Sources []string `toml:"sources"`
	// Batch is the most frames of one inference of a batched pipeline
	// (0: the number of sources, capped by the model's batch dimension).
	Batch int `toml:"batch"`
	// BatchWait is the longest the first frame of a batch waits for the
	// other cameras' frames.
	BatchWait    Duration      `toml:"batch_wait"`
	Model        string        `toml:"model"`
	Sensors      []string      `toml:"sensors"`
	SensorWindow Duration      `toml:"sensor_window"`
	Schedule     string        `toml:"schedule"` // latest | queue
	Queue        int           `toml:"queue"`
	Sinks        []string      `toml:"sinks"`
	Preprocess   Preprocess    `toml:"preprocess"`
	Postprocess  []Postprocess `toml:"postprocess"`
}

// Batched reports whether the pipeline runs several cameras as batches
// (sources = [...]).
func (p *Pipeline) Batched() bool { return len(p.Sources) > 0 }

// Cameras are the names of the pipeline's cameras: its source, or its
// sources.
func (p *Pipeline) Cameras() []string {
	if p.Batched() {
		return p.Sources
	}
	if p.Source == "" {
		return nil
	}
	return []string{p.Source}
}

// Preprocess is [pipeline.preprocess].
type Preprocess struct {
	Input  string    `toml:"input"`  // engine input tensor; "" = the first
	Resize string    `toml:"resize"` // stretch | letterbox
	Color  string    `toml:"color"`  // rgb | bgr
	Scale  float64   `toml:"scale"`
	Mean   []float64 `toml:"mean"`
	Std    []float64 `toml:"std"`
	Width  int       `toml:"width"`  // for engines with dynamic input size
	Height int       `toml:"height"` // for engines with dynamic input size

	Device      string `toml:"device"`       // auto | gpu | cpu
	ColorMatrix string `toml:"color_matrix"` // bt601 | bt709 (YUV sources)
	ColorRange  string `toml:"color_range"`  // limited | full (YUV sources)
	Filter      string `toml:"filter"`       // bilinear | area
	Layout      string `toml:"layout"`       // auto | nchw | nhwc
	Threads     int    `toml:"threads"`      // CPU path goroutines; 0 = min(cores, 4)
}

// Postprocess is one [[pipeline.postprocess]]. A field tagged kinds is a
// key of those kinds only (edged config print leaves it out for the
// others); the rest are keys of every kind.
type Postprocess struct {
	Output         string   `toml:"output"`
	Kind           string   `toml:"kind"` // raw | topk | detections | keypoints
	K              int      `kinds:"topk" toml:"k"`
	Softmax        bool     `kinds:"topk" toml:"softmax"`
	Labels         []string `kinds:"topk,detections,keypoints" toml:"labels"`
	MaxValues      int      `kinds:"raw" toml:"max_values"`
	ScoreThreshold float64  `kinds:"detections,keypoints" toml:"score_threshold"`
	IOUThreshold   float64  `kinds:"detections,keypoints" toml:"iou_threshold"`
	MaxDetections  int      `kinds:"detections,keypoints" toml:"max_detections"`
	// Format is the detector output format of detections and keypoints:
	// auto | yolov8 | yolov5 | end2end | efficientnms | rtdetr.
	Format string `kinds:"detections,keypoints" toml:"format"`
	// Outputs lists every output a multi-output format reads, in its
	// order (efficientnms: num_dets, boxes, scores, classes; rtdetr:
	// boxes, scores); empty: found by name and shape.
	Outputs []string `kinds:"detections,keypoints" toml:"outputs"`
	// Sigmoid applies the logistic function to class scores (detectors
	// that output logits).
	Sigmoid bool `kinds:"detections,keypoints" toml:"sigmoid"`
}

// Sink is one [[sink]]: every key of every sink kind (the kinds' packages
// declare which are theirs, sinks.go).
type Sink struct {
	Name   string `toml:"name"`
	Kind   string `toml:"kind"` // socket | serial | mqtt
	Format string `toml:"format"`

	// Socket.
	Path       string `toml:"path"`
	Mode       string `toml:"mode"`
	Group      string `toml:"group"`
	MaxClients int    `toml:"max_clients"`
	// MaxClientsPerUID bounds one peer uid's connections; default
	// MaxClients/2.
	MaxClientsPerUID int      `toml:"max_clients_per_uid"`
	ClientQueue      int      `toml:"client_queue"`
	WriteTimeout     Duration `toml:"write_timeout"`
	AllowUIDs        []int    `toml:"allow_uids"`
	AllowGIDs        []int    `toml:"allow_gids"`

	// Serial.
	Device        string `toml:"device"`
	Baud          int    `toml:"baud"`
	DataBits      int    `toml:"data_bits"`
	Parity        string `toml:"parity"`
	StopBits      int    `toml:"stop_bits"`
	Queue         int    `toml:"queue"` // serial and mqtt: records held in memory
	MaxFrameBytes int    `toml:"max_frame_bytes"`

	// MQTT.
	URL            string   `toml:"url"`          // mqtt://host:1883 | mqtts://host:8883
	Topic          string   `toml:"topic"`        // {device} {pipeline} {sink}
	StatusTopic    string   `toml:"status_topic"` // {device} {sink}
	QoS            *int     `toml:"qos"`          // 0 | 1 (default 1)
	ClientID       string   `toml:"client_id"`
	Username       string   `toml:"username"`
	PasswordFile   string   `toml:"password_file"`
	CAFile         string   `toml:"ca_file"`
	CertFile       string   `toml:"cert_file"`
	KeyFile        string   `toml:"key_file"`
	QueueBytes     int64    `toml:"queue_bytes"` // on-disk queue bound
	Keepalive      Duration `toml:"keepalive"`   // mqtt: MQTT keep-alive; socket: idle clients get a keepalive record
	ConnectTimeout Duration `toml:"connect_timeout"`
	AckTimeout     Duration `toml:"ack_timeout"`

	pathDefaulted bool // the kind filled in the path (a socket sink's default)
}

// PathDefaulted reports whether a socket sink's path is the default
// (socketsink.DefaultPath) because the configuration leaves it empty.
func (s *Sink) PathDefaulted() bool { return s.pathDefaulted }

// Duration is a time.Duration written as a string such as "250ms".
type Duration = confkeys.Duration

// Problem is one thing wrong with a configuration, located in its file.
type Problem struct {
	File      string
	Line, Col int
	Key       string // key path, e.g. pipeline[0].model
	Msg       string
}

func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteByte(':')
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", p.Line, p.Col)
	}
	if b.Len() > 0 {
		b.WriteByte(' ')
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error lists every problem found in one file. It wraps ErrInvalid.
type Error struct{ Problems []Problem }

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is(err, ErrInvalid) hold.
func (e *Error) Unwrap() error { return ErrInvalid }

// LoadFile reads, decodes, defaults and validates a configuration file,
// as Parse does. The path must lead to a regular file of at most
// MaxFileBytes; it is opened without blocking, so a FIFO or a device is
// refused at once, as is a larger file, before anything is read.
func LoadFile(path string) (*Config, error) {
	data, err := regfile.ReadFile(path, MaxFileBytes)
	if err != nil {
		return nil, &Error{Problems: []Problem{{File: path, Msg: fmt.Sprintf("cannot read configuration: %v", errors.Unwrap(err))}}}
	}
	return Parse(path, data)
}

// Parse decodes, defaults and validates configuration text. name is used in
// messages and to resolve relative paths ("" for the embedded default).
//
// Every problem found is returned in one *Error. Unless the text
// cannot be read as TOML at all, the configuration as far as it was
// understood (defaults filled in) comes with it: it must not be run, but
// edged check goes on to check the devices and model files it names.
func Parse(name string, data []byte) (*Config, error) {
	idx := indexKeys(data)
	var top map[string]toml.Primitive
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&top)
	if err != nil {
		return nil, &Error{Problems: []Problem{syntaxProblem(name, err)}}
	}
	cfg := &Config{File: name, idx: idx, files: &files{}}
	d := &decoder{md: md, file: name, idx: idx}
	d.fields("", top, reflect.ValueOf(cfg).Elem())
	cfg.applyDefaults()
	k := cfg.newChecker()
	k.broken = d.broken
	probs := append(d.probs, cfg.validate(k)...)
	if len(probs) > 0 {
		sortProblems(probs)
		return cfg, &Error{Problems: probs}
	}
	return cfg, nil
}

// decoder decodes a configuration key by key, so that a value of the
// wrong type is reported at its key and every other key is still decoded
// and validated; keys the schema does not have are reported too.
type decoder struct {
	md    toml.MetaData
	file  string
	idx   *keyIndex
	probs []Problem
	// broken holds the key paths whose value did not decode: validation
	// does not complain about them again (see checker.add).
	broken map[string]bool
}

// fields decodes the keys of a table at path (indexed, "" for the whole
// file) into the struct v.
func (d *decoder) fields(path string, keys map[string]toml.Primitive, v reflect.Value) {
	byTag := map[string]int{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if tag := f.Tag.Get("toml"); f.IsExported() && tag != "" && tag != "-" {
			byTag[tag] = i
		}
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		at := key
		if path != "" {
			at = path + "." + key
		}
		i, ok := byTag[key]
		if !ok {
			line, col := d.idx.pos(at) // the key is what is wrong
			msg := "unknown key (check the spelling; every key is listed in configs/edged.toml)"
			if near := closest(key, slices.Collect(maps.Keys(byTag))); near != "" {
				msg = fmt.Sprintf("unknown key; did you mean %q? (every key is listed in configs/edged.toml)", near)
			}
			d.probs = append(d.probs, Problem{File: d.file, Line: line, Col: col, Key: at, Msg: msg})
			continue
		}
		d.value(at, keys[key], v.Field(i))
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// value decodes one value at path into v: a table into a struct (key by
// key), an array of tables into a slice of structs (table by table),
// anything else whole.
func (d *decoder) value(path string, prim toml.Primitive, v reflect.Value) {
	switch {
	case v.Kind() == reflect.Struct && !reflect.PointerTo(v.Type()).Implements(textUnmarshaler):
		// The decoder takes a value that is not a table for an empty
		// table when it decodes into a map: look first.
		var raw any
		if err := d.md.PrimitiveDecode(prim, &raw); err != nil {
			d.fail(path, err)
			return
		}
		if _, ok := raw.(map[string]any); !ok {
			d.fail(path, fmt.Errorf("incompatible types: TOML value has type %T; destination has type table", raw))
			return
		}
		var keys map[string]toml.Primitive
		if err := d.md.PrimitiveDecode(prim, &keys); err != nil {
			d.fail(path, err)
			return
		}
		d.fields(path, keys, v)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		var elems []toml.Primitive
		if err := d.md.PrimitiveDecode(prim, &elems); err != nil {
			d.fail(path, err)
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), len(elems), len(elems)))
		for i, e := range elems {
			d.value(fmt.Sprintf("%s[%d]", path, i), e, v.Index(i))
		}
	default:
		if err := d.md.PrimitiveDecode(prim, v.Addr().Interface()); err != nil {
			v.SetZero() // what it decoded before it failed is not the value
			d.fail(path, err)
		}
	}
}

// add reports a problem with the value at path.
func (d *decoder) add(path, msg string) {
	line, col := d.idx.valuePos(path)
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Col: col, Key: path, Msg: msg})
}

// fail reports a value at path that did not decode, with the decoder's
// reason less its own location (path says where).
func (d *decoder) fail(path string, err error) {
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg = pe.Message
	} else if i := strings.Index(msg, "(last key \""); i >= 0 {
		if j := strings.Index(msg[i:], "\")"); j >= 0 {
			msg = strings.TrimSpace(strings.TrimPrefix(msg[i+j+2:], ":"))
		}
	}
	if d.broken == nil {
		d.broken = map[string]bool{}
	}
	d.broken[path] = true
	d.add(path, msg)
}

// syntaxProblem locates an error that kept the text from being read as
// TOML at all.
func syntaxProblem(name string, err error) Problem {
	p := Problem{File: name, Msg: strings.TrimPrefix(err.Error(), "toml: ")}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		p.Line, p.Col, p.Msg = pe.Position.Line, pe.Position.Col, pe.Message
	}
	if p.Line > 0 && p.Col == 0 {
		p.Col = 1
	}
	return p
}

func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}

// Resolve turns a path from the configuration into an absolute one,
// relative to the configuration file's folder.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, BuiltinPrefix) {
		return p
	}
	if c.File == "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return filepath.Join(filepath.Dir(c.File), p)
}

// Source returns the source named n.
func (c *Config) Source(n string) *Source {
	for i := range c.Sources {
		if c.Sources[i].Name == n {
			return &c.Sources[i]
		}
	}
	return nil
}

// Model returns the model named n.
func (c *Config) Model(n string) *Model {
	for i := range c.Models {
		if c.Models[i].Name == n {
			return &c.Models[i]
		}
	}
	return nil
}

// Sink returns the sink named n.
func (c *Config) Sink(n string) *Sink {
	for i := range c.Sinks {
		if c.Sinks[i].Name == n {
			return &c.Sinks[i]
		}
	}
	return nil
}

// ParseMode parses a socket file mode such as "0660".
func ParseMode(s string) (os.FileMode, error) {
	return confkeys.ParseMode(s)
}
