package jpeg

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// maxBatch is the most frames one nvJPEG batch decodes: the cameras that
// share a device, with room to spare.
const maxBatch = 16

// nvRequest is one frame handed to a device's batcher. Each Decoder owns
// one, so a decode allocates nothing.
type nvRequest struct {
	stage  nvStage // the bitstream, and a device buffer
	n      int     // bitstream bytes in stage
	w, h   int
	out    uint64 // device address the image is decoded to
	status int    // 0 decoded, 1 bad data, 3 failure (see edged_nj_job)
	code   int
	where  string
	done   chan struct{}
}

// nvShared is the nvJPEG engine of one device, shared by every Decoder on
// it: one goroutine decodes what is pending as one batch, so cameras whose
// frames arrive in the same period are decoded together on the JPEG
// engines. It lives as long as a Decoder uses it.
type nvShared struct {
	dev     *nvDevice
	ordinal int
	reqs    chan *nvRequest
	users   int // Decoders holding it; guarded by nvSharedMu
	done    chan struct{}
	batch   []*nvRequest
	frames  atomic.Uint64 // decoded through the JPEG engines
	batches atomic.Uint64 // batches of more than one frame
}

var (
	nvSharedMu sync.Mutex
	nvDevices  = map[int]*nvShared{}
)

// acquireNV returns the device's engine, opening it on first use.
func acquireNV(lib string, ordinal int, wantHW bool) (*nvShared, string, error) {
	path, err := loadNVJPEG(lib)
	if err != nil {
		return nil, "", err
	}
	nvSharedMu.Lock()
	defer nvSharedMu.Unlock()
	if s := nvDevices[ordinal]; s != nil {
		s.users++
		return s, path, nil
	}
	dev, err := openNVDevice(ordinal, wantHW)
	if err != nil {
		return nil, "", err
	}
	s := &nvShared{dev: dev, ordinal: ordinal, reqs: make(chan *nvRequest, maxBatch), users: 1,
		done: make(chan struct{}), batch: make([]*nvRequest, 0, maxBatch)}
	go s.loop()
	nvDevices[ordinal] = s
	return s, path, nil
}

// release drops one user; the last closes the engine after its goroutine
// has finished.
func (s *nvShared) release() {
	nvSharedMu.Lock()
	s.users--
	last := s.users == 0
	if last {
		delete(nvDevices, s.ordinal)
	}
	nvSharedMu.Unlock()
	if last {
		close(s.reqs)
		<-s.done
		s.dev.close()
	}
}

// loop decodes requests until reqs is closed. It takes what is pending
// without waiting for more: a single camera's frame is decoded at once,
// and frames that arrive while a batch runs form the next one.
func (s *nvShared) loop() {
	defer close(s.done)
	runtime.LockOSThread() // CUDA's current context stays with the thread
	defer runtime.UnlockOSThread()
	for r := range s.reqs {
		s.batch = append(s.batch[:0], r)
	more:
		for len(s.batch) < maxBatch {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break more
				}
				s.batch = append(s.batch, r)
			default:
				break more
			}
		}
		hw := s.dev.run(s.batch)
		s.frames.Add(uint64(hw))
		if len(s.batch) > 1 {
			s.batches.Add(1)
		}
		for _, r := range s.batch {
			r.done <- struct{}{}
		}
	}
}

// nvBackend is a Decoder's use of the shared engine.
type nvBackend struct {
	s       *nvShared
	direct  bool // GPU.Direct
	req     nvRequest
	scratch []byte // a frame with the default Huffman tables inserted
}

// hasEOI reports whether src ends with the EOI marker, after the zero
// padding UVC cameras add to fill a buffer. nvJPEG decodes a truncated
// frame without complaint; libjpeg warns. A frame cut short is corrupt.
func hasEOI(src []byte) bool {
	src = bytes.TrimRight(src, "\x00")
	return len(src) >= 2 && src[len(src)-2] == 0xff && src[len(src)-1] == 0xd9
}

func (b *nvBackend) decode(dst, src []byte, denom int) (int, int, error) {
	if denom != 1 {
		return 0, 0, fmt.Errorf("%w: 1/%d: nvJPEG decodes at full scale only", ErrScale, denom)
	}
	if !hasEOI(src) {
		return 0, 0, fmt.Errorf("%w: no EOI marker: the frame is truncated", ErrCorrupt)
	}
	// MJPEG cameras omit the Huffman tables; nvJPEG wants them.
	full, err := WithDefaultHuffman(b.scratch[:0], src)
	if err != nil {
		return 0, 0, err
	}
	if len(full) > 0 && len(src) > 0 && &full[0] != &src[0] {
		b.scratch, src = full, full
	}
	w, h, code := b.req.stage.header(src)
	if code != 0 {
		return 0, 0, fmt.Errorf("%w: nvjpegGetImageInfo: %s", ErrCorrupt, nvStatus(code))
	}
	if need := 3 * w * h; len(dst) < need || need == 0 {
		return 0, 0, fmt.Errorf("%w: %d bytes for a %dx%d RGB24 image", ErrShort, len(dst), w, h)
	}
	r := &b.req
	if err := r.stage.put(src); err != nil {
		return 0, 0, err
	}
	r.n, r.w, r.h = len(src), w, h
	r.out = 0
	if b.direct {
		r.out = b.s.dev.devicePtr(dst)
	}
	copied := r.out == 0
	if copied {
		var err error
		if r.out, err = r.stage.device(3 * w * h); err != nil {
			return 0, 0, err
		}
	}
	b.s.reqs <- r
	<-r.done
	switch r.status {
	case 0:
		if copied {
			if err := r.stage.copyOut(dst[:3*w*h]); err != nil {
				return 0, 0, err
			}
		}
		return w, h, nil
	case 1:
		return 0, 0, fmt.Errorf("%w: %s: %s", ErrCorrupt, r.where, nvStatus(r.code))
	}
	return 0, 0, fmt.Errorf("%w: %s failed (status %d)", ErrDevice, r.where, r.code)
}

func (b *nvBackend) close() {
	if b.s != nil {
		b.req.stage.free()
		b.s.release()
		b.s = nil
	}
}

// nvStatus names an nvjpegStatus_t.
func nvStatus(code int) string {
	names := []string{"success", "not initialized", "invalid parameter", "bad JPEG", "JPEG not supported",
		"allocator failure", "execution failed", "architecture mismatch", "internal error",
		"implementation not supported", "incomplete bitstream"}
	if code >= 0 && code < len(names) {
		return fmt.Sprintf("%s (%d)", names[code], code)
	}
	return fmt.Sprintf("status %d", code)
}
