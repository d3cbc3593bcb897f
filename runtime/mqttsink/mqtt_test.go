package mqttsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/socketsink"
	"github.com/edged-dev/edged/runtime/stream"
)

// TestMQTTResultsInOrder: results reach a real Mosquitto in order, on the
// pipeline's topic, each with the device id; status records go to the
// status topic, where "online" is retained. Both encodings.
func TestMQTTResultsInOrder(t *testing.T) {
	b := startBroker(t, "")
	for _, enc := range []stream.Encoding{stream.NDJSON, stream.CBOR} {
		t.Run(enc.String(), func(t *testing.T) {
			sub := subscribe(t, b, "edged/#")
			ev := &events{}
			s := newTestSink(t, Options{Name: "cloud-" + enc.String(), URL: b.url("mqtt"), QoS: 1, Encoding: enc, Dir: t.TempDir()}, ev)
			base := s.Stats().FirstSeq // the run's sink_started record
			for i := range 300 {
				s.Publish(result([]string{"front", "rear"}[i%2], uint64(i)))
			}
			s.Publish(&stream.Record{Kind: stream.KindStatus, Device: "dev-1", Event: "config_reloaded", TNs: 1})
			recs := sub.waitSeq(t, base+301, 20*time.Second)
			checkInOrder(t, recs, base, base+301, "dev-1")
			if recs[0].Seq != base || recs[0].Event != EventStarted {
				t.Errorf("first record %+v, want the sink_started record at seq %d", recs[0], base)
			}
			tops := sub.topics()
			if tops["edged/dev-1/front/results"] != 150 || tops["edged/dev-1/rear/results"] != 150 || tops["edged/dev-1/status"] < 2 {
				t.Errorf("topics %v", tops)
			}
			last := recs[len(recs)-1]
			if last.Type != "status" || last.Event != "config_reloaded" {
				t.Errorf("last record %+v", last)
			}
			if _, pres := sub.records(t); !slices.Contains(pres, PayloadOnline) {
				t.Errorf("presence %v, want online (retained)", pres)
			}
			waitFor(t, "the cursor to reach the last record", 5*time.Second, func() bool { return s.Stats().AckedSeq == base+301 })
			if st := s.Stats(); st.Sent != 302 || st.Dropped != 0 || !st.Connected || st.Queued != 0 {
				t.Errorf("stats %+v", st)
			}
			if ev.find(Connected) == nil || !strings.HasPrefix(ev.statuses()[0], "sink_up") {
				t.Errorf("events %+v, statuses %q", ev.evs, ev.statuses())
			}
			s.Close()
			// A clean stop leaves "offline" retained.
			waitFor(t, "offline", 5*time.Second, func() bool {
				_, pres := sub.records(t)
				return len(pres) > 0 && pres[len(pres)-1] == PayloadOffline
			})
		})
	}
}

// outage is how long the broker is away in TestMQTTBrokerOutage:
// EDGED_MQTT_OUTAGE (CI sets 30s, as in the issue), else 3 s.
func outage(t *testing.T) time.Duration {
	if v := os.Getenv("EDGED_MQTT_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGED_MQTT_OUTAGE: %v", err)
		}
		return d
	}
	return 3 * time.Second
}

// feed publishes results at rate per second until stop is closed, and
// reports how many and the slowest Publish call.
func feed(s []interface{ Publish(*stream.Record) }, rate int, stop chan struct{}) (n *atomic.Uint64, slowest *atomic.Int64, done chan struct{}) {
	n, slowest, done = &atomic.Uint64{}, &atomic.Int64{}, make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			r := result("front", n.Load())
			for _, sk := range s {
				t0 := time.Now()
				sk.Publish(r)
				if d := time.Since(t0).Nanoseconds(); d > slowest.Load() {
					slowest.Store(d)
				}
			}
			n.Add(1)
		}
	}()
	return n, slowest, done
}

