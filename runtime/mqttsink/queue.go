package mqttsink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The on-disk queue keeps records on their way to the broker in segment
// files, <Dir>/<first seq, 20 digits>.seg, each a run of frames
// (frames.go), a file "cursor" holding the highest seq the broker
// acknowledged (uint64 and its CRC-32C), and the seq file (seqfile.go).
// Frames are appended with one write each and the files are fsynced at
// most every SyncEvery (and on Close), so a power cut loses at most the
// records of the last SyncEvery; a torn cursor reads as "nothing
// acknowledged": the records still on disk are sent again (duplicates,
// never a loss).
//
// Damage costs only what it hits. Opening walks every frame; a frame that
// does not check (length, CRC, a seq that does not follow the one before)
// starts a hole that ends at the next frame that does, so a flipped byte
// costs its own record; only what follows the last intact frame of a
// segment (a frame torn by a power cut) is cut off. Damage found later,
// while reading, is stepped over the same way.
//
// A folder that cannot be used (read-only, full, not a folder, a symbolic
// link out of the state folder) does not stop the queue: it goes on in
// memory and tries the folder again every RetryEvery, at start as later;
// when the folder works again, the records kept in memory are written
// there too.

const (
	segSuffix  = ".seg"
	cursorName = "cursor"
)

// Errors of the queue.
var (
	// ErrCorrupt is a frame that does not parse: a short header, a length
	// past MaxPayload or past the data, or a CRC mismatch.
	ErrCorrupt = errors.New("mqttsink: corrupt queue frame")
	// ErrDisk wraps a failure to use the on-disk queue (disk full,
	// read-only file system, a folder that cannot be made); the queue goes
	// on in memory.
	ErrDisk = errors.New("mqttsink: on-disk queue write failed")
	// ErrTooLarge is a record longer than MaxPayload: it is not queued.
	ErrTooLarge = errors.New("mqttsink: record too large for the queue")
)

// QueueOptions configure a Queue.
type QueueOptions struct {
	// Dir holds the segment files, the cursor and the seq file; "" keeps
	// everything in memory.
	Dir string
	// Root, when set, is a folder Dir lies in (the state folder): the
	// queue creates Dir inside it and follows no symbolic link that leads
	// out of it.
	Root string
	// MaxBytes bounds the frames kept (disk and memory together); past it
	// the oldest segment is dropped.
	MaxBytes int64
	// SegmentBytes is the size at which a new segment file is started
	// (default MaxBytes/16, at least 16 KiB): the unit of dropping.
	SegmentBytes int64
	// MemBytes bounds the frames kept in memory while the disk cannot be
	// written (default min(MaxBytes, 16 MiB)).
	MemBytes int64
	// SyncEvery is how often appended frames and the cursor are fsynced
	// (default 1 s).
	SyncEvery time.Duration
	// RetryEvery is how often a queue whose folder failed tries it again
	// (default 10 s).
	RetryEvery time.Duration

	// failWrite, when set, is asked before each disk write (tests).
	failWrite func() error
}

// OpenReport says what opening the folder found.
type OpenReport struct {
	Records   int    // unacknowledged records recovered
	Acked     uint64 // the cursor
	LastSeq   uint64 // highest seq in a segment or the cursor
	Truncated int64  // bytes cut off torn segment tails
	Corrupt   int    // segments with a torn tail (cut there)
	// Damaged is how many damaged stretches inside segments were stepped
	// over (each cost the record it hit, or the few it spans), and
	// DamagedBytes their bytes.
	Damaged      int
	DamagedBytes int64
	// HighWater is the seq file's value (HighWaterKnown: it was intact):
	// no seq handed out before is above it. Clean: the previous run
	// stopped cleanly and HighWater is its last seq, not a reservation.
	HighWater      uint64
	HighWaterKnown bool
	Clean          bool
	// Late: the folder was opened after it had failed, while the queue
	// ran in memory.
	Late bool
}

type segment struct {
	first, last uint64 // seqs of its first and last frame (count > 0)
	count       int
	size        int64
	path        string   // disk segment: its name in the folder
	f           *os.File // disk segment, open for reading (and appending, the tail)
	mem         []byte   // memory segment
	holes       []hole   // damage to step over
}

