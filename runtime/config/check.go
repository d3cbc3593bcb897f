package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edged-dev/edged/internal/confkeys"
	"github.com/edged-dev/edged/internal/regfile"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/umem"
)

// Defaults. configs/edged.toml documents each of them; a test checks that
// the two agree.
const (
	DefaultStopTimeout  = 5 * time.Second
	DefaultStallTimeout = 10 * time.Second
	DefaultSensorWindow = 50 * time.Millisecond
	DefaultQueue        = 4
	// DefaultBatchWait is batch_wait's default: runtime/batch's
	// DefaultWait, which says how it was chosen (a runtime test checks
	// that the two agree).
	DefaultBatchWait = 2 * time.Millisecond
	// MaxBatchWait bounds batch_wait: a wait is for frames captured
	// together, not for a camera's next frame.
	MaxBatchWait     = time.Second
	DefaultMaxValues = 1024
	// Post-processing defaults of detections and keypoints, and of topk.
	DefaultScoreThreshold = 0.25
	DefaultIOUThreshold   = 0.45
	DefaultMaxDetections  = 100
	DefaultTopK           = 1
	// DefaultMaxModelBytes is daemon.max_model_bytes: 1 GiB (the reasons
	// are at trt.DefaultMaxBytes).
	DefaultMaxModelBytes = trt.DefaultMaxBytes
)

// applyDefaults fills what the file leaves out, table by table: the
// daemon's and the GPU's keys, then each source, model, pipeline and sink
// by its kind.
func (c *Config) applyDefaults() {
	c.daemonDefaults()
	for i := range c.Sources {
		c.Sources[i].defaults()
	}
	for i := range c.Models {
		c.Models[i].defaults()
	}
	for i := range c.Pipelines {
		c.Pipelines[i].defaults()
	}
	for i := range c.Sinks {
		c.Sinks[i].defaults()
	}
}

// daemonDefaults fills the [daemon] and [gpu] tables.
func (c *Config) daemonDefaults() {
	d := &c.Daemon
	def(&d.LogLevel, "info")
	def(&d.LogFormat, "text")
	if d.StopTimeout.Duration == 0 {
		d.StopTimeout.Duration = DefaultStopTimeout
	}
	if d.StallTimeout.Duration == 0 {
		d.StallTimeout.Duration = DefaultStallTimeout
	}
	if d.MaxModelBytes == 0 {
		d.MaxModelBytes = DefaultMaxModelBytes
	}
	if d.PreviewFPS == 0 {
		d.PreviewFPS = DefaultPreviewFPS
	}
	if d.PreviewWidth == 0 {
		d.PreviewWidth = DefaultPreviewWidth
	}
	if d.PreviewClients == 0 {
		d.PreviewClients = DefaultPreviewClients
	}
	def(&d.Sysfs, "/sys")
	def(&d.Procfs, "/proc")
	def(&d.Rootfs, "/")
	def(&c.GPU.Memory, string(umem.StrategyAuto))
	def(&c.GPU.TensorRTPlugins, PluginsAuto)
	if c.GPU.NVJPEGHardware == nil {
		c.GPU.NVJPEGHardware = new(bool)
		*c.GPU.NVJPEGHardware = true
	}
}

// defaults fills a [[model]] table.
func (m *Model) defaults() {
	def(&m.Backend, "auto")
	if m.DLACore == nil {
		m.DLACore = new(int)
		*m.DLACore = -1
	}
}

// defaults fills a [[pipeline]] table and its post-processing steps.
func (p *Pipeline) defaults() {
	def(&p.Schedule, "latest")
	if p.Queue == 0 {
		p.Queue = DefaultQueue
	}
	if p.SensorWindow.Duration == 0 {
		p.SensorWindow.Duration = DefaultSensorWindow
	}
	if p.BatchWait.Duration == 0 {
		p.BatchWait.Duration = DefaultBatchWait
	}
	pp := &p.Preprocess
	def(&pp.Resize, "stretch")
	def(&pp.Color, "rgb")
	def(&pp.Device, "auto")
	def(&pp.ColorMatrix, "bt601")
	def(&pp.ColorRange, "limited")
	def(&pp.Filter, "bilinear")
	def(&pp.Layout, "auto")
	if pp.Scale == 0 {
		pp.Scale = 1.0 / 255
	}
	if pp.Mean == nil {
		pp.Mean = []float64{0, 0, 0}
	}
	if pp.Std == nil {
		pp.Std = []float64{1, 1, 1}
	}
	for j := range p.Postprocess {
		p.Postprocess[j].defaults()
	}
}

