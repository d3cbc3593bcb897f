package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edged-dev/edged/internal/regfile"
	edruntime "github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/preprocess"
	"github.com/edged-dev/edged/runtime/ratelog"
	"github.com/edged-dev/edged/runtime/serialsink"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/jpeg"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/sensors/serialsrc"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/sensors/v4l2"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/umem"
)

// wiring holds what the concrete parts share: the memory placement (the
// CUDA device, when there is one), opened once per daemon.
type wiring struct {
	log   *slog.Logger
	mu    sync.Mutex
	place *umem.Placement
	// devFrames is the placement of the pipelines whose pictures NVDEC
	// writes (frames.go): device memory on place's device.
	devFrames *umem.Placement
}

// factories wires the concrete sources, engines, memory and sinks that the
// configuration names.
func factories(log *slog.Logger) edruntime.Factories {
	w := &wiring{log: log}
	return edruntime.Factories{
		Allocator:      w.allocator,
		FrameAllocator: w.frameAllocator,
		Camera:         w.camera,
		Sensor:         newSensor,
		Backend:        w.backend,
		GPUPreprocess:  w.gpuPreprocess,
		Sink: func(s *config.Sink, c *config.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
			sink, err := newSink(log, s, c, inherited, control)
			return sink, sinkError(s, err)
		},
		DeviceMemory: w.deviceMemory,
	}
}

// deviceMemory reports the free and total memory of a discrete GPU, where
// TensorRT engines live; ok is false without one (no CUDA, or an
// integrated GPU, whose memory is the system's).
func (w *wiring) deviceMemory() (free, total uint64, ok bool) {
	w.mu.Lock()
	place := w.place
	w.mu.Unlock()
	if place == nil || place.Device == nil || place.Probe.Integrated {
		return 0, 0, false
	}
	free, total, err := place.Device.MemInfo()
	return free, total, err == nil
}

func (w *wiring) allocator(g config.GPU) (umem.Allocator, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.place == nil {
		p, err := umem.Open(umem.Options{Device: g.Device, Strategy: umem.Strategy(g.Memory), Strict: g.Strict})
		if err != nil {
			return nil, "", err
		}
		w.place = p
	}
	return w.place.Alloc, w.place.Reason, nil
}

func (w *wiring) backend(name string, m *config.Model, c *config.Config) (trt.Backend, error) {
	switch name {
	case "onnx":
		return onnx.New(onnx.Options{Library: c.Resolve(c.Daemon.OnnxRuntimeLib)})
	case "tensorrt":
		w.mu.Lock()
		place := w.place
		w.mu.Unlock()
		if place == nil || place.Device == nil {
			return nil, fmt.Errorf("%w: TensorRT needs a CUDA GPU, and this daemon runs with memory strategy %q (%s)",
				trt.ErrBackend, placeStrategy(place), placeReason(place))
		}
		return newTensorRT(w.log.With("model", m.Name), place, m, c)
	}
	return nil, fmt.Errorf("%w: unknown backend %q", trt.ErrBackend, name)
}

// gpuPreprocess builds a pipeline's GPU preprocessing on the daemon's
// device, reading frames from allocator frames as their placement says
// (in place for NVDEC's pictures in device memory). The compiled kernels are cached in systemd's CacheDirectory
// ($CACHE_DIRECTORY), else state_dir, else the user's cache folder.
func (w *wiring) gpuPreprocess(o preprocess.Options, frames umem.Allocator, c *config.Config) (edruntime.GPUPreprocessor, error) {
	place := w.placementFor(frames)
	if place == nil || place.Device == nil {
		return nil, fmt.Errorf("%w: memory strategy %q (%s)", preprocess.ErrNoGPU, placeStrategy(place), placeReason(place))
	}
	cache, err := kernelCacheDir(c)
	if err != nil {
		w.log.Warn("no kernel cache: the preprocessing kernels are compiled at every start", "err", err)
	}
	g, err := preprocess.NewGPU(o, preprocess.GPUOptions{Placement: place, CacheDir: cache,
		NVRTC: libPath(c, c.GPU.NVRTCLibrary), ReadInPlacePinned: o.Filter != preprocess.Area})
	if err != nil {
		return nil, err
	}
	if ptx := g.PTX(); !ptx.FromCache {
		w.log.Info("preprocessing kernels compiled", "nvrtc", ptx.NVRTC, "arch", ptx.Arch, "cache", cache, "cache_err", ptx.CacheErr)
	}
	return g, nil
}