// ReadAt reads the segment's bytes.
func (s *segment) ReadAt(b []byte, off int64) (int, error) {
	if s.f != nil {
		return s.f.ReadAt(b, off)
	}
	if off >= int64(len(s.mem)) {
		return 0, io.EOF
	}
	n := copy(b, s.mem[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// holeAt returns the end of the hole that starts at off.
func (s *segment) holeAt(off int64) (int64, bool) {
	for _, h := range s.holes {
		if h.off == off {
			return h.end, true
		}
	}
	return 0, false
}

// Queue is the sink's bounded, ordered, persistent record queue: one
// appender and one reader, each its own goroutine.
type Queue struct {
	o QueueOptions

	mu       sync.Mutex
	dir      *os.Root // the folder, once it could be opened
	segs     []*segment
	total    int64 // bytes of frames in segs
	memTotal int64
	acked    uint64
	degraded bool // appending to memory: the folder failed
	failedAt time.Time
	dirty    bool // appended or acked since the last sync
	cursor   *os.File
	seqf     *os.File
	reserved uint64 // seqs up to this one are recorded in seqf
	seqGen   uint32
	lastSeq  uint64 // highest seq appended or found in the folder
	appended bool   // appended since the queue was made
	lastSync time.Time
	closed   bool
	late     *OpenReport // a late open LateOpen has not handed out yet
	rewinds  uint64      // the reader must start again from Acked
	damaged  int         // records lost to damage (at open and found by the reader)

	// reader position: the next frame of rseg after rseq is at roff.
	rseg  *segment
	roff  int64
	rseq  uint64
	rprev uint64 // seq of the last intact frame the reader passed in rseg
	rd    *frameReader
	fbuf  []byte
}

// OpenQueue makes the queue and opens (creating) its folder, recovering
// what it holds. A folder that cannot be used is not fatal: the queue is
// returned running in memory, together with the error (wrapping ErrDisk),
// and tries the folder again every RetryEvery.
func OpenQueue(o QueueOptions) (*Queue, OpenReport, error) {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = max(o.MaxBytes/16, 16<<10)
	}
	if o.MemBytes <= 0 {
		o.MemBytes = min(o.MaxBytes, 16<<20)
	}
	if o.SyncEvery <= 0 {
		o.SyncEvery = time.Second
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 10 * time.Second
	}
	q := &Queue{o: o, lastSync: time.Now()}
	if o.Dir == "" {
		q.degraded = true
		q.failedAt = time.Now().Add(1 << 62) // never retried: there is no folder
		return q, OpenReport{}, nil
	}
	rep, err := q.openDir()
	if err != nil {
		q.fail()
	}
	return q, rep, err
}

// openRoot opens the queue's folder, creating it: inside o.Root when set,
// refusing a path that leads out of it.
func (q *Queue) openRoot() (*os.Root, error) {
	if q.o.Root == "" {
		if err := os.MkdirAll(q.o.Dir, 0o750); err != nil {
			return nil, err
		}
		return os.OpenRoot(q.o.Dir)
	}
	rel, err := filepath.Rel(q.o.Root, q.o.Dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s is not inside the state folder %s", q.o.Dir, q.o.Root)
	}
	if err := os.MkdirAll(q.o.Root, 0o750); err != nil { // the state folder itself: edged's own
		return nil, err
	}
	root, err := os.OpenRoot(q.o.Root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := root.MkdirAll(rel, 0o750); err != nil {
		return nil, outside(err, q.o.Dir, q.o.Root)
	}
	r, err := root.OpenRoot(rel)
	return r, outside(err, q.o.Dir, q.o.Root)
}

// outside names the refusal of a path that a symbolic link leads out of
// the state folder.
func outside(err error, path, root string) error {
	if err != nil && strings.Contains(err.Error(), "escapes") {
		return fmt.Errorf("%s leads out of the state folder %s (a symbolic link?); edged writes only inside it: %w", path, root, err)
	}
	return err
}

// openDir opens the folder and takes in what it holds: the cursor, the
// seq file and the segments, merged with what the queue holds in memory
// (a late open).
func (q *Queue) openDir() (OpenReport, error) {
	var rep OpenReport
	wrap := func(err error) error { return fmt.Errorf("%w: %s: %w", ErrDisk, q.o.Dir, err) }
	root, err := q.openRoot()
	if err != nil {
		return rep, wrap(err)
	}
	var files []*os.File
	fail := func(err error) (OpenReport, error) {
		for _, f := range files {
			f.Close()
		}
		root.Close()
		return rep, wrap(err)
	}
	cur, err := root.OpenFile(cursorName, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fail(err)
	}
	files = append(files, cur)
	seqf, err := root.OpenFile(seqName, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fail(err)
	}
	files = append(files, seqf)
	acked := readCursor(cur)
	st, stOK := readSeqState(seqf)
	rep.Acked, rep.LastSeq = acked, acked
	rep.HighWater, rep.HighWaterKnown, rep.Clean = st.seq, stOK, stOK && st.clean
	disk, err := recoverSegments(root, acked, &rep)
	if err != nil {
		return fail(err)
	}
	q.dir, q.cursor, q.seqf, q.seqGen, q.reserved = root, cur, seqf, st.gen, st.seq
	q.merge(disk, acked)
	q.lastSeq = max(q.lastSeq, rep.LastSeq, st.seq)
	q.damaged += rep.Damaged
	return rep, nil
}

func readCursor(f *os.File) uint64 {
	var cb [12]byte
	if n, _ := f.ReadAt(cb[:], 0); n == 12 && crc32.Checksum(cb[:8], castagnoli) == binary.BigEndian.Uint32(cb[8:]) {
		return binary.BigEndian.Uint64(cb[:])
	}
	return 0
}

func writeCursor(f *os.File, seq uint64) error {
	var cb [12]byte
	binary.BigEndian.PutUint64(cb[:], seq)
	binary.BigEndian.PutUint32(cb[8:], crc32.Checksum(cb[:8], castagnoli))
	_, err := f.WriteAt(cb[:], 0)
	return err
}

// segmentNames lists the folder's segment files with the seq their name
// gives, in seq order.
func segmentNames(root *os.Root) ([]string, []uint64, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, nil, err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), segSuffix) {
			if _, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), segSuffix), 10, 64); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names) // 20-digit names sort by seq
	firsts := make([]uint64, len(names))
	for i, n := range names {
		firsts[i], _ = strconv.ParseUint(strings.TrimSuffix(n, segSuffix), 10, 64)
	}
	return names, firsts, nil
}

