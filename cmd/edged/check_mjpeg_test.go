package main

import (
	"bytes"
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/replay"
	"github.com/edged-dev/edged/trt"
)

// TestCheckMJPEG: `edged check` names the decoder of an MJPEG pipeline,
// the scale for its model's input and why.
func TestCheckMJPEG(t *testing.T) {
	text := strings.Replace(string(configs.Default), `format = "YUYV"`, `format = "MJPEG"`, 1)
	text = strings.Replace(text, "\nwidth = 640 ", "\nwidth = 1920", 1)
	text = strings.Replace(text, "height = 480\n", "height = 1080\n", 1)
	cfg, err := config.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	sigs := map[string]trt.Signature{cfg.Pipelines[0].Model: {Inputs: []trt.TensorSpec{{Name: "image", Type: trt.Float32, Shape: []int64{1, 3, 224, 224}}}}}
	run := func() (oks, warns []string) {
		checkMJPEG(&wiring{}, cfg, sigs, func(f string, a ...any) { oks = append(oks, fmt.Sprintf(f, a...)) },
			func(f string, a ...any) { warns = append(warns, fmt.Sprintf(f, a...)) })
		return
	}
	oks, warns := run()
	all := strings.Join(append(oks, warns...), "\n")
	if len(oks)+len(warns) != 1 || !strings.Contains(all, "MJPEG decoded by") || !strings.Contains(all, "scale 1/4 (1/4: 1920x1080 decodes to 480x270") {
		t.Fatalf("ok %q, warn %q", oks, warns)
	}
	// A forced fallback is a choice, not a missing library: no warning.
	t.Setenv("EDGED_JPEG", "go")
	oks, warns = run()
	if len(oks) != 1 || len(warns) != 0 || !strings.Contains(oks[0], "image/jpeg (EDGED_JPEG=go)") {
		t.Fatalf("EDGED_JPEG=go: ok %q, warn %q", oks, warns)
	}
}

// TestReplayMJPEGNamesDecoder: the real binary replaying an MJPEG
// recording (a replay source learns the format only when it opens the
// file, after the engine input was announced) logs which decoder serves
// it, at what scale and why, and produces results.
func TestReplayMJPEGNamesDecoder(t *testing.T) {
	lib := needORT(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "cam.edgedraw")
	f, err := os.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	w, err := replay.NewRecorder(f, sensors.Format{Width: 320, Height: 240, Pixel: sensors.MJPEG})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		img := image.NewRGBA(image.Rect(0, 0, 320, 240))
		for p := range img.Pix {
			img.Pix[p] = uint8(p*7 + i*31)
		}
		var b bytes.Buffer
		if err := stdjpeg.Encode(&b, img, &stdjpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFrame(b.Bytes(), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sock := filepath.Join(dir, "edged.sock")
	cfg := filepath.Join(dir, "edged.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
[[source]]
name = "cam"
kind = "replay"
path = %q
fps = 60.0
loop = true
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam"
model = "demo"
sinks = ["local"]
[[sink]]
name = "local"
kind = "socket"
path = %q
`, rec, sock)), 0o644)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, `msg="MJPEG decoding" pipeline=p source=cam decoder="MJPEG decoded by `)
	waitLog(t, d, "scale 1/")
	readRecords(t, sock).results(t, "p", 0, 5)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
