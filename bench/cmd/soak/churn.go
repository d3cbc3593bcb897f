package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
)

// Every churn loop below runs until ctx is done, and every wait in it is
// bounded: the soak stops by itself.

const (
	installTimeout = 20 * time.Second // a valid model file renamed in, to its first result
	rejectTimeout  = 20 * time.Second // a junk file, to engine_rejected
	hupTimeout     = 30 * time.Second // a changed configuration, to config_reloaded
	noticeTimeout  = 15 * time.Second // an unplugged pty, to edged saying it is down
	recoverTimeout = 20 * time.Second // a replugged pty, to edged using it again
)

// jitter returns d ± 25 %.
func (s *soak) jitter(d time.Duration) time.Duration {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return d*3/4 + time.Duration(s.rng.Int64N(int64(d)/2+1))
}

func (s *soak) randN(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

// modelChurn renames a model variant into place every -model-every, each
// different from the one serving, and checks that it is installed; every
// -junk-every-th change is preceded by a file that must be rejected (text,
// the first half of a model, an empty file) while the old engine serves.
func (s *soak) modelChurn(ctx context.Context) {
	for i := 1; ; i++ {
		if !sleepCtx(ctx, s.jitter(s.o.modelEvery)) {
			return
		}
		if s.o.junkEvery > 0 && i%s.o.junkEvery == 0 {
			var junk []byte
			kind := (i / s.o.junkEvery) % 3
			switch kind {
			case 0:
				junk = []byte(strings.Repeat("this is not a model\n", 50))
			case 1:
				v := s.variants[i%len(s.variants)].data
				junk = v[:len(v)/2]
			case 2:
				junk = nil
			}
			t := time.Now()
			if err := s.writeModel(junk); err != nil {
				s.problem("model: writing junk: %v", err)
				return
			}
			s.count("model_junk_written")
			if waitUntil(ctx, rejectTimeout, func() bool { _, ok := s.mon.firstEvent("engine_rejected", "", t); return ok }) {
				s.count("model_junk_rejected")
				s.addTime("reject", time.Since(t))
			} else if ctx.Err() == nil {
				s.problem("model: junk file #%d (%d bytes) renamed in at t=%.0f s: no engine_rejected within %v", i/s.o.junkEvery, len(junk), s.at(t), rejectTimeout)
			}
		}
		v := s.variants[i%len(s.variants)]
		t := time.Now()
		if err := s.writeModel(v.data); err != nil {
			s.problem("model: writing variant %d: %v", v.n, err)
			return
		}
		s.count("model_valid_written")
		if waitUntil(ctx, installTimeout, func() bool { return s.mon.sawSHA(v.sha, t) || s.metricSHAAfter(t) == v.sha }) {
			s.count("model_valid_installed")
			s.addTime("install", time.Since(t))
		} else if ctx.Err() == nil {
			s.problem("model: variant %d (sha256 %s) renamed in at t=%.0f s was not installed within %v", v.n, v.sha, s.at(t), installTimeout)
		}
	}
}

// metricSHAAfter returns the SHA-256 prefix of the engine serving the
// pipeline, from a scrape taken after t ("" if none yet).
func (s *soak) metricSHAAfter(t time.Time) string {
	m := s.latestMetrics()
	if m == nil || !m.at.After(t) {
		return ""
	}
	if e := m.find("edged_engine_info", "pipeline", "soak"); e != nil {
		return e.labels["sha256"]
	}
	return ""
}

// hupChurn sends SIGHUP every -hup-every; every other time the camera's
// rate is changed first (alternating -fps and 0.8 × -fps), which restarts
// the pipeline, and config_reloaded must follow. An unchanged
// configuration only re-checks the engine files.
func (s *soak) hupChurn(ctx context.Context) {
	for i := 1; ; i++ {
		if !sleepCtx(ctx, s.jitter(s.o.hupEvery)) {
			return
		}
		changed := i%2 == 1
		if changed {
			fps := s.o.fps
			if (i/2)%2 == 0 {
				fps = s.o.fps * 0.8
			}
			if err := s.writeConfig(fps); err != nil {
				s.problem("sighup: writing the configuration: %v", err)
				return
			}
		}
		t := time.Now()
		if err := s.edged.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			return // edged exited; the sampler reports it
		}
		if !changed {
			s.count("sighup_unchanged")
			continue
		}
		s.count("sighup_changed")
		var got event
		if waitUntil(ctx, hupTimeout, func() bool {
			var ok bool
			if got, ok = s.mon.firstEvent("config_reloaded", "", t); ok {
				return true
			}
			got, ok = s.mon.firstEvent("config_rejected", "", t)
			return ok
		}) {
			if got.name == "config_rejected" {
				s.problem("sighup: a valid configuration was rejected at t=%.0f s: %s", s.at(t), got.reason)
			} else {
				s.count("sighup_reloaded")
			}
		} else if ctx.Err() == nil {
			s.problem("sighup: no config_reloaded within %v of the SIGHUP at t=%.0f s", hupTimeout, s.at(t))
		}
	}
}

