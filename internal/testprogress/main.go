package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// pkg is what is known of a package so far.
type pkg struct {
	started time.Time
	output  []string            // the package's own output (no test)
	tests   map[string][]string // each test's output, while it runs or once it failed
	running map[string]time.Time
	failed  []string // tests that failed, in order
	done    bool
}

// printer turns events into the report; its methods are called with mu
// held (the heartbeat runs on a goroutine of its own).
type printer struct {
	mu       sync.Mutex
	w        io.Writer
	pkgs     map[string]*pkg
	order    []string
	last     time.Time // when something was last printed
	failed   bool
	now      func() time.Time
	interval time.Duration
}

func newPrinter(w io.Writer) *printer {
	return &printer{w: w, pkgs: map[string]*pkg{}, now: time.Now, interval: 20 * time.Second, last: time.Now()}
}

func (p *printer) printf(format string, a ...any) {
	fmt.Fprintf(p.w, format, a...)
	p.last = p.now()
}

func (p *printer) pkg(name string) *pkg {
	k := p.pkgs[name]
	if k == nil {
		k = &pkg{started: p.now(), tests: map[string][]string{}, running: map[string]time.Time{}}
		p.pkgs[name] = k
		p.order = append(p.order, name)
	}
	return k
}

// line handles one input line: an event, or (go's own messages, a
// corrupted line) text that is passed on as it is.
func (p *printer) line(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		p.printf("%s\n", b)
		return
	}
	if e.Package == "" { // build output of a command line
		if e.Output != "" {
			p.printf("%s", e.Output)
		}
		return
	}
	k := p.pkg(e.Package)
	switch e.Action {
	case "start":
		k.started = p.now()
	case "run":
		if e.Test != "" {
			k.running[e.Test] = p.now()
		}
	case "output", "build-output":
		if isMarker(e.Output) {
			return // go test without -v does not print them either
		}
		if e.Test == "" {
			k.output = append(k.output, e.Output)
		} else {
			k.tests[e.Test] = append(k.tests[e.Test], e.Output)
		}
	case "pass", "skip":
		if e.Test != "" {
			delete(k.running, e.Test)
			delete(k.tests, e.Test) // a passed test's output is not shown
			return
		}
		p.finish(e.Package, k, e)
	case "fail", "build-fail":
		if e.Test != "" {
			delete(k.running, e.Test)
			k.failed = append(k.failed, e.Test)
			return
		}
		p.finish(e.Package, k, e)
	}
}

// isMarker reports whether line is one of the lines test2json adds to
// say which test runs ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME").
func isMarker(line string) bool {
	for _, m := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(line, m) {
			return true
		}
	}
	return false
}

// finish prints a package's line, and everything a failure needs.
func (p *printer) finish(name string, k *pkg, e event) {
	k.done = true
	if e.Action == "pass" || e.Action == "skip" {
		// go test's own summary line ("ok  pkg 1.2s", "?  pkg [no test
		// files]") is the package's last output.
		p.printf("%s", summary(k.output, name, e))
		return
	}
	p.failed = true
	for _, t := range k.failed {
		// A subtest's output is under its own name; its parent's holds
		// the "--- FAIL" lines around it.
		p.printf("%s", strings.Join(k.tests[t], ""))
	}
	p.printf("%s", strings.Join(k.output, ""))
	if len(k.output) == 0 {
		p.printf("FAIL\t%s\t%.3fs\n", name, e.Elapsed)
	}
}

// summary is the line go test ends a package's output with, or one like it.
func summary(out []string, name string, e event) string {
	for i := len(out) - 1; i >= 0; i-- {
		if l := out[i]; strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") || strings.HasPrefix(l, "ok\t") || strings.HasPrefix(l, "?\t") {
			return l
		}
	}
	if e.Action == "skip" {
		return fmt.Sprintf("?   \t%s\t[no test files]\n", name)
	}
	return fmt.Sprintf("ok  \t%s\t%.3fs\n", name, e.Elapsed)
}

// heartbeat says what is still running when nothing was printed for the
// interval.
func (p *printer) heartbeat() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if now.Sub(p.last) < p.interval {
		return
	}
	var parts []string
	for _, name := range p.order {
		k := p.pkgs[name]
		if k.done {
			continue
		}
		s := fmt.Sprintf("%s (%s", name, now.Sub(k.started).Round(time.Second))
		var tests []string
		for t := range k.running {
			tests = append(tests, t)
		}
		slices.SortFunc(tests, func(a, b string) int { return k.running[a].Compare(k.running[b]) })
		for i, t := range tests {
			if i == 2 {
				s += fmt.Sprintf(", +%d more", len(tests)-2)
				break
			}
			s += fmt.Sprintf(", %s %s", t, now.Sub(k.running[t]).Round(time.Second))
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		parts = []string{"building"}
	}
	p.printf("... still running: %s\n", strings.Join(parts, "; "))
}

// end reports packages the input left unfinished; it returns whether all
// passed.
func (p *printer) end() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range p.order {
		if k := p.pkgs[name]; !k.done {
			p.failed = true
			p.printf("%s%s", strings.Join(k.output, ""), fmt.Sprintf("FAIL\t%s\t(no result: the output ended while it ran)\n", name))
		}
	}
	return !p.failed
}

func run(in io.Reader, out io.Writer, tick <-chan time.Time) bool {
	p := newPrinter(out)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-tick:
				p.heartbeat()
			}
		}
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		p.line(sc.Bytes())
	}
	close(stop)
	wg.Wait()
	if err := sc.Err(); err != nil {
		p.printf("testprogress: reading the test output: %v\n", err)
		p.failed = true
	}
	return p.end()
}

func main() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	if !run(os.Stdin, os.Stdout, t.C) {
		os.Exit(1)
	}
}
