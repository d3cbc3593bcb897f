package reload_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/trt"
	"github.com/edged-dev/edged/trt/reload"
	"github.com/edged-dev/edged/trt/trttest"
	"github.com/fsnotify/fsnotify"
)

// TestScript runs the reload behaviour scripts in testdata/reload. Each
// line is a command; "#" starts a comment. The commands:
//
//	opts KEY=VALUE...       before start: debounce=, settle=, rescan= (off
//	                        or a duration), poll=, deaf (file events are
//	                        lost; only watcher errors and rescans remain)
//	write NAME CONTENT      truncate and write NAME in place
//	replace NAME CONTENT    write NAME.tmp, rename it over NAME
//	slowwrite NAME CHUNK EVERY CONTENT
//	                        write in place CHUNK bytes at a time, pausing
//	                        EVERY between chunks
//	mv SRC DST | rm NAME | mkdir NAME | rmdir NAME | ln TARGET NAME
//	start                   Load, then Start; Load must succeed
//	start-fail REASON       Load must fail with that RejectReason
//	                        (or "missing")
//	trigger | overflow      Trigger(); inject fsnotify.ErrEventOverflow
//	budget ok|fail          the memory budget's answer from now on
//	expect OUTCOME [gen=N] [reason=R]
//	                        the next event
//	settled                 wait for a check that started after the last
//	                        file operation; no event may be pending
//	serving value=V gen=N   one inference on the serving engine
//	loads N                 the backend was asked to load N times in all
//
// CONTENT is "model [value=V] [nan] [inf] [infer-error] [short-output]
// [reshape] [version-error] [load-error=TEXT] [delay=D] [pad=N]
// [in=NAME:TYPE:D,D..] [out=NAME:TYPE:D,D..]", "truncated ..." (the first
// half of such a model), "empty" or "garbage". At the end of every script
// no loaded content may be one the script did not write whole.
func TestScript(t *testing.T) {
	files, err := filepath.Glob("testdata/reload/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/reload")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptRun struct {
	t       *testing.T
	h       *harness
	edits   []func(*reload.Options)
	deaf    bool
	refuse  chan bool
	file    string
	lineNum int
}

func runScript(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &scriptRun{t: t, file: file, refuse: make(chan bool, 1)}
	s.refuse <- false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		s.lineNum++
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		args := strings.Fields(line)
		if len(args) == 0 {
			continue
		}
		s.do(args)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if s.h != nil {
		s.h.checkLoadedComplete()
	}
}

func (s *scriptRun) fatalf(format string, a ...any) {
	s.t.Helper()
	s.t.Fatalf("%s:%d: %s", s.file, s.lineNum, fmt.Sprintf(format, a...))
}

// harness creates the harness on first use, with the options so far.
func (s *scriptRun) harness() *harness {
	if s.h == nil {
		s.h = newHarness(s.t, func(o *reload.Options) {
			o.Budget = func(n int64) error {
				r := <-s.refuse
				s.refuse <- r
				if r {
					return fmt.Errorf("%w: script says no", trt.ErrMemory)
				}
				return nil
			}
			for _, e := range s.edits {
				e(o)
			}
		})
		if s.deaf {
			s.h.r.UseWatcher(deafWatcher)
		}
	}
	return s.h
}

func (s *scriptRun) path(name string) string { return filepath.Join(s.harness().dir, name) }

func (s *scriptRun) do(args []string) {
	s.t.Helper()
	cmd, args := args[0], args[1:]
	need := func(n int) {
		if len(args) < n {
			s.fatalf("%s needs %d arguments", cmd, n)
		}
	}
	switch cmd {
	case "opts":
		if s.h != nil {
			s.fatalf("opts after the first file operation")
		}
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			if k == "deaf" {
				s.deaf = true
				continue
			}
			var d time.Duration
			if v == "off" {
				d = -1
			} else {
				var err error
				if d, err = time.ParseDuration(v); err != nil {
					s.fatalf("%s: %v", a, err)
				}
			}
			switch k {
			case "debounce":
				s.edits = append(s.edits, func(o *reload.Options) { o.Debounce = d })
			case "settle":
				s.edits = append(s.edits, func(o *reload.Options) { o.Settle = d })
			case "rescan":
				s.edits = append(s.edits, func(o *reload.Options) { o.Rescan = d })
			case "poll":
				s.edits = append(s.edits, func(o *reload.Options) { o.Poll = d })
			default:
				s.fatalf("unknown option %q", k)
			}
		}
	case "write":
		need(2)
		data, whole := s.content(args[1:])
		h := s.harness()
		h.begin()
		if err := os.WriteFile(s.path(args[0]), data, 0o644); err != nil {
			s.fatalf("%v", err)
		}
		h.note(data, whole)
	case "replace":
		need(2)
		data, whole := s.content(args[1:])
		h := s.harness()
		tmp := s.path(args[0] + ".tmp")
		h.begin()
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			s.fatalf("%v", err)
		}
		if err := os.Rename(tmp, s.path(args[0])); err != nil {
			s.fatalf("%v", err)
		}
		h.note(data, whole)
	case "slowwrite":
		need(4)
		chunk, err := strconv.Atoi(args[1])
		every, err2 := time.ParseDuration(args[2])
		if err != nil || err2 != nil || chunk <= 0 {
			s.fatalf("slowwrite NAME CHUNK EVERY CONTENT")
		}
		data, whole := s.content(args[3:])
		h := s.harness()
		h.begin()
		f, err := os.OpenFile(s.path(args[0]), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			s.fatalf("%v", err)
		}
		for off := 0; off < len(data); off += chunk {
			if _, err := f.Write(data[off:min(off+chunk, len(data))]); err != nil {
				s.fatalf("%v", err)
			}
			time.Sleep(every) // the stimulus: a slow writer
		}
		f.Close()
		h.note(data, whole)
	case "mv":
		need(2)
		s.harness().begin()
		if err := os.Rename(s.path(args[0]), s.path(args[1])); err != nil {
			s.fatalf("%v", err)
		}
		s.h.op()
	case "rm":
		need(1)
		s.harness().begin()
		if err := os.Remove(s.path(args[0])); err != nil {
			s.fatalf("%v", err)
		}
		s.h.op()
	case "mkdir":
		need(1)
		s.harness().begin()
		if err := os.MkdirAll(s.path(args[0]), 0o755); err != nil {
			s.fatalf("%v", err)
		}
		s.h.op()
	case "rmdir":
		need(1)
		s.harness().begin()
		if err := os.RemoveAll(s.path(args[0])); err != nil {
			s.fatalf("%v", err)
		}
		s.h.op()
	case "ln":
		need(2)
		s.harness().begin()
		if err := os.Symlink(args[0], s.path(args[1])); err != nil {
			s.fatalf("%v", err)
		}
		s.h.op()
	case "start":
		h := s.harness()
		if err := h.r.Load(context.Background()); err != nil {
			s.fatalf("Load: %v", err)
		}
		h.r.Start()
	case "start-fail":
		need(1)
		err := s.harness().r.Load(context.Background())
		got := trt.RejectReason(err)
		if errors.Is(err, os.ErrNotExist) {
			got = "missing"
		}
		if err == nil || got != args[0] {
			s.fatalf("Load: %v (%s), want a %s failure", err, got, args[0])
		}
	case "trigger":
		s.harness().r.Trigger()
	case "overflow":
		s.harness().r.InjectWatchError(fsnotify.ErrEventOverflow)
	case "budget":
		need(1)
		<-s.refuse
		s.refuse <- args[0] == "fail"
	case "expect":
		need(1)
		h := s.harness()
		h.t = s.t
		ev := h.next()
		if ev.Outcome.String() != args[0] {
			s.fatalf("event %v, want %s", ev, args[0])
		}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			switch k {
			case "gen":
				if fmt.Sprint(ev.Generation) != v {
					s.fatalf("event %v, want gen %s", ev, v)
				}
			case "reason":
				if got := trt.RejectReason(ev.Reason); got != v {
					s.fatalf("event %v: reason %q, want %q", ev, got, v)
				}
			default:
				s.fatalf("unknown expectation %q", a)
			}
		}
	case "settled":
		h := s.harness()
		h.settled()
		h.noEvent()
	case "serving":
		var value float64
		var gen uint64
		for _, a := range args {
			k, v, _ := strings.Cut(a, "=")
			var err error
			switch k {
			case "value":
				value, err = strconv.ParseFloat(v, 32)
			case "gen":
				gen, err = strconv.ParseUint(v, 10, 64)
			default:
				err = fmt.Errorf("unknown key")
			}
			if err != nil {
				s.fatalf("%s: %v", a, err)
			}
		}
		v, g := s.harness().serving()
		if v != float32(value) || g != gen {
			s.fatalf("serving value %v gen %d, want value %v gen %d", v, g, value, gen)
		}
	case "loads":
		need(1)
		if got := fmt.Sprint(s.harness().be.Loads()); got != args[0] {
			s.fatalf("%s loads, want %s", got, args[0])
		}
	default:
		s.fatalf("unknown command %q", cmd)
	}
}

