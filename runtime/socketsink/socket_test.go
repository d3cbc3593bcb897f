package socketsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// waitTimeout bounds every wait in these tests; it is generous because
// the machines running them may be loaded.
const waitTimeout = 20 * time.Second

func TestMain(m *testing.M) {
	switch os.Getenv("STREAM_TEST_HELPER") {
	case "client":
		helperClient()
		return
	case "activation":
		helperActivation()
		return
	}
	os.Exit(m.Run())
}

type events struct {
	ch chan ClientEvent
}

func newEvents() *events { return &events{ch: make(chan ClientEvent, 1024)} }

func (e *events) on(ev ClientEvent) {
	select {
	case e.ch <- ev:
	default:
	}
}

// wait returns the next event of kind k.
func (e *events) wait(t *testing.T, k ClientEventKind) ClientEvent {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == k {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %v client event within %v", k, waitTimeout)
		}
	}
}

func socketPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "s.sock")
}

func newSocket(t *testing.T, opts Options) (*Sink, *events) {
	t.Helper()
	ev := newEvents()
	if opts.Path == "" && opts.Listener == nil {
		opts.Path = socketPath(t)
	}
	opts.NoActivation = true
	if opts.OnClient == nil {
		opts.OnClient = ev.on
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ev
}

// dial connects and waits until the sink admitted the client.
func dial(t *testing.T, s *Sink, ev *events, sub *stream.Subscription) *stream.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := stream.Dial(ctx, s.Path(), sub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ev.wait(t, ClientConnected)
	return c
}

// next reads one record or fails the test.
func next(t *testing.T, c *stream.Client) stream.Message {
	t.Helper()
	var m stream.Message
	done := make(chan error, 1)
	go func() { done <- c.Next(&m) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reading a record: %v", err)
		}
	case <-time.After(waitTimeout):
		c.Close()
		<-done
		t.Fatalf("no record within %v", waitTimeout)
	}
	return m
}

// waitSent waits until the sink has counted n records sent. A writer
// counts a batch once its write returned, which can be after the peer
// has read the batch: a test that has read every record waits for the
// count before it checks the stats. A count that never comes fails.
func waitSent(t *testing.T, s *Sink, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(waitTimeout); s.Stats().Sent < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every record was read but only %d of %d counted as sent: %+v", s.Stats().Sent, n, s.Stats())
		}
	}
}

func TestSocketDeliversInOrder(t *testing.T) {
	// The clients are read one after the other: the second and third wait
	// with what they were sent unread while the first is read, which on a
	// loaded machine can take longer than the default WriteTimeout (5 s)
	// that would cut them off. Slow clients are TestSocketSlowClient's.
	s, ev := newSocket(t, Options{QueueLen: 1024, WriteTimeout: waitTimeout})
	var clients []*stream.Client
	for i := 0; i < 3; i++ {
		clients = append(clients, dial(t, s, ev, nil))
	}
	const n = 600
	for i := 1; i <= n; i++ {
		if i%100 == 0 {
			s.Publish(&stream.Record{Kind: stream.KindStatus, Event: "source_up", Source: "cam", TNs: int64(i)})
			continue
		}
		s.Publish(streamtest.Result("front", uint64(i)))
	}
	for ci, c := range clients {
		for i := 1; i <= n; i++ {
			m := next(t, c)
			if m.Rec.Seq != uint64(i) || m.Missed != 0 {
				t.Fatalf("client %d: record %d has seq %d (missed %d)", ci, i, m.Rec.Seq, m.Missed)
			}
			if i%100 == 0 {
				if m.Rec.Type != "status" || m.Rec.Event != "source_up" || m.Rec.TNs != int64(i) {
					t.Fatalf("client %d: record %d is %+v, want the status event", ci, i, m.Rec)
				}
			} else if m.Rec.Type != "result" || m.Rec.FrameSeq != uint64(i) || m.Rec.Outputs["top"].Top[0].Index != i%3 {
				t.Fatalf("client %d: record %d is %+v", ci, i, m.Rec)
			}
		}
	}
	waitSent(t, s, 3*n)
	st := s.Stats()
	if st.Clients != 3 || st.Sent != 3*n || st.Dropped != 0 || st.Published != n {
		t.Fatalf("stats %+v", st)
	}
}

func TestSocketModeAndGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the socket another group")
	}
	grp := ""
	for _, name := range []string{"nogroup", "daemon", "bin", "sys", "adm"} {
		if g, err := user.LookupGroup(name); err == nil && g.Gid != "0" {
			grp = name
			break
		}
	}
	if grp == "" {
		t.Skip("no non-root group on this machine")
	}
	g, _ := user.LookupGroup(grp)
	wantGID, _ := strconv.Atoi(g.Gid)
	for _, tc := range []struct {
		mode, want os.FileMode
		group      string
	}{{0, 0o660, grp}, {0o600, 0o600, g.Gid}} {
		path := socketPath(t)
		// A umask that would make the file wider or narrower must not matter.
		old := syscall.Umask(0)
		s, _ := newSocket(t, Options{Path: path, Mode: tc.mode, Group: tc.group})
		syscall.Umask(old)
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != tc.want || fi.Mode()&os.ModeSocket == 0 || int(st.Gid) != wantGID {
			t.Fatalf("socket is %v gid %d, want %v gid %d", fi.Mode(), st.Gid, tc.want, wantGID)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".edged-*"))
		if len(left) != 0 {
			t.Fatalf("temporary directories left behind: %v", left)
		}
		s.Close()
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("socket file still there after Close: %v", err)
		}
	}
	if _, err := New(Options{Path: socketPath(t), Group: "no-such-group-edged", NoActivation: true}); err == nil || !strings.Contains(err.Error(), "no-such-group-edged") {
		t.Fatalf("unknown group: %v", err)
	}
}

func TestSocketReplacesStale(t *testing.T) {
	path := socketPath(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // leaves a socket file nobody listens on, like a crash
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	s, ev := newSocket(t, Options{Path: path})
	c := dial(t, s, ev, nil)
	s.Publish(streamtest.Result("p", 1))
	if m := next(t, c); m.Rec.FrameSeq != 1 {
		t.Fatalf("got %+v", m.Rec)
	}
}

func TestSocketRefusesLive(t *testing.T) {
	path := socketPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = New(Options{Path: path, NoActivation: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), path) {
		t.Fatalf("NewSocket on a live socket: %v, want ErrInUse naming the path", err)
	}
	// The live socket still works.
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the other listener was disturbed: %v", err)
	}
	c.Close()

	file := filepath.Join(t.TempDir(), "notasocket")
	os.WriteFile(file, []byte("keep me"), 0o644)
	if _, err := New(Options{Path: file, NoActivation: true}); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("NewSocket over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("regular file was replaced")
	}
}

func TestSocketCloseKeepsForeignFile(t *testing.T) {
	path := socketPath(t)
	s, _ := newSocket(t, Options{Path: path})
	// Someone replaces the socket file (e.g. a second instance started
	// after deleting ours); Close must not remove theirs.
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("Close removed a socket file it did not create: %v", err)
	}
}

