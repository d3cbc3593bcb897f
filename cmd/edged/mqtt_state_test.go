package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edged-dev/edged/internal/mosquittotest"
	"github.com/edged-dev/edged/runtime/mqttsink"
	"github.com/edged-dev/edged/runtime/stream"
)

// mqttConfig is metricsConfig with an MQTT sink "cloud" to the broker,
// device id edge-42 and the state folder state.
func mqttConfig(t *testing.T, dir, state string, b *mosquittotest.Broker) (cfg, sock, metrics string) {
	t.Helper()
	return metricsConfig(t, dir,
		`sinks = ["local"]`, `sinks = ["local", "cloud"]`,
		`state_dir = ""`, `state_dir = "`+state+`"`,
		`device_id = ""`, `device_id = "edge-42"`,
		`# Serial (UART) sink:`, fmt.Sprintf("[[sink]]\nname = \"cloud\"\nkind = \"mqtt\"\nurl = %q\n\n# Serial (UART) sink:", b.URL("mqtt").String()))
}

// mqttRecords decodes what the subscriber got (presence left out).
func mqttRecords(t *testing.T, sub *mosquittotest.Subscriber) []stream.Decoded {
	t.Helper()
	var recs []stream.Decoded
	for _, m := range sub.Messages() {
		if p := string(m.Payload); p == mqttsink.PayloadOnline || p == mqttsink.PayloadOffline {
			continue
		}
		var d stream.Decoded
		if err := stream.DecodeJSON(m.Payload, &d); err != nil {
			t.Fatalf("%s: %v: %q", m.Topic, err, m.Payload)
		}
		recs = append(recs, d)
	}
	return recs
}

