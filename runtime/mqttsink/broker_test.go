package mqttsink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
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

// broker is a Mosquitto process on a loopback port, with a generated
// configuration.
type broker struct {
	t     *testing.T
	bin   string
	dir   string
	port  int
	extra string // more configuration lines for the listener
	mu    sync.Mutex
	cmd   *exec.Cmd
	exit  chan struct{}
}

func startBroker(t *testing.T, extra string) *broker {
	b := &broker{t: t, bin: mosquittotest.Path(t), dir: t.TempDir(), port: mosquittotest.FreePort(t), extra: extra}
	b.start()
	t.Cleanup(func() {
		b.stop()
		if t.Failed() || os.Getenv("EDGED_MOSQUITTO_LOG") != "" {
			log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			t.Logf("mosquitto log (last lines):\n%s", strings.Join(lines[max(0, len(lines)-4000):], "\n"))
		}
	})
	return b
}

func (b *broker) url(scheme string) *url.URL {
	u, _ := url.Parse(fmt.Sprintf("%s://127.0.0.1:%d", scheme, b.port))
	return u
}

func (b *broker) start() {
	b.t.Helper()
	conf := filepath.Join(b.dir, "mosquitto.conf")
	text := fmt.Sprintf(`user root
persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 0
log_dest file %s/mosquitto.log
log_type all
listener %d 127.0.0.1
%s
`, b.dir, b.dir, b.port, b.extra)
	if !strings.Contains(b.extra, "allow_anonymous") {
		text += "allow_anonymous true\n"
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		b.t.Fatal(err)
	}
	cmd := exec.Command(b.bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	b.mu.Lock()
	b.cmd, b.exit = cmd, exit
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exit:
			log, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
			b.t.Fatalf("mosquitto exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("mosquitto does not listen on %d", b.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the broker with SIGTERM (it saves its persistent state).
func (b *broker) stop() {
	b.mu.Lock()
	cmd, exit := b.cmd, b.exit
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exit
	}
}

func (b *broker) signal(sig syscall.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.cmd.Process.Signal(sig)
	}
}

// message is one message a subscriber received.
type message struct {
	topic   string
	payload []byte
	retain  bool
}

// subscriber is a QoS 1 subscription with a persistent session (it gets
// what was published while it was away, across broker restarts).
type subscriber struct {
	mu   sync.Mutex
	msgs []message
	cm   *autopaho.ConnectionManager
	stop context.CancelFunc
}

func subscribe(t *testing.T, b *broker, topic string) *subscriber {
	t.Helper()
	return subscribeAt(t, b.url("mqtt"), topic, "", "")
}

func subscribeAt(t *testing.T, u *url.URL, topic, user, pass string) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{stop: cancel}
	ready := make(chan struct{}, 1)
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		ConnectUsername:               user,
		ConnectPassword:               []byte(pass),
		KeepAlive:                     5,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         3600,
		ReconnectBackoff:              func(int) time.Duration { return 100 * time.Millisecond },
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			go func() {
				cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
				select {
				case ready <- struct{}{}:
				default:
				}
			}()
		},
		ClientConfig: paho.ClientConfig{
			ClientID: "test-sub-" + u.Port(),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				s.mu.Lock()
				s.msgs = append(s.msgs, message{pr.Packet.Topic, append([]byte(nil), pr.Packet.Payload...), pr.Packet.Retain})
				s.mu.Unlock()
				return true, nil
			}},
		},
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.cm = cm
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("subscriber did not subscribe")
	}
	t.Cleanup(func() { cancel(); <-cm.Done() })
	return s
}

// records returns the decoded records received so far (presence messages
// left out) and the presence payloads.
func (s *subscriber) records(t *testing.T) (recs []stream.Decoded, presence []string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if p := string(m.payload); p == PayloadOnline || p == PayloadOffline {
			presence = append(presence, p)
			continue
		}
		var d stream.Decoded
		if err := stream.DecodeJSON(m.payload, &d); err != nil {
			if err := stream.DecodeCBOR(m.payload, &d); err != nil {
				t.Fatalf("message on %s does not decode: %v: %q", m.topic, err, m.payload)
			}
		}
		recs = append(recs, d)
	}
	return recs, presence
}

