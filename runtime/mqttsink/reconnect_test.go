package mqttsink

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// droppingBroker accepts MQTT connections, answers CONNECT with a
// successful CONNACK and hangs up at once: a broker (or a proxy in front
// of it) that accepts and drops. It counts the connections.
func droppingBroker(t *testing.T) (*url.URL, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := r.ReadByte(); err != nil { // CONNECT's fixed header
					return
				}
				size, mul := 0, 1
				for {
					b, err := r.ReadByte()
					if err != nil {
						return
					}
					size += int(b&0x7f) * mul
					if b&0x80 == 0 {
						break
					}
					mul <<= 7
				}
				if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
					return
				}
				c.Write([]byte{0x20, 0x03, 0x00, 0x00, 0x00}) // CONNACK: success, no properties
			}()
		}
	}()
	return &url.URL{Scheme: "mqtt", Host: ln.Addr().String()}, &n
}

// TestBrokerThatDropsAtOnceBacksOff: before, a connection that came up
// was re-made at once after every drop (autopaho's attempt count starts
// again at 0 after a connection), so a broker that accepts and drops got
// connections as fast as the loopback could carry them. A connection
// dropped soon after it came up now counts as a failed attempt:
// BackoffMin (50 ms here) doubling to BackoffMax (500 ms).
func TestBrokerThatDropsAtOnceBacksOff(t *testing.T) {
	u, conns := droppingBroker(t)
	t0 := time.Now()
	s := newTestSink(t, Options{URL: u}, &events{})
	time.Sleep(2 * time.Second)
	got, took := conns.Load(), time.Since(t0)
	s.Close()
	// The most connections the time taken can hold: the first at once,
	// then every wait drawn at its shortest (half the doubled delay: the
	// jitter). 50, 100, 200, 400, 500, 500 ms halved: 11 in 2 s, more
	// when a loaded machine oversleeps; without the backoff it would be
	// thousands.
	p := s.retry.Policy
	most := int64(p.MostAttempts(took))
	if got < 2 || got > most {
		t.Errorf("%d connections in %v to a broker that drops each at once, want 2 to %d (%v doubling to %v, jittered)", got, took.Round(time.Millisecond), most, p.Min, p.Max)
	}
}