// kernelCacheDir is where compiled kernels are kept: systemd's
// CacheDirectory, else state_dir/nvrtc (made inside the state folder,
// refused when a symbolic link leads it out), else the user's cache
// folder.
func kernelCacheDir(c *config.Config) (string, error) {
	if d := os.Getenv("CACHE_DIRECTORY"); d != "" {
		return filepath.Join(strings.Split(d, ":")[0], "nvrtc"), nil
	}
	if c.Daemon.StateDir != "" {
		state := c.Resolve(c.Daemon.StateDir)
		if err := os.MkdirAll(state, 0o750); err != nil {
			return "", err
		}
		root, err := os.OpenRoot(state)
		if err != nil {
			return "", err
		}
		defer root.Close()
		if err := root.MkdirAll("nvrtc", 0o750); err != nil {
			return "", fmt.Errorf("%s/nvrtc: %w (a symbolic link out of the state folder is refused)", state, err)
		}
		return filepath.Join(state, "nvrtc"), nil
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "edged", "nvrtc"), nil
	}
	return "", nil
}

func placeStrategy(p *umem.Placement) string {
	if p == nil {
		return "none"
	}
	return string(p.Strategy)
}

func placeReason(p *umem.Placement) string {
	if p == nil {
		return "not opened"
	}
	return p.Reason
}

// camera builds a frame source; MJPEG is decoded on the daemon's GPU
// (nvJPEG) when the frames go to one (see jpegOptions).
func (w *wiring) camera(sc *config.Source, c *config.Config) (sensors.Source, error) {
	return newCamera(sc, c, w.jpegOptions(sc, c))
}

// jpegOptions puts a source's MJPEG decoding on the CUDA device when the
// daemon has one and a pipeline the source feeds may preprocess there:
// nvJPEG writes the decoded frame into the slot (managed or mapped pinned
// memory) that the preprocessing kernels read. Pipelines held to
// preprocess.device = "cpu" keep the CPU decoders.
func (w *wiring) jpegOptions(sc *config.Source, c *config.Config) jpeg.Options {
	w.mu.Lock()
	place := w.place
	w.mu.Unlock()
	if place == nil || place.Device == nil {
		return jpeg.Options{}
	}
	for _, pc := range c.Pipelines {
		if slices.Contains(pc.Cameras(), sc.Name) && pc.Preprocess.Device != "cpu" {
			hw := c.GPU.NVJPEGHardware == nil || *c.GPU.NVJPEGHardware
			// nvJPEG writes the slot itself unless the slot is managed
			// memory the host owns between GPU work (Jetson, or strict
			// mode): then it decodes into device memory and copies.
			direct := place.Strategy != umem.StrategyManaged || (place.Probe.ConcurrentManagedAccess && !c.GPU.Strict)
			return jpeg.Options{GPU: &jpeg.GPU{Device: c.GPU.Device, Library: libPath(c, c.GPU.NVJPEGLibrary), NoHardware: !hw, Direct: direct}}
		}
	}
	return jpeg.Options{}
}

// newCamera builds camera sc by its kind (sourceKinds).
func newCamera(sc *config.Source, c *config.Config, jo jpeg.Options) (sensors.Source, error) {
	k, ok := sourceKinds[sc.Kind]
	if !ok || k.camera == nil {
		return nil, fmt.Errorf("source kind %q is not a camera", sc.Kind)
	}
	pf, err := sensors.ParsePixelFormat(sc.Format)
	if err != nil && sc.Format != "" {
		return nil, err
	}
	return k.camera(sc, c, pf, jo)
}

func newSynthetic(sc *config.Source, _ *config.Config, pf sensors.PixelFormat, jo jpeg.Options) (sensors.Source, error) {
	return synthetic.New(synthetic.Options{Name: sc.Name, Width: sc.Width, Height: sc.Height, Pixel: pf, FPS: sc.FPS,
		Seed: uint64(sc.Seed), PeriodFrames: sc.Period, JPEG: jo})
}

func newV4L2(sc *config.Source, c *config.Config, pf sensors.PixelFormat, jo jpeg.Options) (sensors.Source, error) {
	opts := v4l2.Options{Name: sc.Name, Device: devicePath(sc, c), Width: sc.Width, Height: sc.Height, Pixel: pf, FPS: sc.FPS,
		Buffers: sc.Buffers, Memory: sc.IO, JPEG: jo}
	src, err := v4l2.New(opts)
	if err != nil {
		return nil, err
	}
	return sizedSource{src, v4l2.SlotSizeHint(opts)}, nil
}