// recoverSegments walks every segment file: damage inside is stepped
// over, a torn tail cut off, a segment with nothing intact or wholly
// acknowledged removed.
func recoverSegments(root *os.Root, acked uint64, rep *OpenReport) ([]*segment, error) {
	names, firsts, err := segmentNames(root)
	if err != nil {
		return nil, err
	}
	var segs []*segment
	var prev uint64
	win := make([]byte, readAhead)
	for i, name := range names {
		limit := uint64(noLimit)
		if i+1 < len(names) {
			limit = firsts[i+1]
		}
		s, err := recoverSegment(root, name, max(prev, firsts[i]-min(firsts[i], 1)), limit, win, rep)
		if err != nil {
			for _, s := range segs {
				s.f.Close()
			}
			return nil, err
		}
		if s == nil {
			root.Remove(name)
			continue
		}
		prev = s.last
		if s.last <= acked {
			s.f.Close()
			root.Remove(name)
			continue
		}
		segs = append(segs, s)
		rep.LastSeq = max(rep.LastSeq, s.last)
		rep.Records += s.count
	}
	if len(segs) > 0 && segs[0].first <= acked {
		// Partly acknowledged: the reader skips to the cursor.
		rep.Records -= int(acked - segs[0].first + 1)
	}
	return segs, nil
}