// A client that never reads is cut off after WriteTimeout; a client that
// reads gets every record meanwhile, and Publish never waits.
//
// The stuck client's drops are made first, while it is the only client:
// records are published until its socket buffer and its queue are full and
// the oldest is dropped. Only the 16 records that fill its queue after its
// writer blocked must come within WriteTimeout (1 s), which a loaded
// machine or qemu does not stretch that far; when the drops were left to
// the paced publishing below, a slow machine cut the client off (300 ms)
// before its queue of 64 was full, with nothing dropped.
func TestSocketSlowClient(t *testing.T) {
	s, ev := newSocket(t, Options{QueueLen: 16, WriteTimeout: time.Second})
	stuck, err := net.Dial("unix", s.Path()) // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuckEv := ev.wait(t, ClientConnected)

	big := &stream.Record{Kind: stream.KindResult, Pipeline: "p", Outputs: []stream.Output{{Name: "raw", Kind: stream.OutputRaw, Shape: []int64{512}, Data: make([]float32, 512)}}}
	for i := range big.Outputs[0].Data {
		big.Outputs[0].Data[i] = float32(i) * 1.25
	}
	for i := uint64(1); s.Stats().Dropped == 0; i++ {
		if i > 100000 {
			t.Fatalf("%d records published to a client that does not read and none dropped (stats %+v)", i, s.Stats())
		}
		big.FrameSeq = i
		s.Publish(big)
	}

	var slowGone ClientEvent
	gone := false
	noteGone := func(e ClientEvent) {
		if e.Kind == ClientDisconnected && !gone {
			slowGone, gone = e, true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	good, err := stream.Dial(ctx, s.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	deadline := time.After(waitTimeout)
	for connected := false; !connected; { // the stuck client may go meanwhile
		select {
		case e := <-ev.ch:
			connected = e.Kind == ClientConnected
			noteGone(e)
		case <-deadline:
			t.Fatal("the reading client was not admitted")
		}
	}

	got := make(chan uint64, 1)
	readerErr := make(chan error, 1)
	go func() {
		var m stream.Message
		for {
			if err := good.Next(&m); err != nil {
				readerErr <- err
				return
			}
			got <- m.Rec.FrameSeq
		}
	}()
	for i := uint64(1); ; i++ {
		big.FrameSeq = i
		s.Publish(big)
		select { // the good client keeps up: wait for it, never for the stuck one
		case f := <-got:
			if f != i {
				t.Fatalf("good client got frame %d, want %d", f, i)
			}
		case err := <-readerErr:
			t.Fatal(err)
		case <-deadline:
			t.Fatalf("stuck client not disconnected after %d records", i)
		}
		if !gone {
			select {
			case e := <-ev.ch:
				noteGone(e)
			default:
			}
		}
		if gone && i >= 50 {
			break
		}
	}
	if slowGone.ID != stuckEv.ID || !errors.Is(slowGone.Err, ErrSlowClient) {
		t.Fatalf("disconnect event %+v, want the stuck client (id %d) with ErrSlowClient", slowGone, stuckEv.ID)
	}
	if st := good.Stats(); st.Missed != 0 {
		t.Fatalf("good client missed %d records", st.Missed)
	}
	st := s.Stats()
	if st.SlowDisconnects != 1 || st.Clients != 1 || st.Dropped == 0 {
		t.Fatalf("stats %+v: want one slow disconnect, one client left, drops counted for the stuck client", st)
	}
}

func TestSocket64Clients(t *testing.T) {
	const clients, n = 64, 300
	// All of one uid; no keepalives among the records counted.
	s, ev := newSocket(t, Options{QueueLen: 512, MaxClientsPerUID: clients, Keepalive: time.Hour})
	cs := make([]*stream.Client, clients)
	for i := range cs {
		cs[i] = dial(t, s, ev, nil)
	}
	for i := 1; i <= n; i++ {
		s.Publish(streamtest.Result("p", uint64(i)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for ci, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m stream.Message
			for i := 1; i <= n; i++ {
				if err := c.Next(&m); err != nil {
					errs <- fmt.Errorf("client %d record %d: %w", ci, i, err)
					return
				}
				if m.Rec.Seq != uint64(i) || m.Rec.FrameSeq != uint64(i) {
					errs <- fmt.Errorf("client %d: record %d has seq %d frame %d", ci, i, m.Rec.Seq, m.Rec.FrameSeq)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitSent(t, s, clients*n)
	if st := s.Stats(); st.Sent != clients*n || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSocketMaxClients(t *testing.T) {
	s, ev := newSocket(t, Options{MaxClients: 2, MaxClientsPerUID: 2})
	dial(t, s, ev, nil)
	dial(t, s, ev, nil)
	c, err := stream.Dial(context.Background(), s.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := next(t, c)
	if m.Rec.Type != "error" || !strings.Contains(m.Rec.Error, "too many clients") || m.Rec.Seq != 1 {
		t.Fatalf("third client got %+v, want a too-many-clients error record", m.Rec)
	}
	if err := c.Next(&m); err != io.EOF {
		t.Fatalf("after the error record: %v, want EOF", err)
	}
	if e := ev.wait(t, ClientRejected); !errors.Is(e.Err, ErrTooManyClients) {
		t.Fatalf("event %+v", e)
	}
	if st := s.Stats(); st.Rejected != 1 || st.RejectedFull != 1 || st.Clients != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Publish with clients connected allocates nothing in steady state.
func TestPublishAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counting")
	}
	s, ev := newSocket(t, Options{})
	for i := 0; i < 4; i++ {
		enc := stream.NDJSON
		if i%2 == 1 {
			enc = stream.CBOR
		}
		c := dial(t, s, ev, &stream.Subscription{Encoding: enc})
		if m := next(t, c); m.Rec.Event != "subscribed" { // the subscription is in effect
			t.Fatalf("first record %+v", m.Rec)
		}
		go func() { // read raw bytes without decoding: no allocations
			var buf [32 << 10]byte
			for {
				if _, err := c.Conn().Read(buf[:]); err != nil {
					return
				}
			}
		}()
	}
	r := streamtest.BenchRecord()
	status := &stream.Record{Kind: stream.KindStatus, Event: "source_up", Source: "cam0", Pipeline: "front", TNs: 1}
	for i := 0; i < 5000; i++ { // warm up pools and buffers
		s.Publish(r)
		s.Publish(status)
	}
	allocs := testing.AllocsPerRun(5000, func() {
		r.FrameSeq++
		s.Publish(r)
		s.Publish(status)
	})
	if allocs != 0 {
		t.Fatalf("Publish allocates %.2f times per call with 4 clients", allocs)
	}
	// AllocsPerRun rounds down; count exactly too (writers included). A
	// handful may come from the record pool growing to a new peak.
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	const n = 10000
	for i := 0; i < n; i++ {
		r.FrameSeq++
		s.Publish(r)
	}
	runtime.ReadMemStats(&b)
	if m := b.Mallocs - a.Mallocs; m > n/100 {
		t.Fatalf("%d allocations for %d records", m, n)
	}
	if st := s.Stats(); st.Sent == 0 {
		t.Fatalf("nothing was sent: %+v", st)
	}
}

func TestSocketSubscribe(t *testing.T) {
	s, ev := newSocket(t, Options{QueueLen: 128})
	all := dial(t, s, ev, nil)
	onlyB := dial(t, s, ev, &stream.Subscription{Pipelines: []string{"b"}, Encoding: stream.CBOR})
	none := dial(t, s, ev, &stream.Subscription{Pipelines: []string{}})
	for _, c := range []*stream.Client{onlyB, none} {
		m := next(t, c)
		if m.Rec.Type != "status" || m.Rec.Event != "subscribed" || m.Rec.Seq != 1 {
			t.Fatalf("first record %+v, want the subscribed reply", m.Rec)
		}
	}
	for i := 1; i <= 10; i++ {
		p := "a"
		if i%2 == 0 {
			p = "b"
		}
		s.Publish(streamtest.Result(p, uint64(i)))
	}
	s.Publish(&stream.Record{Kind: stream.KindStatus, Event: "config_reloaded"})
	s.Publish(&stream.Record{Kind: stream.KindStatus, Event: "source_down", Pipeline: "a"})

	for i := 1; i <= 12; i++ {
		if m := next(t, all); m.Rec.Seq != uint64(i) {
			t.Fatalf("all: record %d seq %d", i, m.Rec.Seq)
		}
	}
	for i := 2; i <= 6; i++ {
		m := next(t, onlyB)
		if m.Encoding != stream.CBOR || m.Rec.Pipeline != "b" || m.Rec.FrameSeq != uint64(2*(i-1)) || m.Rec.Seq != uint64(i) {
			t.Fatalf("onlyB record %+v (%v)", m.Rec, m.Encoding)
		}
	}
	if m := next(t, onlyB); m.Rec.Event != "config_reloaded" {
		t.Fatalf("onlyB: %+v, want the global status event", m.Rec)
	}
	if m := next(t, none); m.Rec.Event != "config_reloaded" || m.Rec.Seq != 2 {
		t.Fatalf("none: %+v, want only the global status event", m.Rec)
	}
}

// An encoding switch while records flow: records queued before the reply
// keep NDJSON, the reply and everything after are CBOR, and the client's
// decoder reads them all, in order, without a gap.
func TestSocketSwitchEncodingMidStream(t *testing.T) {
	s, ev := newSocket(t, Options{QueueLen: 4096})
	c := dial(t, s, ev, nil)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			s.Publish(streamtest.Result("p", uint64(i)))
		}
	}()
	sub := &stream.Subscription{Encoding: stream.CBOR}
	if err := c.Send(sub.AppendRequest(nil)); err != nil {
		t.Fatal(err)
	}
	seenReply := false
	frame := uint64(0)
	for frame < n || !seenReply {
		m := next(t, c)
		if m.Missed != 0 {
			t.Fatalf("gap of %d before seq %d", m.Missed, m.Rec.Seq)
		}
		if m.Rec.Type == "status" {
			if m.Rec.Event != "subscribed" || m.Encoding != stream.CBOR || seenReply {
				t.Fatalf("unexpected status %+v in %v", m.Rec, m.Encoding)
			}
			seenReply = true
			continue
		}
		frame++
		if m.Rec.FrameSeq != frame {
			t.Fatalf("frame %d, want %d", m.Rec.FrameSeq, frame)
		}
		if want := map[bool]stream.Encoding{false: stream.NDJSON, true: stream.CBOR}[seenReply]; m.Encoding != want {
			t.Fatalf("frame %d in %v, want %v (reply seen: %v)", frame, m.Encoding, want, seenReply)
		}
	}
	<-done
}

func TestSocketBadInput(t *testing.T) {
	s, ev := newSocket(t, Options{})
	c := dial(t, s, ev, nil)
	c.Send([]byte("hello\n"))
	m := next(t, c)
	if m.Rec.Type != "error" || !strings.Contains(m.Rec.Error, "bad request") {
		t.Fatalf("garbage line answered with %+v", m.Rec)
	}
	s.Publish(streamtest.Result("p", 1)) // still connected after one bad line
	if m := next(t, c); m.Rec.Type != "result" || m.Rec.Seq != 2 {
		t.Fatalf("after a bad line: %+v", m.Rec)
	}
	c.Send([]byte(`{"subscribe":{"pipelines":["a"],"extra":1}}` + "\n" + `{"reload":"everything"}` + "\n"))
	for i := 0; i < 2; i++ {
		if m := next(t, c); m.Rec.Type != "error" {
			t.Fatalf("bad request %d answered with %+v", i, m.Rec)
		}
	}
	if st := s.Stats(); st.BadRequests != 3 || st.Clients != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Long lines and floods of garbage do not grow the daemon's memory: the
// reader has a fixed 4 KiB buffer, and the connection is closed.
func TestSocketHugeLineBoundedMemory(t *testing.T) {
	s, ev := newSocket(t, Options{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	const clients = 8
	line := make([]byte, 1<<20) // 1 MiB without a newline
	for i := range line {
		line[i] = 'a' + byte(i%26)
	}
	for i := 0; i < clients; i++ {
		c := dial(t, s, ev, nil)
		werr := make(chan error, 1)
		go func() {
			c.Conn().SetWriteDeadline(time.Now().Add(waitTimeout))
			_, err := c.Conn().Write(line) // the daemon stops reading after 4 KiB
			werr <- err
		}()
		m := next(t, c)
		if m.Rec.Type != "error" || !strings.Contains(m.Rec.Error, "longer than 4096") {
			t.Fatalf("1 MiB line answered with %+v", m.Rec)
		}
		if err := c.Next(&m); err != io.EOF {
			t.Fatalf("connection not closed after an oversized line: %v", err)
		}
		if e := ev.wait(t, ClientDisconnected); !errors.Is(e.Err, stream.ErrRequest) {
			t.Fatalf("disconnect reason %v", e.Err)
		}
		if err := <-werr; err == nil {
			t.Fatal("the daemon swallowed the whole 1 MiB line")
		}
	}
	// Eight refused lines close the connection too.
	c := dial(t, s, ev, nil)
	c.Send([]byte(strings.Repeat("{\"x\":1}\n", 20)))
	for i := 0; i < maxBadRequests+1; i++ {
		m := next(t, c)
		if m.Rec.Type != "error" {
			t.Fatalf("record %d: %+v", i, m.Rec)
		}
	}
	var m stream.Message
	if err := c.Next(&m); err != io.EOF {
		t.Fatalf("garbage flood: connection still open (%v)", err)
	}

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// 8 MiB were sent in total; the daemon side may hold a few small
	// buffers per client, nothing proportional to the input.
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 2<<20 {
		t.Fatalf("heap grew by %d bytes after %d MiB of oversized input", grow, clients)
	}
}

func TestSocketControl(t *testing.T) {
	var mu sync.Mutex
	var got []PeerCred
	fail := false
	s, _ := newSocket(t, Options{OnControl: func(ctx context.Context, req stream.ControlRequest, peer PeerCred) error {
		if req.Reload != "engines" {
			return fmt.Errorf("unexpected %q", req.Reload)
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, peer)
		if fail {
			return errors.New("model directory unreadable")
		}
		return nil
	}})
	for i := 0; i < 20; i++ {
		s.Publish(streamtest.Result("p", uint64(i))) // no clients yet: nothing queued
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := stream.RequestReload(ctx, s.Path()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(got) != 1 || got[0].UID != uint32(os.Getuid()) || got[0].PID != int32(os.Getpid()) {
		t.Fatalf("OnControl saw peers %+v, want this process", got)
	}
	fail = true
	mu.Unlock()
	if err := stream.RequestReload(ctx, s.Path()); !errors.Is(err, stream.ErrRemote) || !strings.Contains(err.Error(), "model directory unreadable") {
		t.Fatalf("failing reload: %v", err)
	}

	s2, _ := newSocket(t, Options{})
	if err := stream.RequestReload(ctx, s2.Path()); !errors.Is(err, stream.ErrRemote) || !strings.Contains(err.Error(), "not enabled") {
		t.Fatalf("reload without OnControl: %v", err)
	}
}

// A sink on an inherited listener leaves it open and its file in place,
// so the next sink (after a configuration reload) can take it over.
func TestSocketInheritedListener(t *testing.T) {
	path := socketPath(t)
	ln := inheritedListener(t, path)
	defer ln.Close()
	for round := 0; round < 2; round++ {
		s, ev := newSocket(t, Options{Listener: ln})
		if s.Path() != path {
			t.Fatalf("path %q", s.Path())
		}
		c := dial(t, s, ev, nil)
		s.Publish(streamtest.Result("p", uint64(round)))
		if m := next(t, c); m.Rec.FrameSeq != uint64(round) {
			t.Fatalf("round %d: %+v", round, m.Rec)
		}
		s.Close()
		if _, err := os.Lstat(path); err != nil {
			t.Fatalf("round %d: Close removed the inherited socket file: %v", round, err)
		}
	}
	// Still accepting in the kernel backlog while no sink runs.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("inherited listener closed by the sink: %v", err)
	}
	c.Close()
}

// inheritedListener makes a listener the way activation does: from a file
// descriptor, so package net did not create (and will not unlink) it.
func inheritedListener(t *testing.T, path string) net.Listener {
	t.Helper()
	orig, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := orig.File()
	if err != nil {
		t.Fatal(err)
	}
	orig.SetUnlinkOnClose(false)
	orig.Close()
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Socket activation end to end: a child process gets the listener as fd 3
// with LISTEN_FDS/LISTEN_FDNAMES, as systemd passes it, and NewSocket finds
// it by name.
func TestSocketActivation(t *testing.T) {
	path := socketPath(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, _ := ln.File()
	defer f.Close()
	cmd := selfCommand(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STREAM_TEST_HELPER=activation", "LISTEN_FDS=1", "LISTEN_FDNAMES=results", "STREAM_TEST_SOCKET="+path)
	cmd.ExtraFiles = []*os.File{f}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	// The helper prints "ready" once its sink runs, then publishes a record
	// per client it sees.
	var ready [6]byte
	if _, err := io.ReadFull(out, ready[:]); err != nil || string(ready[:]) != "ready\n" {
		t.Fatalf("helper: %q %v", ready, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := stream.Dial(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := next(t, c)
	if m.Rec.Type != "status" || m.Rec.Event != "activated" || m.Rec.Reason != "results "+path {
		t.Fatalf("got %+v", m.Rec)
	}
}

func helperActivation() {
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid())) // systemd sets it to the child's pid
	path := os.Getenv("STREAM_TEST_SOCKET")
	ev := make(chan ClientEvent, 4)
	s, err := New(Options{Name: "results", Path: "/nonexistent/never-bound.sock", OnClient: func(e ClientEvent) { ev <- e }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	<-ev
	s.Publish(&stream.Record{Kind: stream.KindStatus, Event: "activated", Reason: "results " + s.Path(), TNs: 1})
	_ = path
	s.Close()
	os.Exit(0)
}

// A client of another uid is rejected when an allowlist is set. The client
// runs as a child process with a different uid (the test must run as root).
func TestSocketRejectsOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client under another uid")
	}
	const uid, gid = 65534, 65534 // nobody/nogroup
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	if os.Getenv("EDGED_EXEC_WRAPPER") != "" {
		// Under qemu the helper would need the emulator and the sysroot to
		// be readable by the other user too.
		t.Skip("runs natively only: the helper process of another uid cannot use the qemu wrapper")
	}
	// The test binary may sit in a directory only root can read: copy it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	// The helper also belongs to a supplementary group, as a user added to
	// the socket's group with usermod -aG is.
	const extraGID = 54321
	run := func(s *Sink) string {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), "STREAM_TEST_HELPER=client", "STREAM_TEST_SOCKET="+s.Path())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{extraGID}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}

	s, ev := newSocket(t, Options{Path: path, Mode: 0o666, AllowUIDs: []uint32{0}})
	out := run(s)
	if !strings.HasPrefix(out, "error ") || !strings.Contains(out, "uid 65534") || !strings.Contains(out, "not allowed") {
		t.Fatalf("client of uid %d got %q, want an error record naming its uid", uid, out)
	}
	e := ev.wait(t, ClientRejected)
	if e.Peer.UID != uid || e.Peer.GID != gid || !slices.Equal(e.Peer.Groups, []uint32{extraGID}) || !errors.Is(e.Err, ErrNotAllowed) {
		t.Fatalf("rejection event %+v", e)
	}
	s.Close()

	// Allowed by a supplementary group (SO_PEERGROUPS).
	s, ev = newSocket(t, Options{Path: path, Mode: 0o666, AllowGIDs: []uint32{extraGID}})
	go func() {
		ev.wait(t, ClientConnected)
		s.Publish(streamtest.Result("p", 41))
	}()
	if out := run(s); out != "result 41" {
		t.Fatalf("allowlisted supplementary group: client got %q", out)
	}
	s.Close()

	// Allowed by gid.
	s, ev = newSocket(t, Options{Path: path, Mode: 0o666, AllowUIDs: []uint32{0}, AllowGIDs: []uint32{gid}})
	go func() {
		ev.wait(t, ClientConnected)
		s.Publish(streamtest.Result("p", 42))
	}()
	if out := run(s); out != "result 42" {
		t.Fatalf("allowlisted gid: client got %q", out)
	}
	s.Close()

	// Without o+w on the socket the kernel refuses the connection.
	s, _ = newSocket(t, Options{Path: path})
	if out := run(s); !strings.Contains(out, "permission denied") {
		t.Fatalf("mode 0660: client got %q, want permission denied", out)
	}
}

func helperClient() {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := stream.Dial(ctx, os.Getenv("STREAM_TEST_SOCKET"), nil)
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(0)
	}
	var m stream.Message
	if err := c.Next(&m); err != nil {
		fmt.Println("read:", err)
		os.Exit(0)
	}
	switch m.Rec.Type {
	case "error":
		fmt.Println("error", m.Rec.Error)
	default:
		fmt.Println(m.Rec.Type, m.Rec.FrameSeq)
	}
	os.Exit(0)
}

// TestSocketCloseFlushes: Close writes what is queued to a client that
// reads (within FlushTimeout), then EOF, while a client that does not read
// holds it no longer than the flush deadline. The records are 2 KiB of
// one class label rather than of floats: the same bytes to flush (600 KB,
// more than the socket buffer holds, so most wait in the sink's queue),
// but a tenth of the decoding, which under -race on a loaded machine took
// the reader past the deadline (1.6 s of the 3 s when unloaded).
func TestSocketCloseFlushes(t *testing.T) {
	s, ev := newSocket(t, Options{QueueLen: 1024, FlushTimeout: 3 * time.Second})
	reader := dial(t, s, ev, nil)
	stuck, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	ev.wait(t, ClientConnected)
	big := &stream.Record{Kind: stream.KindResult, Pipeline: "p", Outputs: []stream.Output{{Name: "top", Kind: stream.OutputClasses, Classes: []stream.Class{{Index: 1, Label: strings.Repeat("label ", 340), Score: 0.5}}}}}
	const n = 300
	for i := 1; i <= n; i++ {
		big.FrameSeq = uint64(i)
		s.Publish(big)
	}
	for _, c := range s.Clients() {
		if c.Queued == 0 {
			t.Fatalf("client %d has nothing queued before Close: the records all fit its socket buffer, nothing is left to flush", c.ID)
		}
	}
	closed := make(chan struct{})
	start := time.Now()
	go func() {
		s.Close()
		close(closed)
	}()
	for i := 1; i <= n; i++ {
		if m := next(t, reader); m.Rec.FrameSeq != uint64(i) || m.Missed != 0 {
			t.Fatalf("record %d: %+v missed %d", i, m.Rec.FrameSeq, m.Missed)
		}
	}
	t.Logf("the reader had the %d records %v after Close began", n, time.Since(start))
	var m stream.Message
	if err := reader.Next(&m); err != io.EOF {
		t.Fatalf("after the flush: %v, want EOF", err)
	}
	select {
	case <-closed:
		// The stuck client holds Close until the flush deadline, not longer
		// than a generous margin past it.
		t.Logf("Close took %v with a stuck client (FlushTimeout 3s)", time.Since(start))
	case <-time.After(waitTimeout):
		t.Fatal("Close did not return although the stuck client's flush deadline passed")
	}
	if st := s.Stats(); st.Sent < n {
		t.Fatalf("stats %+v", st)
	}
	s.Publish(big) // after Close: a no-op
	s.Close()      // idempotent
}

func TestSocketRunCancel(t *testing.T) {
	s, _ := newSocket(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := os.Lstat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("socket file left after Run returned")
	}
}

// Large records for a client that does not read: memory stays near the
// per-client byte budget, not QueueLen × record size.
func TestSocketQueueBytesBound(t *testing.T) {
	s, ev := newSocket(t, Options{QueueLen: 256, QueueBytes: 1 << 20, WriteTimeout: waitTimeout})
	stuck, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	ev.wait(t, ClientConnected)
	big := &stream.Record{Kind: stream.KindResult, Pipeline: "p", Outputs: []stream.Output{{Name: "t", Kind: stream.OutputRaw, Shape: []int64{12000}, Data: make([]float32, 12000)}}}
	for i := range big.Outputs[0].Data {
		big.Outputs[0].Data[i] = float32(i) / 7
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 400 // ~100 KB each: 40 MB in total
	for i := 1; i <= n; i++ {
		big.FrameSeq = uint64(i)
		s.Publish(big)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 8<<20 {
		t.Fatalf("heap grew by %d MB for a 1 MB client budget", grow>>20)
	}
	cl := s.Clients()
	if len(cl) != 1 || cl[0].Queued > 11 || cl[0].Dropped == 0 {
		t.Fatalf("client %+v: want at most ~10 records of 100 KB queued and drops counted", cl)
	}
}

// selfCommand runs a copy of this test binary: through $EDGED_EXEC_WRAPPER
// when set (qemu in arm64 test runs; it keeps the PID, so inherited fds and
// LISTEN_PID work).
func selfCommand(bin string, args ...string) *exec.Cmd {
	if w := os.Getenv("EDGED_EXEC_WRAPPER"); w != "" {
		return exec.Command(w, append([]string{bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

// Clients that receive nothing (subscribed to no pipeline, or to one that
// does not exist) and hang up are disconnected at once, although no write
// ever fails for them; otherwise a few one-line connections would hold
// every place under MaxClients. A client that only shuts down its sending
// side keeps reading and is kept until it closes.
func TestSocketReapsClientsThatReceiveNothing(t *testing.T) {
	const max = 3
	s, ev := newSocket(t, Options{MaxClients: max})
	hangups := []struct {
		name string
		send string
	}{
		{"subscribe to none", `{"subscribe":{"pipelines":[]}}` + "\n"},
		{"subscribe to an unknown pipeline", `{"subscribe":{"pipelines":["nope"]}}` + "\n"},
		{"reload request", `{"reload":"engines"}` + "\n"},
		{"half a request", `{"subscribe":`},
		{"nothing", ""},
	}
	for round := range 4 {
		for _, h := range hangups {
			conn, err := net.Dial("unix", s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(conn, h.send); err != nil {
				t.Fatal(err)
			}
			ev.wait(t, ClientConnected)
			if round%2 == 1 {
				time.Sleep(20 * time.Millisecond) // the reply is queued, unread: the close resets
			}
			conn.Close()
			if e := ev.wait(t, ClientDisconnected); e.Err != nil {
				t.Fatalf("%s: disconnected with %v, want a plain hang-up", h.name, e.Err)
			}
		}
	}
	if st := s.Stats(); st.Clients != 0 || st.Rejected != 0 || st.Disconnects != uint64(4*len(hangups)) {
		t.Fatalf("stats %+v: want every client gone and none refused", st)
	}

	// A half-closed client still gets records, then goes when it closes.
	half, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Path(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	ev.wait(t, ClientConnected)
	if err := half.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the sink has read the EOF
	s.Publish(streamtest.Result("p", 1))
	dec := stream.NewDecoder(half, stream.DecoderOptions{})
	var m stream.Message
	half.SetReadDeadline(time.Now().Add(waitTimeout))
	if err := dec.Next(&m); err != nil || m.Rec.FrameSeq != 1 {
		t.Fatalf("half-closed client: %v %+v", err, m.Rec)
	}
	if st := s.Stats(); st.Clients != 1 {
		t.Fatalf("half-closed client dropped: %+v", st)
	}
	half.Close()
	ev.wait(t, ClientDisconnected)
	if st := s.Stats(); st.Clients != 0 {
		t.Fatalf("after close: %+v", st)
	}
}

// slowReader reads at most n bytes per period: a client that keeps
// reading, slower than the stream.
type slowReader struct {
	r      io.Reader
	n      int
	period time.Duration
}

func (s slowReader) Read(b []byte) (int, error) {
	time.Sleep(s.period)
	return s.r.Read(b[:min(len(b), s.n)])
}

// A client that reads steadily but slower than the stream loses its
// oldest records (seq gaps) and stays connected: it is not "a client that
// accepted no data for WriteTimeout". The writer used to block on the full
// socket until the reader had emptied most of it, far longer than
// WriteTimeout, and cut it off with ErrSlowClient. A client that reads
// nothing is still cut off.
func TestSocketSteadySlowReaderStays(t *testing.T) {
	const wt = 400 * time.Millisecond
	s, ev := newSocket(t, Options{QueueLen: 64, WriteTimeout: wt})
	stuck, err := net.Dial("unix", s.Path()) // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuckID := ev.wait(t, ClientConnected).ID
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ev.wait(t, ClientConnected)

	// About 1 KiB per record, 500 records/s; the reader takes 1 KiB per
	// 10 ms at most, a fifth of that, and reads for 3 s (7.5 write
	// timeouts), and on until it has lost records: on a loaded machine the
	// publisher can fall below the reader's pace for a while, and a reader
	// that keeps up shows nothing here.
	rec := &stream.Record{Kind: stream.KindResult, Pipeline: "p", Outputs: []stream.Output{{Name: "raw", Kind: stream.OutputRaw, Shape: []int64{128}, Data: make([]float32, 128)}}}
	for i := range rec.Outputs[0].Data {
		rec.Outputs[0].Data[i] = float32(i) * 1.125
	}
	stop := make(chan struct{})
	published := make(chan struct{})
	go func() {
		defer close(published)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rec.FrameSeq = i
			s.Publish(rec)
		}
	}()
	dec := stream.NewDecoder(slowReader{conn, 1 << 10, 10 * time.Millisecond}, stream.DecoderOptions{FromStart: true})
	var m stream.Message
	records, last := 0, uint64(0)
	for t0 := time.Now(); time.Since(t0) < 3*time.Second || dec.Stats().Missed == 0; {
		if time.Since(t0) > waitTimeout {
			close(stop)
			<-published
			t.Fatalf("the slow reader lost no records in %v (%+v): it was never slower than the stream", waitTimeout, dec.Stats())
		}
		conn.SetReadDeadline(time.Now().Add(waitTimeout))
		if err := dec.Next(&m); err != nil {
			close(stop)
			<-published
			t.Fatalf("slow reader cut off after %d records (last frame %d): %v; events: %v", records, last, err, drainEvents(ev))
		}
		if m.Rec.Type == "error" {
			t.Fatalf("slow reader got an error record: %s", m.Rec.Error)
		}
		records++
		last = m.Rec.FrameSeq
	}
	close(stop)
	<-published
	var gone []ClientEvent
	for _, e := range drainEvents(ev) {
		if e.Kind == ClientDisconnected {
			gone = append(gone, e)
		}
	}
	if len(gone) != 1 || gone[0].ID != stuckID || !errors.Is(gone[0].Err, ErrSlowClient) {
		t.Fatalf("disconnects %+v: want only the client that reads nothing (id %d), with ErrSlowClient", gone, stuckID)
	}
	if st := s.Stats(); st.SlowDisconnects != 1 || st.Clients != 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("slow reader: %d records, decoder %+v", records, dec.Stats())
}

// drainEvents returns the events received so far.
func drainEvents(ev *events) []ClientEvent {
	var out []ClientEvent
	for {
		select {
		case e := <-ev.ch:
			out = append(out, e)
		default:
			return out
		}
	}
}