func newReplay(sc *config.Source, c *config.Config, pf sensors.PixelFormat, jo jpeg.Options) (sensors.Source, error) {
	path := c.Resolve(sc.Path)
	src, err := replay.New(replay.Options{Name: sc.Name, Path: path, Pixel: pf, FPS: sc.FPS, FreeRun: sc.FreeRun, Loop: sc.Loop, JPEG: jo})
	if err != nil {
		return nil, err
	}
	size, err := replaySlotSize(path, pf)
	if err != nil {
		return nil, err
	}
	return sizedSource{src, size}, nil
}

// sizedSource tells the runtime how large a frame slot the source needs
// before it has started (runtime looks for SlotSize).
type sizedSource struct {
	sensors.Source
	size int
}

func (s sizedSource) SlotSize() int { return s.size }

// WorkBytes passes on what the source allocates besides its slots, for
// the memory check (runtime looks for this method).
func (s sizedSource) WorkBytes() int64 {
	w, ok := s.Source.(interface{ WorkBytes() int64 })
	if !ok {
		return 0
	}
	return w.WorkBytes()
}

// Pacing passes on whether the source waits by design for its next
// frame (runtime looks for sensors.Pacer; the embedding hides it).
func (s sizedSource) Pacing() bool {
	p, ok := s.Source.(sensors.Pacer)
	return ok && p.Pacing()
}

// DecodeLine passes on a replay source's late decoder description.
func (s sizedSource) DecodeLine() string {
	if t, ok := s.Source.(interface{ DecodeLine() string }); ok {
		return t.DecodeLine()
	}
	return ""
}

// SetDecodeTarget passes the engine input size on to an MJPEG source
// (runtime looks for this method; the embedding hides the source's own).
func (s sizedSource) SetDecodeTarget(w, h int, resize string) string {
	if t, ok := s.Source.(interface {
		SetDecodeTarget(w, h int, resize string) string
	}); ok {
		return t.SetDecodeTarget(w, h, resize)
	}
	return ""
}

// Collector passes on the camera's own series (runtime looks for this
// method; the embedding hides the source's own).
func (s sizedSource) Collector() prometheus.Collector {
	if c, ok := s.Source.(interface{ Collector() prometheus.Collector }); ok {
		return c.Collector()
	}
	return noSeries{}
}

// noSeries is the collector of a source kind that has no series of its own.
type noSeries struct{}

func (noSeries) Describe(chan<- *prometheus.Desc) {}
func (noSeries) Collect(chan<- prometheus.Metric) {}

// replaySlotSize is the frame slot a replay source needs: its frame size
// (replayFormat), at least RGB24's for an image folder.
func replaySlotSize(path string, pf sensors.PixelFormat) (int, error) {
	f, dir, err := replayFormat(path, pf)
	if err != nil {
		return 0, err
	}
	if dir {
		return max(f.FrameSize(), f.Width*f.Height*3), nil
	}
	return f.FrameSize(), nil
}

// replayFormat reads a recording's header, or the header of the first
// usable image of a folder (replay.ProbeFolder, dir true), for the frames'
// format.
func replayFormat(path string, pf sensors.PixelFormat) (f sensors.Format, dir bool, _ error) {
	st, err := os.Stat(path)
	if err != nil {
		return f, false, fmt.Errorf("replay %s: %w", path, err)
	}
	if st.IsDir() {
		f, err := replay.ProbeFolder(path, pf)
		return f, true, err
	}
	fh, _, err := regfile.Open(path, regfile.NoLimit)
	if err != nil {
		return f, false, err
	}
	defer fh.Close()
	hdr := make([]byte, 32)
	if _, err := io.ReadFull(fh, hdr); err != nil {
		return f, false, fmt.Errorf("replay %s: reading the header: %w", path, err)
	}
	h, err := replay.ParseHeader(hdr)
	if err != nil {
		return f, false, fmt.Errorf("replay %s: %w", path, err)
	}
	return h.Format, false, nil
}

func newSensor(sc *config.Source, c *config.Config) (sensors.SampleSource, error) {
	src, err := serialsrc.New(serialsrc.Options{Name: sc.Name, Device: devicePath(sc, c), Baud: sc.Baud, Protocol: sc.Protocol, Columns: sc.Columns})
	if err != nil {
		return nil, err
	}
	return serialSensor{src}, nil
}