// defaults fills a [[pipeline.postprocess]] step by its kind.
func (q *Postprocess) defaults() {
	def(&q.Kind, "raw")
	switch q.Kind {
	case "raw":
		if q.MaxValues == 0 {
			q.MaxValues = DefaultMaxValues
		}
	case "topk":
		if q.K == 0 {
			q.K = DefaultTopK
		}
	case "detections", "keypoints":
		def(&q.Format, "auto")
		if q.ScoreThreshold == 0 {
			q.ScoreThreshold = DefaultScoreThreshold
		}
		if q.IOUThreshold == 0 {
			q.IOUThreshold = DefaultIOUThreshold
		}
		if q.MaxDetections == 0 {
			q.MaxDetections = DefaultMaxDetections
		}
	}
}

// Values of [gpu] tensorrt_plugins besides a path.
const (
	PluginsAuto = "auto"
	PluginsOff  = "off"
)

// MaxDLACore bounds [[model]] dla_core: Jetson modules have at most two
// DLA cores; whether the one named is there is checked against the
// device.
const MaxDLACore = 7

func def(s *string, v string) { confkeys.Default(s, v) }

// checker collects problems with positions.
type checker struct {
	file  string
	idx   *keyIndex
	probs []Problem
	// broken holds the key paths whose value did not decode (Parse
	// reported them). A problem at such a key, below it, or saying that
	// the table holding it misses it is not reported again: it would be
	// about the zero value left in its place.
	broken map[string]bool
}

// Problem returns a problem at key (a path such as "source[0].buffers"),
// positioned where the key, or the closest table holding it, is written
// in c's file, for checks made outside this package (runtime's memory and
// engine checks).
func (c *Config) Problem(key, format string, args ...any) Problem {
	k := c.newChecker()
	k.add(key, format, args...)
	return k.probs[0]
}

// newChecker returns a checker that positions problems in c's file (by
// key path alone for a Config built in code).
func (c *Config) newChecker() *checker {
	k := &checker{file: c.File, idx: c.idx}
	if k.idx == nil {
		k.idx = newKeyIndex()
	}
	return k
}

func (k *checker) add(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for b := range k.broken {
		parent, leaf := b[:max(strings.LastIndexByte(b, '.'), 0)], b[strings.LastIndexByte(b, '.')+1:]
		if path == b || strings.HasPrefix(path, b+".") || strings.HasPrefix(path, b+"[") ||
			path == parent && strings.HasPrefix(msg, "missing "+leaf) {
			return
		}
	}
	// A problem is with a key's value (its column), or with a table or
	// a key left out (where the table is written).
	line, col := k.idx.valuePos(path)
	k.probs = append(k.probs, Problem{File: k.file, Line: line, Col: col, Key: path, Msg: msg})
}

// decoded reports whether every value of the table at path (such as
// "source[1]") decoded. The checks of other tables do not draw
// conclusions from one that did not: its name or kind may be the value
// that failed.
func (k *checker) decoded(path string) bool {
	for b := range k.broken {
		if strings.HasPrefix(b, path+".") {
			return false
		}
	}
	return true
}

// namesDecoded reports whether the name of every table of kind (such as
// "source") decoded: if one did not, a reference to a name not found may
// be to that table, and is not reported.
func (k *checker) namesDecoded(kind string) bool {
	for b := range k.broken {
		if strings.HasPrefix(b, kind+"[") && strings.HasSuffix(b, "].name") {
			return false
		}
	}
	return true
}

func (k *checker) oneOf(path, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		k.add(path, "%q is not one of %s", v, quoteList(allowed))
	}
}

func quoteList(s []string) string { return confkeys.QuoteList(s) }

func (k *checker) unique(kind string, names []string) {
	seen := map[string]int{}
	for i, n := range names {
		path := fmt.Sprintf("%s[%d].name", kind, i)
		switch {
		case n == "":
			k.add(fmt.Sprintf("%s[%d]", kind, i), "missing name")
		case strings.ContainsAny(n, " \t\n\"\\"):
			k.add(path, "name %q must not contain spaces, quotes or backslashes", n)
		default:
			if j, dup := seen[n]; dup {
				k.add(path, "duplicate name %q (also used by %s[%d])", n, kind, j)
			} else {
				seen[n] = i
			}
		}
	}
}

