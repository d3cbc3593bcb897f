package mqttsink

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
)

// TestProbe is edged check's MQTT probe against a real broker that wants
// a password over TLS: the right credentials connect, a wrong password is
// ErrAuth, a certificate the configured CA did not sign is ErrTLS and a
// port nobody listens on is ErrConnect. It does not take the session of
// a sink connected with the same client id, and publishes nothing.
func TestProbe(t *testing.T) {
	mosquittotest.Path(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command("mosquitto_passwd", "-b", "-c", pw, "edged", "s3cret").CombinedOutput(); err != nil {
		t.Skipf("mosquitto_passwd: %v %s", err, out)
	}
	caFile, certFile, keyFile := certs(t, dir, "broker")
	otherCA, _, _ := certs(t, dir, "other")
	plain := mosquittotest.FreePort(t)
	b := startBroker(t, fmt.Sprintf("certfile %s\nkeyfile %s\nlistener %d 127.0.0.1\nallow_anonymous false\npassword_file %s", certFile, keyFile, plain, pw))
	tlsGood, err := TLSConfig(readPEM(t, caFile), PEM{}, PEM{})
	if err != nil {
		t.Fatal(err)
	}
	tlsBad, _ := TLSConfig(readPEM(t, otherCA), PEM{}, PEM{})
	sub := subscribeAt(t, mustURL(t, fmt.Sprintf("mqtt://127.0.0.1:%d", plain)), "#", "edged", "s3cret")

	// A sink connected with the client id the probes use, before them.
	running := newTestSink(t, Options{Name: "cloud", Device: "dev-1", ClientID: "edged-{device}-{sink}", URL: b.url("mqtts"), QoS: 1, TLS: tlsGood,
		Username: "edged", Password: []byte("s3cret"), Dir: t.TempDir()}, nil)
	waitFor(t, "the running sink to connect", 10*time.Second, func() bool { return running.Stats().Connected })
	o := Options{Name: "cloud", Device: "dev-1", ClientID: "edged-{device}-{sink}", URL: b.url("mqtts"), TLS: tlsGood, Username: "edged", Password: []byte("s3cret"), ConnectTimeout: 3 * time.Second}
	ctx := context.Background()
	if err := Probe(ctx, o); err != nil {
		t.Errorf("right credentials: %v", err)
	}
	wrong := o
	wrong.Password = []byte("wrong")
	if err := Probe(ctx, wrong); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong password: %v, want ErrAuth", err)
	}
	untrusted := o
	untrusted.TLS = tlsBad
	if err := Probe(ctx, untrusted); !errors.Is(err, ErrTLS) {
		t.Errorf("untrusted certificate: %v, want ErrTLS", err)
	}
	closed := o
	closed.URL = mustURL(t, fmt.Sprintf("mqtts://127.0.0.1:%d", mosquittotest.FreePort(t)))
	if err := Probe(ctx, closed); !errors.Is(err, ErrConnect) || errors.Is(err, ErrAuth) || errors.Is(err, ErrTLS) {
		t.Errorf("nobody listening: %v, want ErrConnect", err)
	}
	time.Sleep(300 * time.Millisecond)
	if st := running.Stats(); !st.Connected || st.Connects != 1 {
		t.Errorf("the running sink lost its connection to a probe: %+v", st)
	}
	recs, presence := sub.records(t)
	// The running sink's sink_started record and its retained "online".
	if len(recs) != 1 || recs[0].Event != EventStarted || len(presence) != 1 {
		t.Errorf("the probes published: %d records (%+v), presence %q", len(recs), recs, presence)
	}
}
