package main

import (
	"context"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClientsThatReceiveNothingCannotHoldSlots: every place of the socket
// taken by clients that subscribe to no pipeline and never read. Before,
// they held every place for good (nothing flowed to them, so no write
// ever timed out) and every other client was refused. Now each is sent a
// keepalive once it has been written nothing for `keepalive`, and is
// disconnected once it has left that unread for `write_timeout`
// (edged_stream_disconnects_total{reason="unread"}); then `edged tail`
// gets in, and on a pipeline that produces nothing (an optional camera
// that is not there) it stays connected, reading the keepalives, printing
// nothing. And no user may take more than max_clients_per_uid places.
func TestClientsThatReceiveNothingCannotHoldSlots(t *testing.T) {
	lib := needORT(t)
	const max = 8
	dir := t.TempDir()
	quiet := "[[source]]\nname = \"absent\"\nkind = \"v4l2\"\noptional = true\ndevice = \"" + filepath.Join(dir, "no-camera") + "\"\nwidth = 640\nheight = 480\nformat = \"YUYV\"\n\n[[model]]"
	cfg, sock, metrics := metricsConfig(t, dir,
		`max_clients = 64`, `max_clients = 8`,
		`# max_clients_per_uid = 32`, `max_clients_per_uid = 8`,
		`write_timeout = "5s"`, `write_timeout = "1s"`,
		`keepalive = "10s"`, `keepalive = "500ms"`,
		"[[model]]", quiet,
		"[[sink]]", "[[pipeline]]\nname = \"quiet\"\nsource = \"absent\"\nmodel = \"demo\"\nsinks = [\"local\"]\n\n[[sink]]")
	d := start(t, lib, cfg, sock)
	clients := `edged_stream_clients{sink="local"}`
	waitMetric(t, metrics, clients, 0)

	for range max {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, `{"subscribe":{"pipelines":[]}}`+"\n") // and never reads
	}
	waitMetric(t, metrics, clients, max)
	if _, stderr, code := runCmd(t, 30*time.Second, "tail", "-socket", sock, "-n", "1"); code != 1 || !strings.Contains(stderr, "too many clients") {
		t.Fatalf("tail while the sink is full: exit %d, %s", code, stderr)
	}
	t0 := time.Now()
	waitMetric(t, metrics, clients, 0)
	if took := time.Since(t0); took > 10*time.Second { // about 2 s: keepalive + write_timeout + a check
		t.Errorf("clients that read nothing held their places %v", took)
	}
	if v := scrape(t, metrics, `edged_stream_disconnects_total{reason="unread",sink="local"}`); v != max {
		t.Errorf("edged_stream_disconnects_total{reason=\"unread\"} = %v, want %d", v, max)
	}
	if out, stderr, code := runCmd(t, 30*time.Second, "tail", "-socket", sock, "-n", "2", "-pipeline", "demo"); code != 0 || !strings.Contains(out, "result #") {
		t.Fatalf("tail after the silent clients went: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}

	// edged tail on a pipeline that produces nothing stays connected.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tl := edged("tail", "-socket", sock, "-pipeline", "quiet")
	tl = exec.CommandContext(ctx, tl.Path, tl.Args[1:]...)
	var out, errb strings.Builder
	tl.Stdout, tl.Stderr = &out, &errb
	if err := tl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- tl.Wait() }()
	waitMetric(t, metrics, clients, 1)
	select {
	case err := <-exited:
		t.Fatalf("tail of a quiet pipeline exited (%v): %s %s", err, out.String(), errb.String())
	case <-time.After(4 * time.Second): // 8 keepalives, 4 write timeouts
	}
	if v := scrape(t, metrics, clients); v != 1 {
		t.Fatalf("%v clients while tail reads a quiet pipeline", v)
	}
	tl.Process.Signal(syscall.SIGINT)
	<-exited
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "subscribed") || errb.String() != "" {
		t.Errorf("tail of a quiet pipeline printed %q, %q; want its subscription's reply only", out.String(), errb.String())
	}
	if code, _ := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// TestClientsPerUser: the default max_clients_per_uid is half of
// max_clients: a user that has that many connected is refused more, with
// the reason, and counted; others still get in.
func TestClientsPerUser(t *testing.T) {
	lib := needORT(t)
	cfg, sock, metrics := metricsConfig(t, t.TempDir(), `max_clients = 64`, `max_clients = 4`)
	start(t, lib, cfg, sock)
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 0)
	for range 2 {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go io.Copy(io.Discard, conn) // reading clients: they stay
	}
	waitMetric(t, metrics, `edged_stream_clients{sink="local"}`, 2)
	_, stderr, code := runCmd(t, 30*time.Second, "tail", "-socket", sock, "-n", "1")
	if code != 1 || !strings.Contains(stderr, "too many clients of this user") || !strings.Contains(stderr, "max_clients_per_uid") {
		t.Fatalf("a third client of one user: exit %d, %s", code, stderr)
	}
	waitMetric(t, metrics, `edged_stream_rejected_total{reason="max_clients_per_uid",sink="local"}`, 1)
}
