package mqttsink

import (
	"bufio"
	"context"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/edged-dev/edged/runtime/stream"
)

// strictBroker is an MQTT 5 broker for one client that reads every packet
// with paho's parser and keeps what it read: CONNECT is answered with a
// CONNACK, a QoS 1 PUBLISH with a PUBACK, PINGREQ with PINGRESP. A packet
// that does not parse ends the connection and is kept as the error.
type strictBroker struct {
	url *url.URL

	mu        sync.Mutex
	publishes []packets.Publish
	pings     int
	err       error
	changed   chan struct{}
}

func startStrictBroker(t *testing.T) *strictBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &strictBroker{url: &url.URL{Scheme: "mqtt", Host: ln.Addr().String()}, changed: make(chan struct{}, 1)}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() { defer conns.Done(); b.serve(c) }()
		}
	}()
	return b
}

func (b *strictBroker) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		cp, err := packets.ReadPacket(r)
		if err != nil {
			b.note(func() {
				if b.err == nil {
					b.err = err
				}
			})
			return
		}
		var answer []byte
		switch p := cp.Content.(type) {
		case *packets.Connect:
			answer = []byte{0x20, 0x03, 0x00, 0x00, 0x00} // CONNACK: success, no properties
		case *packets.Publish:
			b.note(func() { b.publishes = append(b.publishes, *p) })
			if p.QoS == 1 {
				answer = []byte{0x40, 0x02, byte(p.PacketID >> 8), byte(p.PacketID)} // PUBACK: success
			}
		case *packets.Pingreq:
			b.note(func() { b.pings++ })
			answer = []byte{0xd0, 0x00} // PINGRESP
		case *packets.Disconnect:
			return
		}
		if answer != nil {
			if _, err := c.Write(answer); err != nil {
				return
			}
		}
	}
}

func (b *strictBroker) note(f func()) {
	b.mu.Lock()
	f()
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// wait returns once cond holds (called with b.mu held) or the deadline
// passed; it reports whether cond held.
func (b *strictBroker) wait(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-b.changed:
		case <-deadline:
			return false
		}
	}
}

// pingInPublishConn stages the race between paho's keepalive pinger and a
// publish on one connection: the first PINGREQ is held until the first
// PUBLISH has written all but its last part (paho writes the fixed
// header, the topic and properties, then the payload), and that last
// write is held until the PINGREQ is written. Where the two writers are
// not serialised per packet, the PINGREQ lands inside the PUBLISH every
// time; where they are, one of them waits for the other's whole packet,
// so each hold gives up after a second and the write goes ahead.
type pingInPublishConn struct {
	net.Conn
	pingOnce          sync.Once
	published, pinged chan struct{}

	mu      sync.Mutex
	seen    bool // the first PUBLISH began
	pubLeft int  // bytes of it not written yet
}

func (c *pingInPublishConn) Write(b []byte) (int, error) {
	if len(b) == 2 && b[0] == 0xc0 && b[1] == 0x00 { // PINGREQ
		first := false
		c.pingOnce.Do(func() { first = true })
		if first {
			select {
			case <-c.published:
			case <-time.After(time.Second):
			}
			defer close(c.pinged)
		}
		return c.Conn.Write(b)
	}
	c.mu.Lock()
	last := false
	switch {
	case !c.seen && len(b) > 1 && b[0]>>4 == packets.PUBLISH:
		c.seen = true
		size, mul, i := 0, 1, 1
		for ; i < len(b) && i < 5; i++ { // the remaining length (VBI)
			size += int(b[i]&0x7f) * mul
			mul <<= 7
			if b[i]&0x80 == 0 {
				break
			}
		}
		c.pubLeft = size - (len(b) - i - 1)
	case c.pubLeft > 0:
		last = len(b) == c.pubLeft
		c.pubLeft -= len(b)
	}
	c.mu.Unlock()
	if last {
		close(c.published)
		select {
		case <-c.pinged:
		case <-time.After(time.Second):
		}
	}
	return c.Conn.Write(b)
}

