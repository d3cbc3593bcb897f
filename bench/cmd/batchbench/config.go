package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edged-dev/edged/bench/internal/onnxmodel"
)

// The ways N cameras reach the model.
const (
	wayOwn     = "own"     // a pipeline and a [[model]] table per camera: an engine (session) each
	wayShared  = "shared"  // a pipeline per camera on one [[model]]: one session, an engine per pipeline on it
	wayBatched = "batched" // one pipeline, sources = [...]: one inference of up to N frames
)

// buffers is every camera's buffers key; a camera's frame pool is
// poolSlots slots of a frame (runtime's poolSlots: buffers + 2 + mailbox 1).
const (
	buffers   = 4
	poolSlots = buffers + 2 + 1
	poolBytes = poolSlots * frameBytes
)

// saturationQueue is the queue of the free-running runs' pipelines: a
// replay source that runs free into a pipeline of schedule = "latest"
// fills frames as fast as the CPU copies them, only to replace them (1000
// frames a second, 4 GB/s of copying, taking the CPU from inference); in
// a queue each frame waits for the pipeline, so results/s is what the
// pipelines can do and no frame is lost.
const saturationQueue = 4

// caseSpec is one run of the daemon.
type caseSpec struct {
	Way     string
	N       int
	Phase   string // paced | saturation | stalled
	FPS     float64
	Wait    time.Duration // batch_wait of the batched way
	Threads int           // ONNX Runtime intra-op threads of the model
	Device  string        // [pipeline.preprocess] device; "" leaves it out (auto)
	// Profiled runs are perf's: their figures are not the tables' (perf
	// takes CPU from the daemon), only their profile is reported.
	Profiled bool `json:",omitempty"`
}

// Phases of a case.
const (
	phasePaced      = "paced"      // every camera at FPS
	phaseSaturation = "saturation" // every camera free-running: as fast as its pipeline takes frames
	phaseStalled    = "stalled"    // paced, and the last camera stops delivering (inputs.Stalled)
)

func (c caseSpec) name() string {
	if c.Profiled {
		return fmt.Sprintf("%s-n%d-%s-profiled", c.Way, c.N, c.Phase)
	}
	return fmt.Sprintf("%s-n%d-%s", c.Way, c.N, c.Phase)
}

// cameraName is camera i's source name; pipelineName its pipeline's when
// it has one of its own.
func cameraName(i int) string   { return fmt.Sprintf("cam%d", i) }
func pipelineName(i int) string { return fmt.Sprintf("p%d", i) }

// configText is the daemon's configuration of the case.
func configText(c caseSpec, in inputs, sock, ortLib string) string {
	var b strings.Builder
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	fmt.Fprintf(&b, "# written by batchbench: %s\n[daemon]\nlog_level = \"info\"\nstall_timeout = \"10m\"\n", c.name())
	if ortLib != "" {
		fmt.Fprintf(&b, "onnxruntime_lib = %s\n", q(ortLib))
	}
	fmt.Fprintf(&b, "\n[[sink]]\nname = \"out\"\nkind = \"socket\"\npath = %s\nclient_queue = 4096\n", q(sock))
	for i := range c.N {
		path, pace := in.Noisy, fmt.Sprintf("loop = true\nfps = %g", c.FPS)
		switch {
		case c.Phase == phaseSaturation:
			pace = "loop = true\nfree_run = true"
		case c.Phase == phaseStalled && i == c.N-1:
			path, pace = in.Stalled, "loop = false # its recorded pace: then nothing for an hour"
		}
		fmt.Fprintf(&b, "\n[[source]]\nname = %q\nkind = \"replay\"\npath = %s\n%s\nbuffers = %d\n", cameraName(i), q(path), pace, buffers)
	}
	models := 1
	if c.Way == wayOwn {
		models = c.N
	}
	for i := range models {
		fmt.Fprintf(&b, "\n[[model]]\nname = \"m%d\"\npath = %s\nbackend = \"onnx\"\nreload = false\nthreads = %d\n", i, q(in.Model), c.Threads)
	}
	// Free-running cameras deliver as fast as their pipeline takes frames
	// (a queue holds them back); paced ones as cameras do (the newest
	// frame wins).
	schedule := "schedule = \"latest\""
	if c.Phase == phaseSaturation {
		schedule = fmt.Sprintf("schedule = \"queue\"\nqueue = %d", saturationQueue)
	}
	pipeline := func(name, sources, model string) {
		fmt.Fprintf(&b, "\n[[pipeline]]\nname = %q\n%s\nmodel = %q\nsinks = [\"out\"]\n%s\n", name, sources, model, schedule)
		fmt.Fprintf(&b, "\n[pipeline.preprocess]\ninput = %q\nresize = \"stretch\"\ncolor = \"rgb\"\nwidth = %d\nheight = %d\nthreads = 1\n", onnxmodel.InputName, onnxmodel.Size, onnxmodel.Size)
		if c.Device != "" {
			fmt.Fprintf(&b, "device = %q\n", c.Device)
		}
		fmt.Fprintf(&b, "\n[[pipeline.postprocess]]\noutput = %q\nkind = \"topk\"\nk = 1\n", onnxmodel.OutputName)
	}
	if c.Way == wayBatched {
		names := make([]string, c.N)
		for i := range names {
			names[i] = q(cameraName(i))
		}
		pipeline("batched", fmt.Sprintf("sources = [%s]\nbatch = %d\nbatch_wait = %q", strings.Join(names, ", "), c.N, c.Wait), "m0")
		return b.String()
	}
	for i := range c.N {
		model := "m0"
		if c.Way == wayOwn {
			model = fmt.Sprintf("m%d", i)
		}
		pipeline(pipelineName(i), fmt.Sprintf("source = %q", cameraName(i)), model)
	}
	return b.String()
}