// recoverSegment scans one segment file for frames with seqs in
// (prev, limit). nil with no error: nothing intact in it.
func recoverSegment(root *os.Root, name string, prev, limit uint64, win []byte, rep *OpenReport) (*segment, error) {
	f, err := root.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	res, err := newFrameReader(f, st.Size(), win).scan(prev, limit)
	if err != nil {
		f.Close()
		return nil, err
	}
	rep.Damaged += len(res.holes)
	for _, h := range res.holes {
		rep.DamagedBytes += h.end - h.off
	}
	if res.torn > 0 {
		if err := f.Truncate(res.end); err != nil {
			f.Close()
			return nil, err
		}
		rep.Truncated += res.torn
		rep.Corrupt++
	}
	if res.count == 0 {
		f.Close()
		return nil, nil
	}
	if _, err := f.Seek(res.end, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &segment{first: res.first, last: res.last, count: res.count, size: res.end, path: name, f: f, holes: res.holes}, nil
}

// merge takes the folder's segments into the queue, in seq order with
// those held in memory. The reader starts again from the cursor, lowered
// below the first record in memory the broker has not acknowledged: a
// late open can bring older records than those sent meanwhile (resent
// ones are duplicates, as after any reconnect).
func (q *Queue) merge(disk []*segment, ackedDisk uint64) {
	cursor := ackedDisk
	for _, s := range q.segs {
		if s.last > q.acked {
			cursor = min(cursor, max(s.first, q.acked+1)-1)
			break
		}
	}
	q.segs = append(disk, q.segs...)
	slices.SortStableFunc(q.segs, func(a, b *segment) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	for _, s := range disk {
		q.total += s.size
	}
	if q.appended || q.acked > 0 {
		q.acked = cursor
		writeCursor(q.cursor, cursor)
	} else {
		q.acked = ackedDisk
	}
	q.rseg = nil
	q.rewinds++
}

// Append adds a frame for seq (which must grow) and drops the oldest
// segments past the bound, returning how many unacknowledged records they
// held. A folder that fails keeps the record in memory, switches the
// queue to memory until it works again, and returns an error wrapping
// ErrDisk (at the failure and at each retry that fails). A payload longer
// than MaxPayload is refused with ErrTooLarge.
func (q *Queue) Append(seq uint64, payload []byte) (dropped int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, errors.New("mqttsink: queue closed")
	}
	if len(payload) > MaxPayload {
		return 0, fmt.Errorf("%w: seq %d is %d bytes; a queue frame carries at most %d", ErrTooLarge, seq, len(payload), MaxPayload)
	}
	if q.retryDue() {
		err = q.tryDisk()
	}
	if !q.degraded {
		if rerr := q.reserve(seq); rerr != nil {
			err = fmt.Errorf("%w: %s: %s: %w", ErrDisk, q.o.Dir, seqName, rerr)
			q.fail()
		}
	}
	q.fbuf = AppendFrame(q.fbuf[:0], seq, payload)
	if werr := q.appendFrame(seq, q.fbuf); werr != nil {
		err = werr
	}
	q.lastSeq = max(q.lastSeq, seq)
	q.appended = true
	q.dirty = true
	dropped = q.bound()
	q.maybeSync()
	return dropped, err
}

// appendFrame writes frame to the tail segment, starting a new one when
// the tail is full or of the other kind (disk or memory) than the queue's
// state; a failed write goes to memory.
func (q *Queue) appendFrame(seq uint64, frame []byte) (err error) {
	tail := q.tail()
	if tail == nil || (tail.f == nil) != q.degraded || tail.size+int64(len(frame)) > q.o.SegmentBytes && tail.size > 0 {
		tail, err = q.newSegment(seq)
	}
	if err == nil && tail.f != nil {
		werr := q.writeCheck()
		if werr == nil {
			_, werr = tail.f.Write(frame)
		}
		if werr != nil {
			tail.f.Truncate(tail.size) // no torn frame left behind
			err = fmt.Errorf("%w: %s: %w", ErrDisk, filepath.Join(q.o.Dir, tail.path), werr)
			q.fail()
			tail, _ = q.newSegment(seq)
		}
	}
	if tail.f == nil {
		tail.mem = append(tail.mem, frame...)
		q.memTotal += int64(len(frame))
	}
	if tail.count == 0 {
		tail.first = seq
	}
	tail.last = seq
	tail.count++
	tail.size += int64(len(frame))
	q.total += int64(len(frame))
	return err
}

// bound drops the oldest segments past MaxBytes (and memory segments past
// MemBytes), returning the unacknowledged records they held.
func (q *Queue) bound() (dropped int) {
	for len(q.segs) > 1 && (q.total > q.o.MaxBytes || q.memTotal > q.o.MemBytes) {
		i := 0
		if q.total <= q.o.MaxBytes {
			// Memory over its bound: drop the oldest memory segment.
			i = slices.IndexFunc(q.segs, func(s *segment) bool { return s.f == nil })
			if i == len(q.segs)-1 {
				break
			}
		}
		dropped += q.unacked(q.segs[i])
		q.remove(i)
	}
	return dropped
}

func (q *Queue) writeCheck() error {
	if q.o.failWrite != nil {
		return q.o.failWrite()
	}
	return nil
}

// reserve records in the seq file, before seq is queued, that seqs up to
// seq+reserveBlock-1 may be in use.
func (q *Queue) reserve(seq uint64) error {
	if q.seqf == nil || seq <= q.reserved {
		return nil
	}
	if err := q.writeCheck(); err != nil {
		return err
	}
	st := seqState{seq: seq + reserveBlock - 1, written: time.Now(), gen: q.seqGen + 1}
	if err := writeSeqState(q.seqf, st); err != nil {
		return err
	}
	q.seqGen, q.reserved = st.gen, st.seq
	return nil
}

func (q *Queue) retryDue() bool {
	return q.degraded && q.o.Dir != "" && time.Since(q.failedAt) >= q.o.RetryEvery
}

// Retry tries a failed folder again when RetryEvery has passed since it
// failed (the sink's writer calls it on a timer, so a queue that gets no
// records is retried too). It returns the error of an attempt that
// failed.
func (q *Queue) Retry() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || !q.retryDue() {
		return nil
	}
	return q.tryDisk()
}