// serialSensor tells the runtime, for metrics, what a serial sensor
// refused (runtime looks for RejectedLines).
type serialSensor struct{ *serialsrc.Source }

// RejectedLines counts the lines or packets the sensor refused, by reason.
func (s serialSensor) RejectedLines() map[string]uint64 {
	st := s.Stats()
	return map[string]uint64{"checksum": st.Checksum, "malformed": st.Malformed, "oversize": st.Oversize}
}

// newSink builds sink s by its kind (sinkKinds).
func newSink(log *slog.Logger, s *config.Sink, c *config.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
	k, ok := sinkKinds[s.Kind]
	if !ok {
		return nil, errors.New("sink kind " + s.Kind + " is not available in this build")
	}
	return k.build(log, s, c, inherited, control)
}

// newSocketSink builds a socket sink: its listener (or the one systemd
// passed), control requests handed to the daemon, client events logged.
func newSocketSink(log *slog.Logger, s *config.Sink, c *config.Config, inherited net.Listener, control edruntime.ControlFunc) (edruntime.Sink, error) {
	lg := log.With("sink", s.Name)
	var rl ratelog.Limiter
	o, err := socketOptions(s, c)
	if err != nil {
		return nil, err
	}
	o.Listener = inherited
	o.OnControl = func(ctx context.Context, req stream.ControlRequest, peer socketsink.PeerCred) error {
		rl.Log(lg, slog.LevelInfo, "control", "control request", "request", req.Reload, "peer_uid", peer.UID, "peer_pid", peer.PID)
		return control(ctx, req.Reload)
	}
	o.OnClient = socketsink.LogClients(lg)
	sock, err := socketsink.New(o)
	if err != nil {
		return nil, err
	}
	if inherited != nil {
		lg.Info("socket sink listening (socket activation)", "path", sock.Path())
	} else {
		lg.Info("socket sink listening", "path", sock.Path(), "mode", fmt.Sprintf("%04o", o.Mode), "group", s.Group)
	}
	return sock, nil
}

// newSerialSink builds a serial sink; its port events are logged.
func newSerialSink(log *slog.Logger, s *config.Sink, c *config.Config, _ net.Listener, _ edruntime.ControlFunc) (edruntime.Sink, error) {
	lg := log.With("sink", s.Name, "device", s.Device)
	o := serialSinkOptions(s, c)
	o.OnEvent = serialsink.LogEvents(lg)
	ser, err := serialsink.New(o)
	if err != nil {
		return nil, err
	}
	return ser, nil
}

// socketOptions are the options of socket sink s, as run makes them and
// check probes them: the path resolved against the configuration's
// folder, no callbacks, no inherited listener.
func socketOptions(s *config.Sink, c *config.Config) (socketsink.Options, error) {
	enc, err := stream.ParseEncoding(s.Format)
	if err != nil {
		return socketsink.Options{}, err
	}
	mode, err := config.ParseMode(s.Mode)
	if err != nil {
		return socketsink.Options{}, err
	}
	return socketsink.Options{
		Name: s.Name, Path: c.Resolve(s.Path), NoActivation: true, Device: c.Daemon.DeviceID,
		Mode: mode, Group: s.Group, Encoding: enc, MaxClients: s.MaxClients, MaxClientsPerUID: s.MaxClientsPerUID, QueueLen: s.ClientQueue,
		WriteTimeout: s.WriteTimeout.Duration, Keepalive: s.Keepalive.Duration, FlushTimeout: c.Daemon.StopTimeout.Duration / 2,
		AllowUIDs: u32s(s.AllowUIDs), AllowGIDs: u32s(s.AllowGIDs),
	}, nil
}

// serialSinkOptions are the options of serial sink s, as run makes them
// and check probes them.
func serialSinkOptions(s *config.Sink, c *config.Config) serialsink.Options {
	return serialsink.Options{
		Name: s.Name, Device: c.Resolve(s.Device), Baud: s.Baud, DataBits: s.DataBits, Parity: s.Parity, StopBits: s.StopBits,
		Format: s.Format, QueueLen: s.Queue, MaxFrameBytes: s.MaxFrameBytes, FlushTimeout: c.Daemon.StopTimeout.Duration / 2,
	}
}

