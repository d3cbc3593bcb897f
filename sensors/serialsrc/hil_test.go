//go:build hil

package serialsrc

// Serial loopback on real hardware: two ports wired TX->RX (two USB-serial
// adapters, or a Jetson UART and an adapter):
//
//	EDGED_HIL_SERIAL_TX=/dev/serial/by-id/usb-...A-if00-port0 \
//	EDGED_HIL_SERIAL_RX=/dev/serial/by-id/usb-...B-if00-port0 \
//	EDGED_HIL_SERIAL_BAUD=115200 go test -tags hil -run HIL -v ./sensors/serialsrc

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.bug.st/serial"
)

func TestHILSerialLoopback(t *testing.T) {
	tx, rx := os.Getenv("EDGED_HIL_SERIAL_TX"), os.Getenv("EDGED_HIL_SERIAL_RX")
	if tx == "" || rx == "" {
		t.Skip("EDGED_HIL_SERIAL_TX and EDGED_HIL_SERIAL_RX not set")
	}
	baud := 115200
	if s := os.Getenv("EDGED_HIL_SERIAL_BAUD"); s != "" {
		var err error
		if baud, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Name: "hil", Device: rx, Baud: baud, Protocol: COBS, Columns: []string{"i", "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := serial.Open(tx, &serial.Mode{BaudRate: baud})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const n = 1000
	go func() {
		var buf []byte
		for i := 0; i < n; i++ {
			buf = AppendPacket(buf[:0], []float32{float32(i), 0.5})
			if _, err := w.Write(buf); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got, last int
	last = -1
	for got < n {
		x, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %d packets: %v (stats %+v)", got, err, s.Stats())
		}
		if i := int(x.Values[0]); i <= last {
			t.Fatalf("packet %d after %d", i, last)
		} else {
			last = i
		}
		got++
		if last == n-1 {
			break
		}
	}
	st := s.Stats()
	t.Logf("%d of %d packets at %d baud; stats %+v", got, n, baud, st)
	if st.Checksum != 0 || st.Malformed > 1 {
		t.Errorf("line errors on a loopback cable: %+v", st)
	}
}
