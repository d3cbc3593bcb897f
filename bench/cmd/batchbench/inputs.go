package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/edged-dev/edged/bench/internal/onnxmodel"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
)

// Camera geometry of every case.
const (
	width, height = 1920, 1080
	frameBytes    = width * height * 2 // YUYV
)

// inputs are the files every case reads.
type inputs struct {
	Model   string // the classifier with a symbolic batch dimension
	Noisy   string // frames of seeded noise, every delta 0: paced by fps or free-running
	Stalled string // the same frames at 1/fps for stallAfter, then one frame due an hour later
}

// writeInputs writes the model and the recordings into dir. frames is the
// noisy recording's length; the stalled recording plays stallAfter at fps
// (looping the noisy frames) and then waits an hour for its next frame:
// a camera that stops delivering without saying so.
func writeInputs(dir string, frames int, hidden int, fps float64, stallAfter time.Duration) (inputs, error) {
	in := inputs{Model: filepath.Join(dir, "model.onnx"), Noisy: filepath.Join(dir, "noisy-1920x1080.edgedraw"),
		Stalled: filepath.Join(dir, "stalled-1920x1080.edgedraw")}
	model, err := onnxmodel.Build(onnxmodel.Options{DynamicBatch: true, Hidden: hidden})
	if err != nil {
		return in, err
	}
	if err := os.WriteFile(in.Model, model, 0o644); err != nil {
		return in, err
	}
	data := noisyFrames(frames)
	if err := writeRecording(in.Noisy, data, func(int) int64 { return 0 }, frames); err != nil {
		return in, err
	}
	period := int64(float64(time.Second) / fps)
	played := int(stallAfter.Seconds()*fps) + 1
	err = writeRecording(in.Stalled, data, func(i int) int64 {
		switch {
		case i == 0:
			return 0
		case i < played:
			return period
		}
		return int64(time.Hour)
	}, played+1)
	return in, err
}

// noisyFrames returns n frames of seeded uniform random bytes: valid YUYV
// that nothing compresses or predicts (benchgen's noisy kind).
func noisyFrames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		var key [32]byte
		binary.LittleEndian.PutUint64(key[0:], uint64(i))
		copy(key[8:], "batchbench noisy")
		out[i] = make([]byte, frameBytes)
		rand.NewChaCha8(key).Read(out[i])
	}
	return out
}

// writeRecording writes count frames (cycling through data) with the delta of
// each frame from delta.
func writeRecording(path string, data [][]byte, delta func(i int) int64, count int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rec, err := replay.NewRecorder(w, sensors.Format{Width: width, Height: height, Pixel: sensors.YUYV})
	if err == nil {
		var t int64
		for i := 0; i < count && err == nil; i++ {
			t += delta(i)
			err = rec.WriteFrame(data[i%len(data)], t, 0)
		}
	}
	if err == nil {
		err = rec.Flush()
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
