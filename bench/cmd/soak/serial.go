package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/runtime/stream"
)

// serialDev is a pty pair behind a stable symlink, as a USB serial adapter
// is behind its /dev/serial/by-id link: plug makes a new pair (a new
// /dev/pts/N, as ttyUSB0 becomes ttyUSB1) and points the link at its slave
// with a rename; unplug closes both ends, which edged sees as a hang-up,
// and removes the link, as udev does.
type serialDev struct {
	name string
	link string
	// run uses the master end while the device is plugged in; it returns
	// when the master is closed.
	run func(master *os.File, plugged time.Time)

	mu      sync.Mutex
	master  *os.File
	slave   *os.File
	done    chan struct{}
	plugged time.Time
}

func (d *serialDev) plug() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.master != nil {
		return fmt.Errorf("%s: already plugged in", d.name)
	}
	m, s, err := openPty()
	if err != nil {
		return fmt.Errorf("%s: opening a pty: %w", d.name, err)
	}
	tmp := d.link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(s.Name(), tmp); err != nil {
		m.Close()
		s.Close()
		return err
	}
	if err := os.Rename(tmp, d.link); err != nil {
		m.Close()
		s.Close()
		return err
	}
	// Our slave fd stays open while plugged in: with no slave open the
	// master's reads fail (EIO) before edged has opened the port.
	d.master, d.slave, d.done, d.plugged = m, s, make(chan struct{}), time.Now()
	go func(m *os.File, done chan struct{}, at time.Time) {
		defer close(done)
		d.run(m, at)
	}(m, d.done, d.plugged)
	return nil
}

// openPty opens a pty pair whose master is in non-blocking mode, so that
// Go's poller serves it: creack/pty leaves it blocking, and closing a
// blocking file waits for a Read in progress to return, which on a quiet
// line is never, so the "unplugged" master would stay open.
func openPty() (master, slave *os.File, err error) {
	m, s, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	fd, err := unix.Dup(int(m.Fd()))
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		s.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), m.Name()), s, nil
}

// unplug closes the pair and removes the link; it waits for run to return.
func (d *serialDev) unplug() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.master == nil {
		return
	}
	os.Remove(d.link)
	d.master.Close()
	d.slave.Close()
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
	}
	d.master, d.slave = nil, nil
}

// imuRun writes CSV samples ("n,ax") to the master at rate Hz until it is
// closed, and drains what comes back.
func imuRun(rate float64, sent *atomic.Int64) func(*os.File, time.Time) {
	return func(m *os.File, _ time.Time) {
		go io.Copy(io.Discard, m) // nothing is sent to the sensor; keep the pty drained
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			<-tick.C
			if _, err := fmt.Fprintf(m, "%d,%d.5\r\n", n, n%1000); err != nil {
				return
			}
			sent.Add(1)
		}
	}
}

// uartStats counts what the serial sink's far end decoded.
type uartStats struct {
	records, crcErrors, frameErrors atomic.Int64
	lastRecord                      atomic.Int64 // UnixNano of the last record decoded
}

// uartRun decodes the COBS+CRC frames edged writes until the master is
// closed, as a microcontroller on the UART would.
func uartRun(st *uartStats) func(*os.File, time.Time) {
	return func(m *os.File, _ time.Time) {
		dec := stream.NewDecoder(m, stream.DecoderOptions{Framing: stream.FramingSerial})
		var msg stream.Message
		var crc, frame uint64
		defer func() {
			s := dec.Stats()
			st.crcErrors.Add(int64(s.CRCErrors - crc))
			st.frameErrors.Add(int64(s.FrameErrors - frame))
		}()
		for {
			if err := dec.Next(&msg); err != nil {
				return
			}
			st.records.Add(1)
			st.lastRecord.Store(time.Now().UnixNano())
			s := dec.Stats()
			st.crcErrors.Add(int64(s.CRCErrors - crc))
			st.frameErrors.Add(int64(s.FrameErrors - frame))
			crc, frame = s.CRCErrors, s.FrameErrors
		}
	}
}
