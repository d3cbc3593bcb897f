package preprocess

// A frame is cut into chunks of output rows (plan.chunks). Run publishes
// the frame in an atomic word, rings each worker's doorbell and claims
// chunks itself; a worker that wakes claims chunks too, and one that wakes
// late finds none left, so a busy machine never makes a frame wait for a
// goroutine to be scheduled. A chunk's values do not depend on who
// computes it. Nothing here allocates per frame.

// runFrame computes every chunk of the frame in progress.
func (p *Preprocessor) runFrame() {
	n := uint64(len(p.plan.chunks))
	p.done.Store(0)
	p.state.Store(n << 32) // publishes the frame: n chunks, next 0
	if n > 1 {
		p.startWorkers()
		for _, w := range p.workers[1:] {
			select {
			case w.wake <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}
	if !p.workers[0].claimChunks() {
		<-p.fin // a worker finishes the last chunk
	}
}

// claimChunks computes chunks of the current frame until none is left and
// reports whether it finished the frame's last one.
func (w *worker) claimChunks() (last bool) {
	p := w.p
	for {
		s := p.state.Load()
		n, c := uint32(s>>32), uint32(s)
		if c >= n {
			return last
		}
		if !p.state.CompareAndSwap(s, s+1) {
			continue
		}
		w.chunk(int(c))
		if p.done.Add(1) == n {
			last = true
		}
	}
}

func (p *Preprocessor) startWorkers() {
	if p.started {
		return
	}
	p.started = true
	for _, w := range p.workers[1:] {
		w.wake = make(chan struct{}, 1)
		p.exited.Add(1)
		go w.loop()
	}
}

func (w *worker) loop() {
	defer w.p.exited.Done()
	for range w.wake {
		if w.claimChunks() {
			w.p.fin <- struct{}{}
		}
	}
}

// stopWorkers ends the worker goroutines (no frame is in progress).
func (p *Preprocessor) stopWorkers() {
	if !p.started {
		return
	}
	for _, w := range p.workers[1:] {
		close(w.wake)
	}
	p.exited.Wait()
}
