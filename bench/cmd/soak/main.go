package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	edged, ortLib, out, machine string
	duration                    time.Duration
	fps                         float64
	width, height               int
	modelEvery, hupEvery        time.Duration
	reloadEvery, unplugEvery    time.Duration
	writeTimeout                time.Duration
	junkEvery, readers          int
	seed                        uint64
	keep                        bool
	mqtt, replay                bool
	brokerEvery, brokerDown     time.Duration
	replayEvery                 time.Duration
	tol                         Tolerances
}

// soak is one run.
type soak struct {
	o                               options
	dir, out                        string
	sock, cfgPath, modelPath        string
	metricsAddr                     string
	variants                        []variant
	edged                           *edgedProc
	scr                             *scraper
	mon                             *monitor
	imu, uart                       *serialDev
	mqtt                            *mqttPart
	mqttSum                         *MQTTSum
	imuSent                         atomic.Int64
	uartSt                          uartStats
	t0                              time.Time
	rngMu                           sync.Mutex
	rng                             *rand.Rand
	latestMu                        sync.Mutex
	latest                          *metrics
	rows                            []Row // the sampler's, read after it stopped
	mu                              sync.Mutex
	problems, notes                 []string
	counts                          map[string]int
	times                           map[string][]float64
	exitCode                        int
	phase                           atomic.Int32
	stopTook                        time.Duration
	stopKilled, exitedEarly, interr bool
}