// validate checks the decoded, defaulted configuration with k, which knows
// where each key is written and which did not decode.
func (c *Config) validate(k *checker) []Problem {
	d := c.Daemon
	k.oneOf("daemon.log_level", d.LogLevel, "debug", "info", "warn", "error")
	k.oneOf("daemon.log_format", d.LogFormat, "text", "json")
	if d.StopTimeout.Duration < 0 {
		k.add("daemon.stop_timeout", "must be positive")
	}
	if d.StallTimeout.Duration < time.Second {
		k.add("daemon.stall_timeout", "must be at least 1s (it is how long a pipeline may make no progress before the systemd watchdog pings stop)")
	}
	if strings.ContainsAny(d.DeviceID, "/+#\x00") || strings.TrimSpace(d.DeviceID) != d.DeviceID || len(d.DeviceID) > 128 {
		k.add("daemon.device_id", "%q must not contain /, +, #, or surrounding spaces, and at most 128 bytes (it is part of MQTT topics)", d.DeviceID)
	}
	if d.MaxModelBytes < 1<<20 {
		k.add("daemon.max_model_bytes", "must be at least 1048576 (1 MiB): it is the largest model file edged reads, in bytes")
	}
	checkMetricsListen(k, d.MetricsListen)
	checkPreview(k, d)
	for _, f := range []struct{ key, v string }{{"sysfs", d.Sysfs}, {"procfs", d.Procfs}, {"rootfs", d.Rootfs}} {
		if !filepath.IsAbs(f.v) {
			k.add("daemon."+f.key, "%q must be an absolute path (where edged reads the board's health)", f.v)
		}
	}
	if _, err := umem.ParseStrategy(c.GPU.Memory); err != nil {
		k.add("gpu.memory", "%q is not one of \"auto\", \"managed\", \"pinned\", \"mapped\", \"device\", \"host\"", c.GPU.Memory)
	}
	if c.GPU.Device < 0 {
		k.add("gpu.device", "must not be negative")
	}
	if p := c.GPU.TensorRTPlugins; p != PluginsAuto && p != PluginsOff && strings.TrimSpace(p) != p {
		k.add("gpu.tensorrt_plugins", "%q: want \"auto\", \"off\" or the path of libnvinfer_plugin", p)
	}

	names := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	k.unique("source", names(len(c.Sources), func(i int) string { return c.Sources[i].Name }))
	k.unique("model", names(len(c.Models), func(i int) string { return c.Models[i].Name }))
	k.unique("pipeline", names(len(c.Pipelines), func(i int) string { return c.Pipelines[i].Name }))
	k.unique("sink", names(len(c.Sinks), func(i int) string { return c.Sinks[i].Name }))

	for i := range c.Sources {
		c.checkSource(k, i)
	}
	for i := range c.Models {
		c.checkModel(k, i)
	}
	for i := range c.Sinks {
		c.checkSink(k, i)
	}
	if len(c.Pipelines) == 0 {
		k.add("", "no [[pipeline]] defined: edged needs at least one pipeline (source -> model -> sinks)")
	}
	for i := range c.Pipelines {
		c.checkPipeline(k, i)
	}
	c.checkBatchedCameras(k)
	return k.probs
}

// The live preview's defaults and bounds ([daemon] preview_*).
const (
	DefaultPreviewFPS     = 5
	DefaultPreviewWidth   = 640
	DefaultPreviewClients = 4
	MaxPreviewFPS         = 30
	MinPreviewWidth       = 32
	MaxPreviewWidth       = 7680
	MaxPreviewClients     = 64
)

// checkPreview checks the live preview's keys: it is served on
// metrics_listen, so it needs one.
func checkPreview(k *checker, d Daemon) {
	if d.Preview && d.MetricsListen == "" {
		k.add("daemon.preview", "the preview is served on daemon.metrics_listen, which is off: set metrics_listen = \"127.0.0.1:9464\" (or \"unix:/run/edged/metrics.sock\")")
	}
	if !(d.PreviewFPS > 0 && d.PreviewFPS <= MaxPreviewFPS) {
		k.add("daemon.preview_fps", "%g: want more than 0 and at most %d pictures a second", d.PreviewFPS, MaxPreviewFPS)
	}
	if d.PreviewWidth < MinPreviewWidth || d.PreviewWidth > MaxPreviewWidth {
		k.add("daemon.preview_width", "%d: want %d to %d pixels", d.PreviewWidth, MinPreviewWidth, MaxPreviewWidth)
	}
	if d.PreviewClients < 1 || d.PreviewClients > MaxPreviewClients {
		k.add("daemon.preview_clients", "%d: want 1 to %d viewers of each picture", d.PreviewClients, MaxPreviewClients)
	}
}

