package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/trt/onnx"
)

// isolatedEnv is the environment of a traced edged: the test's own minus
// the folders a library could write to unasked (HOME, TMPDIR, XDG_*),
// which point at the empty folders of dirs instead; minus the variables
// ONNX Runtime takes as "running in CI" (they would switch its telemetry
// off whatever edged does) and with ORT_DISABLE_TELEMETRY=0, the value a
// user could have set, which edged must override.
func isolatedEnv(t *testing.T, root, lib string) (env []string, dirs map[string]string) {
	dirs = map[string]string{}
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "cwd"} {
		dirs[k] = filepath.Join(root, strings.ToLower(k))
		if err := os.Mkdir(dirs[k], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := dirs[k]; ours || slices.Contains(onnx.CIVariables, k) || strings.HasPrefix(k, "ORT_") ||
			k == "NOTIFY_SOCKET" || k == "STATE_DIRECTORY" || k == "CACHE_DIRECTORY" || strings.HasPrefix(k, "LISTEN_") {
			continue
		}
		env = append(env, kv)
	}
	for k, d := range dirs {
		if k != "cwd" {
			env = append(env, k+"="+d)
		}
	}
	return append(env, "EDGED_ONNXRUNTIME_LIB="+lib, onnx.EnvDisableTelemetry+"=0"), dirs
}

var startedPID = regexp.MustCompile(`msg="edged starting".* pid=(\d+)`)