// TestMQTTBrokerOutage: the broker is stopped mid-stream (EDGED_MQTT_OUTAGE)
// and started again; at QoS 1 every record arrives, in order, seq
// contiguous (duplicates allowed), and publishing never waited.
func TestMQTTBrokerOutage(t *testing.T) {
	b := startBroker(t, "")
	sub := subscribe(t, b, "edged/dev-1/front/results")
	ev := &events{}
	s := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: t.TempDir(), AckTimeout: time.Second}, ev)
	base := s.Stats().FirstSeq
	stop := make(chan struct{})
	n, slowest, done := feed([]interface{ Publish(*stream.Record) }{s}, 100, stop)
	time.Sleep(time.Second)
	b.stop()
	t0 := time.Now()
	waitFor(t, "the sink to see the broker gone", 10*time.Second, func() bool { return !s.Stats().Connected })
	time.Sleep(outage(t) - time.Since(t0))
	b.start()
	time.Sleep(time.Second)
	close(stop)
	<-done
	total := n.Load()
	t.Logf("%d records published over a %v outage; slowest Publish %v", total, outage(t), time.Duration(slowest.Load()))
	recs := sub.waitSeq(t, base+total, 60*time.Second)
	checkInOrder(t, recs, base+1, base+total, "dev-1")
	// A Publish that waited for the broker would take the ack timeout
	// (1 s) or a write deadline; 250 ms leaves room for -race on a loaded
	// machine (66 ms seen on two shared cores).
	if d := time.Duration(slowest.Load()); d > 250*time.Millisecond {
		t.Errorf("a Publish took %v: the pipeline waited", d)
	}
	st := s.Stats()
	if st.Dropped != 0 || st.Connects < 2 || st.ErrConnect == 0 {
		t.Errorf("stats %+v", st)
	}
	if !hasStatus(ev.statuses(), "sink_down", "cloud", "127.0.0.1") {
		t.Errorf("no sink_down status naming the sink and url: %q", ev.statuses())
	}
}

func hasStatus(st []string, event string, words ...string) bool {
	for _, s := range st {
		if strings.HasPrefix(s, event+":") {
			ok := true
			for _, w := range words {
				ok = ok && strings.Contains(s, w)
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// TestMQTTRestartWhileBrokerDown: records published while the broker is
// down survive a restart of the sink (the daemon) in the on-disk queue,
// seq continuing across it, and the restarted sink delivers them in order
// when the broker returns.
func TestMQTTRestartWhileBrokerDown(t *testing.T) {
	b := startBroker(t, "")
	sub := subscribe(t, b, "edged/dev-1/front/results") // a persistent session: it gets what arrives while it is away
	b.stop()
	dir := t.TempDir()
	s1 := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: dir}, nil)
	base1 := s1.Stats().FirstSeq
	for i := range 100 {
		s1.Publish(result("front", uint64(i)))
	}
	s1.Close()
	s2 := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: dir}, nil)
	base2 := s2.Stats().FirstSeq
	if st := s2.Stats(); st.Recovered != 101 || base2 <= base1+100 || st.LastSeq != base2 {
		t.Fatalf("after the restart (first run %d..%d): %+v", base1, base1+100, st)
	}
	for i := range 50 {
		s2.Publish(result("front", uint64(100+i)))
	}
	b.start()
	recs := sub.waitSeq(t, base2+50, 30*time.Second)
	checkInOrder(t, recs, base1+1, base1+100, "dev-1")
	checkInOrder(t, recs, base2+1, base2+50, "dev-1")
}

// TestMQTTQueueBound: with the broker down, past queue_bytes the oldest
// records are dropped and counted; what arrives later shows the gap in
// seq and is otherwise complete and in order.
func TestMQTTQueueBound(t *testing.T) {
	b := startBroker(t, "")
	sub := subscribe(t, b, "edged/dev-1/front/results")
	b.stop()
	s := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: t.TempDir(), QueueBytes: 64 << 10}, nil)
	base := s.Stats().FirstSeq // the sink_started record, dropped first
	for i := range 2000 {
		s.Publish(result("front", uint64(i)))
		if i%100 == 0 {
			time.Sleep(time.Millisecond) // let the writer keep up: the ring is not what is tested
		}
	}
	waitFor(t, "the queue to take every record", 5*time.Second, func() bool { return s.Stats().Unpublished == 0 })
	st := s.Stats()
	if st.DroppedQueueFull == 0 || st.QueueBytes > 64<<10 {
		t.Fatalf("stats %+v", st)
	}
	b.start()
	recs := sub.waitSeq(t, base+2000, 30*time.Second)
	first := recs[0].Seq
	if first != base+st.DroppedQueueFull {
		t.Errorf("first delivered seq %d after %d dropped from %d", first, st.DroppedQueueFull, base)
	}
	checkInOrder(t, recs, first, base+2000, "dev-1")
}

