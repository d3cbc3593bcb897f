package mqttsink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/stream"
)

// broker is a Mosquitto on a loopback port (internal/mosquittotest).
type broker struct {
	*mosquittotest.Broker
	t   *testing.T
	dir string
}

func startBroker(t *testing.T, extra string) *broker {
	b := mosquittotest.StartBroker(t, extra)
	return &broker{Broker: b, t: t, dir: b.Dir}
}

func (b *broker) url(scheme string) *url.URL { return b.URL(scheme) }
func (b *broker) stop()                      { b.Stop() }
func (b *broker) signal(sig syscall.Signal)  { b.Signal(sig) }

func (b *broker) start() {
	b.t.Helper()
	if err := b.Start(); err != nil {
		b.t.Fatal(err)
	}
}

// subscriber is a QoS 1 subscription with a persistent session (it gets
// what was published while it was away, across broker restarts).
type subscriber struct{ *mosquittotest.Subscriber }

func subscribe(t *testing.T, b *broker, topic string) *subscriber {
	t.Helper()
	return subscribeAt(t, b.url("mqtt"), topic, "", "")
}

func subscribeAt(t *testing.T, u *url.URL, topic, user, pass string) *subscriber {
	t.Helper()
	return &subscriber{mosquittotest.SubscribeT(t, u, topic, user, pass)}
}

// records returns the decoded records received so far (presence messages
// left out) and the presence payloads.
func (s *subscriber) records(t *testing.T) (recs []stream.Decoded, presence []string) {
	t.Helper()
	for _, m := range s.Messages() {
		if p := string(m.Payload); p == PayloadOnline || p == PayloadOffline {
			presence = append(presence, p)
			continue
		}
		var d stream.Decoded
		if err := stream.DecodeJSON(m.Payload, &d); err != nil {
			if err := stream.DecodeCBOR(m.Payload, &d); err != nil {
				t.Fatalf("message on %s does not decode: %v: %q", m.Topic, err, m.Payload)
			}
		}
		recs = append(recs, d)
	}
	return recs, presence
}

func (s *subscriber) topics() map[string]int {
	out := map[string]int{}
	for _, m := range s.Messages() {
		out[m.Topic]++
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
