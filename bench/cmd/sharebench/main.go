package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edged-dev/edged/bench/internal/onnxmodel"
	"github.com/edged-dev/edged/internal/procfs"
	"github.com/edged-dev/edged/runtime"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/synthetic"
	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/onnx"
	"github.com/edged-dev/edged/umem"
)

// Camera geometry: one pool is (buffers + 2 + mailbox 1) slots of a frame.
const (
	width, height = 1920, 1080
	buffers       = 4
	fps           = 15
)

// poolBytes is one camera's frame pool (runtime's poolSlots × SlotSize).
const poolBytes = (buffers + 2 + 1) * width * height * 2

// result is what a child reports.
type result struct {
	N          int     `json:"n"`
	Shared     bool    `json:"shared"`
	RSS        int64   `json:"rss_bytes"`
	HWM        int64   `json:"hwm_bytes"`
	ResultsPS  float64 `json:"results_per_s"`
	ModelBytes int     `json:"model_bytes"`
	Loads      int     `json:"loads"`
}

// The source kind its configurations use, for config.Parse (the binary
// registers every kind, cmd/edged/kinds.go).
func init() {
	config.RegisterSourceKinds(synthetic.SourceKind)
	config.RegisterSinkKinds(socketsink.SinkKind)
}

func main() {
	var (
		ns     = flag.String("n", "1,2,4,8", "pipeline counts")
		hidden = flag.Int("hidden", 4096, "hidden units of the benchmark classifier (weights: hidden × 1000 × 4 bytes)")
		settle = flag.Duration("settle", 3*time.Second, "running time before sampling, after every pipeline has results")
		sample = flag.Duration("sample", 2*time.Second, "VmRSS sampling window (every 100 ms)")
		repeat = flag.Int("repeat", 3, "runs of each case, interleaved; the median is reported")
		child  = flag.Bool("child", false, "run one case (internal)")
		n      = flag.Int("case-n", 1, "pipelines of the case (internal)")
		shared = flag.Bool("case-shared", true, "share the model (internal)")
	)
	flag.Parse()
	if *child {
		r, err := runCase(*n, *shared, *hidden, *settle, *sample)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sharebench:", err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	var counts []int
	for _, f := range strings.Split(*ns, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "sharebench: -n %q: %v\n", *ns, err)
			os.Exit(2)
		}
		counts = append(counts, v)
	}
	os.Exit(parent(counts, *hidden, *settle, *sample, max(*repeat, 1)))
}

func parent(counts []int, hidden int, settle, sample time.Duration, repeat int) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharebench:", err)
		return 1
	}
	runs := map[[2]int][]result{} // {n, shared} -> every run
	for rep := range repeat {
		for _, n := range counts {
			for _, sh := range []bool{true, false} {
				cmd := exec.Command(self, "-child", "-case-n", fmt.Sprint(n), "-case-shared="+fmt.Sprint(sh),
					"-hidden", fmt.Sprint(hidden), "-settle", settle.String(), "-sample", sample.String())
				cmd.Stderr = os.Stderr
				out, err := cmd.Output()
				var r result
				if err == nil {
					err = json.Unmarshal(out, &r)
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "sharebench: case n=%d shared=%v: %v\n", n, sh, err)
					return 1
				}
				runs[[2]int{n, b2i(sh)}] = append(runs[[2]int{n, b2i(sh)}], r)
				fmt.Fprintf(os.Stderr, "sharebench: run %d n=%d shared=%v: RSS %.1f MiB, HWM %.1f MiB, %.1f results/s, %d model loads\n",
					rep+1, n, sh, mib(r.RSS), mib(r.HWM), r.ResultsPS, r.Loads)
			}
		}
	}
	res := map[[2]int]result{}
	spread := map[[2]int][2]int64{}
	for k, rs := range runs {
		slices.SortFunc(rs, func(a, b result) int { return int(a.RSS - b.RSS) })
		res[k] = rs[len(rs)/2]
		spread[k] = [2]int64{rs[0].RSS, rs[len(rs)-1].RSS}
	}
	mb := res[[2]int{counts[0], 1}].ModelBytes
	fmt.Printf("sharebench: %d×%d YUYV synthetic cameras at %d fps, ONNX Runtime CPU, classifier with %d hidden units (model file %.1f MiB); one camera's frame pool %.1f MiB (%d slots); median of %d runs (range)\n\n",
		width, height, fps, hidden, mib(int64(mb)), mib(poolBytes), buffers+3, repeat)
	fmt.Println("| pipelines | shared: RSS MiB | loads | results/s | separate: RSS MiB | loads | results/s | shared / separate RSS |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range counts {
		s, p := res[[2]int{n, 1}], res[[2]int{n, 0}]
		ss, ps := spread[[2]int{n, 1}], spread[[2]int{n, 0}]
		fmt.Printf("| %d | %.1f (%.1f–%.1f) | %d | %.1f | %.1f (%.1f–%.1f) | %d | %.1f | %.3f |\n", n, mib(s.RSS), mib(ss[0]), mib(ss[1]), s.Loads, s.ResultsPS,
			mib(p.RSS), mib(ps[0]), mib(ps[1]), p.Loads, p.ResultsPS, float64(s.RSS)/float64(p.RSS))
	}
	lo, hi := counts[0], counts[len(counts)-1]
	if lo == hi {
		return 0
	}
	k := hi - lo
	bound := float64(k) * poolBytes * 1.1
	code := 0
	for _, sh := range []int{1, 0} {
		d := res[[2]int{hi, sh}].RSS - res[[2]int{lo, sh}].RSS
		verdict := "holds"
		if float64(d) > bound {
			verdict = "does not hold"
			if sh == 1 {
				code = 1
			}
		}
		name := map[int]string{1: "shared", 0: "separate"}[sh]
		fmt.Printf("\n%s: RSS(%d) − RSS(%d) = %.1f MiB; bound %d × %.1f MiB × 1.1 = %.1f MiB: %s (%.1f MiB per added pipeline, the frame pool is %.1f MiB)",
			name, hi, lo, mib(d), k, mib(poolBytes), mib(int64(bound)), verdict, mib(d)/float64(k), mib(poolBytes))
	}
	fmt.Println()
	return code
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// runCase runs the daemon with n pipelines on one model and measures it.
func runCase(n int, shared bool, hidden int, settle, sample time.Duration) (result, error) {
	r := result{N: n, Shared: shared}
	model, err := onnxmodel.Build(onnxmodel.Options{Hidden: hidden})
	if err != nil {
		return r, err
	}
	r.ModelBytes = len(model)
	dir, err := os.MkdirTemp("", "sharebench")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(path, model, 0o644); err != nil {
		return r, err
	}
	cfg, err := config.Parse(filepath.Join(dir, "edged.toml"), []byte(configText(n, path, filepath.Join(dir, "edged.sock"))))
	if err != nil {
		return r, err
	}
	ort, err := onnx.New(onnx.Options{})
	if err != nil {
		return r, err
	}
	be := &counting{Backend: ort, shared: shared}
	sink := &counter{seen: map[string]int{}}
	d, err := runtime.New(runtime.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Factories: runtime.Factories{
			Allocator: func(config.GPU) (umem.Allocator, string, error) { return umem.NewHost(), "bench", nil },
			Camera:    func(sc *config.Source, _ *config.Config) (sensors.Source, error) { return camera(sc) },
			Sensor: func(*config.Source, *config.Config) (sensors.SampleSource, error) {
				return nil, fmt.Errorf("no sensors")
			},
			Backend: func(string, *config.Model, *config.Config) (trt.Backend, error) { return be, nil },
			Sink: func(*config.Sink, *config.Config, net.Listener, runtime.ControlFunc) (runtime.Sink, error) {
				return sink, nil
			},
		}})
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(2 * time.Minute)
	for sink.pipelines() < n {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("only %d of %d pipelines produced results in 2 minutes", sink.pipelines(), n)
		}
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("Run returned nil")
			}
			return r, fmt.Errorf("the daemon ended before every pipeline had results: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	time.Sleep(settle)
	// What is resident, not garbage the collector has not reached yet:
	// the Go heap's timing would otherwise decide a difference of tens of
	// MiB between two runs of the same case.
	debug.FreeOSMemory()
	from, t0 := sink.total(), time.Now()
	var rss []int64
	for end := time.Now().Add(sample); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		m, err := procfs.ReadMem(os.Getpid())
		if err != nil {
			return r, err
		}
		rss = append(rss, m.RSSBytes())
		r.HWM = int64(m.HWM) << 10
	}
	r.ResultsPS = float64(sink.total()-from) / time.Since(t0).Seconds()
	slices.Sort(rss)
	r.RSS = rss[len(rss)/2]
	r.Loads = be.loads()
	return r, nil
}

