package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/runtime/config"
	"github.com/edged-dev/edged/runtime/stream"
)

// Tests of the result socket as a client meets it through the real
// binary: misbehaving peers, tail and reload.

// metricsConfig is testConfig with /metrics on a Unix socket in dir.
func metricsConfig(t *testing.T, dir string, edits ...string) (cfgPath, sock, metrics string) {
	t.Helper()
	metrics = filepath.Join(dir, "metrics.sock")
	edits = append([]string{`metrics_listen = ""`, `metrics_listen = "unix:` + metrics + `"`}, edits...)
	cfgPath, sock = testConfig(t, dir, edits...)
	return cfgPath, sock, metrics
}

// scrape returns the value of the sample whose name and labels are series
// (e.g. `edged_stream_clients{sink="local"}`; labels in any order, all of
// the sample's), or -1 when there is none.
func scrape(t *testing.T, metrics, series string) float64 {
	t.Helper()
	v, err := tryScrape(metrics, series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func tryScrape(metrics, series string) (float64, error) {
	mfs, err := scrapeFamilies(metrics, "")
	if err != nil {
		return 0, err
	}
	return sampleValue(mfs, series)
}

// seriesLabel matches one label pair of a series written as in the text
// format.
var seriesLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// sampleValue finds series (name{label="value",...}) among the families:
// the counter, gauge or untyped sample with exactly those labels.
func sampleValue(mfs map[string]*dto.MetricFamily, series string) (float64, error) {
	name, labels, _ := strings.Cut(series, "{")
	want := map[string]string{}
	for _, m := range seriesLabel.FindAllStringSubmatch(labels, -1) {
		v, err := strconv.Unquote(`"` + m[2] + `"`)
		if err != nil {
			return 0, fmt.Errorf("series %s: %w", series, err)
		}
		want[m[1]] = v
	}
	mf := mfs[name]
	if mf == nil {
		return -1, nil
	}
next:
	for _, m := range mf.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		for _, l := range m.Label {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Untyped != nil:
			return m.Untyped.GetValue(), nil
		}
		return 0, fmt.Errorf("series %s is a %s", series, mf.GetType())
	}
	return -1, nil
}

// scrapeFamilies gets /metrics from the Unix socket metrics, asking for
// the format accept names ("": the default, text), and parses it (text:
// expfmt's parser; otherwise the decoder for the format served).
func scrapeFamilies(metrics, accept string) (map[string]*dto.MetricFamily, error) {
	body, h, err := getMetrics(metrics, accept)
	if err != nil {
		return nil, err
	}
	f := expfmt.ResponseFormat(h)
	if f.FormatType() == expfmt.TypeTextPlain {
		p := expfmt.NewTextParser(pmodel.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("parsing /metrics: %w", err)
		}
		return mfs, nil
	}
	mfs := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(bytes.NewReader(body), f)
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			return mfs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding /metrics (%s): %w", f, err)
		}
		mfs[mf.GetName()] = mf
	}
}