// checkMetricsListen catches every daemon.metrics_listen that cannot be
// right, so that a listen failure at run time (an address in use, a
// network not up yet) is a runtime condition, not a configuration error.
func checkMetricsListen(k *checker, a string) {
	const key = "daemon.metrics_listen"
	if a == "" {
		return
	}
	if p, ok := strings.CutPrefix(a, "unix:"); ok {
		if p == "" {
			k.add(key, "%q names no socket path (use \"unix:/run/edged/metrics.sock\")", a)
		}
		return
	}
	_, port, err := net.SplitHostPort(a)
	if err != nil || port == "" {
		k.add(key, "%q is neither host:port nor unix:/path (e.g. \"127.0.0.1:9464\")", a)
		return
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		k.add(key, "%q: port %q is not a port number (0-65535) or service name", a, port)
	}
}

func (c *Config) checkModel(k *checker, i int) {
	m := &c.Models[i]
	at := func(key string) string { return fmt.Sprintf("model[%d].%s", i, key) }
	if m.Name != "" && !strings.ContainsAny(m.Name, " \t\n\"\\") { // else unique said so
		if err := CheckModelName(m.Name); err != nil {
			k.add(at("name"), "%v", err)
		}
	}
	k.oneOf(at("backend"), m.Backend, "auto", "onnx", "tensorrt")
	if m.Threads < 0 {
		k.add(at("threads"), "must not be negative")
	}
	c.checkTensorRTKeys(k, i)
	switch name, builtin := m.Builtin(); {
	case m.Path == "":
		k.add(fmt.Sprintf("model[%d]", i), "missing path (a .onnx, .engine or .plan file, or \"builtin:demo\")")
	case builtin:
		if !slices.Contains(BuiltinModels(), name) {
			k.add(at("path"), "no built-in model %q (built in: %s)", name, strings.Join(BuiltinModels(), ", "))
		}
	default:
		if _, err := ModelBackend(m); err != nil {
			k.add(at("path"), "%v", err)
		}
	}
}

// checkTensorRTKeys checks the keys only TensorRT engines use: plugins
// and dla_core (the files themselves are checked by CheckFiles, the DLA
// cores by edged check and at load against the device).
func (c *Config) checkTensorRTKeys(k *checker, i int) {
	m := &c.Models[i]
	at := func(key string) string { return fmt.Sprintf("model[%d].%s", i, key) }
	backend, err := ModelBackend(m)
	trtModel := err == nil && backend == "tensorrt"
	if dla := m.DLA(); dla < -1 || dla > MaxDLACore {
		k.add(at("dla_core"), "%d: want -1 (the GPU) or a DLA core number, 0 or 1 on Jetson Orin and Xavier", dla)
	} else if dla >= 0 && err == nil && !trtModel {
		k.add(at("dla_core"), "model %q runs on %s; only TensorRT engines run on a DLA core (build one with trtexec --useDLACore=%d)", m.Name, backend, dla)
	}
	seen := map[string]int{}
	for j, p := range m.Plugins {
		switch {
		case strings.TrimSpace(p) == "":
			k.add(at("plugins"), "plugins[%d] is empty: want the path of a TensorRT plugin library (.so)", j)
		case err == nil && !trtModel:
			k.add(at("plugins"), "model %q runs on %s; plugins are TensorRT plugin libraries", m.Name, backend)
			return
		default:
			if d, dup := seen[c.Resolve(p)]; dup {
				k.add(at("plugins"), "plugins[%d] is plugins[%d] again", j, d)
			}
			seen[c.Resolve(p)] = j
		}
	}
}