// TestNothingLeavesTheDevice runs `edged run` under strace for 20 s past
// READY=1 (ONNX Runtime 1.30's telemetry resolves its collector about
// 10 s after start) with a socket sink, a metrics listener, a state
// folder and — when Mosquitto is installed — an MQTT sink, while a client
// reads results and /metrics is scraped; then `edged check`. It fails on
//
//   - connections: any peer the configuration does not name: only the
//     NOTIFY_SOCKET, the socket sink's own path (probed for a stale
//     socket) and the MQTT broker are allowed, and no DNS;
//   - files: any name created, opened for writing, renamed, linked or
//     removed outside the state folder, the socket's folder and /dev, and
//     any file left in HOME, TMPDIR, XDG_* or the working folder, all
//     pointed at empty folders (check too: it makes and removes its
//     probes of the socket and state folders there).
func TestNothingLeavesTheDevice(t *testing.T) {
	lib := needORT(t)
	strace := needStrace(t)
	root := t.TempDir()
	env, dirs := isolatedEnv(t, root, lib)
	state, sockDir := filepath.Join(root, "state"), filepath.Join(root, "run")
	for _, d := range []string{state, sockDir} {
		os.Mkdir(d, 0o750)
	}
	n := newNotifySocket(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", mosquittotest.FreePort(t))
	edits := []string{
		`state_dir = ""`, `state_dir = "` + state + `"`,
		`metrics_listen = ""`, `metrics_listen = "` + metrics + `"`,
	}
	allowed := map[string]bool{"unix:" + n.path: true}
	brokerPort := 0
	if mq := findMosquitto(t); mq != "" {
		brokerPort = mosquittotest.FreePort(t)
		conf := filepath.Join(root, "mosquitto.conf")
		os.WriteFile(conf, []byte(fmt.Sprintf("user root\nlistener %d 127.0.0.1\nallow_anonymous true\n", brokerPort)), 0o600)
		broker := exec.Command(mq, "-c", conf)
		if err := broker.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { broker.Process.Signal(syscall.SIGTERM); broker.Wait() })
		waitDial(t, fmt.Sprintf("127.0.0.1:%d", brokerPort))
		allowed[fmt.Sprintf("ip:127.0.0.1:%d", brokerPort)] = true
		edits = append(edits, `sinks = ["local"]`, `sinks = ["local", "cloud"]`,
			`# Serial (UART) sink:`, fmt.Sprintf("[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = \"mqtt://127.0.0.1:%d\"\n\n# Serial (UART) sink:", brokerPort))
	} else {
		t.Log("mosquitto not installed: no MQTT sink in this run")
	}
	cfg, sock := testConfig(t, sockDir, edits...)
	allowed["unix:"+sock] = true

	cmd := edged("run", "-config", cfg)
	cmd.Env = append(env, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=15000000")
	cmd.Dir = dirs["cwd"]
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	prefix := filepath.Join(root, "trace", "run")
	os.Mkdir(filepath.Dir(prefix), 0o755)
	tr := traceCmd(strace, prefix, cmd)
	tr.WaitDelay = 5 * time.Second // edged may outlive a killed strace: do not wait for its stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	t.Cleanup(func() {
		if tr.ProcessState == nil {
			if pm := startedPID.FindStringSubmatch(stderr.String()); pm != nil {
				pid, _ := strconv.Atoi(pm[1])
				syscall.Kill(pid, syscall.SIGKILL)
			}
			tr.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("edged stderr:\n%s", stderr.String())
		}
	})
	n.waitFor(t, "READY=1", 60*time.Second, func(m []string) bool { return index(m, "READY=1") >= 0 })
	ready := time.Now()

	// Use what the configuration names: a client reads results, /metrics
	// is scraped, and (above) the MQTT sink delivers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := stream.Dial(ctx, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m stream.Message
	for i := 0; i < 20; i++ {
		if err := cl.Next(&m); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if resp, err := http.Get("http://" + metrics + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	time.Sleep(time.Until(ready.Add(20 * time.Second)))

	pm := startedPID.FindStringSubmatch(stderr.String())
	if pm == nil {
		t.Fatalf("no pid in the log")
	}
	pid, _ := strconv.Atoi(pm[1])
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("edged did not stop after SIGTERM")
	}
	calls := readTrace(t, prefix)
	t.Logf("edged run: %d traced calls over %v", len(calls), time.Since(ready).Round(time.Second))

	t.Run("connections", func(t *testing.T) {
		for peer, cs := range peers(calls) {
			t.Logf("peer %s: %d calls", peer, len(cs))
			if !allowed[peer] {
				t.Errorf("edged reached %s, which its configuration does not name (%d calls), e.g. %s", peer, len(cs), cs[0])
			}
		}
		if brokerPort != 0 && len(peers(calls)[fmt.Sprintf("ip:127.0.0.1:%d", brokerPort)]) == 0 {
			t.Errorf("no connection to the broker was traced: is the trace complete?")
		}
	})
	t.Run("files", func(t *testing.T) {
		changed := changedPaths(calls, dirs["cwd"])
		t.Logf("%d paths changed, all under %s or %s", len(changed), state, sockDir)
		checkChanged(t, changed, state, sockDir)
		emptyDirs(t, dirs)
	})
	t.Run("check", func(t *testing.T) {
		cmd := edged("check", "-config", cfg)
		cmd.Env, cmd.Dir = env, dirs["cwd"]
		prefix := filepath.Join(root, "trace", "check")
		out, err := traceCmd(strace, prefix, cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("edged check: %v\n%s", err, out)
		}
		calls := readTrace(t, prefix)
		// check asks systemd about the unit's IPAddressDeny= (systemctl
		// show, over systemd's or D-Bus' socket) when the configuration
		// has a network endpoint.
		asked := map[string]bool{"unix:/run/systemd/private": true, "unix:/run/dbus/system_bus_socket": true, "unix:/var/run/dbus/system_bus_socket": true}
		for peer, cs := range peers(calls) {
			if !allowed[peer] && !asked[peer] {
				t.Errorf("edged check reached %s (%d calls), e.g. %s", peer, len(cs), cs[0])
			}
		}
		// check makes the socket in its folder and a file in the state
		// folder, as run would, and removes them (issue 19): changes
		// there, nothing left behind.
		checkChanged(t, changedPaths(calls, dirs["cwd"]), state, sockDir)
		emptyDirs(t, dirs)
		for _, d := range []string{state, sockDir} {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".edged-") {
					t.Errorf("edged check left %s in %s", e.Name(), d)
				}
			}
		}
	})
}

// checkChanged fails for every changed path outside the folders given
// and /dev.
func checkChanged(t *testing.T, changed map[string][]sysCall, folders ...string) {
	t.Helper()
	for p, cs := range changed {
		ok := within(p, "/dev")
		for _, f := range folders {
			ok = ok || within(p, f)
		}
		if !ok {
			t.Errorf("%s changed outside edged's folders (%d calls), e.g. %s", p, len(cs), cs[0])
		}
	}
}

// findMosquitto is the broker when it is installed ("" when not; a
// failure instead under EDGED_REQUIRE_MOSQUITTO=1).
func findMosquitto(t *testing.T) string {
	if p := mosquittotest.Lookup(); p != "" || os.Getenv("EDGED_REQUIRE_MOSQUITTO") != "1" {
		return p
	}
	return mosquittotest.Path(t) // fails
}