// tryDisk opens the folder if it never could be, writes the segments held
// in memory into it and records the seq; then the queue is on disk again.
func (q *Queue) tryDisk() error {
	if q.dir == nil {
		rep, err := q.openDir()
		if err != nil {
			q.fail()
			return err
		}
		rep.Late = true
		q.late = &rep
	}
	for _, s := range q.segs {
		if s.f == nil {
			if err := q.persist(s); err != nil {
				q.fail()
				return fmt.Errorf("%w: %s: %w", ErrDisk, q.o.Dir, err)
			}
		}
	}
	if q.appended {
		if err := q.reserve(q.lastSeq); err != nil {
			q.fail()
			return fmt.Errorf("%w: %s: %s: %w", ErrDisk, q.o.Dir, seqName, err)
		}
	}
	q.degraded = false
	return nil
}

// persist writes a memory segment into the folder; from then on it is a
// disk segment. A segment file of the folder that starts at the same seq
// (records of an earlier run with the same seqs: see docs/PROTOCOL.md)
// leaves it in memory.
func (q *Queue) persist(s *segment) error {
	name := fmt.Sprintf("%020d%s", s.first, segSuffix)
	f, err := q.dir.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o640)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := q.writeCheck(); err != nil {
		f.Close()
		q.dir.Remove(name)
		return err
	}
	if _, err := f.Write(s.mem); err != nil {
		f.Close()
		q.dir.Remove(name)
		return err
	}
	f.Sync()
	q.memTotal -= s.size
	s.f, s.path, s.mem = f, name, nil
	return nil
}

// LateOpen hands out, once, the report of a folder opened after it had
// failed: the sink announces it and keeps its seq above what it found.
func (q *Queue) LateOpen() (OpenReport, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.late == nil {
		return OpenReport{}, false
	}
	rep := *q.late
	q.late = nil
	return rep, true
}

// Rewinds counts the times the reader had to start again from Acked (a
// late open brought older records); a reader that saw it change goes back
// to Acked.
func (q *Queue) Rewinds() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rewinds
}

func (q *Queue) fail() {
	q.degraded = true
	q.failedAt = time.Now()
}

func (q *Queue) tail() *segment {
	if len(q.segs) == 0 {
		return nil
	}
	return q.segs[len(q.segs)-1]
}

// newSegment starts a segment at seq: a file, or memory when degraded or
// when the file cannot be created (then the queue is degraded and the
// error returned).
func (q *Queue) newSegment(seq uint64) (*segment, error) {
	var err error
	if !q.degraded && q.dir != nil {
		name := fmt.Sprintf("%020d%s", seq, segSuffix)
		var f *os.File
		f, err = q.dir.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o640)
		if err == nil {
			if t := q.tail(); t != nil && t.f != nil {
				t.f.Sync() // the previous segment is complete
			}
			s := &segment{path: name, f: f}
			q.segs = append(q.segs, s)
			return s, nil
		}
		err = fmt.Errorf("%w: %s: %w", ErrDisk, q.o.Dir, err)
		q.fail()
	}
	s := &segment{}
	q.segs = append(q.segs, s)
	return s, err
}

// unacked is how many of s's records the broker has not acknowledged.
func (q *Queue) unacked(s *segment) int {
	if s.last <= q.acked {
		return 0
	}
	if s.first > q.acked {
		return s.count
	}
	return int(s.last - q.acked) // approximate when seqs have gaps
}

func (q *Queue) remove(i int) {
	s := q.segs[i]
	q.total -= s.size
	if s.f == nil {
		q.memTotal -= s.size
	} else {
		s.f.Close()
		q.dir.Remove(s.path)
	}
	if q.rseg == s {
		q.rseg = nil
	}
	q.segs = slices.Delete(q.segs, i, i+1)
}