func (s *subscriber) topics() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, m := range s.msgs {
		out[m.topic]++
	}
	return out
}

// waitSeq waits until a result with seq >= n arrived.
func (s *subscriber) waitSeq(t *testing.T, n uint64, timeout time.Duration) []stream.Decoded {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		recs, _ := s.records(t)
		for _, r := range recs {
			if r.Seq >= n {
				return recs
			}
		}
		if time.Now().After(deadline) {
			var last uint64
			if len(recs) > 0 {
				last = recs[len(recs)-1].Seq
			}
			t.Fatalf("seq %d did not arrive within %v (%d records, last seq %d)", n, timeout, len(recs), last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkInOrder checks that the first occurrences of seqs from..to all
// arrived, in order (duplicates of a resend allowed before moving on).
func checkInOrder(t *testing.T, recs []stream.Decoded, from, to uint64, device string) {
	t.Helper()
	next := from
	var maxSeen uint64
	dups := 0
	for _, r := range recs {
		if r.Device != device {
			t.Fatalf("seq %d: device %q, want %q", r.Seq, r.Device, device)
		}
		if r.Seq < from || r.Seq > to {
			continue
		}
		switch {
		case r.Seq == next:
			next++
		case r.Seq < next:
			dups++ // resent after a reconnect
		default:
			t.Fatalf("seq %d arrived when %d was expected: lost or out of order", r.Seq, next)
		}
		maxSeen = max(maxSeen, r.Seq)
	}
	if next != to+1 {
		t.Fatalf("records %d..%d: only up to %d arrived", from, to, next-1)
	}
	t.Logf("seq %d..%d complete and in order (%d duplicates)", from, to, dups)
}

// result returns a small result record.
func result(pipeline string, frame uint64) *stream.Record {
	return &stream.Record{Kind: stream.KindResult, Device: "dev-1", Pipeline: pipeline, FrameSeq: frame, TCaptureNs: int64(frame),
		Engine:  stream.EngineRef{Name: "demo", Generation: 1, SHA256: "ab12cd34ef56"},
		Outputs: []stream.Output{{Name: "centroid", Kind: stream.OutputRaw, Shape: []int64{1, 2}, Data: []float32{0.25, 0.75}}}}
}

// events collects a sink's events.
type events struct {
	mu  sync.Mutex
	evs []Event
	st  []string
}

func (e *events) on(ev Event) { e.mu.Lock(); e.evs = append(e.evs, ev); e.mu.Unlock() }
func (e *events) status(event, reason string) {
	e.mu.Lock()
	e.st = append(e.st, event+": "+reason)
	e.mu.Unlock()
}

func (e *events) find(k EventKind) *Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.evs {
		if e.evs[i].Kind == k {
			ev := e.evs[i]
			return &ev
		}
	}
	return nil
}

func (e *events) statuses() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.st...)
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newTestSink(t *testing.T, o Options, ev *events) *Sink {
	t.Helper()
	if o.Name == "" {
		o.Name = "cloud"
	}
	o.Device = "dev-1"
	if o.Topic == "" {
		o.Topic = "edged/{device}/{pipeline}/results"
	}
	if o.StatusTopic == "" {
		o.StatusTopic = "edged/{device}/status"
	}
	if o.ClientID == "" {
		o.ClientID = "edged-{device}-{sink}"
	}
	o.BackoffMin, o.BackoffMax = 50*time.Millisecond, 500*time.Millisecond
	if o.AckTimeout == 0 {
		o.AckTimeout = 2 * time.Second
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	o.FlushTimeout = 2 * time.Second
	if ev != nil {
		o.OnEvent = ev.on
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if ev != nil {
		s.SetStatusFunc(ev.status)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// certs makes a CA and a server certificate for 127.0.0.1 signed by it,
// written as PEM files in dir; it returns the CA file.
func certs(t *testing.T, dir, name string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	caFile, certFile, keyFile = filepath.Join(dir, name+"-ca.pem"), filepath.Join(dir, name+"-server.pem"), filepath.Join(dir, name+"-server.key")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return caFile, certFile, keyFile
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