func main() {
	o := options{tol: DefaultTolerances}
	flag.StringVar(&o.edged, "edged", "bin/edged", "the edged binary (built by make build, with libonnxruntime.so.1 next to it)")
	flag.StringVar(&o.ortLib, "ort-lib", "", "libonnxruntime.so.1 for edged (default: edged's own search: next to the binary, ...)")
	flag.StringVar(&o.out, "out", "", "report folder (default bin/soak-report/<UTC time>)")
	flag.StringVar(&o.machine, "machine", "", "a few words on the machine, for the summary (e.g. \"dev VM, 2 cores, shared\")")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the churn runs, after edged is ready")
	flag.Float64Var(&o.fps, "fps", 100, "the synthetic camera's rate (SIGHUP churn alternates it with 0.8 × this)")
	flag.IntVar(&o.width, "width", 640, "camera frame width")
	flag.IntVar(&o.height, "height", 480, "camera frame height")
	flag.DurationVar(&o.modelEvery, "model-every", 3*time.Second, "a model variant is renamed into place this often (±25 %)")
	flag.IntVar(&o.junkEvery, "junk-every", 5, "every Nth model change is preceded by a junk file that must be rejected (0 = never)")
	flag.DurationVar(&o.hupEvery, "hup-every", 20*time.Second, "SIGHUP this often (±25 %); every other one changes the camera's rate")
	flag.DurationVar(&o.reloadEvery, "reload-every", 15*time.Second, "`edged reload` this often (±25 %)")
	flag.DurationVar(&o.unplugEvery, "unplug-every", 30*time.Second, "each pty (serial sensor, serial sink) is unplugged and replugged this often (±25 %)")
	flag.DurationVar(&o.writeTimeout, "write-timeout", 5*time.Second, "the socket sink's write_timeout (a client that never reads is held this long + 3 s)")
	flag.IntVar(&o.readers, "readers", 3, "socket clients that connect, read 20-500 records and leave, in a loop")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the churn's random choices (0 = from the clock; the summary prints it)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary folder (config, models, state, socket)")
	flag.BoolVar(&o.mqtt, "mqtt", true, "an MQTT sink to a local Mosquitto (needs mosquitto), stopped and started again during the soak")
	flag.DurationVar(&o.brokerEvery, "broker-every", 60*time.Second, "the broker is stopped this often (±25 %)")
	flag.DurationVar(&o.brokerDown, "broker-down", 5*time.Second, "... for this long")
	flag.BoolVar(&o.replay, "replay", true, "a second pipeline replaying a recording that is replaced under edged")
	flag.DurationVar(&o.replayEvery, "replay-every", 40*time.Second, "the recording is replaced this often (±25 %)")
	flag.Float64Var(&o.tol.Warmup, "warmup", o.tol.Warmup, "fraction of the run ignored before the first window")
	flag.Float64Var(&o.tol.Window, "window", o.tol.Window, "fraction of the run in each compared window")
	flag.Float64Var(&o.tol.RSSFrac, "rss-frac", o.tol.RSSFrac, "RSS may grow by this fraction of the first window's median ...")
	flag.Float64Var(&o.tol.RSSMiB, "rss-mib", o.tol.RSSMiB, "... or by this many MiB, whichever is larger")
	flag.Float64Var(&o.tol.FDs, "fds", o.tol.FDs, "open fds may grow by this many")
	flag.Float64Var(&o.tol.Goroutines, "goroutines", o.tol.Goroutines, "goroutines may grow by this many")
	flag.Float64Var(&o.tol.MaxStall, "max-stall", o.tol.MaxStall, "seconds results may stop flowing")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if o.out == "" {
		o.out = filepath.Join("bin", "soak-report", time.Now().UTC().Format("20060102T150405Z"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// Phases of a run, in samples.csv.
const (
	phaseQuietBefore = iota
	phaseChurn
	phaseQuietAfter
)

var phaseNames = []string{"quiet", "churn", "quiet-after"}

// quietFor is how long edged is sampled before the churn starts and after
// it ends, with only the monitor client connected.
const quietFor = 5 * time.Second

func run(ctx context.Context, o options) (bool, error) {
	if _, err := os.Stat(o.edged); err != nil {
		return false, fmt.Errorf("%w (run make build first)", err)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "edged-soak-")
	if err != nil {
		return false, err
	}
	if o.keep {
		fmt.Printf("soak: temporary folder %s (kept)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	s := &soak{
		o: o, dir: dir, out: o.out,
		sock:      filepath.Join(dir, "edged.sock"),
		cfgPath:   filepath.Join(dir, "edged.toml"),
		modelPath: filepath.Join(dir, "models", "demo.onnx"),
		rng:       rand.New(rand.NewPCG(o.seed, 24)),
		counts:    map[string]int{},
		times:     map[string][]float64{},
	}
	for _, d := range []string{"models", "state", "dev", "variants", "recordings", "mosquitto"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return false, err
		}
	}
	if s.variants, err = makeVariants(o.edged, filepath.Join(dir, "variants")); err != nil {
		return false, err
	}
	if err := s.writeModel(s.variants[0].data); err != nil {
		return false, err
	}
	// A free loopback port for /metrics.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	s.metricsAddr = ln.Addr().String()
	ln.Close()
	s.scr = newScraper(s.metricsAddr)

	s.imu = &serialDev{name: "sensor", link: filepath.Join(dir, "dev", "imu"), run: imuRun(200, &s.imuSent)}
	s.uart = &serialDev{name: "sink", link: filepath.Join(dir, "dev", "uart"), run: uartRun(&s.uartSt)}
	if err := s.imu.plug(); err != nil {
		return false, err
	}
	defer s.imu.unplug()
	if err := s.uart.plug(); err != nil {
		return false, err
	}
	defer s.uart.unplug()
	if o.mqtt {
		if s.mqtt, err = startMQTT(mqttBrokerDir(dir)); err != nil {
			return false, err
		}
		defer s.mqtt.close()
	}
	if o.replay {
		if err := writeRecording(s.recordingPath(), replayW, replayH, 0); err != nil {
			return false, err
		}
	}
	if err := s.writeConfig(o.fps); err != nil {
		return false, err
	}
	copyFile(s.cfgPath, filepath.Join(o.out, "edged.toml"))

	logPath := filepath.Join(o.out, "edged.log")
	if s.edged, err = startEdged(o.edged, s.cfgPath, logPath, o.ortLib); err != nil {
		return false, err
	}
	defer s.edged.stop(5 * time.Second) // on every early return
	fmt.Printf("soak: edged (pid %d) on %s, %g fps %dx%d; metrics http://%s/metrics; log %s\n",
		s.edged.pid(), s.cfgPath, o.fps, o.width, o.height, s.metricsAddr, logPath)
	if !waitUntil(ctx, 60*time.Second, func() bool { return s.edged.hasExited() || s.scr.ready() }) || s.edged.hasExited() {
		s.edged.stop(5 * time.Second)
		return false, fmt.Errorf("edged did not become ready within 60 s (%v); last lines of %s:\n%s", s.edged.waitErr, logPath, tailFile(logPath, 20))
	}
	s.t0 = time.Now()
	fmt.Printf("soak: edged ready; churning for %v (seed %d); report in %s\n", o.duration, o.seed, o.out)

	// The churn stops at the deadline, on an interrupt, or when edged
	// exits; the sampler and the monitor run until everything else is done.
	churnCtx, stopChurn := context.WithTimeout(ctx, o.duration+quietFor)
	defer stopChurn()
	sampCtx, stopSampler := context.WithCancel(context.Background())
	defer stopSampler()
	s.mon = newMonitor(s.sock)
	var bg, churn sync.WaitGroup
	bg.Go(func() { s.mon.run(sampCtx) })
	samplerDone := make(chan struct{})
	go func() { defer close(samplerDone); s.sample(sampCtx, stopChurn) }()
	// A few quiet seconds (the monitor is the only client) before anything
	// is disturbed, and again after the churn: summary.txt compares them.
	sleepCtx(churnCtx, quietFor)
	s.phase.Store(phaseChurn)
	churn.Go(func() { s.modelChurn(churnCtx) })
	churn.Go(func() { s.hupChurn(churnCtx) })
	churn.Go(func() { s.reloadChurn(churnCtx) })
	churn.Go(func() { s.clientChurn(churnCtx) })
	if s.mqtt != nil {
		churn.Go(func() { s.brokerChurn(churnCtx) })
	}
	if o.replay {
		churn.Go(func() { s.replayChurn(churnCtx) })
	}
	churn.Go(func() {
		s.unplugChurn(churnCtx, s.imu, 0, func(m *metrics, _ time.Time) bool {
			return m.get("edged_source_up", "source", "imu") == 0
		}, func(m *metrics, t time.Time) bool {
			return m.get("edged_source_up", "source", "imu") == 1 && s.mon.sensorAfter(t)
		})
	})
	churn.Go(func() {
		s.unplugChurn(churnCtx, s.uart, o.unplugEvery/2, func(m *metrics, _ time.Time) bool {
			return m.get("edged_serial_up", "sink", "uart") == 0
		}, func(m *metrics, t time.Time) bool {
			return m.get("edged_serial_up", "sink", "uart") == 1 && s.uartSt.lastRecord.Load() > t.UnixNano()
		})
	})
	<-churnCtx.Done()
	s.interr = ctx.Err() != nil
	churnDone := make(chan struct{})
	go func() { churn.Wait(); close(churnDone) }()
	select {
	case <-churnDone:
	case <-time.After(30 * time.Second):
		s.problem("the churn did not stop within 30 s of the end (a bug in the soak tool)")
	}
	s.phase.Store(phaseQuietAfter)
	if !s.edged.hasExited() {
		sleepCtx(ctx, quietFor)
	}
	stopSampler()
	<-samplerDone
	bg.Wait()
	if !s.edged.hasExited() {
		s.exitCode, s.stopTook, s.stopKilled = s.edged.stop(15 * time.Second)
		switch {
		case s.stopKilled:
			s.problem("edged did not exit within 15 s of SIGTERM (killed)")
		case s.exitCode != 0:
			s.problem("edged exited with status %d after SIGTERM", s.exitCode)
		}
	}
	if s.interr {
		s.problem("interrupted after %.0f s of %v", time.Since(s.t0).Seconds(), o.duration)
	}
	if s.mqtt != nil {
		s.mqttSum = s.mqttVerdict()
	}
	return s.report()
}

// sample reads edged's RSS and fds from /proc and scrapes /metrics every
// second; when edged exits it records a problem and stops the churn.
func (s *soak) sample(ctx context.Context, stopChurn func()) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastPrint := time.Now()
	var prev *Row
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.edged.exited:
			if !s.exitedEarly {
				s.exitedEarly = true
				s.problem("edged exited at t=%.0f s: %v; last lines of its log:\n%s", s.at(time.Now()), s.edged.waitErr, tailFile(filepath.Join(s.out, "edged.log"), 15))
				stopChurn()
			}
			<-ctx.Done()
			return
		case <-tick.C:
		}
		now := time.Now()
		r := Row{Sample: Sample{T: s.at(now), Goroutines: math.NaN(), ResultsTotal: math.NaN(), ResultsPerS: math.NaN()},
			Phase: int(s.phase.Load()), FDsMetric: math.NaN(), Clients: math.NaN(), Generation: math.NaN(), SerialUp: math.NaN(), IMUUp: math.NaN()}
		r.received = s.mon.received()
		r.RSSMiB, r.FDs = procSample(s.edged.pid())
		if m, err := s.scr.scrape(); err == nil {
			s.latestMu.Lock()
			s.latest = m
			s.latestMu.Unlock()
			r.Goroutines = m.get("edged_goroutines")
			r.FDsMetric = m.get("edged_open_fds")
			r.ResultsTotal = m.get("edged_results_total", "pipeline", "soak")
			r.Clients = m.get("edged_stream_clients", "sink", "local")
			r.SerialUp = m.get("edged_serial_up", "sink", "uart")
			r.IMUUp = m.get("edged_source_up", "source", "imu")
			if e := m.find("edged_engine_info", "pipeline", "soak"); e != nil {
				r.SHA = e.labels["sha256"]
				fmt.Sscan(e.labels["generation"], &r.Generation)
			}
		} else {
			s.count("scrape_errors")
			s.note("scrape at t=%.0f s: %v", r.T, err)
		}
		if prev != nil {
			// What the monitor received (and lost to seq gaps): the
			// counter of /metrics starts again from 0 when a SIGHUP
			// restarts the pipeline, which would show as a dip.
			r.ResultsPerS = float64(r.received-prev.received) / (r.T - prev.T)
		}
		s.rows = append(s.rows, r)
		prev = &s.rows[len(s.rows)-1]
		if now.Sub(lastPrint) >= 30*time.Second {
			lastPrint = now
			s.mu.Lock()
			fmt.Printf("soak: t=%4.0fs rss %.1f MiB, fds %.0f, goroutines %.0f, %.0f results/s, clients %.0f, engine gen %.0f | models %d/%d installed, junk %d/%d rejected, sighup %d, reload %d, unplugs %d+%d, problems %d\n",
				r.T, r.RSSMiB, r.FDs, r.Goroutines, r.ResultsPerS, r.Clients, r.Generation,
				s.counts["model_valid_installed"], s.counts["model_valid_written"], s.counts["model_junk_rejected"], s.counts["model_junk_written"],
				s.counts["sighup_changed"]+s.counts["sighup_unchanged"], s.counts["edged_reload_ok"],
				s.counts["sensor_unplugs"], s.counts["sink_unplugs"], len(s.problems))
			s.mu.Unlock()
		}
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