// TestMQTTBadCredentials: a wrong password is a clear error naming the
// sink and url (ErrAuth), counted, announced as a sink_down status; the
// sink keeps accepting records without waiting. The right one works.
func TestMQTTBadCredentials(t *testing.T) {
	bin := mosquittotest.Path(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	if out, err := exec.Command(filepath.Join(filepath.Dir(bin), "..", "bin", "mosquitto_passwd"), "-b", "-c", pw, "edged", "s3cret").CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("mosquitto_passwd", "-b", "-c", pw, "edged", "s3cret").CombinedOutput(); err2 != nil {
			t.Fatalf("mosquitto_passwd: %v %s %s", err, out, out2)
		}
	}
	b := startBroker(t, "allow_anonymous false\npassword_file "+pw)
	ev := &events{}
	bad := newTestSink(t, Options{Name: "badcreds", URL: b.url("mqtt"), QoS: 1, Username: "edged", Password: []byte("wrong"), Dir: t.TempDir()}, ev)
	waitFor(t, "ConnectFailed", 10*time.Second, func() bool { return ev.find(ConnectFailed) != nil })
	e := ev.find(ConnectFailed)
	if !errors.Is(e.Err, ErrAuth) {
		t.Fatalf("error %v does not wrap ErrAuth", e.Err)
	}
	t0 := time.Now()
	for i := range 5000 {
		bad.Publish(result("front", uint64(i)))
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("5000 Publish calls took %v", d)
	}
	if st := bad.Stats(); st.ErrAuth == 0 || st.Connected {
		t.Errorf("stats %+v", st)
	}
	if !hasStatus(ev.statuses(), "sink_down", `"badcreds"`, b.url("mqtt").String(), "credentials") {
		t.Errorf("statuses %q", ev.statuses())
	}
	t.Logf("status: %s", ev.statuses()[0])

	sub := subscribeAt(t, b.url("mqtt"), "edged/#", "edged", "s3cret")
	good := newTestSink(t, Options{Name: "good", URL: b.url("mqtt"), QoS: 1, Username: "edged", Password: []byte("s3cret"), Dir: t.TempDir()}, nil)
	base := good.Stats().FirstSeq
	for i := range 10 {
		good.Publish(result("front", uint64(i)))
	}
	checkInOrder(t, sub.waitSeq(t, base+10, 10*time.Second), base, base+10, "dev-1")
}