// camera is a case's camera for its source table.
func camera(sc *config.Source) (sensors.Source, error) {
	return synthetic.New(synthetic.Options{Name: sc.Name, Width: sc.Width, Height: sc.Height, Pixel: sensors.YUYV, FPS: sc.FPS, Seed: uint64(sc.Seed)})
}

func configText(n int, model, sock string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "[daemon]\nlog_level = \"warn\"\n\n[[model]]\nname = \"m\"\npath = %q\nreload = false\n\n[[sink]]\nname = \"null\"\nkind = \"socket\"\npath = %q\n", model, sock)
	for i := range n {
		fmt.Fprintf(&b, `
[[source]]
name = "cam%[1]d"
kind = "synthetic"
width = %[2]d
height = %[3]d
format = "YUYV"
fps = %[4]d.0
buffers = %[5]d
seed = %[6]d

[[pipeline]]
name = "p%[1]d"
source = "cam%[1]d"
model = "m"
sinks = ["null"]
schedule = "latest"

[pipeline.preprocess]
threads = 1

[[pipeline.postprocess]]
output = %[7]q
kind = "topk"
k = 1
`, i, width, height, fps, buffers, i+1, onnxmodel.OutputName)
	}
	return b.String()
}

// counting counts the models it loads; unless shared, its engines cannot
// share (trt.Sharer is hidden), so every pipeline loads the model itself,
// as before engines were shared.
type counting struct {
	trt.Backend
	shared bool
	mu     sync.Mutex
	n      int
}

func (b *counting) Load(ctx context.Context, model []byte, o trt.LoadOptions) (trt.Engine, error) {
	e, err := b.Backend.Load(ctx, model, o)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	if b.shared {
		return e, nil
	}
	return separate{e}, nil
}

func (b *counting) loads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// separate is an engine that does not share its model.
type separate struct{ trt.Engine }

func (e separate) Metadata() *trt.Metadata { return trt.MetadataOf(e.Engine) }

// counter is a sink that counts results per pipeline.
type counter struct {
	mu   sync.Mutex
	seen map[string]int
	n    int
}

func (c *counter) Publish(r *stream.Record) {
	if r.Kind != stream.KindResult {
		return
	}
	c.mu.Lock()
	c.seen[r.Pipeline]++
	c.n++
	c.mu.Unlock()
}
func (c *counter) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (c *counter) Close() error                  { return nil }
func (c *counter) pipelines() int                { c.mu.Lock(); defer c.mu.Unlock(); return len(c.seen) }
func (c *counter) total() int                    { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

var _ io.Closer = (*counter)(nil)
