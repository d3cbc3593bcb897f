package jpeg

// NVJPEGStats reports, for the nvJPEG engine of CUDA device ordinal, the
// frames decoded on the JPEG engines and the batches of more than one
// frame; ok is false when no Decoder holds that engine.
func NVJPEGStats(ordinal int) (hwFrames, batches uint64, ok bool) {
	nvSharedMu.Lock()
	defer nvSharedMu.Unlock()
	s := nvDevices[ordinal]
	if s == nil {
		return 0, 0, false
	}
	return s.frames.Load(), s.batches.Load(), true
}

// AllocManaged returns n bytes of CUDA managed memory on the device d
// decodes on, and a function that frees it; nil when d is not nvJPEG.
func AllocManaged(d *Decoder, n int) ([]byte, func()) {
	b, ok := d.b.(*nvBackend)
	if !ok {
		return nil, func() {}
	}
	m := b.s.dev.allocManaged(n)
	if m == nil {
		return nil, func() {}
	}
	return m, func() { b.s.dev.freeManaged(m) }
}
