package serialsrc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/edged-dev/edged/sensors"
	"github.com/edged-dev/edged/sensors/sensorstest"
)

const waitLimit = 20 * time.Second

// tty is a pty pair standing in for a USB serial adapter: the test writes
// to master what the sensor would send; the source opens the slave by path.
type tty struct {
	master, slave *os.File
}

func newTTY(t *testing.T) *tty { return newTTYB(t) }

func newTTYB(t testing.TB) *tty {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Skipf("no pty available: %v", err)
	}
	p := &tty{master: m, slave: s}
	t.Cleanup(func() { p.master.Close(); p.slave.Close() })
	return p
}

func (p *tty) send(t *testing.T, s string) {
	t.Helper()
	if _, err := p.master.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// link points a by-id style symlink at the pty slave, atomically.
func link(t *testing.T, path string, p *tty) {
	t.Helper()
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := os.Symlink(p.slave.Name(), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func startSource(t *testing.T, o Options) *Source {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func next(t *testing.T, s *Source) sensors.Sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	x, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v (stats %+v)", err, s.Stats())
	}
	return x
}

// eventually waits for cond, re-checking as the source makes progress.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNMEAOverPTY(t *testing.T) {
	p := newTTY(t)
	s := startSource(t, Options{Name: "gps", Device: p.slave.Name(), Protocol: NMEA, Baud: 9600})
	before := sensors.Now()
	gga := "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47"
	p.send(t, gga+"\r\n")
	p.send(t, nmea("GPGSV,1,1,01,03,03,111,00")+"\r\n")                                // ignored
	p.send(t, "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*48\r\n") // checksum
	p.send(t, "\x7f\x13noise"+nmea("GNRMC,000001,A,0100.000,N,00200.000,E,0,0,010100,,")+"\r\n")
	p.send(t, strings.Repeat("x", 1000)+"\n") // oversize
	p.send(t, gga[:20])                       // split across writes
	p.send(t, gga[20:]+"\r\n")

	x := next(t, s)
	if x.Kind != "gga" || x.Sensor != "gps" || x.Seq != 0 || !approx(x.Values[1], 48+7.038/60) {
		t.Fatalf("first sample %+v", x)
	}
	if x.TMono < before || x.TMono > sensors.Now() {
		t.Fatalf("TMono %d outside [%d, now]", x.TMono, before)
	}
	x = next(t, s)
	if x.Kind != "rmc" || x.Seq != 1 || !approx(x.Values[2], 1) || !approx(x.Values[3], 2) {
		t.Fatalf("resynchronised RMC: %+v", x)
	}
	x = next(t, s)
	if x.Kind != "gga" || x.Seq != 2 {
		t.Fatalf("split sentence: %+v", x)
	}
	st := s.Stats()
	if st.Parsed != 3 || st.Checksum != 1 || st.Ignored != 1 || st.Resyncs != 1 || st.Oversize != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCSVOverPTY(t *testing.T) {
	p := newTTY(t)
	s := startSource(t, Options{Name: "imu", Device: p.slave.Name(), Protocol: CSV, Columns: []string{"ax", "ay", "az", "gx", "gy", "gz"}})
	p.send(t, "ax,ay,az,gx,gy,gz\n0.1,0.2,-9.8,0,0,0.5\n1,2,3\n")
	for i := 0; i < 50; i++ {
		p.send(t, fmt.Sprintf("%d,0,0,0,0,0\r\n", i))
	}
	x := next(t, s)
	if x.Kind != "imu" || x.N != 6 || x.Values[2] != -9.8 || x.Values[5] != 0.5 || x.Names[5] != "gz" {
		t.Fatalf("sample %+v", x)
	}
	var last int64
	for i := 0; i < 50; i++ {
		x = next(t, s)
		if x.Values[0] != float64(i) || x.Seq != uint64(i+1) || x.TMono < last {
			t.Fatalf("sample %d: %+v (previous t %d)", i, x, last)
		}
		last = x.TMono
	}
	if st := s.Stats(); st.Ignored != 1 || st.Malformed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCOBSOverPTYWithCorruption(t *testing.T) {
	p := newTTY(t)
	s := startSource(t, Options{Name: "mcu", Device: p.slave.Name(), Protocol: COBS, Columns: []string{"a", "b"}, Kind: "mcu"})
	good := AppendPacket(nil, []float32{1, 2})
	// A packet whose payload took a bit flip on the line: COBS-valid, CRC
	// wrong.
	raw := make([]byte, 20)
	pkt := AppendPacket(nil, []float32{3, 4})
	n, err := DecodeCOBS(raw, pkt[:len(pkt)-1])
	if err != nil {
		t.Fatal(err)
	}
	raw[1] ^= 0x10
	bad := append(AppendCOBS(nil, raw[:n]), 0)
	var stream []byte
	stream = append(stream, 0x55, 0xAA, 0) // noise, then a delimiter to resync
	stream = append(stream, good...)
	stream = append(stream, bad...)
	stream = append(stream, 0, 0) // idle delimiters
	stream = append(stream, AppendPacket(nil, []float32{5, 6})...)
	p.send(t, string(stream))
	x := next(t, s)
	if x.Kind != "mcu" || x.Values[0] != 1 || x.Values[1] != 2 {
		t.Fatalf("first packet %+v", x)
	}
	x = next(t, s)
	if x.Values[0] != 5 || x.Values[1] != 6 {
		t.Fatalf("packet after the corrupt one %+v", x)
	}
	if st := s.Stats(); st.Checksum != 1 || st.Malformed != 1 {
		t.Fatalf("stats %+v: want the noise and the flipped packet counted", st)
	}
}

func TestQueueDropsOldest(t *testing.T) {
	p := newTTY(t)
	s := startSource(t, Options{Name: "imu", Device: p.slave.Name(), Protocol: CSV, Columns: []string{"v"}, Queue: 4})
	for i := 0; i < 20; i++ {
		p.send(t, fmt.Sprintf("%d\n", i))
	}
	eventually(t, "20 parsed lines", func() bool { return s.Stats().Parsed == 20 })
	if d := s.Stats().Dropped; d != 16 {
		t.Fatalf("dropped %d, want 16", d)
	}
	for i := 16; i < 20; i++ {
		if x := next(t, s); x.Values[0] != float64(i) {
			t.Fatalf("got %v, want the newest samples (16..19)", x.Values[0])
		}
	}
}

func TestUnplugAndReplug(t *testing.T) {
	dir := t.TempDir()
	byID := filepath.Join(dir, "usb-FTDI_FT232R_A1B2C3-if00-port0")
	p1 := newTTY(t)
	link(t, byID, p1)
	s := startSource(t, Options{Name: "imu", Device: byID, Protocol: CSV, Columns: []string{"v"}})
	p1.send(t, "1\n")
	if x := next(t, s); x.Values[0] != 1 {
		t.Fatalf("got %v", x.Values[0])
	}

	// Unplug: the adapter vanishes while a Next is waiting.
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		errc <- err
	}()
	p1.master.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, sensors.ErrDeviceGone) {
			t.Fatalf("after unplug: %v, want ErrDeviceGone", err)
		}
		if !strings.Contains(err.Error(), byID) {
			t.Errorf("error %q does not name the device", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("unplug not detected")
	}
	if err := s.Close(); err != nil {
		t.Logf("close after unplug: %v", err)
	}
	p1.slave.Close()

	// While unplugged, the by-id name dangles: Start says not found.
	os.Remove(byID)
	if err := s.Start(context.Background()); !errors.Is(err, sensors.ErrNotFound) {
		t.Fatalf("Start while unplugged: %v, want ErrNotFound", err)
	}

	// Replug: a new pty (a new /dev/pts/N, like ttyUSB0 -> ttyUSB1)
	// behind the same stable name.
	p2 := newTTY(t)
	link(t, byID, p2)
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start after replug: %v", err)
	}
	p2.send(t, "2\n")
	if x := next(t, s); x.Values[0] != 2 || x.Seq != 1 {
		t.Fatalf("after replug got %+v", x)
	}
	if st := s.Stats(); st.Starts != 2 || st.DeviceGone != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSourceContract: a Next waiting for a line wakes on cancel and on
// Close (sensorstest.CheckSampleSource).
func TestSourceContract(t *testing.T) {
	p := newTTY(t)
	sensorstest.CheckSampleSource(t, startSource(t, Options{Name: "gps", Device: p.slave.Name(), Protocol: NMEA}))
}

func TestIdleReadsCounted(t *testing.T) {
	p := newTTY(t)
	s := startSource(t, Options{Name: "gps", Device: p.slave.Name(), Protocol: NMEA, ReadTimeout: 20 * time.Millisecond})
	eventually(t, "an idle read", func() bool { return s.Stats().IdleReads > 0 })
	p.send(t, "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\n")
	if x := next(t, s); x.Kind != "gga" {
		t.Fatalf("after idle: %+v", x)
	}
}

func TestOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Name: "a", Protocol: NMEA},
		{Name: "b", Device: "/dev/null", Protocol: "ubx"},
		{Name: "c", Device: "/dev/null", Protocol: CSV},
		{Name: "d", Device: "/dev/null", Protocol: COBS, Columns: make([]string, 17)},
	} {
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), `"`+o.Name+`"`) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	s, err := New(Options{Name: "x", Device: filepath.Join(t.TempDir(), "missing"), Protocol: NMEA})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, sensors.ErrNotFound) {
		t.Fatalf("missing device: %v", err)
	}
}
