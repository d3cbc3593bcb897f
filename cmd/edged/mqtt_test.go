package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/stream"
)

// TestMQTTSinkWrongCredentials runs the binary with a socket sink and two
// MQTT sinks on a real Mosquitto that requires a password: the one with a
// wrong password logs a clear error naming the sink and url, counts it in
// /metrics (edged_sink_errors_total{reason="auth"}, edged_sink_connected
// 0) and announces sink_down on the socket, while the socket keeps
// streaming results and the other MQTT sink delivers them, each with the
// device id, in order. Then its password file is corrected and SIGHUP
// sent: the sink is rebuilt with the new password and connects (sink_up),
// the socket client staying connected.
func TestMQTTSinkWrongCredentials(t *testing.T) {
	lib := needORT(t)
	bin := mosquittotest.Path(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command("mosquitto_passwd", "-b", "-c", pw, "edged", "s3cret").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v %s", err, out)
	}
	port := mosquittotest.FreePort(t)
	conf := filepath.Join(dir, "mosquitto.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf("user root\nlistener %d 127.0.0.1\nallow_anonymous false\npassword_file %s\nlog_dest file %s/mosquitto.log\n", port, pw, dir)), 0o600)
	broker := exec.Command(bin, "-c", conf)
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Process.Signal(syscall.SIGTERM); broker.Wait() })
	brokerURL := fmt.Sprintf("mqtt://127.0.0.1:%d", port)
	waitDial(t, fmt.Sprintf("127.0.0.1:%d", port))

	// A subscriber to what the good sink sends.
	var mu sync.Mutex
	var got []stream.Decoded
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u, _ := url.Parse(brokerURL)
	ready := make(chan struct{}, 1)
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{u}, KeepAlive: 5, ConnectUsername: "edged", ConnectPassword: []byte("s3cret"),
		CleanStartOnInitialConnection: true,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			go func() {
				cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "edged/edge-42/#", QoS: 1}}})
				ready <- struct{}{}
			}()
		},
		ClientConfig: paho.ClientConfig{ClientID: "test-sub", OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			var d stream.Decoded
			if p := string(pr.Packet.Payload); p == "online" || p == "offline" {
				return true, nil // presence, not a record
			}
			if err := stream.DecodeJSON(pr.Packet.Payload, &d); err == nil {
				mu.Lock()
				got = append(got, d)
				mu.Unlock()
			}
			return true, nil
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("subscriber did not subscribe")
	}
	defer func() { cancel(); <-cm.Done() }()

	good := filepath.Join(dir, "good.pw")
	bad := filepath.Join(dir, "bad.pw")
	os.WriteFile(good, []byte("s3cret\n"), 0o600)
	os.WriteFile(bad, []byte("wrong\n"), 0o600)
	metrics := fmt.Sprintf("127.0.0.1:%d", mosquittotest.FreePort(t))
	goodSink := fmt.Sprintf(`[[sink]]
name = "good"
kind = "mqtt"
url = %q
username = "edged"
password_file = %q

# Serial (UART) sink:`, brokerURL, good)
	badSink := fmt.Sprintf(`[[sink]]
name = "cloud"
kind = "mqtt"
url = %q
username = "edged"
password_file = %q

`, brokerURL, bad)
	config := func(bad bool) (string, string) {
		sinks, extra := `sinks = ["local", "good"]`, goodSink
		if bad {
			sinks, extra = `sinks = ["local", "cloud", "good"]`, badSink+goodSink
		}
		return testConfig(t, dir,
			`sinks = ["local"]`, sinks,
			`state_dir = ""`, `state_dir = "`+filepath.Join(dir, "state")+`"`,
			`metrics_listen = ""`, `metrics_listen = "`+metrics+`"`,
			`device_id = ""`, `device_id = "edge-42"`,
			`# Serial (UART) sink:`, extra)
	}
	cfg, sock := config(false)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, "mqtt sink connected")
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cl, err := stream.Dial(cctx, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The sink with the wrong password comes in with a reload, so that
	// this client is there to see its sink_down.
	config(true)
	d.cmd.Process.Signal(syscall.SIGHUP)
	var m stream.Message
	results, sawDown := 0, false
	t0 := time.Now()
	for results < 100 || !sawDown {
		if err := cl.Next(&m); err != nil {
			t.Fatalf("socket: %v (results %d, sink_down seen %v)", err, results, sawDown)
		}
		if m.Rec.Device != "edge-42" {
			t.Fatalf("socket record without the device id: %+v", m.Rec)
		}
		switch {
		case m.Rec.Type == "result":
			results++
		case m.Rec.Event == "sink_down" && m.Rec.Source == "cloud":
			sawDown = true
			if !strings.Contains(m.Rec.Reason, `"cloud"`) || !strings.Contains(m.Rec.Reason, brokerURL) || !strings.Contains(m.Rec.Reason, "credentials") {
				t.Errorf("sink_down reason %q", m.Rec.Reason)
			}
		}
	}
	t.Logf("socket: %d results in %v beside the refused MQTT sink", results, time.Since(t0))

	log := d.stderr.String()
	if !strings.Contains(log, "sink=cloud") || !strings.Contains(log, brokerURL) {
		t.Errorf("the error does not name the sink and url:\n%s", log)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`edged_sink_connected{sink="cloud"} 0`, `edged_sink_connected{sink="good"} 1`, `edged_sink_errors_total{reason="auth",sink="cloud"} `} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), `edged_sink_errors_total{reason="auth",sink="cloud"} 0`) {
		t.Error("auth errors not counted")
	}

	// Results go to edged/edge-42/demo/results, status records (sharing
	// the sink's seq) to edged/edge-42/status: together, seq has no gap.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, r := range got {
			if r.Type == "result" {
				n++
			}
		}
		mu.Unlock()
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d results over MQTT", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	for i, r := range got {
		if r.Device != "edge-42" || (r.Type == "result" && r.Pipeline != "demo") || (i > 0 && r.Seq != got[i-1].Seq+1) {
			t.Fatalf("MQTT record %d: %+v (previous seq %d)", i, r, got[max(i-1, 0)].Seq)
		}
	}
	mu.Unlock()

	// The password file corrected, then SIGHUP: the files a configuration
	// names are part of it, so this is a changed configuration (before,
	// "configuration unchanged" until a restart). The sink is rebuilt with
	// the new password and connects; the socket sink, whose files did not
	// change, keeps its client.
	os.WriteFile(bad, []byte("s3cret\n"), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	for up := false; !up; {
		if err := cl.Next(&m); err != nil {
			t.Fatalf("socket after the corrected password file: %v", err)
		}
		up = m.Rec.Event == "sink_up" && m.Rec.Source == "cloud"
	}
	if strings.Contains(d.stderr.String(), "configuration unchanged") {
		t.Error("the corrected password file was taken for an unchanged configuration")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `edged_sink_connected{sink="cloud"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink with the corrected password is not connected:\n%s", body)
		}
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func waitDial(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
