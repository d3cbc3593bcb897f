package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// configText is the soak's configuration: a synthetic camera at fps, the
// model file served from models/, a serial IMU on a pty attached to every
// result, results to a socket and a serial sink on another pty, metrics on
// loopback, and a state folder (last-good copies are written on every
// reload).
func (s *soak) configText(fps float64) string {
	sinks, extra := `"local", "uart"`, ""
	if s.mqtt != nil {
		sinks += `, "cloud"`
		extra += s.mqtt.sinkConfig()
	}
	if s.o.replay {
		extra += s.replayConfig()
	}
	return fmt.Sprintf(`# edged soak (bench/cmd/soak): generated, rewritten on SIGHUP churn
[daemon]
log_level = "info"
state_dir = %q
metrics_listen = %q
device_id = %q

[[source]]
name = "cam"
kind = "synthetic"
width = %d
height = %d
fps = %g

[[source]]
name = "imu"
kind = "serial"
device = %q
baud = 921600
protocol = "csv"
columns = ["n", "ax"]

[[model]]
name = "demo"
path = %q

[[pipeline]]
name = "soak"
source = "cam"
model = "demo"
sensors = ["imu"]
sensor_window = "50ms"
sinks = [%s]

[[pipeline.postprocess]]
output = "class"
kind = "topk"
labels = ["red", "green", "blue", "yellow", "cyan", "magenta", "orange", "grey"]

[[sink]]
name = "local"
kind = "socket"
path = %q
write_timeout = %q

[[sink]]
name = "uart"
kind = "serial"
device = %q
baud = 921600
`, filepath.Join(s.dir, "state"), s.metricsAddr, mqttDevice, s.o.width, s.o.height, fps,
		s.imu.link, s.modelPath, sinks, s.sock, s.o.writeTimeout.String(), s.uart.link) + extra
}

// writeConfig replaces the configuration file atomically.
func (s *soak) writeConfig(fps float64) error {
	tmp := s.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.configText(fps)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.cfgPath)
}

// variant is one model file the churn renames into place.
type variant struct {
	n    int
	data []byte
	sha  string // first 12 hex digits of its SHA-256, as results carry it
}

// makeVariants has edged write the demo model and its variants 1..7
// (classes permuted), so the files are what `edged demo-model` writes.
func makeVariants(edged, dir string) ([]variant, error) {
	var out []variant
	for n := 0; n <= 7; n++ {
		p := filepath.Join(dir, fmt.Sprintf("variant%d.onnx", n))
		if b, err := exec.Command(edged, "demo-model", "-o", p, "-variant", fmt.Sprint(n)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s demo-model -variant %d: %w\n%s", edged, n, err, b)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		out = append(out, variant{n: n, data: data, sha: hex.EncodeToString(sum[:])[:12]})
	}
	return out, nil
}

// writeModel puts data at the model path the safe way: a temporary file
// in the same folder, then a rename.
func (s *soak) writeModel(data []byte) error {
	tmp := filepath.Join(filepath.Dir(s.modelPath), ".demo.onnx.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.modelPath)
}

// edgedProc is the running daemon.
type edgedProc struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

func startEdged(bin, cfg, logPath, ortLib string) (*edgedProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	newCmd := func() *exec.Cmd {
		c := exec.Command(bin, "run", "-config", cfg)
		c.Env = os.Environ()
		if ortLib != "" {
			c.Env = append(c.Env, "EDGED_ONNXRUNTIME_LIB="+ortLib)
		}
		c.Stdout, c.Stderr = logf, logf
		return c
	}
	cmd := newCmd()
	// If the soak dies, edged must not run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cmd = newCmd() // a sandbox without PR_SET_PDEATHSIG
		if err2 := cmd.Start(); err2 != nil {
			logf.Close()
			return nil, fmt.Errorf("%s: %w", bin, err)
		}
	}
	e := &edgedProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		e.waitErr = cmd.Wait()
		logf.Close()
		close(e.exited)
	}()
	return e, nil
}

func (e *edgedProc) pid() int { return e.cmd.Process.Pid }

func (e *edgedProc) hasExited() bool {
	select {
	case <-e.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to timeout (then SIGKILL); it returns the
// exit status and how long edged took.
func (e *edgedProc) stop(timeout time.Duration) (code int, took time.Duration, killed bool) {
	t0 := time.Now()
	if !e.hasExited() {
		e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(timeout):
			e.cmd.Process.Kill()
			<-e.exited
			killed = true
		}
	}
	return e.cmd.ProcessState.ExitCode(), time.Since(t0), killed
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