// TestPingNeverLandsInsidePublish: paho's keepalive pinger writes its
// PINGREQ from its own goroutine (the first one right after CONNACK, as
// the sink publishes "online"), and paho writes a PUBLISH in several
// Writes when the connection is not a *net.TCPConn, so the connection the
// sink hands paho must serialise whole packets. It once did only for TLS:
// on mqtt:// a PINGREQ could land between a PUBLISH's header and its
// payload; Mosquitto then dropped the connection for a protocol error and
// kept "\xc0\x00onli" as the retained presence (TestMQTTResultsInOrder
// and TestMQTTBadCredentials saw it under load). The race is staged here
// on every connection (pingInPublishConn), against a broker that parses
// every byte.
func TestPingNeverLandsInsidePublish(t *testing.T) {
	b := startStrictBroker(t)
	var staged []*pingInPublishConn
	var mu sync.Mutex
	// The first PINGREQ goes at once; the next check for its PINGRESP
	// comes a keepalive later, well after the holds of a second.
	o := Options{URL: b.url, QoS: 1, Encoding: stream.CBOR, Keepalive: 30 * time.Second}
	o.dialTCP = func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c := &pingInPublishConn{Conn: raw, published: make(chan struct{}), pinged: make(chan struct{})}
		mu.Lock()
		staged = append(staged, c)
		mu.Unlock()
		return c, nil
	}
	s := newTestSink(t, o, &events{})
	const n = 5
	for i := range n {
		s.Publish(result("front", uint64(i)))
	}
	done := func() bool {
		return b.err != nil || len(b.publishes) > 0 && string(b.publishes[0].Payload) != PayloadOnline ||
			len(b.publishes) >= 2+n && b.pings > 0
	}
	if !b.wait(30*time.Second, done) {
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Fatalf("after 30 s the broker has %d publishes and %d pings (stats %+v)", len(b.publishes), b.pings, s.Stats())
	}
	b.mu.Lock()
	pubs, pings, perr := b.publishes, b.pings, b.err
	b.mu.Unlock()
	if perr != nil {
		t.Fatalf("the broker could not parse what the sink wrote: %v", perr)
	}
	if p := pubs[0]; p.Topic != "edged/dev-1/status" || string(p.Payload) != PayloadOnline {
		t.Fatalf("first PUBLISH: %q on %q, want %q on the status topic (a PINGREQ written inside it reads as \\xc0\\x00 in its payload)", p.Payload, p.Topic, PayloadOnline)
	}
	if pings == 0 {
		t.Fatal("no PINGREQ reached the broker: the race was not staged")
	}
	// The run's first record, sink_started, then the results.
	if d, err := decodeCBOR(pubs[1].Payload); err != nil || pubs[1].Topic != "edged/dev-1/status" || d.Event != EventStarted {
		t.Fatalf("PUBLISH 1: %q on %q (%v), want the run's %s record", pubs[1].Payload, pubs[1].Topic, err, EventStarted)
	}
	for i, p := range pubs[2 : 2+n] {
		var d stream.Decoded
		if err := stream.DecodeCBOR(p.Payload, &d); err != nil || p.Topic != "edged/dev-1/front/results" || d.FrameSeq != uint64(i) {
			t.Fatalf("PUBLISH %d: %q on %q (%v), want result %d", i+2, p.Payload, p.Topic, err, i)
		}
	}
	if st := s.Stats(); st.Connects != 1 || st.ErrPublish != 0 {
		t.Errorf("stats %+v: want one connection and no failed publish", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(staged) != 1 {
		t.Errorf("%d connections dialled, want 1", len(staged))
	}
}

func decodeCBOR(b []byte) (stream.Decoded, error) {
	var d stream.Decoded
	err := stream.DecodeCBOR(b, &d)
	return d, err
}
