package serialsink

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.bug.st/serial"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/runtime/stream/streamtest"
)

// newPty returns a pty master and its slave's path; the sink opens the
// port by path, as it would a UART. The test keeps its own slave fd open so
// the master does not read EIO while the sink has the port closed (between
// reopens, after Close); closing the master still hangs up the sink's fd.
// waitTimeout bounds every wait for an event or a frame.
const waitTimeout = 20 * time.Second

func newPty(t *testing.T) (*os.File, string) {
	t.Helper()
	m, sl, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() {
		sl.Close()
		m.Close()
	})
	return m, sl.Name()
}

func newSerialSink(t *testing.T, opts Options) (*Sink, chan Event) {
	t.Helper()
	ev := make(chan Event, 1024)
	if opts.OnEvent == nil {
		opts.OnEvent = func(e Event) {
			select {
			case ev <- e:
			default:
			}
		}
	}
	if opts.BackoffMin == 0 {
		opts.BackoffMin, opts.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ev
}

func waitSerialEvent(t *testing.T, ev chan Event, k EventKind) Event {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case e := <-ev:
			if e.Kind == k {
				return e
			}
		case <-timer.C:
			t.Fatalf("no %v serial event within %v", k, waitTimeout)
		}
	}
}

// frameReader decodes serial frames from r on a goroutine and hands them
// over one by one.
type frameReader struct {
	msgs chan stream.Message
	errc chan error
	dec  *stream.Decoder
}

func readFrames(r io.Reader, framing stream.Framing) *frameReader {
	fr := &frameReader{msgs: make(chan stream.Message, 1<<16), errc: make(chan error, 1), dec: stream.NewDecoder(r, stream.DecoderOptions{Framing: framing})}
	go func() {
		for {
			var m stream.Message
			if err := fr.dec.Next(&m); err != nil {
				fr.errc <- err
				return
			}
			m.Raw = nil
			fr.msgs <- m
		}
	}()
	return fr
}

func (fr *frameReader) next(t *testing.T) stream.Message {
	t.Helper()
	select {
	case m := <-fr.msgs:
		return m
	case err := <-fr.errc:
		t.Fatalf("serial reader: %v", err)
	case <-time.After(waitTimeout):
		t.Fatalf("no frame within %v", waitTimeout)
	}
	return stream.Message{}
}

// 10,000 results at 921600 baud over a pty decode with no loss, in order.
func TestSerial10000Results(t *testing.T) {
	master, path := newPty(t)
	on := true
	s, ev := newSerialSink(t, Options{Device: path, Baud: 921600, QueueLen: 256, DTR: &on, RTS: &on})
	waitSerialEvent(t, ev, Opened)
	fr := readFrames(master, stream.FramingSerial)
	const n = 10000
	received := 0
	check := func(m stream.Message) {
		received++
		if m.Rec.Seq != uint64(received) || m.Rec.FrameSeq != uint64(received) || m.Missed != 0 {
			t.Fatalf("record %d: seq %d frame %d missed %d", received, m.Rec.Seq, m.Rec.FrameSeq, m.Missed)
		}
		if len(m.Rec.Outputs["top"].Top) != 1 || m.Rec.Outputs["top"].Top[0].Index != received%3 {
			t.Fatalf("record %d: outputs %+v", received, m.Rec.Outputs)
		}
	}
	for i := 1; i <= n; i++ {
		for i-received > 128 { // a pipeline slower than the link: never fill the queue
			check(fr.next(t))
		}
		s.Publish(streamtest.Result("front", uint64(i)))
	}
	for received < n {
		check(fr.next(t))
	}
	// The writer counts a frame once its write returned, which can be
	// after the other end of the pty has read it: wait for the count.
	for deadline := time.Now().Add(waitTimeout); s.Stats().Sent < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("every frame was read but only %d of %d counted as sent: %+v", s.Stats().Sent, n, s.Stats())
		}
	}
	st := s.Stats()
	if st.Sent != n || st.Dropped != 0 || st.Published != n || !st.Up {
		t.Fatalf("sink stats %+v", st)
	}
}