// getMetrics returns the body and headers of /metrics.
func getMetrics(metrics, accept string) ([]byte, http.Header, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", metrics)
		}}}
	req, err := http.NewRequest("GET", "http://edged/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("scraping /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("scraping /metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return body, resp.Header, nil
}

// waitMetric waits until the series has the value want (the daemon may
// still be starting).
func waitMetric(t *testing.T, metrics, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := tryScrape(metrics, series)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (%v), want %v", series, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runCmd runs the binary to completion and returns stdout, stderr and the
// exit code.
func runCmd(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := edged(args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("edged %s did not finish within %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), timeout, out.String(), errb.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// TestClientsThatReceiveNothingAreReaped is issue 10's lock-out: peers
// that subscribe to no pipeline (or to one that does not exist) and hang
// up, and `edged reload` (which subscribes to none), used to stay counted
// as clients until a restart, so max_clients of them locked every
// legitimate client out. Now each is gone as soon as it hangs up, however
// many come, and a tail afterwards is served.
func TestClientsThatReceiveNothingAreReaped(t *testing.T) {
	lib := needORT(t)
	const max = 4
	cfg, sock, metrics := metricsConfig(t, t.TempDir(), `max_clients = 64`, `max_clients = `+strconv.Itoa(max),
		`# max_clients_per_uid = 32`, `max_clients_per_uid = `+strconv.Itoa(max)) // every client here is of one user
	start(t, lib, cfg, sock)
	clients := `edged_stream_clients{sink="local"}`
	waitMetric(t, metrics, clients, 0)

	lines := []string{
		`{"subscribe":{"pipelines":[]}}`,
		`{"subscribe":{"pipelines":["no-such-pipeline"]}}`,
		`{"subscribe":{"pipelines":[],"encoding":"cbor"}}`,
		`{"reload":"engines"}`,
	}
	for i := range 3 * max {
		// Hang-ups are reaped as the daemon's reader sees them, a moment
		// later: on a loaded machine a burst of max of them can still be
		// counted when the next connects. So each waits until fewer than
		// max are counted (before the fix they never were: this failed).
		deadline := time.Now().Add(30 * time.Second)
		for n, err := tryScrape(metrics, clients); err != nil || n >= max; n, err = tryScrape(metrics, clients) {
			if time.Now().After(deadline) {
				t.Fatalf("%s = %v (%v) 30 s after %d clients hung up: they are not reaped", clients, n, err, i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, lines[i%len(lines)]+"\n")
		if i%2 == 0 {
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			conn.Read(make([]byte, 1)) // the start of the reply (or, before the fix, of the refusal)
		}
		conn.Close()
	}
	for range 3 * max {
		if _, stderr, code := runCmd(t, 30*time.Second, "reload", "-socket", sock); code != 0 {
			t.Fatalf("edged reload: exit %d: %s", code, stderr)
		}
	}
	waitMetric(t, metrics, clients, 0)
	out, stderr, code := runCmd(t, 30*time.Second, "tail", "-socket", sock, "-n", "1")
	if code != 0 || !strings.HasPrefix(out, "result #") {
		t.Fatalf("tail after %d one-line clients and %d reloads: exit %d\nstdout: %s\nstderr: %s", 3*max, 3*max, code, out, stderr)
	}
	if got := scrape(t, metrics, `edged_stream_rejected_total{sink="local",reason="any"}`); got != 0 {
		t.Errorf("%v connections refused, want none", got)
	}
}

// TestRefusedClientsFailLoudly: when the socket is full, edged tail and
// edged reload exit 1 with the daemon's reason on stderr (tail printed
// the refusal as if it were a record and exited 0; reload reported a
// broken pipe), and the refusals are counted in /metrics by reason.
func TestRefusedClientsFailLoudly(t *testing.T) {
	lib := needORT(t)
	cfg, sock, metrics := metricsConfig(t, t.TempDir(), `max_clients = 64`, `max_clients = 1`)
	start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 0)
	holder, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	go io.Copy(io.Discard, holder)
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 1)

	for _, args := range [][]string{
		{"tail", "-socket", sock, "-n", "1"},
		{"tail", "-socket", sock, "-n", "1", "-json", "-pipeline", "demo"},
		{"reload", "-socket", sock},
	} {
		out, stderr, code := runCmd(t, 30*time.Second, args...)
		if code != 1 || !strings.Contains(stderr, "too many clients (1 connected)") || strings.Contains(stderr, "broken pipe") {
			t.Errorf("edged %s on a full socket: exit %d, stderr %q; want exit 1 and the daemon's reason", strings.Join(args, " "), code, stderr)
		}
		if out != "" {
			t.Errorf("edged %s on a full socket printed %q on stdout", strings.Join(args, " "), out)
		}
	}
	if got := scrape(t, metrics, `edged_stream_rejected_total{sink="local",reason="max_clients"}`); got != 3 {
		t.Errorf("refusals for max_clients: %v, want 3", got)
	}
	if got := scrape(t, metrics, `edged_stream_rejected_total{sink="local",reason="any"}`); got != 3 {
		t.Errorf("refusals: %v, want 3", got)
	}
}

// TestTailWithoutDaemonNamesBothSockets: tail and reload without -socket
// look at edged run's default and at the systemd unit's socket; when
// neither is there the message names both.
func TestTailWithoutDaemonNamesBothSockets(t *testing.T) {
	if _, err := os.Stat(systemSocket); err == nil {
		t.Skipf("%s exists on this machine", systemSocket)
	}
	xdg := t.TempDir()
	for _, sub := range []string{"tail", "reload"} {
		cmd := edged(sub)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), filepath.Join(xdg, "edged.sock")) || !strings.Contains(stderr.String(), systemSocket) {
			t.Errorf("edged %s with no daemon: exit %d, %q; want exit 1 naming %s and %s", sub, code, stderr.String(), filepath.Join(xdg, "edged.sock"), systemSocket)
		}
	}
}

// TestSteadySlowReaderKeepsStreaming is issue 11's slow reader: a client
// that reads steadily but slower than the stream loses its oldest records
// (seq gaps, docs/PROTOCOL.md) and stays connected. It used to be cut off
// after the socket filled, with the false reason "accepted no data for
// <write_timeout>". A client that reads nothing is still cut off.
func TestSteadySlowReaderKeepsStreaming(t *testing.T) {
	lib := needORT(t)
	cfg, sock, metrics := metricsConfig(t, t.TempDir(),
		"\nwidth = 640", "\nwidth = 160", "height = 480", "height = 120", "fps = 30.0", "fps = 120.0",
		"k = 1\n", "k = 8\n", "client_queue = 256", "client_queue = 16", `write_timeout = "5s"`, `write_timeout = "1s"`)
	d := start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 0)
	stuck, err := net.Dial("unix", sock) // never reads
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Up to 120 results/s of about 700 bytes (top 8 classes); the reader
	// takes 1 KiB per 50 ms, a quarter of that, for 12 s: the socket fills
	// within a few seconds, records are dropped from the client's queue
	// (16 records), and the reader reaches the gap once it has read what
	// the socket held.
	dec := stream.NewDecoder(slowReader{conn, 1 << 10, 50 * time.Millisecond}, stream.DecoderOptions{FromStart: true})
	var m stream.Message
	records := 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := dec.Next(&m); err != nil {
			t.Fatalf("slow reader cut off after %d records: %v", records, err)
		}
		if m.Rec.Type == "error" {
			t.Fatalf("slow reader got an error record: %s", m.Rec.Error)
		}
		records++
	}
	if st := dec.Stats(); st.Missed == 0 {
		t.Errorf("no records lost (%+v): the reader was not slower than the stream", st)
	}
	waitMetric(t, metrics, `edged_stream_disconnects_total{sink="local",reason="slow"}`, 1) // the stuck one
	if got := scrape(t, metrics, `edged_stream_clients{sink="local"}`); got != 1 {
		t.Errorf("%v clients connected, want the slow reader", got)
	}
	if n := strings.Count(d.stderr.String(), "accepted no data"); n != 1 {
		t.Errorf("%d clients logged as accepting no data, want 1 (the stuck one)", n)
	}
	t.Logf("slow reader: %d records in 12 s, decoder %+v", records, dec.Stats())
}

// slowReader reads at most n bytes per period.
type slowReader struct {
	r      io.Reader
	n      int
	period time.Duration
}

func (s slowReader) Read(b []byte) (int, error) {
	time.Sleep(s.period)
	return s.r.Read(b[:min(len(b), s.n)])
}

// TestPeersCannotFloodTheLog is issue 11's journal flood: thousands of
// reload requests, refused connections, and connections that come and go
// used to give one or two log lines each. Each kind is now logged once per
// 10 s, and the next line of a kind says how many were left out.
func TestPeersCannotFloodTheLog(t *testing.T) {
	lib := needORT(t)
	// Two clients of one user, one of which reads nothing: no per-user
	// limit, no keepalive in this test.
	cfg, sock, metrics := metricsConfig(t, t.TempDir(), `max_clients = 64`, `max_clients = 2`,
		`# max_clients_per_uid = 32`, `max_clients_per_uid = 2`, `keepalive = "10s"`, `keepalive = "1h"`)
	d := start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 0)
	t0 := time.Now()

	// 3000 reload requests on one connection, in bursts of 100 that fit
	// the client's queue, so that every reply arrives.
	const reloads = 3000
	flood, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	flood.SetDeadline(time.Now().Add(2 * time.Minute))
	sc := bufio.NewScanner(flood)
	io.WriteString(flood, `{"subscribe":{"pipelines":[]}}`+"\n")
	for range reloads / 100 {
		if _, err := io.WriteString(flood, strings.Repeat(`{"reload":"engines"}`+"\n", 100)); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 100; {
			if !sc.Scan() {
				t.Fatalf("reading replies: %v", sc.Err())
			}
			if strings.Contains(sc.Text(), `"reload_requested"`) {
				n++
			}
		}
	}
	// 200 refused connections while two clients are connected.
	holder, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 2)
	for range 200 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, c) // the error record, then EOF
		c.Close()
	}
	holder.Close()
	flood.Close()
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 0)
	// 200 clients that connect and hang up.
	for range 200 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Each of the 402 connections was refused (some of the last 200 too,
	// while those before were still being reaped) or came and went.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		gone := scrape(t, metrics, `edged_stream_disconnects_total{sink="local",reason="any"}`)
		refused := scrape(t, metrics, `edged_stream_rejected_total{sink="local",reason="any"}`)
		if gone+refused == 402 && refused >= 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v disconnects and %v refusals, want 402 in all", gone, refused)
		}
	}
	if time.Since(t0) > 9*time.Second {
		t.Skipf("the floods took %v, more than the 10 s the log limit covers", time.Since(t0))
	}
	log := d.stderr.String()
	for _, line := range []string{`msg="control request"`, `msg="client rejected"`, `msg="client connected"`, `msg="client disconnected"`, `re-check requested`} {
		if n := strings.Count(log, line); n > 2 {
			t.Errorf("%d %s lines", n, line)
		}
	}
	// Past the 10 s, the next line of a kind carries the count.
	time.Sleep(10*time.Second - time.Since(t0) + 100*time.Millisecond)
	if _, stderr, code := runCmd(t, 30*time.Second, "reload", "-socket", sock); code != 0 {
		t.Fatalf("edged reload: %s", stderr)
	}
	waitLog(t, d, fmt.Sprintf(`msg="control request" sink=local request=engines peer_uid=%d`, os.Getuid()))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.stderr.String(), "suppressed="+strconv.Itoa(reloads-1)) {
		if time.Now().After(deadline) {
			t.Fatalf("no control request line with suppressed=%d:\n%s", reloads-1, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTailSerialHangup: edged tail -serial shows records as they come, and
// when the far end of the line goes away (here the pty master closes) it
// ends cleanly after the records it got, exit 0 and nothing on stderr. It used to report the EIO the kernel
// gives for a hang-up during a read ("input/output error", exit 1), often
// enough on a loaded machine; each round is a fresh chance.
func TestTailSerialHangup(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		master, slave, err := pty.Open()
		if err != nil {
			t.Skipf("no pty: %v", err)
		}
		// Raw before anything is written: records sent before tail has
		// opened the port (and made it raw) would otherwise go through
		// the cooked line discipline (CR to NL, erase characters) and
		// reach tail as bad frames.
		makeRaw(t, slave)
		cmd := edged("tail", "-serial", slave.Name(), "-baud", "921600")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		scanned := make(chan string)
		go func() {
			defer close(scanned)
			for lines.Scan() {
				scanned <- lines.Text()
			}
		}()
		// Until tail shows a record: frames keep coming, so one sent before
		// tail opened the port does not matter. Starting a -race binary on
		// a loaded machine can take seconds; that is not what is tested.
		var frame, scratch []byte
		send := func(seq uint64) {
			frame, scratch = stream.AppendSerialFrame(append(frame[:0], 0), scratch,
				&stream.Record{Kind: stream.KindStatus, Event: "config_reloaded", TNs: int64(seq)}, seq)
			master.Write(frame)
		}
		started := time.Now()
		seq := uint64(1)
	wait:
		for ; ; seq++ {
			send(seq)
			select {
			case _, ok := <-scanned:
				if !ok {
					t.Fatalf("round %d: tail printed nothing; stderr: %s", round, stderr.String())
				}
				break wait
			case <-time.After(20 * time.Millisecond):
				if time.Since(started) > 30*time.Second {
					t.Fatalf("round %d: tail printed nothing within 30 s of records; stderr: %s", round, stderr.String())
				}
			}
		}
		// tail -serial is a live view: each record shows as it comes (it
		// used to wait for 4 KiB of output). One more record must show on
		// its own.
		marker := seq + 1
		send(marker)
		deadline := time.After(10 * time.Second)
	live:
		for {
			select {
			case l, ok := <-scanned:
				if !ok {
					t.Fatalf("round %d: tail ended before showing record %d; stderr: %s", round, marker, stderr.String())
				}
				if strings.Contains(l, "status #"+strconv.FormatUint(marker, 10)+" ") {
					break live
				}
			case <-deadline:
				t.Fatalf("round %d: tail did not show record %d within 10 s of it; stderr: %s", round, marker, stderr.String())
			}
		}
		// Hang up while tail waits in a read.
		time.Sleep(time.Duration(round%4) * 5 * time.Millisecond)
		slave.Close()
		master.Close()
		for range scanned {
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("round %d: tail did not end after the hang-up", round)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 || stderr.Len() != 0 {
			t.Fatalf("round %d: tail after a hang-up: exit %d, stderr %q; want exit 0 and nothing", round, code, stderr.String())
		}
	}
}

// TestTailJSONOfCBOR: edged tail -json prints a CBOR record (serial frames,
// or a socket client that asked for CBOR) as the NDJSON encoding of the
// same record: same keys in the same order, same values. It used to
// re-encode only the keys it knew and drop zero values, so the first
// result over serial had no "frame_seq" (0), a summarised result lost
// "data":[] and "outputs":{}, and an empty sha256 vanished. Checked on
// every golden record of docs/PROTOCOL.md; strings may differ only in how
// they escape.
func TestTailJSONOfCBOR(t *testing.T) {
	golden, err := filepath.Glob("../../runtime/stream/testdata/golden/*.ndjson")
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, want := range golden {
		base := strings.TrimSuffix(want, ".ndjson")
		wantText, err := os.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range [][2]string{{base + ".cobs", "cobs-cbor"}, {base + ".cbor", "cbor"}} {
			out, stderr, code := runCmd(t, 30*time.Second, "tail", "-file", in[0], "-framing", in[1], "-json")
			if code != 0 {
				t.Fatalf("tail -file %s: exit %d: %s", in[0], code, stderr)
			}
			if got, want := jsonTokens(t, out), jsonTokens(t, string(wantText)); !slices.Equal(got, want) {
				t.Errorf("tail -json of %s:\n got %s want %s", filepath.Base(in[0]), out, wantText)
			}
		}
	}
}

// jsonTokens lists the tokens of JSON text, numbers as written.
func jsonTokens(t *testing.T, text string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var toks []string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return toks
		}
		if err != nil {
			t.Fatalf("%v in %s", err, text)
		}
		toks = append(toks, fmt.Sprintf("%T:%v", tok, tok))
	}
}

// TestSocketPathTakenByAnotherFile: when the configured socket path is a
// symbolic link, a directory or a regular file, edged run refuses it and
// says which in words (a symbolic link was written "L---------", a
// regular file "----------").
func TestSocketPathTakenByAnotherFile(t *testing.T) {
	lib := needORT(t)
	for _, c := range []struct {
		kind string
		make func(path string) error
	}{
		{"a symbolic link", func(p string) error { return os.Symlink("/nonexistent", p) }},
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }},
		{"a regular file", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
	} {
		dir := t.TempDir()
		cfg, sock := testConfig(t, dir)
		if err := c.make(sock); err != nil {
			t.Fatal(err)
		}
		cmd := edged("run", "-config", cfg)
		cmd.Env = append(os.Environ(), "EDGED_ONNXRUNTIME_LIB="+lib)
		out, _ := cmd.CombinedOutput()
		want := sock + " is " + c.kind + "; remove it or choose another socket path"
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), want) || strings.Contains(string(out), "-----") {
			t.Errorf("socket path is %s: exit %d, want an error saying %q:\n%s", c.kind, cmd.ProcessState.ExitCode(), want, out)
		}
	}
}

