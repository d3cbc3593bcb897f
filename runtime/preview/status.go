package preview

import (
	"net/url"
	"time"
)

// Status is what the page shows beside the pictures (GET /status.json):
// the daemon fills it in (Options.Status), the hub adds the pictures'
// addresses and viewers.
type Status struct {
	Device    string     `json:"device"`
	Version   string     `json:"version"`
	Time      time.Time  `json:"time"`
	Preview   Summary    `json:"preview"`
	Pipelines []Pipeline `json:"pipelines"`
	Board     *Board     `json:"board,omitempty"`
	// Problem says why the daemon cannot do what its configuration says
	// (a pipeline that failed to restart), "" otherwise.
	Problem string `json:"problem,omitempty"`
}

// Summary is the preview's own state.
type Summary struct {
	Enabled bool    `json:"enabled"`
	FPS     float64 `json:"fps"`
	Width   int     `json:"width"`
	Clients int     `json:"clients"`
	Encoder string  `json:"encoder,omitempty"` // the JPEG encoder serving, once one has
	Warning string  `json:"warning,omitempty"`
}

// Pipeline is one pipeline's health.
type Pipeline struct {
	Name  string `json:"name"`
	State string `json:"state"` // starting, waiting, running, failed
	// Reason says why a pipeline waits or failed, or why it is slow.
	Reason    string   `json:"reason,omitempty"`
	Sources   []Source `json:"sources"`
	FPS       float64  `json:"fps"`           // results a second over the latency window
	Requested float64  `json:"requested_fps"` // the source's fps (0: as fast as it goes)
	Latency   *Latency `json:"latency,omitempty"`
	Engine    *Engine  `json:"engine,omitempty"`
	Throttled string   `json:"throttled,omitempty"` // "18 of 30 fps, gpu-thermal throttling at 98.5 °C"
	Results   uint64   `json:"results"`
	Dropped   uint64   `json:"dropped"`
}

// Latency is capture-to-result latency over a recent window.
type Latency struct {
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	Window  float64 `json:"window_s"` // the window's length
	Results uint64  `json:"results"`  // results in it
}

// Engine is the engine generation serving.
type Engine struct {
	Model      string `json:"model"`
	Backend    string `json:"backend"`
	Generation uint64 `json:"generation"`
	SHA256     string `json:"sha256"`
}

// Source is a camera of a pipeline, with its picture.
type Source struct {
	Name   string `json:"name"`
	Up     bool   `json:"up"`
	Reason string `json:"reason,omitempty"` // why it is down
	Format string `json:"format,omitempty"`
	// Picture and Stream are the addresses of its .jpg and .mjpeg, and
	// Viewers how many watch now (the hub fills them in).
	Picture string `json:"picture"`
	Stream  string `json:"stream"`
	Viewers int    `json:"viewers"`
	// Skipped counts frames the preview could not show, Why says why.
	Skipped uint64 `json:"skipped,omitempty"`
	Why     string `json:"why,omitempty"`
}

// Board is the board's health.
type Board struct {
	PowerMode  string   `json:"power_mode,omitempty"`
	Throttling []string `json:"throttling,omitempty"`
	Pressure   string   `json:"pressure,omitempty"`
	Zones      []Zone   `json:"zones,omitempty"`
	GPULoad    *float64 `json:"gpu_load,omitempty"` // 0..1
	MemAvail   uint64   `json:"memory_available_bytes,omitempty"`
	MemTotal   uint64   `json:"memory_total_bytes,omitempty"`
	Rails      []Rail   `json:"rails,omitempty"`
}

// Zone is a thermal zone.
type Zone struct {
	Name    string   `json:"name"`
	Celsius float64  `json:"celsius"`
	Passive *float64 `json:"passive,omitempty"` // the first passive trip point
}

// Rail is a power monitor's channel.
type Rail struct {
	Name  string  `json:"name"`
	Watts float64 `json:"watts"`
}

// PicturePath is the address of picture k with ext (".jpg" or
// ".mjpeg"): /preview/<pipeline>/<source><ext>.
func PicturePath(k Key, ext string) string {
	return "/preview/" + url.PathEscape(k.Pipeline) + "/" + url.PathEscape(k.Source) + ext
}

// status is the daemon's status with the hub's part filled in.
func (h *Hub) status() Status {
	var st Status
	if h.opts.Status != nil {
		st = h.opts.Status()
	}
	s := h.settings()
	st.Preview = Summary{Enabled: s.Enabled, FPS: s.FPS, Width: s.Width, Clients: s.Clients}
	if b := h.encInfo.Load(); b != nil {
		st.Preview.Encoder, st.Preview.Warning = b.Name, b.Warning
	}
	for i := range st.Pipelines {
		p := &st.Pipelines[i]
		for j := range p.Sources {
			src := &p.Sources[j]
			k := Key{p.Name, src.Name}
			src.Picture, src.Stream = PicturePath(k, ".jpg"), PicturePath(k, ".mjpeg")
			h.mu.Lock()
			t := h.taps[k]
			h.mu.Unlock()
			if t != nil {
				src.Viewers = t.Viewers()
				src.Skipped, src.Why = t.Skipped()
			}
		}
	}
	return st
}