// CheckFiles reports model files that do not exist or are not regular
// files, and the files MQTT sinks name (password and TLS files) that
// cannot be read, are not regular files or exceed their limit (files.go);
// those it reads and keeps (ReadNamed, SinkFiles). Nothing it opens can
// block it. It is separate from the schema validation in Parse so that
// example configurations can be validated on machines without their
// models.
func (c *Config) CheckFiles() error {
	k := c.newChecker()
	for i := range c.Models {
		m := &c.Models[i]
		if _, builtin := m.Builtin(); builtin || m.Path == "" {
			continue
		}
		at := fmt.Sprintf("model[%d].path", i)
		p := c.Resolve(m.Path)
		f, _, err := regfile.Open(p, regfile.NoLimit)
		if err != nil {
			what := "model file"
			if errors.Is(err, regfile.ErrNotRegular) {
				what = "model path"
			}
			k.add(at, "%s %s: %v", what, p, errCause(err))
			continue
		}
		f.Close()
	}
	c.checkPluginFiles(k)
	c.checkSourceFiles(k)
	for i := range c.Sinks {
		s := &c.Sinks[i]
		for _, f := range s.files() {
			if _, err := c.ReadNamed(f.path, f.limit); err != nil {
				p := c.Resolve(f.path)
				k.add(fmt.Sprintf("sink[%d].%s", i, f.key), "%s %s: %v", strings.ReplaceAll(f.key, "_", " "), p, errCause(err))
			}
		}
	}
	if len(k.probs) == 0 {
		return nil
	}
	sortProblems(k.probs)
	return &Error{Problems: k.probs}
}

// checkPluginFiles checks the TensorRT plugin libraries the configuration
// names as edged checks them before loading one (trt.CheckPluginFile):
// each model's plugins, and [gpu] tensorrt_plugins when it is a path and a
// model runs on TensorRT.
func (c *Config) checkPluginFiles(k *checker) {
	usesTensorRT := false
	for i := range c.Models {
		m := &c.Models[i]
		if b, err := ModelBackend(m); err == nil && b == "tensorrt" {
			usesTensorRT = true
		}
		for j, pl := range m.Plugins {
			if strings.TrimSpace(pl) == "" {
				continue // said by checkTensorRTKeys
			}
			if err := trt.CheckPluginFile(c.Resolve(pl), c.Daemon.MaxModelBytes); err != nil {
				k.add(fmt.Sprintf("model[%d].plugins", i), "plugins[%d]: %v", j, err)
			}
		}
	}
	if p := c.GPU.TensorRTPlugins; p != PluginsAuto && p != PluginsOff && usesTensorRT {
		if err := trt.CheckPluginFile(c.Resolve(p), c.Daemon.MaxModelBytes); err != nil {
			k.add("gpu.tensorrt_plugins", "%v", err)
		}
	}
}