// TestMQTTUntrustedCertificate: a broker whose certificate is not signed
// by ca_file is refused (ErrTLS, counted, sink_down); with the right CA the
// records arrive over TLS.
func TestMQTTUntrustedCertificate(t *testing.T) {
	mosquittotest.Path(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := certs(t, dir, "broker")
	otherCA, _, _ := certs(t, dir, "other") // a CA that did not sign the broker's certificate
	plain := mosquittotest.FreePort(t)
	b := startBroker(t, fmt.Sprintf("certfile %s\nkeyfile %s\nlistener %d 127.0.0.1", certFile, keyFile, plain))
	sub := subscribeAt(t, mustURL(t, fmt.Sprintf("mqtt://127.0.0.1:%d", plain)), "edged/#", "", "")

	ev := &events{}
	tlsBad, err := TLSConfig(readPEM(t, otherCA), PEM{}, PEM{})
	if err != nil {
		t.Fatal(err)
	}
	newTestSink(t, Options{Name: "untrusted", URL: b.url("mqtts"), QoS: 1, TLS: tlsBad, Dir: t.TempDir()}, ev)
	waitFor(t, "ConnectFailed", 10*time.Second, func() bool { return ev.find(ConnectFailed) != nil })
	if e := ev.find(ConnectFailed); !errors.Is(e.Err, ErrTLS) {
		t.Fatalf("error %v does not wrap ErrTLS", e.Err)
	}
	if !hasStatus(ev.statuses(), "sink_down", `"untrusted"`, "mqtts://127.0.0.1", "certificate") {
		t.Errorf("statuses %q", ev.statuses())
	}
	t.Logf("status: %s", ev.statuses()[0])

	tlsGood, err := TLSConfig(readPEM(t, caFile), PEM{}, PEM{})
	if err != nil {
		t.Fatal(err)
	}
	good := newTestSink(t, Options{Name: "trusted", URL: b.url("mqtts"), QoS: 1, TLS: tlsGood, Dir: t.TempDir()}, nil)
	base := good.Stats().FirstSeq
	for i := range 10 {
		good.Publish(result("front", uint64(i)))
	}
	checkInOrder(t, sub.waitSeq(t, base+10, 10*time.Second), base, base+10, "dev-1")
	if _, err := TLSConfig(PEM{Name: "junk.pem", Data: []byte("junk")}, PEM{}, PEM{}); err == nil || !strings.Contains(err.Error(), "junk.pem") {
		t.Errorf("a ca_file without a certificate: %v", err)
	}
}

func readPEM(t *testing.T, path string) PEM {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return PEM{Name: path, Data: b}
}

// TestMQTTBrokerStopsReading: a broker that stops reading (SIGSTOP: its
// TCP window fills) does not slow the pipeline: a socket sink fed by the
// same loop keeps receiving at the full rate, Publish never waits, and
// after SIGCONT every record arrives in order.
func TestMQTTBrokerStopsReading(t *testing.T) {
	b := startBroker(t, "")
	sub := subscribe(t, b, "edged/dev-1/front/results")
	s := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: t.TempDir(), AckTimeout: 500 * time.Millisecond, ConnectTimeout: 500 * time.Millisecond}, nil)
	base := s.Stats().FirstSeq
	path := filepath.Join(t.TempDir(), "s.sock")
	sock, err := socketsink.New(socketsink.Options{Name: "local", Path: path, NoActivation: true, QueueLen: 256, WriteTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := stream.Dial(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m stream.Message
		for cl.Next(&m) == nil {
			got.Add(1)
		}
	}()
	// A big payload fills the broker's socket buffers quickly.
	stop := make(chan struct{})
	n, slowest, done := feed([]interface{ Publish(*stream.Record) }{s, sock}, 200, stop)
	time.Sleep(time.Second)
	b.signal(syscall.SIGSTOP)
	g0, t0 := got.Load(), time.Now()
	time.Sleep(3 * time.Second)
	rate := float64(got.Load()-g0) / time.Since(t0).Seconds()
	stalled := s.Stats()
	b.signal(syscall.SIGCONT)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	t.Logf("while the broker was stopped: socket client got %.0f records/s (fed at 200/s); slowest Publish %v; mqtt sink %+v",
		rate, time.Duration(slowest.Load()), stalled)
	if rate < 150 {
		t.Errorf("socket sink at %.0f records/s while the broker was stopped, want ~200", rate)
	}
	// Waiting for the stopped broker would take the ack timeout (500 ms)
	// or more; 250 ms leaves room for -race on a loaded machine.
	if d := time.Duration(slowest.Load()); d > 250*time.Millisecond {
		t.Errorf("a Publish took %v", d)
	}
	if stalled.ErrPublish+stalled.ErrConnect == 0 {
		t.Errorf("the stopped broker was not noticed: %+v", stalled)
	}
	total := n.Load()
	checkInOrder(t, sub.waitSeq(t, base+total, 60*time.Second), base+1, base+total, "dev-1")
	cancel()
	wg.Wait()
}

// TestMQTTDiskFull: when the disk queue cannot be written (ENOSPC, and a
// folder that cannot be made at all) the sink says so once (event, status
// record, metric counter), keeps the records in memory and delivers them,
// in order; when the disk works again it says that too.
func TestMQTTDiskFull(t *testing.T) {
	b := startBroker(t, "")
	sub := subscribe(t, b, "edged/dev-1/front/results")
	var fail atomic.Bool
	ev := &events{}
	o := Options{URL: b.url("mqtt"), QoS: 1, Dir: t.TempDir()}
	o.queueOptions.failWrite = func() error {
		if fail.Load() {
			return syscall.ENOSPC
		}
		return nil
	}
	o.queueOptions.RetryEvery = 200 * time.Millisecond
	s := newTestSink(t, o, ev)
	base := s.Stats().FirstSeq
	for i := range 50 {
		s.Publish(result("front", uint64(i)))
	}
	sub.waitSeq(t, base+50, 10*time.Second)
	fail.Store(true)
	for i := range 50 {
		s.Publish(result("front", uint64(50+i)))
		time.Sleep(time.Millisecond)
	}
	waitFor(t, "sink_queue_degraded", 5*time.Second, func() bool { return hasStatus(ev.statuses(), "sink_queue_degraded", "no space left", "memory") })
	if e := ev.find(QueueDegraded); e == nil || !errors.Is(e.Err, ErrDisk) || !errors.Is(e.Err, syscall.ENOSPC) {
		t.Fatalf("event %+v", e)
	}
	if st := s.Stats(); st.ErrDisk == 0 {
		t.Errorf("stats %+v", st)
	}
	sub.waitSeq(t, base+100, 10*time.Second)
	fail.Store(false)
	time.Sleep(300 * time.Millisecond)
	for i := range 50 {
		s.Publish(result("front", uint64(100+i)))
	}
	waitFor(t, "sink_queue_restored", 5*time.Second, func() bool { return hasStatus(ev.statuses(), "sink_queue_restored") })
	checkInOrder(t, sub.waitSeq(t, base+150, 10*time.Second), base+1, base+150, "dev-1")

	// A state folder that cannot be made: memory only from the start.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	ev2 := &events{}
	s2 := newTestSink(t, Options{Name: "nodisk", URL: b.url("mqtt"), QoS: 1, Dir: filepath.Join(file, "mqtt")}, ev2)
	if e := ev2.find(QueueDegraded); e == nil || !errors.Is(e.Err, ErrDisk) || !hasStatus(ev2.statuses(), "sink_queue_degraded", "cannot be opened") {
		t.Fatalf("events %+v, statuses %q", ev2.evs, ev2.statuses())
	}
	s2.Publish(result("front", 0))
	waitFor(t, "the records", 10*time.Second, func() bool { return s2.Stats().Sent == 2 }) // sink_started and the result
	if st := s2.Stats(); !st.Degraded {
		t.Errorf("a folder that cannot be made: stats %+v, want degraded", st)
	}
}

// TestMQTTRefusedRecord: a record the broker refuses (PUBACK "not
// authorised": an ACL) is dropped and counted, not resent forever; the
// records after it go on.
func TestMQTTRefusedRecord(t *testing.T) {
	mosquittotest.Path(t)
	acl := filepath.Join(t.TempDir(), "acl")
	os.WriteFile(acl, []byte("topic read edged/#\ntopic write edged/dev-1/status\ntopic write edged/dev-1/front/results\n"), 0o600)
	b := startBroker(t, "acl_file "+acl)
	sub := subscribe(t, b, "edged/#")
	ev := &events{}
	s := newTestSink(t, Options{URL: b.url("mqtt"), QoS: 1, Dir: t.TempDir()}, ev)
	base := s.Stats().FirstSeq
	s.Publish(result("front", 0))
	s.Publish(result("rear", 1)) // not allowed
	s.Publish(result("front", 2))
	recs := sub.waitSeq(t, base+3, 10*time.Second)
	if len(recs) != 3 || recs[0].Seq != base || recs[1].Seq != base+1 || recs[2].Seq != base+3 {
		t.Fatalf("received %+v", recs)
	}
	// The subscriber can have the last record before the sink has its PUBACK.
	waitFor(t, "the last PUBACK", 5*time.Second, func() bool { return s.Stats().Sent == 3 })
	if st := s.Stats(); st.DroppedRefused != 1 || st.Sent != 3 {
		t.Errorf("stats %+v", st)
	}
	if e := ev.find(Refused); e == nil || !strings.Contains(e.Err.Error(), "0x87") {
		t.Errorf("refused event %+v", e)
	}
}

// TestMQTTRefusedOnThisMachine: a connect this machine refuses (EPERM: the
// unit's IPAddressDeny= or a local firewall drops the SYN before it
// leaves) is told apart from a broker's refusal: the sink_down reason says
// where the connection was stopped and what allows it.
func TestMQTTRefusedOnThisMachine(t *testing.T) {
	ev := &events{}
	o := Options{URL: mustURL(t, "mqtt://192.0.2.10:1883"), QoS: 1, Dir: t.TempDir()}
	o.dialTCP = func(context.Context, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EPERM)}
	}
	newTestSink(t, o, ev)
	waitFor(t, "ConnectFailed", 10*time.Second, func() bool { return ev.find(ConnectFailed) != nil })
	if e := ev.find(ConnectFailed); !errors.Is(e.Err, ErrConnect) || !errors.Is(e.Err, syscall.EPERM) {
		t.Fatalf("error %v", e.Err)
	}
	if !hasStatus(ev.statuses(), "sink_down", "192.0.2.10", "refused on this machine", "IPAddressDeny=", "IPAddressAllow=") {
		t.Errorf("statuses %q", ev.statuses())
	}
	t.Logf("status: %s", ev.statuses()[0])
}
