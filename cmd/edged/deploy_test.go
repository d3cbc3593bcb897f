package main

import (
	"bytes"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/trt/demomodel"
)

// yamlBlock returns the literal block scalar (key: |) named key in text,
// dedented, or "" when there is none.
func yamlBlock(text, key string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != key+": |" {
			continue
		}
		keyIndent := len(l) - len(strings.TrimLeft(l, " "))
		indent := -1
		var out []string
		for _, b := range lines[i+1:] {
			if strings.TrimSpace(b) == "" {
				out = append(out, "")
				continue
			}
			n := len(b) - len(strings.TrimLeft(b, " "))
			if n <= keyIndent {
				break
			}
			if indent < 0 {
				indent = n
			}
			if n < indent {
				break
			}
			out = append(out, b[indent:])
		}
		return strings.Join(out, "\n")
	}
	return ""
}

// uncommented drops YAML comment lines (those starting with #).
func uncommented(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestDeployK8sExample keeps deploy/k8s/edged-daemonset.yaml from rotting
// (there is no YAML parser among edged's dependencies, so the checks are
// textual): the edged.toml in its ConfigMap parses with edged's own
// parser, the model in its model ConfigMap is the demo model, and the
// DaemonSet mounts what that configuration names: the models read-only at
// the model's folder (the whole volume, no subPath), the socket's folder
// and the state folder from the host, the configuration at /etc/edged, and
// probes on the metrics port at /livez and /readyz.
func TestDeployK8sExample(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "k8s", "edged-daemonset.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	toml := yamlBlock(text, "edged.toml")
	if toml == "" {
		t.Fatal("no edged.toml: | block in the ConfigMap")
	}
	cfg, err := config.Parse(path+": edged.toml", []byte(toml))
	if err != nil {
		t.Fatalf("the ConfigMap's edged.toml does not parse:\n%v", err)
	}

	m := regexp.MustCompile(`(?m)^\s+model\.onnx: (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no binaryData model.onnx")
	}
	model, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatalf("binaryData model.onnx: %v", err)
	}
	if !bytes.Equal(model, demomodel.Default) {
		t.Error("binaryData model.onnx is not trt/demomodel/demo.onnx (regenerate it: base64 -w0 trt/demomodel/demo.onnx)")
	}

	live := uncommented(text)
	if strings.Contains(live, "subPath") {
		t.Error("a subPath mount never sees a ConfigMap update")
	}
	// mounts maps each mountPath to its volume name and whether it is
	// read-only.
	type mount struct {
		volume   string
		readOnly bool
	}
	mounts := map[string]mount{}
	re := regexp.MustCompile(`(?m)^\s+- name: (\S+)\n\s+mountPath: (\S+)(\n\s+readOnly: true)?`)
	for _, s := range re.FindAllStringSubmatch(live, -1) {
		mounts[s[2]] = mount{volume: s[1], readOnly: s[3] != ""}
	}
	volume := func(name string) string {
		i := strings.Index(live, "      volumes:\n")
		if i < 0 {
			t.Fatal("no volumes")
		}
		vols := live[i:]
		j := strings.Index(vols, "        - name: "+name+"\n")
		if j < 0 {
			t.Fatalf("no volume %s", name)
		}
		v := vols[j+len("        - name: "+name+"\n"):]
		if k := strings.Index(v, "        - name: "); k >= 0 {
			v = v[:k]
		}
		return v
	}
	need := func(what, dir string, readOnly bool, wantVolume string) {
		t.Helper()
		mt, ok := mounts[dir]
		switch {
		case !ok:
			t.Errorf("%s: nothing is mounted at %s", what, dir)
		case readOnly && !mt.readOnly:
			t.Errorf("%s: %s is not mounted read-only", what, dir)
		case !strings.Contains(volume(mt.volume), wantVolume):
			t.Errorf("%s: volume %s is not %q:\n%s", what, mt.volume, wantVolume, volume(mt.volume))
		}
	}
	if len(cfg.Models) != 1 {
		t.Fatalf("%d models", len(cfg.Models))
	}
	need("model", filepath.Dir(cfg.Models[0].Path), true, "name: edged-models")
	need("configuration", "/etc/edged", true, "name: edged-config")
	if !strings.Contains(live, `args: ["run", "-config", "/etc/edged/edged.toml"]`) {
		t.Error("edged is not run with -config /etc/edged/edged.toml")
	}
	sock := ""
	for _, s := range cfg.Sinks {
		if s.Kind == "socket" {
			sock = s.Path
		}
	}
	need("socket", filepath.Dir(sock), false, "path: "+filepath.Dir(sock))
	need("state", cfg.Daemon.StateDir, false, "path: "+cfg.Daemon.StateDir)

	_, port, err := net.SplitHostPort(cfg.Daemon.MetricsListen)
	if err != nil {
		t.Fatalf("metrics_listen %q: %v (the probes need a TCP listener)", cfg.Daemon.MetricsListen, err)
	}
	if !strings.Contains(live, "- name: metrics\n              containerPort: "+port+"\n") {
		t.Errorf("the container port named metrics is not %s, metrics_listen's", port)
	}
	for _, probe := range []string{"livenessProbe:", "readinessProbe:", "startupProbe:"} {
		if !strings.Contains(live, probe) {
			t.Errorf("no %s", probe)
		}
	}
	for _, p := range []string{"httpGet: {path: /livez, port: metrics}", "httpGet: {path: /readyz, port: metrics}"} {
		if !strings.Contains(live, p) {
			t.Errorf("no probe %q", p)
		}
	}
	for _, s := range []string{"runtimeClassName: nvidia", "privileged: false", "readOnlyRootFilesystem: true"} {
		if !strings.Contains(live, s) {
			t.Errorf("no %q", s)
		}
	}
	for _, src := range cfg.Sources {
		if src.Device == "" {
			continue
		}
		if !strings.Contains(text, src.Device) {
			t.Errorf("source %s's device %s is not in the DaemonSet", src.Name, src.Device)
		}
	}
}