// errCause strips the path from an *os.PathError for messages that already
// name the path.
func errCause(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// ModelBackend picks the backend for a model: from config, else by file type.
func ModelBackend(m *Model) (string, error) {
	if m.Backend != "" && m.Backend != "auto" {
		return m.Backend, nil
	}
	if _, ok := m.Builtin(); ok {
		return "onnx", nil
	}
	switch ext := strings.ToLower(fileExt(m.Path)); ext {
	case ".onnx":
		return "onnx", nil
	case ".engine", ".plan", ".trt":
		return "tensorrt", nil
	default:
		return "", fmt.Errorf("cannot tell the backend from the file name %q: use .onnx (ONNX Runtime) or .engine/.plan (TensorRT), or set backend", m.Path)
	}
}

func fileExt(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 && !strings.ContainsRune(p[i:], '/') {
		return p[i:]
	}
	return ""
}

func (c *Config) checkPipeline(k *checker, i int) {
	p := &c.Pipelines[i]
	at := func(key string) string { return fmt.Sprintf("pipeline[%d].%s", i, key) }
	c.checkPipelineInputs(k, i)
	if p.SensorWindow.Duration < 0 {
		k.add(at("sensor_window"), "must be positive")
	}
	k.oneOf(at("schedule"), p.Schedule, "latest", "queue")
	if p.Queue < 1 || p.Queue > 64 {
		k.add(at("queue"), "must be between 1 and 64")
	}
	if w := p.BatchWait.Duration; w < 0 || w > MaxBatchWait {
		k.add(at("batch_wait"), "%v: must be between 0 and %v", w, MaxBatchWait)
	}
	if p.Batch != 0 && !p.Batched() {
		k.add(at("batch"), "needs sources = [...]: a pipeline of one source runs one frame per inference")
	}
	c.checkPipelineSinks(k, i)
	checkPreprocess(k, &p.Preprocess, func(key string) string { return at("preprocess." + key) })
	outs := map[string]int{} // output name: the step that post-processes it
	for j := range p.Postprocess {
		checkPostprocess(k, i, j, &p.Postprocess[j], outs)
	}
}

// checkPipelineInputs checks what a pipeline reads: its source (a camera),
// its model and its serial sensors, each named by a table that exists.
func (c *Config) checkPipelineInputs(k *checker, i int) {
	p := &c.Pipelines[i]
	at := func(key string) string { return fmt.Sprintf("pipeline[%d].%s", i, key) }
	sourceDecoded := func(src *Source) bool { return k.decoded(fmt.Sprintf("source[%d]", indexIn(c.Sources, src))) }
	camera := func(key, name string) {
		switch src := c.Source(name); {
		case src == nil:
			if k.namesDecoded("source") {
				k.add(key, "no [[source]] named %q", name)
			}
		case !IsCamera(src.Kind) && sourceDecoded(src):
			k.add(key, "source %q is a %s sensor; a pipeline's source must be a camera (%s) — list serial sensors in sensors = [...]", name, src.Kind, sourceKindNames(true, false, " or "))
		}
	}
	switch {
	case p.Source != "" && p.Batched():
		k.add(at("sources"), "set source (one camera) or sources (a batched pipeline of several), not both: source = %q", p.Source)
		c.checkSources(k, i, camera)
	case p.Source != "":
		camera(at("source"), p.Source)
	case p.Batched():
		c.checkSources(k, i, camera)
	default:
		k.add(fmt.Sprintf("pipeline[%d]", i), "missing source (a camera), or sources = [...] for a batched pipeline")
	}
	switch {
	case p.Model == "":
		k.add(fmt.Sprintf("pipeline[%d]", i), "missing model")
	case c.Model(p.Model) == nil && k.namesDecoded("model"):
		k.add(at("model"), "no [[model]] named %q", p.Model)
	}
	for j, s := range p.Sensors {
		src := c.Source(s)
		switch {
		case src == nil:
			if k.namesDecoded("source") {
				k.add(at(fmt.Sprintf("sensors[%d]", j)), "no [[source]] named %q", s)
			}
		case !isSensor(src.Kind) && sourceDecoded(src):
			k.add(at(fmt.Sprintf("sensors[%d]", j)), "source %q is a %s camera, not a serial sensor", s, src.Kind)
		}
	}
}

// checkSources checks a batched pipeline's cameras (each with camera) and
// its batch keys.
func (c *Config) checkSources(k *checker, i int, camera func(key, name string)) {
	p := &c.Pipelines[i]
	at := func(key string) string { return fmt.Sprintf("pipeline[%d].%s", i, key) }
	seen := map[string]bool{}
	for j, name := range p.Sources {
		key := at(fmt.Sprintf("sources[%d]", j))
		if seen[name] {
			k.add(key, "camera %q is listed twice", name)
			continue
		}
		seen[name] = true
		camera(key, name)
	}
	if p.Batch < 0 || p.Batch > len(p.Sources) {
		k.add(at("batch"), "%d: want 1 to %d (the number of sources; 0: as many as the sources, capped by the model's batch dimension)", p.Batch, len(p.Sources))
	}
}

// checkBatchedCameras refuses a camera in two batched pipelines: a
// camera's frames go to one batch, not two (a pipeline of one source may
// still name it: that pipeline opens the source on its own).
func (c *Config) checkBatchedCameras(k *checker) {
	owner := map[string]string{}
	for i := range c.Pipelines {
		p := &c.Pipelines[i]
		for j, name := range p.Sources {
			if o, ok := owner[name]; ok && o != p.Name {
				k.add(fmt.Sprintf("pipeline[%d].sources[%d]", i, j), "camera %q is in batched pipeline %q already: a camera feeds one batched pipeline", name, o)
				continue
			}
			owner[name] = p.Name
		}
	}
}

// checkPipelineSinks checks that a pipeline names sinks, each a [[sink]]
// that exists.
func (c *Config) checkPipelineSinks(k *checker, i int) {
	p := &c.Pipelines[i]
	at := func(key string) string { return fmt.Sprintf("pipeline[%d].%s", i, key) }
	if len(p.Sinks) == 0 {
		k.add(fmt.Sprintf("pipeline[%d]", i), "missing sinks (a list of [[sink]] names)")
	}
	for j, s := range p.Sinks {
		if c.Sink(s) == nil && k.namesDecoded("sink") {
			k.add(at(fmt.Sprintf("sinks[%d]", j)), "no [[sink]] named %q", s)
		}
	}
}

// checkPreprocess checks a pipeline's [pipeline.preprocess] table; pre
// names its keys.
func checkPreprocess(k *checker, pp *Preprocess, pre func(string) string) {
	k.oneOf(pre("resize"), pp.Resize, "stretch", "letterbox")
	k.oneOf(pre("color"), pp.Color, "rgb", "bgr")
	k.oneOf(pre("device"), pp.Device, "auto", "gpu", "cpu")
	k.oneOf(pre("color_matrix"), pp.ColorMatrix, "bt601", "bt709")
	k.oneOf(pre("color_range"), pp.ColorRange, "limited", "full")
	k.oneOf(pre("filter"), pp.Filter, "bilinear", "area")
	k.oneOf(pre("layout"), pp.Layout, "auto", "nchw", "nhwc")
	if pp.Threads < 0 || pp.Threads > 64 {
		k.add(pre("threads"), "must be between 0 (automatic) and 64")
	}
	if pp.Scale <= 0 || math.IsInf(pp.Scale, 0) || math.IsNaN(pp.Scale) {
		k.add(pre("scale"), "must be a positive number (1/255 maps 8-bit pixels to [0,1])")
	}
	if len(pp.Mean) != 3 {
		k.add(pre("mean"), "needs 3 values (one per colour channel)")
	}
	if len(pp.Std) != 3 {
		k.add(pre("std"), "needs 3 values (one per colour channel)")
	}
	for _, v := range pp.Std {
		if v == 0 || math.IsNaN(v) {
			k.add(pre("std"), "values must be non-zero")
			break
		}
	}
	if pp.Width < 0 || pp.Height < 0 {
		k.add(pre("width"), "must not be negative")
	}
}

// checkPostprocess checks step j of pipeline i's post-processing; outs
// maps each output already post-processed to its step.
func checkPostprocess(k *checker, i, j int, q *Postprocess, outs map[string]int) {
	pat := func(key string) string { return fmt.Sprintf("pipeline[%d].postprocess[%d].%s", i, j, key) }
	if q.Output == "" {
		k.add(fmt.Sprintf("pipeline[%d].postprocess[%d]", i, j), "missing output (the engine output tensor name)")
	} else if o, dup := outs[q.Output]; dup {
		k.add(pat("output"), "output %q already post-processed by postprocess[%d]", q.Output, o)
	} else {
		outs[q.Output] = j
	}
	k.oneOf(pat("kind"), q.Kind, "raw", "topk", "detections", "keypoints")
	if q.Kind != "detections" && q.Kind != "keypoints" {
		for _, key := range []struct {
			name string
			set  bool
		}{{"format", q.Format != ""}, {"outputs", len(q.Outputs) > 0}, {"sigmoid", q.Sigmoid}} {
			if key.set {
				k.add(pat(key.name), "applies to kind = \"detections\" and \"keypoints\" only (this output is %s)", q.Kind)
			}
		}
	}
	switch q.Kind {
	case "raw":
		if q.MaxValues < 1 || q.MaxValues > 1<<20 {
			k.add(pat("max_values"), "must be between 1 and 1048576")
		}
	case "topk":
		if q.K < 1 || q.K > 1000 {
			k.add(pat("k"), "must be between 1 and 1000")
		}
	case "detections", "keypoints":
		k.oneOf(pat("format"), q.Format, "auto", "yolov8", "yolov5", "end2end", "efficientnms", "rtdetr")
		if len(q.Outputs) > 0 && q.Output != "" && !slices.Contains(q.Outputs, q.Output) {
			k.add(pat("outputs"), "does not list output %q: outputs names every output the format reads, output among them", q.Output)
		}
		if q.ScoreThreshold < 0 || q.ScoreThreshold > 1 {
			k.add(pat("score_threshold"), "must be between 0 and 1")
		}
		if q.IOUThreshold <= 0 || q.IOUThreshold > 1 {
			k.add(pat("iou_threshold"), "must be in (0, 1]")
		}
		if q.MaxDetections < 1 || q.MaxDetections > 10000 {
			k.add(pat("max_detections"), "must be between 1 and 10000")
		}
	}
}

// indexIn is the index of the element p points to in s, or -1.
func indexIn[T any](s []T, p *T) int {
	for i := range s {
		if &s[i] == p {
			return i
		}
	}
	return -1
}
