package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edged-dev/edged/configs"
	"github.com/edged-dev/edged/internal/onnxproto"
	"github.com/edged-dev/edged/runtime/config"
)

// meminfo writes a /proc/meminfo fixture and returns its folder.
func meminfo(t *testing.T, totalMiB, availMiB int64) string {
	t.Helper()
	dir := t.TempDir()
	text := fmt.Sprintf("MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\n", totalMiB<<10, availMiB<<10, availMiB<<10)
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckMemory is issue 10's fourth finding at the unit: frame pools of
// buffers + 2 + mailbox slots of the source's frame size, and one engine
// per pipeline, are compared with MemAvailable less a quarter of MemTotal.
// What does not fit is refused with the numbers, positioned at the keys
// that decide them; more than the machine has at all is a configuration
// error (exit 78), less is a shortage now (exit 1, retried). A reload is
// credited with what the running configuration holds. TensorRT engines on
// a discrete GPU are checked against its free memory.
func TestCheckMemory(t *testing.T) {
	text := strings.Replace(string(configs.Default), "buffers = 4 ", "buffers = 32", 1)
	text = strings.Replace(text, "\nwidth = 640 ", "\nwidth = 4096", 1)
	text = strings.Replace(text, "height = 480\n", "height = 4096\n", 1)
	cfg, err := config.Parse("big.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan := PlanMemory(cfg, nil, false)
	if len(plan.Needs) != 1 {
		t.Fatalf("plan %+v", plan)
	}
	n := plan.Needs[0]
	// 4096x4096 YUYV frames land in RGB24-sized slots (frameSize): 48 MiB.
	if n.Slots != 35 || n.SlotBytes != 48<<20 || n.PoolBytes() != 35*48<<20 || n.EngineBytes != 2*n.ModelBytes || n.ModelBytes == 0 {
		t.Fatalf("need %+v", n)
	}
	line := 1 + strings.Count(text[:strings.Index(text, "buffers = 32")], "\n")
	at := fmt.Sprintf("big.toml:%d:11: source[0].buffers: pipeline \"demo\": frame pool of 35 slots (buffers 32 + 2 + mailbox 1) × 48.0 MiB (4096x4096 YUYV, slots sized for RGB24) = 1.64 GiB", line)

	// Fits: 1.64 GiB of 8 GiB available less 2 GiB kept.
	if r, err := CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 8192, 8192)}); err != nil || r.Usable() != 6<<30 {
		t.Fatalf("8 GiB machine: %v (report %+v)", err, r)
	}
	// Does not fit now (2 GiB available, 512 MiB usable), would on an
	// idle machine: ErrMemory, not config.ErrInvalid.
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 8192, 2560)})
	var me *MemoryError
	if !errors.As(err, &me) || !errors.Is(err, ErrMemory) || errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), at) ||
		!strings.Contains(err.Error(), "MemAvailable 2.50 GiB and edged keeps 2.00 GiB (a quarter of MemTotal 8.00 GiB) for the rest of the system: 512.0 MiB usable") {
		t.Fatalf("busy 8 GiB machine: %v", err)
	}
	// Can never fit (2 GiB machine): a configuration error too.
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 2048, 2000)})
	if !errors.Is(err, ErrMemory) || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "this machine can never hold it") {
		t.Fatalf("2 GiB machine: %v", err)
	}
	// A reload on the busy machine is credited with what the running
	// configuration holds (the same pipeline).
	if _, err := CheckMemory(cfg, plan, plan, MemoryBudget{ProcRoot: meminfo(t, 8192, 2560)}); err != nil {
		t.Fatalf("reload replacing what it needs: %v", err)
	}
	// No meminfo: nothing checked, as trt's reload budget.
	if r, err := CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: t.TempDir()}); err != nil || r.Checked {
		t.Fatalf("no meminfo: %v %+v", err, r)
	}

	// TensorRT engines on a discrete GPU count against its memory.
	trtText := strings.Replace(string(configs.Default), `path = "builtin:demo" `, `path = "big.engine"  `, 1)
	dir := t.TempDir()
	engine := filepath.Join(dir, "big.engine")
	if err := os.WriteFile(engine, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err = config.Parse(filepath.Join(dir, "trt.toml"), []byte(trtText))
	if err != nil {
		t.Fatal(err)
	}
	plan = PlanMemory(cfg, nil, true)
	if !plan.Needs[0].OnDevice || plan.Device() != 6<<20 {
		t.Fatalf("discrete GPU plan %+v", plan)
	}
	gpu := func(free, total uint64) MemoryBudget {
		return MemoryBudget{ProcRoot: meminfo(t, 8192, 8192), Device: func() (uint64, uint64, error) { return free, total, nil }}
	}
	if _, err := CheckMemory(cfg, plan, MemoryPlan{}, gpu(256<<20, 256<<20)); err != nil {
		t.Fatalf("256 MiB GPU: %v", err)
	}
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, gpu(16<<20, 24<<20))
	if !errors.Is(err, ErrMemory) || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "model[0].path: pipeline \"demo\": engine about 6.0 MiB in GPU memory") {
		t.Fatalf("24 MiB GPU: %v", err)
	}
}

