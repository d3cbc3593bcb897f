package umem

import (
	"fmt"
)

// Uploader makes CPU-written frames readable by kernels on one stream, the
// way its placement says: managed and mapped slots are handed to the
// stream and read in place; pinned and pageable slots are copied into a
// device staging buffer. One frame at a time; Begin and End are called by
// the goroutine that owns the stream, and allocate nothing.
type Uploader struct {
	s       *Stream
	mode    uploadMode
	staging *Mem
	cur     Buffer
	attach  *Mem // the slot handed to the stream, if any
}

// NewUploader returns an uploader onto stream s for frames of up to
// maxBytes bytes.
func (p *Placement) NewUploader(s *Stream, maxBytes int) (*Uploader, error) {
	if p.Device == nil || p.upload == uploadNone {
		return nil, fmt.Errorf("%w: memory = %q has no GPU to upload to", ErrNoCUDA, p.Strategy)
	}
	if s == nil || s.d != p.Device {
		return nil, fmt.Errorf("umem: NewUploader: the stream is nil or of another device")
	}
	u := &Uploader{s: s, mode: p.upload}
	if u.mode == uploadCopy {
		m, err := p.Device.Alloc(maxBytes, MemOptions{Kind: KindDevice})
		if err != nil {
			return nil, fmt.Errorf("umem: staging buffer: %w", err)
		}
		u.staging = m
	}
	return u, nil
}

// Begin hands the first n bytes of b to the stream and returns the device
// address a kernel on the stream reads them from. Until End the CPU must
// not touch b.
func (u *Uploader) Begin(b Buffer, n int) (uintptr, error) {
	if u.cur != nil {
		return 0, fmt.Errorf("umem: Uploader.Begin before End of the previous frame")
	}
	if n <= 0 || n > b.Len() {
		return 0, fmt.Errorf("umem: upload of %d bytes from a %d-byte buffer", n, b.Len())
	}
	m, _ := b.(*Mem)
	if m != nil {
		if err := m.Attach(u.s); err != nil {
			return 0, err
		}
		u.attach = m
	}
	u.cur = b
	switch u.mode {
	case uploadCopy:
		if n > u.staging.n {
			u.abort()
			return 0, fmt.Errorf("umem: upload of %d bytes into a %d-byte staging buffer", n, u.staging.n)
		}
		if err := u.s.Copy(u.staging, b, n); err != nil {
			u.abort()
			return 0, err
		}
		return u.staging.dptr, nil
	default:
		if m == nil || m.dptr == 0 {
			u.abort()
			return 0, fmt.Errorf("umem: %s buffer cannot be read in place by the GPU", b.Kind())
		}
		return m.dptr, nil
	}
}

func (u *Uploader) abort() {
	if u.attach != nil {
		u.attach.reclaim()
	}
	u.cur, u.attach = nil, nil
}

// End hands the frame back to the host once the stream's work enqueued so
// far is done; it waits for that.
func (u *Uploader) End() error {
	if u.cur == nil {
		return nil
	}
	m := u.attach
	u.cur, u.attach = nil, nil
	if m != nil {
		if err := m.Detach(u.s); err != nil {
			return err
		}
	}
	return u.s.Synchronize()
}

// Close frees the staging buffer; it is idempotent.
func (u *Uploader) Close() error {
	u.End()
	if u.staging != nil {
		return u.staging.Release()
	}
	return nil
}