// devicePath is the device node of a V4L2 camera or a serial sensor,
// resolved as every path of the configuration is.
func devicePath(sc *config.Source, c *config.Config) string { return c.Resolve(sc.Device) }

func u32s(v []int) []uint32 {
	out := make([]uint32, 0, len(v))
	for _, x := range v {
		out = append(out, uint32(x))
	}
	return out
}

// libPath resolves a library setting: a bare soname ("libnvrtc.so.13") is
// left to the dynamic loader's search, a path is taken relative to the
// configuration file.
func libPath(c *config.Config, lib string) string {
	if !strings.Contains(lib, "/") {
		return lib
	}
	return c.Resolve(lib)
}

// newMQTTSink builds an MQTT sink; its on-disk queue is
// state_dir/mqtt/<sink>/ (memory only without a state folder).
func newMQTTSink(log *slog.Logger, s *config.Sink, c *config.Config, _ net.Listener, _ edruntime.ControlFunc) (edruntime.Sink, error) {
	o, err := mqttOptions(s, c)
	if err != nil {
		return nil, err
	}
	lg := log.With("sink", s.Name, "url", o.URL.Redacted())
	if o.Dir == "" {
		lg.Warn("no state folder (daemon.state_dir or systemd's StateDirectory=): the MQTT queue is kept in memory only and lost on restart")
	}
	o.OnEvent = mqttsink.LogEvents(lg, o.Dir)
	sink, err := mqttsink.New(o)
	if err != nil {
		return nil, err
	}
	lg.Info("mqtt sink started", "topic", s.Topic, "status_topic", s.StatusTopic, "qos", *s.QoS, "format", o.Encoding.String(), "queue_dir", o.Dir, "first_seq", sink.Stats().FirstSeq)
	return sink, nil
}

// mqttOptions are the options of MQTT sink s, as run makes them and check
// probes them: the password and the TLS settings from the bytes of
// password_file and the CA and client certificate files, read once per
// loaded configuration (CheckFiles: so the sink is built from the bytes
// its reload was compared by), the queue in state_dir/mqtt/<sink>/ (""
// without a state folder); no callbacks.
func mqttOptions(s *config.Sink, c *config.Config) (mqttsink.Options, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return mqttsink.Options{}, fmt.Errorf("url %q: %w", s.URL, err)
	}
	enc, err := stream.ParseEncoding(s.Format)
	if err != nil {
		return mqttsink.Options{}, err
	}
	o := mqttsink.Options{
		Name: s.Name, URL: u, Device: c.Daemon.DeviceID, Topic: s.Topic, StatusTopic: s.StatusTopic,
		QoS: byte(*s.QoS), Encoding: enc, ClientID: s.ClientID, Username: s.Username,
		QueueLen: s.Queue, QueueBytes: s.QueueBytes, Keepalive: s.Keepalive.Duration,
		ConnectTimeout: s.ConnectTimeout.Duration, AckTimeout: s.AckTimeout.Duration,
		FlushTimeout: c.Daemon.StopTimeout.Duration / 2,
	}
	pem := func(key, path string, limit int64) (mqttsink.PEM, error) {
		if path == "" {
			return mqttsink.PEM{}, nil
		}
		b, err := c.ReadNamed(path, limit)
		if err != nil {
			return mqttsink.PEM{}, fmt.Errorf("%s: %w", key, err)
		}
		return mqttsink.PEM{Name: c.Resolve(path), Data: b}, nil
	}
	if s.PasswordFile != "" {
		f, err := pem("password_file", s.PasswordFile, config.MaxPasswordFileBytes)
		if err != nil {
			return mqttsink.Options{}, err
		}
		o.Password = mqttsink.Password(f.Data)
	}
	if u.Scheme == "mqtts" {
		var files [3]mqttsink.PEM
		for i, f := range []struct{ key, path string }{{"ca_file", s.CAFile}, {"cert_file", s.CertFile}, {"key_file", s.KeyFile}} {
			if files[i], err = pem(f.key, f.path, config.MaxPEMFileBytes); err != nil {
				return mqttsink.Options{}, err
			}
		}
		if o.TLS, err = mqttsink.TLSConfig(files[0], files[1], files[2]); err != nil {
			return mqttsink.Options{}, err
		}
	}
	if dir := edruntime.StateDir(c); dir != "" {
		o.Dir, o.Root = filepath.Join(dir, "mqtt", s.Name), dir
	}
	return o, nil
}