// TestCheckMemoryCountsTensors: the memory check counts the tensors an
// engine binds at the shapes it will bind, read from the model file
// without loading it. A dynamic-input model with preprocess.width and
// height of 16384 binds 3 GiB of input and, its output named like the
// input's dimensions, 3 GiB of output per pipeline (before, the check
// counted the 200-byte file twice: nothing); a model declaring a
// dimension of 2^31 needs 1.5 TiB of input (and as much output), which no machine here holds: a
// configuration error (exit 78), at model[0].path.
func TestCheckMemoryCountsTensors(t *testing.T) {
	dir := t.TempDir()
	dyn := filepath.Join(dir, "dynamic.onnx")
	os.WriteFile(dyn, onnxproto.IdentityModel(onnxproto.DTFloat, []int64{1, 3, -1, -1}, []string{"", "", "height", "width"}), 0o644)
	huge := filepath.Join(dir, "huge.onnx")
	os.WriteFile(huge, onnxproto.IdentityModel(onnxproto.DTFloat, []int64{1, 3, 1 << 31, 64}, nil), 0o644)
	text := strings.Replace(string(configs.Default), `path = "builtin:demo" `, `path = "dynamic.onnx" `, 1)
	text = strings.Replace(text, "width = 0 ", "width = 16384", 1)
	text = strings.Replace(text, "height = 0 ", "height = 16384", 1)
	cfg, err := config.Parse(filepath.Join(dir, "dyn.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan := PlanMemory(cfg, nil, false)
	n := plan.Needs[0]
	if n.TensorBytes != 2*3*16384*16384*4 || n.PreBytes < 1<<20 || n.PreBytes > 64<<20 {
		t.Fatalf("need %+v", n)
	}
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 16384, 8000)})
	line := 1 + strings.Count(text[:strings.Index(text, "width = 16384")], "\n")
	want := fmt.Sprintf("dyn.toml:%d:9: pipeline[0].preprocess.width: pipeline \"demo\": the engine binds tensors of 6.00 GiB (model \"demo\": input input[1 3 16384 16384] 3.00 GiB, output output[1 3 16384 16384] 3.00 GiB)", line)
	if !errors.Is(err, ErrMemory) || errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "engine tensors 6.00 GiB") {
		t.Fatalf("16 GiB machine with 7.8 GiB available: %v\nwant %s", err, want)
	}

	text = strings.Replace(string(configs.Default), `path = "builtin:demo" `, `path = "huge.onnx"    `, 1)
	cfg, err = config.Parse(filepath.Join(dir, "huge.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	plan = PlanMemory(cfg, nil, false)
	if n := plan.Needs[0]; n.TensorBytes != 2*3*(1<<31)*64*4 {
		t.Fatalf("need %+v", n)
	}
	_, err = CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 1<<20, 1<<20)})
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "model[0].path: pipeline \"demo\": the engine binds tensors of 3.00 TiB") || !strings.Contains(err.Error(), "this machine can never hold it") {
		t.Fatalf("1 TiB machine: %v", err)
	}
	// The built-in model is read too: its tensors are small and counted.
	cfg, _ = config.Parse("", configs.Default)
	if n := PlanMemory(cfg, nil, false).Needs[0]; n.TensorBytes != (3*64*64+8+2)*4 {
		t.Errorf("built-in model: tensors %d bytes", n.TensorBytes)
	}
}

// TestPlanMemoryCountsSharedModelOnce: pipelines naming one model share
// its weights, so the plan counts the engine once, at the model's first
// pipeline, while each pipeline still counts its own frame pool and the
// tensors its engine binds; a second model is counted on its own.
func TestPlanMemoryCountsSharedModelOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(path, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	text := sharedConfig(t, 4, 30, path)
	text += "\n[[model]]\nname = \"other\"\npath = \"" + path + "\"\n\n[[pipeline]]\nname = \"q\"\nsource = \"cam1\"\nmodel = \"other\"\nsinks = [\"local\"]\n"
	cfg := parseConfig(t, text)
	plan := PlanMemory(cfg, nil, false)
	if len(plan.Needs) != 5 {
		t.Fatalf("%d needs, want 5", len(plan.Needs))
	}
	var engines int64
	for i, n := range plan.Needs {
		switch {
		case n.Model == "demo" && i == 0:
			if n.EngineBytes != 16<<20 || n.SharedWith != "" {
				t.Errorf("first pipeline of demo: %+v, want the engine (2 × 8 MiB) counted", n)
			}
		case n.Model == "demo":
			if n.EngineBytes != 0 || n.SharedWith != "demo" {
				t.Errorf("pipeline %s: engine %d shared with %q, want 0 and the model's first pipeline", n.Pipeline, n.EngineBytes, n.SharedWith)
			}
		case n.Model == "other":
			if n.EngineBytes != 16<<20 || n.SharedWith != "" {
				t.Errorf("pipeline of another model: %+v, want its own engine counted", n)
			}
		}
		if n.PoolBytes() == 0 {
			t.Errorf("pipeline %s counts no frame pool", n.Pipeline)
		}
		engines += n.EngineBytes
	}
	if engines != 2*16<<20 {
		t.Errorf("engines total %d, want two models of 16 MiB", engines)
	}
	r, err := CheckMemory(cfg, plan, MemoryPlan{}, MemoryBudget{ProcRoot: meminfo(t, 64, 16)})
	if err == nil {
		t.Fatalf("a 64 MiB machine: no error (%+v)", r)
	}
	if !strings.Contains(err.Error(), `pipeline "p2": `) || !strings.Contains(err.Error(), `model "demo" shared with pipeline "demo" (counted there)`) {
		t.Errorf("the refusal does not say that p2 shares demo's engine:\n%v", err)
	}
}