// waitRecord waits until a record that ok accepts arrived, and returns it.
func waitRecord(t *testing.T, sub *mosquittotest.Subscriber, what string, timeout time.Duration, ok func(stream.Decoded) bool) stream.Decoded {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range mqttRecords(t, sub) {
			if ok(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s arrived within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var cleanStop = regexp.MustCompile(`stopped cleanly at seq (\d+)`)

// runs splits the records of two runs at the second run's sink_started,
// whose reason gives the first run's last seq; it checks that every seq
// of the first run, from its own sink_started, arrived.
func runs(t *testing.T, recs []stream.Decoded) (first1, last1, first2 uint64, lost []uint64) {
	t.Helper()
	var starts []stream.Decoded
	for _, r := range recs {
		if r.Event == mqttsink.EventStarted && !slices.ContainsFunc(starts, func(s stream.Decoded) bool { return s.Seq == r.Seq }) {
			starts = append(starts, r)
		}
	}
	if len(starts) != 2 {
		t.Fatalf("%d sink_started records, want 2: %+v", len(starts), starts)
	}
	m := cleanStop.FindStringSubmatch(starts[1].Reason)
	if m == nil {
		t.Fatalf("second run's sink_started does not name the first run's last seq: %s", starts[1].Reason)
	}
	first1, first2 = starts[0].Seq, starts[1].Seq
	last1, _ = strconv.ParseUint(m[1], 10, 64)
	seen := map[uint64]bool{}
	for _, r := range recs {
		if r.Device != "edge-42" {
			t.Fatalf("record of device %q: %+v", r.Device, r)
		}
		seen[r.Seq] = true
	}
	for seq := first1; seq <= last1; seq++ {
		if !seen[seq] {
			lost = append(lost, seq)
		}
	}
	return first1, last1, first2, lost
}

// TestMQTTStateFolderUnusableAtStart is the MQTT finding of a state
// folder read-only at start, through the binary. Before: edged logged
// "keeping records in memory only" but edged_sink_queue_degraded stayed 0,
// no sink_queue_degraded record was sent, the folder was never tried
// again, the records of a broker outage were lost at SIGTERM, and the
// next run started at seq 1 again (a consumer deduplicating by device and
// seq dropped its records). Now (the folder's place taken by a file,
// which even root cannot write through): the metric is 1 and the sink's
// own stream carries sink_queue_degraded; the broker goes away; the
// folder is made usable; within 10 s the queue is opened, what was kept
// in memory is written to it (sink_queue_restored, metric 0); SIGTERM;
// edged starts again with the broker still away, then the broker comes
// back: every record of the first run arrives, outage included, and the
// second run starts above the first run's last seq.
func TestMQTTStateFolderUnusableAtStart(t *testing.T) {
	lib := needORT(t)
	b := mosquittotest.StartBroker(t, "")
	sub := mosquittotest.SubscribeT(t, b.URL("mqtt"), "edged/edge-42/#", "", "")
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o750)
	blocker := filepath.Join(state, "mqtt")
	os.WriteFile(blocker, nil, 0o640)
	cfg, sock, metrics := mqttConfig(t, dir, state, b)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, "mqtt queue cannot be written")
	waitMetric(t, metrics, `edged_sink_queue_degraded{sink="cloud"}`, 1)
	waitRecord(t, sub, "sink_queue_degraded on the sink itself", 20*time.Second, func(r stream.Decoded) bool {
		return r.Event == "sink_queue_degraded" && r.Source == "cloud"
	})
	b.Stop()
	time.Sleep(2 * time.Second) // results of the outage: in memory
	os.Remove(blocker)
	waitLog(t, d, "mqtt queue opened at last")
	waitMetric(t, metrics, `edged_sink_queue_degraded{sink="cloud"}`, 0)
	time.Sleep(time.Second) // more of the outage, on disk now
	if code, _ := d.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if segs, _ := filepath.Glob(filepath.Join(state, "mqtt", "cloud", "*.seg")); len(segs) == 0 {
		t.Fatal("no queue files after the stop")
	}

	d = start(t, lib, cfg, sock)
	waitLog(t, d, "mqtt sink started")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, sub, "the second run's sink_started", 30*time.Second, func(r stream.Decoded) bool {
		return r.Event == mqttsink.EventStarted && cleanStop.MatchString(r.Reason)
	})
	time.Sleep(2 * time.Second)
	first1, last1, first2, lost := runs(t, mqttRecords(t, sub))
	if len(lost) != 0 {
		t.Errorf("first run %d..%d: %d records never arrived (%v...)", first1, last1, len(lost), lost[:min(len(lost), 5)])
	}
	if first2 <= last1 {
		t.Errorf("second run starts at %d, the first ended at %d: seqs used twice", first2, last1)
	}
	restored := slices.ContainsFunc(mqttRecords(t, sub), func(r stream.Decoded) bool { return r.Event == "sink_queue_restored" && r.Seq < first2 })
	if !restored {
		t.Error("no sink_queue_restored in the first run's records")
	}
	t.Logf("first run: seq %d..%d (%d records, outage included), all delivered; second run from %d", first1, last1, last1-first1+1, first2)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestMQTTDamagedQueueCostsOneRecord is the MQTT finding of one flipped
// byte a quarter into a queue segment, through the binary: the restart
// cut the segment there (114 records lost, 113 intact). Records queued
// while the broker is away, SIGTERM, a byte flipped a quarter into the
// segment, the broker back, edged started again: every record of the
// first run arrives but the damaged one, the log names the damage and
// edged_sink_dropped_total{reason="damaged"} counts it.
func TestMQTTDamagedQueueCostsOneRecord(t *testing.T) {
	lib := needORT(t)
	b := mosquittotest.StartBroker(t, "")
	sub := mosquittotest.SubscribeT(t, b.URL("mqtt"), "edged/edge-42/#", "", "")
	b.Stop()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg, sock, metrics := mqttConfig(t, dir, state, b)
	d := start(t, lib, cfg, sock)
	waitLog(t, d, "mqtt sink started")
	time.Sleep(4 * time.Second) // about 120 results at 30 fps, queued on disk
	if code, _ := d.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	segs, _ := filepath.Glob(filepath.Join(state, "mqtt", "cloud", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	seg, _ := os.ReadFile(segs[0])
	seg[len(seg)/4] ^= 0x20
	os.WriteFile(segs[0], seg, 0o640)

	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	d = start(t, lib, cfg, sock)
	waitLog(t, d, "damage stepped over")
	waitRecord(t, sub, "the second run's sink_started", 30*time.Second, func(r stream.Decoded) bool {
		return r.Event == mqttsink.EventStarted && cleanStop.MatchString(r.Reason)
	})
	time.Sleep(time.Second)
	first1, last1, _, lost := runs(t, mqttRecords(t, sub))
	if len(lost) != 1 {
		t.Errorf("first run %d..%d (%d bytes queued): %d records lost %v, want the one damaged", first1, last1, len(seg), len(lost), lost[:min(len(lost), 5)])
	}
	waitMetric(t, metrics, `edged_sink_dropped_total{reason="damaged",sink="cloud"}`, 1)
	t.Logf("first run: seq %d..%d, %d records; a byte flipped at %d of %d: lost %v", first1, last1, last1-first1+1, len(seg)/4, len(seg), lost)
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}
