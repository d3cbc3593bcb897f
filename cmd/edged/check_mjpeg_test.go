package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt"
)

// TestCheckMJPEG: `edged check` names the decoder of an MJPEG pipeline,
// the scale for its model's input and why.
func TestCheckMJPEG(t *testing.T) {
	text := strings.Replace(string(configs.Default), `format = "YUYV"`, `format = "MJPEG"`, 1)
	text = strings.Replace(text, "width = 640 ", "width = 1920", 1)
	text = strings.Replace(text, "height = 480\n", "height = 1080\n", 1)
	cfg, err := config.Parse("", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	sigs := map[string]trt.Signature{cfg.Pipelines[0].Model: {Inputs: []trt.TensorSpec{{Name: "image", Type: trt.Float32, Shape: []int64{1, 3, 224, 224}}}}}
	run := func() (oks, warns []string) {
		checkMJPEG(cfg, sigs, func(f string, a ...any) { oks = append(oks, fmt.Sprintf(f, a...)) },
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