// content builds file content from a CONTENT description; whole is false
// for deliberately partial content.
func (s *scriptRun) content(args []string) (data []byte, whole bool) {
	switch args[0] {
	case "empty":
		return []byte{}, true
	case "garbage":
		return []byte("\x7fELF\x02\x01\x01 not a model at all\n"), true
	case "model", "truncated":
	default:
		s.fatalf("unknown content %q", args[0])
	}
	var spec trttest.Spec
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		var err error
		switch k {
		case "value":
			var f float64
			f, err = strconv.ParseFloat(v, 32)
			spec.Value = float32(f)
		case "nan":
			spec.NaN = true
		case "inf":
			spec.Inf = true
		case "infer-error":
			spec.InferError = true
		case "short-output":
			spec.ShortOutput = true
		case "reshape":
			spec.Reshape = true
		case "version-error":
			spec.VersionError = true
		case "load-error":
			spec.LoadError = v
		case "delay":
			spec.Delay, err = time.ParseDuration(v)
		case "pad":
			spec.Pad, err = strconv.Atoi(v)
		case "in", "out":
			var ts trt.TensorSpec
			ts, err = parseTensorArg(v)
			if k == "in" {
				spec.Inputs = append(spec.Inputs, ts)
			} else {
				spec.Outputs = append(spec.Outputs, ts)
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			s.fatalf("%s: %v", a, err)
		}
	}
	if len(spec.Inputs) > 0 && len(spec.Outputs) == 0 {
		spec.Outputs = trttest.DefaultOutputs
	}
	if len(spec.Outputs) > 0 && len(spec.Inputs) == 0 {
		spec.Inputs = trttest.DefaultInputs
	}
	b := spec.Bytes()
	if args[0] == "truncated" {
		return b[:len(b)/2], true
	}
	return b, true
}

// parseTensorArg parses NAME:TYPE:D,D,...
func parseTensorArg(v string) (trt.TensorSpec, error) {
	b := []byte(trttest.Header + "\nin " + strings.ReplaceAll(v, ":", " ") + "\nout y float32 1\nvalue 0\nend\n")
	s, err := trttest.Parse(b)
	if err != nil {
		return trt.TensorSpec{}, err
	}
	return s.Inputs[0], nil
}