// Next returns the first record after seq `after` (valid until the next
// call), or ok=false when there is none yet. A record lost to the bound
// is skipped: the gap shows in the seq numbers. Damage is stepped over
// (counted in Stats().Damaged). err is always nil; it is kept for the
// callers that check it.
func (q *Queue) Next(after uint64) (seq uint64, payload []byte, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rseg == nil || q.rseq != after || !slices.Contains(q.segs, q.rseg) {
		q.rseg = nil
		for _, s := range q.segs {
			if s.last > after {
				q.seek(s)
				break
			}
		}
		if q.rseg == nil {
			return 0, nil, false, nil
		}
	}
	for {
		s := q.rseg
		q.rd.size = s.size
		for q.roff < s.size {
			if end, ok := s.holeAt(q.roff); ok {
				q.roff = end
				continue
			}
			seq, payload, n, err := q.rd.frame(q.roff)
			if err != nil {
				q.stepOver(s, err)
				continue
			}
			q.roff += int64(n)
			q.rprev = seq
			if seq > after {
				q.rseq = seq
				return seq, payload, true, nil
			}
		}
		i := slices.Index(q.segs, s)
		if i < 0 || i == len(q.segs)-1 {
			q.rseq = after
			return 0, nil, false, nil
		}
		q.seek(q.segs[i+1])
	}
}

// seek puts the reader at the start of s.
func (q *Queue) seek(s *segment) {
	q.rseg, q.roff, q.rseq, q.rprev = s, 0, 0, 0
	var win []byte
	if q.rd != nil {
		win = q.rd.buf
	}
	q.rd = newFrameReader(s, s.size, win)
}

// stepOver makes the damage the reader met at roff a hole, up to the next
// intact frame (or the end of the segment when none follows, or when the
// segment cannot be read there at all).
func (q *Queue) stepOver(s *segment, err error) {
	end := s.size
	if errors.Is(err, ErrCorrupt) {
		limit := uint64(noLimit)
		if i := slices.Index(q.segs, s); i >= 0 && i+1 < len(q.segs) {
			limit = q.segs[i+1].first
		}
		if next, ok := q.rd.resync(q.roff+1, q.rprev, limit); ok {
			end = next
		}
	}
	s.holes = append(s.holes, hole{q.roff, end})
	q.damaged++
	q.roff = end
}

// Ack records that the broker has every record up to seq: segments wholly
// acknowledged are removed (the tail is kept for appending), and the
// cursor is written (fsynced with the segments, every SyncEvery).
func (q *Queue) Ack(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq <= q.acked || q.closed {
		return
	}
	q.acked = seq
	for len(q.segs) > 1 && q.segs[0].last <= seq {
		q.remove(0)
	}
	if q.cursor != nil {
		writeCursor(q.cursor, seq) // a failure only means duplicates after a restart
	}
	q.dirty = true
	q.maybeSync()
}

func (q *Queue) maybeSync() {
	if q.dirty && time.Since(q.lastSync) >= q.o.SyncEvery {
		q.sync()
	}
}

func (q *Queue) sync() {
	if t := q.tail(); t != nil && t.f != nil {
		t.f.Sync()
	}
	if q.cursor != nil {
		q.cursor.Sync()
	}
	q.dirty = false
	q.lastSync = time.Now()
}

// Sync fsyncs what was appended and acknowledged.
func (q *Queue) Sync() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.sync()
	}
}

// QueueStats is what the queue holds.
type QueueStats struct {
	Records  int   // unacknowledged records (approximate across gaps)
	Bytes    int64 // frames held, disk and memory
	MemBytes int64 // frames held in memory
	Degraded bool  // appending to memory because the folder failed
	Damaged  int   // records lost to damage in the folder's segments
}

// Stats reports what the queue holds.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStats{Bytes: q.total, MemBytes: q.memTotal, Degraded: q.degraded && q.o.Dir != "", Damaged: q.damaged}
	for _, s := range q.segs {
		st.Records += q.unacked(s)
	}
	return st
}

// Acked is the highest seq the broker acknowledged.
func (q *Queue) Acked() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.acked
}

// Close fsyncs, records the last seq queued in the seq file (a clean
// stop) and closes the files; what is in memory is lost.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.sync()
	if q.seqf != nil && q.appended {
		writeSeqState(q.seqf, seqState{seq: q.lastSeq, clean: true, written: time.Now(), gen: q.seqGen + 1})
	}
	q.closed = true
	q.closeFiles()
	return nil
}

func (q *Queue) closeFiles() {
	for _, s := range q.segs {
		if s.f != nil {
			s.f.Close()
		}
	}
	for _, f := range []*os.File{q.cursor, q.seqf} {
		if f != nil {
			f.Close()
		}
	}
	if q.dir != nil {
		q.dir.Close()
	}
}
