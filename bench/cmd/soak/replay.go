package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
)

// The replay part of the soak: a second pipeline, "rec", plays a recording
// in a loop, and every -replay-every the recording is replaced under the
// daemon, in turn:
//
//  1. a new recording of the same size renamed over it (edged keeps
//     playing the file it has open: results go on);
//  2. the same size written over it in place (the open file changes under
//     the reader: results go on, maybe after the source restarts once);
//  3. another frame size written over it in place, then, at the next turn,
//     the right size renamed back. edged cannot put the new size into the
//     pipeline's frames: it must restart the source with its backoff
//     (edged_source_starts_total grows by a few, not thousands), and
//     results must come back once the right size is there.

const (
	replayW, replayH   = 320, 240
	otherW, otherH     = 256, 192
	replayFrames       = 40
	replayDelta        = 50 * time.Millisecond // 20 frames/s
	resumeTimeout      = 20 * time.Second      // a replacement, to a result of "rec" after it
	maxRestartsPerTurn = 30                    // source starts within a turn of a replacement
)

// writeRecording writes a recording of w×h YUYV frames to path, each frame
// one colour, paced at replayDelta; variant picks the colours.
func writeRecording(path string, w, h, variant int) error {
	var buf bytes.Buffer
	rec, err := replay.NewRecorder(&buf, sensors.Format{Width: w, Height: h, Pixel: sensors.YUYV})
	if err != nil {
		return err
	}
	frame := make([]byte, w*h*2)
	for i := range replayFrames {
		y := byte(16 + (i*37+variant*61)%220)
		for j := 0; j < len(frame); j += 4 {
			frame[j], frame[j+1], frame[j+2], frame[j+3] = y, 128, y, 128
		}
		if err := rec.WriteFrame(frame, int64(i)*int64(replayDelta), 0); err != nil {
			return err
		}
	}
	if err := rec.Flush(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// recordingPath is the replayed file.
func (s *soak) recordingPath() string { return filepath.Join(s.dir, "recordings", "rec.edgedrec") }

// replayConfig is the [[source]] and [[pipeline]] of the replay part.
func (s *soak) replayConfig() string {
	return fmt.Sprintf(`
[[source]]
name = "rec"
kind = "replay"
path = %q
loop = true
width = %d
height = %d

[[pipeline]]
name = "rec"
source = "rec"
model = "demo"
sinks = ["local"]

[[pipeline.postprocess]]
output = "class"
kind = "topk"
labels = ["red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"]
`, s.recordingPath(), replayW, replayH)
}

// replayChurn replaces the recording every -replay-every, in the turns
// described above, and checks what edged does after each.
func (s *soak) replayChurn(ctx context.Context) {
	path := s.recordingPath()
	for i := 1; ; i++ {
		if !sleepCtx(ctx, s.jitter(s.o.replayEvery)) {
			return
		}
		starts0 := s.sourceStarts()
		t := time.Now()
		var err error
		mode := i % 3
		switch mode {
		case 1: // renamed over (after a turn 3: the right size back)
			tmp := path + ".new"
			if err = writeRecording(tmp, replayW, replayH, i); err == nil {
				err = os.Rename(tmp, path)
			}
			s.count("replay_renamed")
		case 2: // same size, in place
			err = writeRecording(path, replayW, replayH, i)
			s.count("replay_in_place")
		case 0: // another size, in place
			err = writeRecording(path, otherW, otherH, i)
			s.count("replay_other_size")
		}
		if err != nil {
			s.problem("replay: replacing the recording: %v", err)
			return
		}
		if mode != 0 {
			if waitUntil(ctx, resumeTimeout, func() bool { return s.mon.resultOfAfter("rec", t) }) {
				s.count("replay_resumed")
				s.addTime("replay_resume", time.Since(t))
			} else if ctx.Err() == nil {
				s.problem("replay: the recording replaced at t=%.0f s (turn %d): no result of pipeline rec within %v", s.at(t), mode, resumeTimeout)
			}
		}
		// A turn's worth of restarts, at most a few (backoff, not a storm).
		sleepCtx(ctx, min(s.o.replayEvery/2, 10*time.Second))
		if n := s.sourceStarts() - starts0; n > maxRestartsPerTurn {
			s.problem("replay: %0.f source starts within %v of replacing the recording at t=%.0f s (turn %d): a restart storm", n, min(s.o.replayEvery/2, 10*time.Second), s.at(t), mode)
		} else {
			s.addValue("replay_restarts", n)
		}
	}
}

// sourceStarts is edged_source_starts_total of the replay source, from a
// scrape taken now.
func (s *soak) sourceStarts() float64 {
	m, err := s.scr.scrape()
	if err != nil {
		return 0
	}
	return m.get("edged_source_starts_total", "source", "rec")
}
