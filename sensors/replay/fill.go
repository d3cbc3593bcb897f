package replay

import (
	"io"
	"sync"
)

// Frames at least this large are read by several goroutines at once.
const (
	parallelMin = 1 << 20
	chunkMin    = 256 << 10
)

// filler reads a large frame from a file with several goroutines at once:
// a 1080p YUYV frame (4 MB) from the page cache takes one core about as
// long as the rest of a frame's processing, and it is latency the result
// reports (its fill stage). The caller reads the first chunk itself. The
// goroutines are owned by the filler: close stops them and waits. A frame
// allocates nothing.
type filler struct {
	work []chan chunk
	done chan error
	wg   sync.WaitGroup
}

type chunk struct {
	ra  io.ReaderAt
	b   []byte
	off int64
}

func newFiller(workers int) *filler {
	f := &filler{done: make(chan error, workers)}
	for i := 0; i < workers; i++ {
		c := make(chan chunk, 1)
		f.work = append(f.work, c)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for ch := range c {
				f.done <- readFull(ch.ra, ch.b, ch.off)
			}
		}()
	}
	return f
}

// read fills b from ra at off.
func (f *filler) read(ra io.ReaderAt, b []byte, off int64) error {
	n := len(f.work) + 1
	if len(b) < parallelMin {
		n = 1
	}
	n = min(n, max(1, len(b)/chunkMin))
	size := (len(b)/n + 4095) &^ 4095
	sent := 0
	for i := 1; i < n; i++ {
		lo := min(i*size, len(b))
		hi := min(lo+size, len(b))
		if i == n-1 {
			hi = len(b)
		}
		if lo >= hi {
			break
		}
		f.work[i-1] <- chunk{ra: ra, b: b[lo:hi], off: off + int64(lo)}
		sent++
	}
	err := readFull(ra, b[:min(size, len(b))], off)
	for i := 0; i < sent; i++ {
		if e := <-f.done; e != nil && err == nil {
			err = e
		}
	}
	return err
}

// close stops the goroutines and waits for them.
func (f *filler) close() {
	for _, c := range f.work {
		close(c)
	}
	f.wg.Wait()
}
