package umem

import (
	"bytes"
	"errors"
	"testing"
)

// TestDeviceFrames: the placement of an NVDEC-fed pipeline on a discrete
// GPU whose daemon runs pinned (auto): its slots are device memory, which
// the host cannot map; an uploader hands a slot to the kernel in place,
// with no copy at all (the fake logs every copy); ReadBack copies one out
// for a CPU consumer; closing it leaves the daemon's device open.
func TestDeviceFrames(t *testing.T) {
	f := newFake(t, discreteProps)
	base, err := openWith(f, StrategyAuto, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if base.Frames != KindPinned {
		t.Fatalf("auto on a discrete GPU: frames %s, want pinned", base.Frames)
	}
	p, err := base.DeviceFrames("NVDEC writes the pictures")
	if err != nil {
		t.Fatal(err)
	}
	if p.Frames != KindDevice || p.Strategy != StrategyPinned || p.Alloc.Strategy() != StrategyPinned || p.Reason != "NVDEC writes the pictures" || p.Device != base.Device {
		t.Fatalf("device frames placement: %+v", p)
	}
	pool, err := NewPool(p.Alloc, 2, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	slot, err := pool.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	if slot.Buffer().Kind() != KindDevice || slot.Bytes() != nil || slot.Device() == 0 || slot.Size() != 8192 {
		t.Fatalf("slot: kind %s, host %v, device %#x, size %d", slot.Buffer().Kind(), slot.Bytes() != nil, slot.Device(), slot.Size())
	}
	if _, err := slot.Buffer().Host(); !errors.Is(err, ErrNotHostAccessible) {
		t.Fatalf("Host of a device slot: %v, want ErrNotHostAccessible", err)
	}
	// A decoder writes the picture on the GPU (here: straight into the
	// fake's memory).
	pic := bytes.Repeat([]byte{1, 2, 3, 4}, 1024)
	copy(f.region(slot.Device(), len(pic)), pic)

	s, err := base.Device.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	up, err := p.NewUploader(s, 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	copiesBefore := len(f.callsMatching("memcpy"))
	ptr, err := up.Begin(slot.Buffer(), len(pic))
	if err != nil {
		t.Fatal(err)
	}
	if ptr != slot.Device() {
		t.Errorf("the kernel reads %#x, the slot is at %#x: the frame was staged", ptr, slot.Device())
	}
	if err := up.End(); err != nil {
		t.Fatal(err)
	}
	if got := f.callsMatching("memcpy")[copiesBefore:]; len(got) != 0 {
		t.Errorf("handing a device frame to the kernel copied: %v", got)
	}

	out := make([]byte, len(pic))
	if err := slot.Buffer().(*Mem).ReadBack(out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, pic) {
		t.Error("ReadBack returned other bytes than the slot holds")
	}
	if got := f.callsMatching("memcpy DtoH"); len(got) != 1 {
		t.Errorf("ReadBack: copies %v, want one DtoH", got)
	}
	if err := slot.Buffer().(*Mem).ReadBack(make([]byte, 8193)); err == nil {
		t.Error("ReadBack past the buffer's end succeeded")
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := base.Device.Alloc(4096, MemOptions{Kind: KindDevice}); err != nil {
		t.Fatalf("the daemon's device after the device-frames placement closed: %v", err)
	}
}

func TestDeviceFramesNeedADevice(t *testing.T) {
	host, err := Open(Options{Strategy: StrategyHost})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.DeviceFrames("x"); !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("device frames without a device: %v, want ErrNoCUDA", err)
	}
}