// TestConfigPrintShowsEveryKey: edged config print writes every key edged
// understands with the value in force, also those the file leaves out
// (reload, allow_uids, allow_gids, columns, sensors, labels were omitted),
// the socket mode in canonical octal, and the result loads back.
func TestConfigPrintShowsEveryKey(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "min.toml")
	os.WriteFile(cfg, []byte(`[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[source]]
name = "imu"
kind = "serial"
device = "/dev/null"
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam0"
model = "demo"
sinks = ["local"]
[[pipeline.postprocess]]
output = "class"
kind = "topk"
[[sink]]
name = "local"
kind = "socket"
path = "/tmp/x.sock"
mode = "600"
`), 0o644)
	out, stderr, code := runCmd(t, 30*time.Second, "config", "print", "-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"\n  reload = true\n", "\n  allow_uids = []\n", "\n  allow_gids = []\n", "\n  columns = []\n",
		"\n  sensors = []\n", "\n    labels = []\n", "\n  mode = \"0600\"\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("config print lacks %q:\n%s", strings.TrimSpace(want), out)
		}
	}
	// Only the keys of each table's kind (issue 19: a socket sink showed
	// baud = 0 and url = ""): columns for the serial source alone.
	if n := strings.Count(out, "\n  columns = "); n != 1 {
		t.Errorf("columns printed for %d sources, want the serial one", n)
	}
	if _, err := config.Parse("printed", []byte(out)); err != nil {
		t.Errorf("printed configuration does not load: %v", err)
	}
}

