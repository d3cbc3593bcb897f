package socketsink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// TestSocketClientsThatDoNotReadLoseTheirPlace: a client that subscribes
// to no pipeline and never reads is sent a keepalive after Keepalive, and
// once it has left that unread for WriteTimeout it is disconnected as
// slow (ErrSlowClient, counted in Unread); so is one that never read its
// "subscribed" reply. A client that reads a quiet stream stays: it gets
// the keepalives (a raw reader sees them, in seq order), and Client.Next
// skips them.
func TestSocketClientsThatDoNotReadLoseTheirPlace(t *testing.T) {
	const ka, wt = 200 * time.Millisecond, 300 * time.Millisecond
	s, ev := newSocket(t, Options{Keepalive: ka, WriteTimeout: wt, MaxClientsPerUID: 8})
	silent := func(subscribe bool) net.Conn {
		c, err := net.Dial("unix", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if subscribe {
			c.Write([]byte(`{"subscribe":{"pipelines":[]}}` + "\n"))
		}
		ev.wait(t, ClientConnected)
		return c
	}
	silent(true)
	silent(false)

	raw, err := net.Dial("unix", s.Path()) // reads, sees the keepalives
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ev.wait(t, ClientConnected)
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		rd := bufio.NewReader(raw)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	quiet := dial(t, s, ev, &stream.Subscription{Pipelines: []string{"front"}}) // reads through Client
	got := make(chan error, 1)
	go func() {
		var m stream.Message
		for {
			if err := quiet.Next(&m); err != nil {
				got <- err
				return
			}
			if m.Rec.Event == stream.EventKeepalive {
				got <- errors.New("Client.Next returned a keepalive")
				return
			}
			if m.Rec.Type == "result" {
				got <- nil
				return
			}
		}
	}()

	t0 := time.Now()
	for range 2 {
		e := ev.wait(t, ClientDisconnected)
		if !errors.Is(e.Err, ErrSlowClient) || !strings.Contains(e.Err.Error(), "read nothing") {
			t.Fatalf("disconnected with %v, want ErrSlowClient for reading nothing", e.Err)
		}
	}
	// About ka+wt; ten times that leaves room for late timers on a loaded
	// machine or under qemu, and still tells a bounded hold from one for
	// good.
	if took := time.Since(t0); took > 10*(ka+wt) {
		t.Errorf("clients that do not read held their places for %v", took)
	}
	// The readers are still there after several keepalive periods.
	for i := 1; i <= 4; i++ {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("keepalive %d: the reader was disconnected", i)
			}
			line = l
		case <-time.After(waitTimeout):
			t.Fatalf("no keepalive %d", i)
		}
		if !strings.Contains(line, `"event":"keepalive"`) || !strings.Contains(line, fmt.Sprintf(`"seq":%d,`, i)) {
			t.Fatalf("record %d on a quiet stream: %s", i, line)
		}
	}
	if st := s.Stats(); st.Clients != 2 || st.Unread != 2 || st.SlowDisconnects != 2 {
		t.Fatalf("stats %+v: want the two readers left and two clients cut for reading nothing", st)
	}
	s.Publish(streamtest.Result("front", 1))
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the quiet client got no result")
	}
	if m := quiet.Stats(); m.Missed != 0 {
		t.Errorf("keepalives counted as lost records: %+v", m)
	}
}

// TestSocketClientsPerUID: no user can take every place: past
// MaxClientsPerUID (default half of MaxClients) a peer's uid is refused
// with ErrTooManyForUID, in an error record that says so; another place
// frees when one of its clients leaves.
func TestSocketClientsPerUID(t *testing.T) {
	s, ev := newSocket(t, Options{MaxClients: 4})
	a := dial(t, s, ev, nil)
	dial(t, s, ev, nil)
	c, err := stream.Dial(context.Background(), s.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := next(t, c)
	if m.Rec.Type != "error" || !strings.Contains(m.Rec.Error, "too many clients of this user") || !strings.Contains(m.Rec.Error, "max_clients_per_uid") {
		t.Fatalf("third client of one uid got %+v", m.Rec)
	}
	if e := ev.wait(t, ClientRejected); !errors.Is(e.Err, ErrTooManyForUID) {
		t.Fatalf("event %+v", e)
	}
	if st := s.Stats(); st.RejectedPerUID != 1 || st.Rejected != 1 || st.RejectedFull != 0 || st.Clients != 2 {
		t.Fatalf("stats %+v", st)
	}
	a.Close()
	ev.wait(t, ClientDisconnected)
	dial(t, s, ev, nil)
}