// faultReader damages a byte stream: bit flips and dropped bytes at given
// offsets, and delivers it in small random pieces.
type faultReader struct {
	data []byte
	pos  int
	rng  *rand.Rand
}

func (f *faultReader) Read(p []byte) (int, error) {
	if f.pos >= len(f.data) {
		return 0, io.EOF
	}
	n := min(1+f.rng.IntN(7), len(p), len(f.data)-f.pos)
	copy(p, f.data[f.pos:f.pos+n])
	f.pos += n
	return n, nil
}

// Bit flips, dropped bytes and dropped delimiters are caught by the CRC (or
// COBS) and the decoder resynchronises at the next 0x00: every undamaged
// frame is decoded, no damaged one is, and the losses show as seq gaps.
func TestSerialFaultsResync(t *testing.T) {
	const n = 400
	var wire []byte
	var bounds [][2]int // each frame's [start, end) in wire, delimiter included
	recs := make([]*stream.Record, n+1)
	var scratch []byte
	wire = append(wire, 0)
	for i := 1; i <= n; i++ {
		r := streamtest.Result("p", uint64(i))
		if i%7 == 0 {
			r = streamtest.BenchRecord()
			r.FrameSeq = uint64(i)
		}
		recs[i] = r
		start := len(wire)
		wire, scratch = stream.AppendSerialFrame(wire, scratch, r, uint64(i))
		bounds = append(bounds, [2]int{start, len(wire)})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	damaged := map[int]bool{} // frame index (seq-1)
	var out []byte
	drop := map[int]bool{}
	flip := map[int]byte{}
	for f := 0; f < n; f++ {
		b := bounds[f]
		switch rng.IntN(8) {
		case 0: // flip one bit inside the frame, never creating a 0x00
			for {
				at := b[0] + rng.IntN(b[1]-b[0]-1)
				bit := byte(1) << rng.IntN(8)
				if wire[at]^bit != 0 {
					flip[at] = bit
					break
				}
			}
			damaged[f] = true
		case 1: // drop one byte inside the frame
			drop[b[0]+rng.IntN(b[1]-b[0]-1)] = true
			damaged[f] = true
		case 2: // drop the delimiter: this frame and the next merge
			if f+1 < n {
				drop[b[1]-1] = true
				damaged[f], damaged[f+1] = true, true
			}
		}
	}
	for i, c := range wire {
		if drop[i] {
			continue
		}
		out = append(out, c^flip[i])
	}
	dec := stream.NewDecoder(&faultReader{data: out, rng: rand.New(rand.NewPCG(3, 4))}, stream.DecoderOptions{Framing: stream.FramingSerial})
	got := map[uint64]bool{}
	var missed uint64
	for {
		var m stream.Message
		err := dec.Next(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seq := m.Rec.Seq
		if seq == 0 || seq > n || damaged[int(seq-1)] || got[seq] {
			t.Fatalf("decoded seq %d, which was damaged or repeated", seq)
		}
		var want stream.Decoded // what the record decodes to unharmed
		if err := stream.DecodeCBOR(stream.AppendCBOR(nil, recs[seq], seq), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Rec, want) {
			t.Fatalf("seq %d decoded wrong:\n%+v\nwant\n%+v", seq, m.Rec, want)
		}
		got[seq] = true
		missed += m.Missed
	}
	lost := 0
	for f := 0; f < n; f++ {
		if !damaged[f] && !got[uint64(f+1)] {
			t.Errorf("undamaged frame %d was not decoded", f+1)
		}
		if damaged[f] {
			lost++
		}
	}
	st := dec.Stats()
	if int(st.Records) != n-lost || st.CRCErrors+st.FrameErrors == 0 {
		t.Fatalf("stats %+v: want %d records and errors counted for %d damaged frames", st, n-lost, lost)
	}
	// Losses at the very end are not visible as gaps; all others are.
	lastGot := 0
	for f := n; f > 0; f-- {
		if got[uint64(f)] {
			lastGot = f
			break
		}
	}
	tailLost, firstGot := n-lastGot, 0
	for f := 1; f <= n; f++ {
		if got[uint64(f)] {
			firstGot = f
			break
		}
	}
	if want := uint64(lost - tailLost - (firstGot - 1)); missed != want {
		t.Fatalf("gaps report %d missed records, want %d", missed, want)
	}
	t.Logf("%d frames, %d damaged, stats %+v", n, lost, st)
}

// The master closes mid-stream (USB unplug); the sink notices, retries
// with backoff while the device is missing, and resumes on a new pty found
// through the same stable path, starting with a delimiter.
func TestSerialReopenAfterHangup(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "usb-edged-if00")
	master1, pts1 := newPty(t)
	if err := os.Symlink(pts1, link); err != nil {
		t.Fatal(err)
	}
	s, ev := newSerialSink(t, Options{Device: link, Baud: 921600})
	waitSerialEvent(t, ev, Opened)
	fr1 := readFrames(master1, stream.FramingSerial)
	for i := 1; i <= 50; i++ {
		s.Publish(streamtest.Result("p", uint64(i)))
		if m := fr1.next(t); m.Rec.Seq != uint64(i) {
			t.Fatalf("before unplug: seq %d, want %d", m.Rec.Seq, i)
		}
	}
	master1.Close() // unplug: the node goes away, and udev removes the by-id link
	os.Remove(link)
	// Keep publishing: the first write after the hang-up fails.
	lost := waitForEvent(t, ev, Lost, func() { s.Publish(streamtest.Result("p", 0)) })
	if lost.Err == nil {
		t.Fatal("lost event without an error")
	}
	waitSerialEvent(t, ev, OpenFailed) // the device is gone

	master2, pts2 := newPty(t) // replug: a new node behind the stable name
	tmp := link + ".new"
	os.Symlink(pts2, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	fr2 := readFrames(master2, stream.FramingSerial)
	waitSerialEvent(t, ev, Opened)
	s.Publish(streamtest.Result("p", 1000))
	var m stream.Message
	for m = fr2.next(t); m.Rec.FrameSeq != 1000; m = fr2.next(t) {
	}
	if st := s.Stats(); st.Reconnects != 1 || !st.Up || st.WriteErrors != 1 {
		t.Fatalf("stats %+v", st)
	}
	if m.Rec.Seq <= 50 {
		t.Fatalf("seq went back to %d after the reopen", m.Rec.Seq)
	}
}

// waitForEvent calls poke repeatedly (event-driven: between polls it waits
// for events) until an event of kind k arrives.
func waitForEvent(t *testing.T, ev chan Event, k EventKind, poke func()) Event {
	t.Helper()
	deadline := time.After(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case e := <-ev:
			if e.Kind == k {
				return e
			}
		case <-tick.C:
			poke()
		case <-deadline:
			t.Fatalf("no %v serial event within %v", k, waitTimeout)
		}
	}
}

// A receiver that stops reading stalls the port. Publish keeps returning
// at once, another sink keeps full rate, memory stays bounded, and when
// the receiver reads again the sink resumes on a reopened port.
func TestSerialStalledReader(t *testing.T) {
	master, path := newPty(t)
	s, ev := newSerialSink(t, Options{Device: path, Baud: 921600, QueueLen: 32, StallSlack: 200 * time.Millisecond})
	waitSerialEvent(t, ev, Opened)
	admitted := make(chan struct{}, 1)
	sock, err := socketsink.New(socketsink.Options{Path: filepath.Join(t.TempDir(), "s.sock"), QueueLen: 64, NoActivation: true,
		OnClient: func(ev socketsink.ClientEvent) {
			if ev.Kind == socketsink.ClientConnected {
				admitted <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	client, err := stream.Dial(t.Context(), sock.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	select { // every record published from now on reaches the client
	case <-admitted:
	case <-time.After(waitTimeout):
		t.Fatal("the socket sink did not admit the client")
	}
	got := make(chan uint64, 16)
	go func() {
		var m stream.Message
		for client.Next(&m) == nil {
			got <- m.Rec.FrameSeq
		}
		close(got)
	}()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Nobody reads the master: the pty buffer fills, a write blocks, the
	// stall is detected and the writer abandoned.
	r := streamtest.BenchRecord()
	stalled := false
	for i := uint64(1); i <= 20000; i++ {
		r.FrameSeq = i
		s.Publish(r)
		sock.Publish(r)
		select { // the socket client gets every record, at publish rate
		case f := <-got:
			if f != i {
				t.Fatalf("socket client got frame %d, want %d", f, i)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("socket client starved at frame %d", i)
		}
		if !stalled {
			select {
			case e := <-ev:
				stalled = e.Kind == Stalled
			default:
			}
		}
		if stalled && i >= 2000 {
			break
		}
	}
	if !stalled {
		t.Fatal("no stall detected although nobody reads the port")
	}
	st := s.Stats()
	if st.Up || st.Stalls != 1 || !st.Abandoned || st.Queued > 32 || st.Dropped == 0 {
		t.Fatalf("stats while stalled %+v", st)
	}
	s.mu.Lock()
	made := s.made
	s.mu.Unlock()
	if made > 32+2 {
		t.Fatalf("%d frame buffers for a queue of 32", made)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 4<<20 {
		t.Fatalf("heap grew by %d bytes while the port was stalled", grow)
	}

	// The receiver reads again: the abandoned write completes, the port is
	// reopened and new records arrive after a resync.
	fr := readFrames(master, stream.FramingSerial)
	waitSerialEvent(t, ev, Opened)
	r.FrameSeq = 99999
	s.Publish(r)
	for m := fr.next(t); m.Rec.FrameSeq != 99999; m = fr.next(t) {
	}
	if st := s.Stats(); !st.Up || st.Reconnects != 1 || st.Abandoned {
		t.Fatalf("stats after recovery %+v", st)
	}
}

func TestSerialNDJSONAndFlush(t *testing.T) {
	master, path := newPty(t)
	s, ev := newSerialSink(t, Options{Device: path, Format: "ndjson", Baud: 921600, QueueLen: 512})
	waitSerialEvent(t, ev, Opened)
	fr := readFrames(master, stream.FramingNDJSON)
	for i := 1; i <= 300; i++ {
		s.Publish(streamtest.Result("p", uint64(i)))
	}
	s.Publish(&stream.Record{Kind: stream.KindStatus, Event: "source_down", Source: "cam0", Reason: "device gone"})
	s.Close() // flushes what is queued
	for i := 1; i <= 300; i++ {
		if m := fr.next(t); m.Rec.Seq != uint64(i) || m.Encoding != stream.NDJSON {
			t.Fatalf("record %d: %+v", i, m.Rec)
		}
	}
	if m := fr.next(t); m.Rec.Event != "source_down" {
		t.Fatalf("last record %+v", m.Rec)
	}
	s.Publish(streamtest.Result("p", 1)) // after Close: nothing
	if st := s.Stats(); st.Sent != 301 || st.Published != 301 {
		t.Fatalf("stats %+v", st)
	}
}

// Raw tensors too big for a frame are summarised, never cut.
func TestSerialSummarises(t *testing.T) {
	master, path := newPty(t)
	s, ev := newSerialSink(t, Options{Device: path, MaxFrameBytes: 512})
	waitSerialEvent(t, ev, Opened)
	fr := readFrames(master, stream.FramingSerial)
	raw := &stream.Record{Kind: stream.KindResult, Pipeline: "p", FrameSeq: 1, Outputs: []stream.Output{
		{Name: "t", Kind: stream.OutputRaw, Shape: []int64{1, 1000}, Data: make([]float32, 1000)}}}
	s.Publish(raw)
	m := fr.next(t)
	if o := m.Rec.Outputs["t"]; !o.Truncated || len(o.Data) != 0 || !reflect.DeepEqual(o.Shape, []int64{1, 1000}) {
		t.Fatalf("summarised output %+v", o)
	}
	if st := s.Stats(); st.Summarised != 1 || st.BytesSent > 512 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSerialOptions(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "no device"},
		{Options{Device: "/dev/x", Parity: "sometimes"}, "parity"},
		{Options{Device: "/dev/x", StopBits: 3}, "stop_bits"},
		{Options{Device: "/dev/x", DataBits: 9}, "data_bits"},
		{Options{Device: "/dev/x", Format: "xml"}, "format"},
		{Options{Device: "/dev/x", MaxFrameBytes: 10}, "max_frame_bytes"},
	} {
		if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.opts, err, tc.want)
		}
	}
	s, err := newSink(Options{Device: "/dev/x", Baud: 9600, Parity: "even", StopBits: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s.bps != 9600.0/12 {
		t.Fatalf("bytes per second %v for 8E2 at 9600", s.bps)
	}
}

// A missing device is retried with growing, capped delays; Close ends it.
func TestSerialMissingDevice(t *testing.T) {
	s, ev := newSerialSink(t, Options{Device: filepath.Join(t.TempDir(), "nope"), BackoffMin: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond})
	var retries []time.Duration
	for len(retries) < 5 {
		e := waitSerialEvent(t, ev, OpenFailed)
		if !errors.Is(e.Err, os.ErrNotExist) || !strings.Contains(e.Err.Error(), "nope") {
			t.Fatalf("open error %v", e.Err)
		}
		retries = append(retries, e.Retry)
	}
	for i, d := range retries {
		if d < 5*time.Millisecond || d > 40*time.Millisecond {
			t.Fatalf("retry %d after %v, outside the 5ms..40ms range (10ms..40ms, each drawn from its upper half): %v", i, d, retries)
		}
	}
	if retries[0] > 10*time.Millisecond || retries[4] < 20*time.Millisecond {
		t.Fatalf("backoff did not grow from 10ms to the 40ms cap: %v", retries)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Up || st.OpenErrors < 5 {
		t.Fatalf("stats %+v", st)
	}
}

// Publish on the serial sink allocates nothing in steady state.
func TestSerialPublishAllocs(t *testing.T) {
	master, path := newPty(t)
	s, ev := newSerialSink(t, Options{Device: path, Baud: 921600})
	waitSerialEvent(t, ev, Opened)
	go io.Copy(io.Discard, master)
	r := streamtest.BenchRecord()
	for i := 0; i < 500; i++ {
		s.Publish(r)
	}
	if a := testing.AllocsPerRun(2000, func() { r.FrameSeq++; s.Publish(r) }); a != 0 {
		t.Fatalf("serial Publish allocates %.2f times per record", a)
	}
	made := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.made }
	var a, b runtime.MemStats
	made0 := made()
	runtime.ReadMemStats(&a)
	for i := 0; i < 5000; i++ {
		r.FrameSeq++
		s.Publish(r)
	}
	runtime.ReadMemStats(&b)
	// The allocations counted are the whole process's (the writer's and
	// the Go runtime's own included: a few dozen at most, such as the free
	// list growing and the scheduler's), and the frame buffers are made as
	// the queue reaches a new peak, which a writer scheduled late on a
	// loaded machine makes happen in this window: up to QueueLen+2 of them
	// in the sink's life, each 3 allocations at most (the frame, its
	// buffer, the buffer grown to the record). Those are allowed; an
	// allocation per record would be 5000.
	made1 := made()
	newFrames := made1 - made0
	if made1 > DefaultQueue+2 {
		t.Fatalf("%d frame buffers made, want at most QueueLen+2 = %d", made1, DefaultQueue+2)
	}
	if m := b.Mallocs - a.Mallocs; m > uint64(3*newFrames)+5000/100 {
		t.Fatalf("%d allocations for 5000 serial records (writer included; %d new frame buffers)", m, newFrames)
	}
}

// edged tail -serial reads frames through OpenSerialReader; a hang-up ends
// the stream with io.EOF.
func TestOpenSerialReader(t *testing.T) {
	m, sl, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer sl.Close()
	r, err := OpenReader(sl.Name(), 921600)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out, scratch []byte
	out = append(out, 0)
	for i := 1; i <= 3; i++ {
		out, scratch = stream.AppendSerialFrame(out, scratch, streamtest.Result("p", uint64(i)), uint64(i))
	}
	if _, err := m.Write(out); err != nil {
		t.Fatal(err)
	}
	fr := readFrames(r, stream.FramingSerial)
	for i := 1; i <= 3; i++ {
		if msg := fr.next(t); msg.Rec.FrameSeq != uint64(i) {
			t.Fatalf("frame %d: %+v", i, msg.Rec)
		}
	}
	m.Close()
	select {
	case err := <-fr.errc:
		if err != io.EOF {
			t.Fatalf("after hang-up: %v, want io.EOF", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("reader not ended by the hang-up")
	}
	if _, err := OpenReader(filepath.Join(t.TempDir(), "none"), 0); err == nil || !strings.Contains(err.Error(), "none") {
		t.Fatalf("missing port: %v", err)
	}
}

// errPort is a serial.Port whose reads fail with err.
type errPort struct {
	serial.Port
	err error
}

func (p errPort) Read([]byte) (int, error) { return 0, p.err }

// A hang-up ends the stream cleanly however the kernel reports it: EIO
// (the other end of a pty closed while a read was under way, which made
// TestOpenSerialReader flaky under load), ENXIO or ENODEV (an unplugged
// adapter). Other errors pass through.
func TestSerialReaderHangupIsEOF(t *testing.T) {
	for _, err := range []error{syscall.EIO, syscall.ENXIO, syscall.ENODEV} {
		if _, got := (serialReader{errPort{err: err}}).Read(make([]byte, 8)); got != io.EOF {
			t.Errorf("read failing with %v: %v, want io.EOF", err, got)
		}
	}
	if _, got := (serialReader{errPort{err: syscall.EBADF}}).Read(make([]byte, 8)); !errors.Is(got, syscall.EBADF) {
		t.Errorf("read failing with EBADF: %v", got)
	}
}

// failingPort opens fine and fails every write at once: a port whose
// adapter hangs up as soon as it is opened.
type failingPort struct{ serial.Port }

func (failingPort) Write([]byte) (int, error) { return 0, syscall.EIO }
func (failingPort) Close() error              { return nil }

// TestSerialPortThatFailsAtOnceBacksOff: before, a port that opened and
// then failed was reopened after the shortest delay every time (10 to 20
// a second, each logged); now a port that fails soon after it opened backs
// off like one that cannot be opened: BackoffMin doubling to BackoffMax.
func TestSerialPortThatFailsAtOnceBacksOff(t *testing.T) {
	s, err := newSink(Options{Device: "/dev/ttyFlaky", Baud: 115200, BackoffMin: 20 * time.Millisecond, BackoffMax: 320 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var opens atomic.Int64
	s.open = func(string, *serial.Mode) (serial.Port, error) {
		opens.Add(1)
		return failingPort{}, nil
	}
	t0 := time.Now()
	go s.supervise()
	defer s.Close()
	stop := time.After(2 * time.Second)
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		case <-time.After(5 * time.Millisecond):
			s.Publish(streamtest.Result("p", 1)) // something to write
		}
	}
	n, took := opens.Load(), time.Since(t0)
	// The most opens the time taken can hold: the first at once, then
	// every wait drawn at its shortest (half the doubled delay: the
	// jitter). 20, 40, 80, 160, 320, 320, ... ms halved: 16 in 2 s, more
	// when a loaded machine oversleeps; without the backoff it would be
	// up to 200 (one per record).
	most := int64(backoff.Policy{Min: s.opts.BackoffMin, Max: s.opts.BackoffMax}.MostAttempts(took))
	if n < 3 || n > most {
		t.Errorf("%d opens in %v of a port that fails at once, want 3 to %d (%v doubling to %v, jittered)", n, took.Round(time.Millisecond), most, s.opts.BackoffMin, s.opts.BackoffMax)
	}
}