// TestProtocolDefaultsAreTheBinarys: the defaults docs/PROTOCOL.md
// promises for socket and serial sinks are the ones edged applies (as
// edged config print shows them for sinks that set nothing).
// docs/PROTOCOL.md said max_clients 64 where edged used 16, and
// max_frame_bytes 4096 where it used 1024.
func TestProtocolDefaultsAreTheBinarys(t *testing.T) {
	doc, err := os.ReadFile("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "sinks.toml")
	os.WriteFile(cfg, []byte(`[[source]]
name = "cam0"
kind = "synthetic"
width = 64
height = 48
[[model]]
name = "demo"
path = "builtin:demo"
[[pipeline]]
name = "p"
source = "cam0"
model = "demo"
sinks = ["local", "uart"]
[[sink]]
name = "local"
kind = "socket"
path = "/tmp/x.sock"
[[sink]]
name = "uart"
kind = "serial"
device = "/dev/null"
`), 0o644)
	printed, stderr, code := runCmd(t, 30*time.Second, "config", "print", "-config", cfg)
	if code != 0 {
		t.Fatalf("config print: exit %d: %s", code, stderr)
	}
	for _, c := range []struct{ doc, key string }{
		{"`max_clients` \\(default (\\d+)\\)", "max_clients = (\\d+)"},
		{"`client_queue`, default (\\d+) records", "client_queue = (\\d+)"},
		{"`write_timeout` \\(default (\\d+) s\\)", `write_timeout = "(\d+)s"`},
		{"`keepalive` \\(default (\\d+) s;", `keepalive = "(\d+)s"`},
		{"`max_frame_bytes` on serial \\(default (\\d+)", "max_frame_bytes = ([1-9]\\d*)"},
	} {
		d := regexp.MustCompile(c.doc).FindSubmatch(doc)
		p := regexp.MustCompile(c.key).FindSubmatch([]byte(printed))
		if d == nil || p == nil {
			t.Errorf("%s: not found in docs/PROTOCOL.md (%q) or config print (%q)", c.key, d, p)
			continue
		}
		if string(d[1]) != string(p[1]) {
			t.Errorf("docs/PROTOCOL.md says %s, edged applies %s", d[0], p[0])
		}
	}
	// max_clients_per_uid: "default half of max_clients".
	mc := regexp.MustCompile(`max_clients = (\d+)`).FindStringSubmatch(printed)
	pu := regexp.MustCompile(`max_clients_per_uid = (\d+)`).FindStringSubmatch(printed)
	if !strings.Contains(string(doc), "`max_clients_per_uid` (default half of `max_clients`)") || mc == nil || pu == nil ||
		fmt.Sprint(atoi(t, mc[1])/2) != pu[1] {
		t.Errorf("docs/PROTOCOL.md's max_clients_per_uid default is not what edged applies: %q %q", mc, pu)
	}
}

// TestSerialSensorRejectedLinesCounted: lines a serial sensor refuses are
// counted in /metrics by reason (they were counted inside the sensor but
// shown nowhere): a CSV IMU on a pty sends good lines, lines with the
// wrong number of columns or a word for a number, and an overlong line.
func TestSerialSensorRejectedLinesCounted(t *testing.T) {
	lib := needORT(t)
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	go io.Copy(io.Discard, master)
	dir := t.TempDir()
	cfg, sock, metrics := metricsConfig(t, dir,
		`sensors = []`, `sensors = ["imu"]`,
		"[[model]]", "[[source]]\nname = \"imu\"\nkind = \"serial\"\ndevice = \""+slave.Name()+"\"\nprotocol = \"csv\"\ncolumns = [\"ax\", \"ay\"]\n\n[[model]]")
	start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_source_up{source="imu"}`, 1)
	lines := "1,2\n1,2,3\n4\nx,1\n1,two\n" + strings.Repeat("9", 300) + "\n3,4\n# comment\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		master.WriteString(lines)
		time.Sleep(100 * time.Millisecond)
		mal := scrape(t, metrics, `edged_sensor_lines_rejected_total{source="imu",reason="malformed"}`)
		over := scrape(t, metrics, `edged_sensor_lines_rejected_total{source="imu",reason="oversize"}`)
		sum := scrape(t, metrics, `edged_sensor_lines_rejected_total{source="imu",reason="checksum"}`)
		// Each round: 3 malformed ("1,2,3", "4", "1,two"; "x,1" starts
		// with a letter, so it is a header, ignored), 1 oversize.
		if over >= 1 && sum == 0 && mal == 3*over {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rejected lines: malformed %v, oversize %v, checksum %v; want 3, 1, 0 per round", mal, over, sum)
		}
	}
}

// makeRaw puts a tty in raw mode, as cfmakeraw(3) does.
func makeRaw(t *testing.T, f *os.File) {
	t.Helper()
	fd := int(f.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Cflag &^= unix.CSIZE | unix.PARENB
	tio.Cflag |= unix.CS8
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
