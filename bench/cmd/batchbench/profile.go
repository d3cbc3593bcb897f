package main

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// profiler samples a process's CPU with perf record over the window.
type profiler struct {
	perf, data string
	cmd        *exec.Cmd
	done       chan error
}

// startProfile starts perf record on pid, writing data; nil when perf is
// "" (no profile asked for).
func startProfile(perf, data string, pid int) (*profiler, error) {
	if perf == "" {
		return nil, nil
	}
	p := &profiler{perf: perf, data: data, done: make(chan error, 1)}
	// cpu-clock: a software event, so it works in a VM without PMU access.
	p.cmd = exec.Command(perf, "record", "-q", "-e", "cpu-clock", "-F", "499", "-p", fmt.Sprint(pid), "-o", data)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s record: %w", perf, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p, nil
}

// stop ends the recording (perf writes its file on SIGINT) and returns
// what perf report makes of it: CPU by shared object and the top symbols.
func (p *profiler) stop() string {
	if p == nil {
		return ""
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	var b strings.Builder
	for _, sort := range []string{"dso", "dso,sym"} {
		out, err := exec.Command(p.perf, "report", "-i", p.data, "--sort", sort, "--stdio", "--percent-limit", "1.5").CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%s report -i %s: %v: %s", p.perf, p.data, err, strings.TrimSpace(string(out)))
		}
		fmt.Fprintf(&b, "perf report --sort %s:\n", sort)
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.TrimRight(l, " "); l != "" && !strings.HasPrefix(l, "#") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// gpuMemory is the GPU memory process pid holds, as nvidia-smi reports
// it (used_memory of its compute context, MiB); 0 when it holds none.
func gpuMemory(nvidiaSMI string, pid int) (int64, error) {
	out, err := exec.Command(nvidiaSMI, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", nvidiaSMI, err)
	}
	return parseComputeApps(string(out), pid)
}

// parseComputeApps sums the MiB of pid's lines of nvidia-smi's
// "pid, used_memory" CSV.
func parseComputeApps(csv string, pid int) (int64, error) {
	var total int64
	for _, l := range strings.Split(strings.TrimSpace(csv), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		var p int
		var mib int64
		if _, err := fmt.Sscanf(l, "%d, %d", &p, &mib); err != nil {
			return 0, fmt.Errorf("nvidia-smi line %q: %w", l, err)
		}
		if p == pid {
			total += mib << 20
		}
	}
	return total, nil
}