// reloadChurn runs `edged reload -socket PATH` every -reload-every.
func (s *soak) reloadChurn(ctx context.Context) {
	for {
		if !sleepCtx(ctx, s.jitter(s.o.reloadEvery)) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out, err := exec.CommandContext(rctx, s.o.edged, "reload", "-socket", s.sock).CombinedOutput()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.problem("edged reload at t=%.0f s: %v: %s", s.at(time.Now()), err, strings.TrimSpace(string(out)))
			continue
		}
		s.count("edged_reload_ok")
	}
}

// unplugChurn unplugs dev every -unplug-every (after an initial offset),
// waits until edged reports it down, leaves it out for 1-3 s, plugs a new
// pty in behind the same name and waits until edged uses it again.
func (s *soak) unplugChurn(ctx context.Context, dev *serialDev, offset time.Duration, isDown, isBack func(m *metrics, since time.Time) bool) {
	if !sleepCtx(ctx, offset) {
		return
	}
	for {
		if !sleepCtx(ctx, s.jitter(s.o.unplugEvery)) {
			return
		}
		t := time.Now()
		dev.unplug()
		s.count(dev.name + "_unplugs")
		if !waitUntil(ctx, noticeTimeout, func() bool {
			m := s.latestMetrics()
			return m != nil && m.at.After(t) && isDown(m, t)
		}) {
			if ctx.Err() == nil {
				s.problem("%s: unplugged at t=%.0f s; edged did not report it down within %v", dev.name, s.at(t), noticeTimeout)
			}
		}
		sleepCtx(ctx, time.Second+time.Duration(s.randN(2000))*time.Millisecond)
		t = time.Now()
		if err := dev.plug(); err != nil {
			s.problem("%s: replug: %v", dev.name, err)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if waitUntil(ctx, recoverTimeout, func() bool {
			m := s.latestMetrics()
			return m != nil && m.at.After(t) && isBack(m, t)
		}) {
			s.count(dev.name + "_recovered")
			s.addTime("recover_"+dev.name, time.Since(t))
		} else if ctx.Err() == nil {
			s.problem("%s: replugged at t=%.0f s; edged did not use it again within %v", dev.name, s.at(t), recoverTimeout)
		}
	}
}

// clientChurn runs the socket clients: readers that connect, read a while
// and leave (NDJSON or CBOR); a steady slow reader; a client that connects
// and never reads (edged cuts it off after write_timeout); and ghosts that
// connect and hang up at once, subscribed to nothing, to an unknown
// pipeline, or after half-closing.
func (s *soak) clientChurn(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < s.o.readers; i++ {
		wg.Go(func() { s.readerLoop(ctx) })
	}
	wg.Go(func() { s.slowLoop(ctx) })
	wg.Go(func() { s.stalledLoop(ctx) })
	wg.Go(func() { s.ghostLoop(ctx) })
	wg.Wait()
}

func (s *soak) dial(ctx context.Context, sub *stream.Subscription) (*stream.Client, error) {
	c, err := stream.Dial(ctx, s.sock, sub)
	if err != nil && ctx.Err() == nil {
		s.count("client_dial_errors")
		s.note("client: %v", err)
	}
	return c, err
}

func (s *soak) readerLoop(ctx context.Context) {
	for ctx.Err() == nil {
		var sub *stream.Subscription
		if s.randN(3) == 0 {
			sub = &stream.Subscription{Encoding: stream.CBOR}
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := s.dial(cctx, sub)
		if err == nil {
			want := 20 + s.randN(480)
			var m stream.Message
			for n := 0; n < want; n++ {
				if err := c.Next(&m); err != nil {
					break
				}
			}
			c.Close()
			s.count("client_readers")
		}
		cancel()
		sleepCtx(ctx, time.Duration(s.randN(300))*time.Millisecond)
	}
}

// slowLoop is a steady slow reader: 1 KiB every 100 ms (about a quarter of
// the stream at 100 fps 640x480) for 5-15 s. It loses records and must
// stay connected (fault 27): a cut-off is a problem. It reads the socket
// itself: a buffered decoder would read 64 KiB at once and then nothing
// for longer than write_timeout.
func (s *soak) slowLoop(ctx context.Context) {
	buf := make([]byte, 1024)
	for ctx.Err() == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", s.sock)
		if err == nil {
			start := time.Now()
			end := start.Add(5*time.Second + time.Duration(s.randN(10_000))*time.Millisecond)
			var got int
			for time.Now().Before(end) && ctx.Err() == nil {
				c.SetReadDeadline(time.Now().Add(s.o.writeTimeout + 5*time.Second))
				n, err := io.ReadFull(c, buf)
				got += n
				if err != nil {
					if ctx.Err() == nil && !s.edged.hasExited() {
						s.problem("client: a steady slow reader (1 KiB per 100 ms) was cut off after %.1f s and %d bytes at t=%.0f s: %v", time.Since(start).Seconds(), got, s.at(time.Now()), err)
					}
					break
				}
				sleepCtx(ctx, 100*time.Millisecond)
			}
			c.Close()
			s.count("client_slow")
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
}

// stalledLoop connects and never reads, for write_timeout + 3 s.
func (s *soak) stalledLoop(ctx context.Context) {
	for ctx.Err() == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", s.sock)
		if err == nil {
			sleepCtx(ctx, s.o.writeTimeout+3*time.Second)
			c.Close()
			s.count("client_stalled")
		}
		sleepCtx(ctx, time.Second)
	}
}

// ghostLoop connects and hangs up, a few times a second.
func (s *soak) ghostLoop(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", s.sock)
		if err == nil {
			uc := c.(*net.UnixConn)
			uc.SetDeadline(time.Now().Add(5 * time.Second))
			switch i % 4 {
			case 0: // subscribed to nothing, gone at once
				io.WriteString(uc, `{"subscribe":{"pipelines":[]}}`+"\n")
			case 1: // not a word
			case 2: // subscribed to a pipeline that does not exist, gone within a second
				io.WriteString(uc, `{"subscribe":{"pipelines":["nope"]}}`+"\n")
				sleepCtx(ctx, time.Duration(s.randN(1000))*time.Millisecond)
			case 3: // half-closed: still reads a little, then goes
				uc.CloseWrite()
				buf := make([]byte, 4096)
				uc.Read(buf)
			}
			uc.Close()
			s.count("client_ghosts")
		}
		sleepCtx(ctx, time.Duration(100+s.randN(200))*time.Millisecond)
	}
}

// at returns t in seconds since edged was ready.
func (s *soak) at(t time.Time) float64 { return t.Sub(s.t0).Seconds() }

func (s *soak) problem(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	s.mu.Lock()
	s.problems = append(s.problems, msg)
	s.mu.Unlock()
	fmt.Printf("soak: PROBLEM: %s\n", msg)
}

// note records something worth reading that is not a failure (at most 50).
func (s *soak) note(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.notes) < 50 {
		s.notes = append(s.notes, fmt.Sprintf(format, a...))
	}
}

func (s *soak) count(k string) {
	s.mu.Lock()
	s.counts[k]++
	s.mu.Unlock()
}

// addValue keeps a number for the summary (median, max) under k.
func (s *soak) addValue(k string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times[k] = append(s.times[k], v)
}

func (s *soak) addTime(k string, d time.Duration) {
	s.mu.Lock()
	s.times[k] = append(s.times[k], d.Seconds())
	s.mu.Unlock()
}

func (s *soak) latestMetrics() *metrics {
	s.latestMu.Lock()
	defer s.latestMu.Unlock()
	return s.latest
}
