package mqttsink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The on-disk queue keeps records on their way to the broker in segment
// files, state_dir/mqtt/<sink>/<first seq, 20 digits>.seg, each a run of
// frames:
//
//	length   uint32 big-endian: bytes of payload
//	seq      uint64 big-endian: the record's sequence number
//	crc      uint32 big-endian: CRC-32C of seq and payload
//	payload  length bytes
//
// and a file "cursor" holding the highest seq the broker acknowledged
// (uint64 and its CRC-32C). Frames are appended with one write each and
// the files are fsynced at most every SyncEvery (and on Close), so a power
// cut loses at most the records of the last SyncEvery; a frame torn by it
// fails its CRC and the segment is truncated there when the queue is
// opened again. A torn cursor reads as "nothing acknowledged": the
// records still on disk are sent again (duplicates, never a loss).

const (
	frameHeader = 16
	// MaxPayload is the largest payload a frame may carry; a length above
	// it is corruption.
	MaxPayload = 16 << 20
	segSuffix  = ".seg"
	cursorName = "cursor"
)

// Errors of the queue.
var (
	// ErrCorrupt is a frame that does not parse: a short header, a length
	// past MaxPayload or past the data, or a CRC mismatch.
	ErrCorrupt = errors.New("mqttsink: corrupt queue frame")
	// ErrDisk wraps a failure to write the on-disk queue (disk full,
	// read-only file system); the queue goes on in memory.
	ErrDisk = errors.New("mqttsink: on-disk queue write failed")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends one frame carrying seq and payload to dst.
func AppendFrame(dst []byte, seq uint64, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	at := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	crc := crc32.Update(crc32.Checksum(dst[at:], castagnoli), castagnoli, payload)
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return append(dst, payload...)
}

// ParseFrame reads the frame at the start of b: its seq, its payload (a
// slice of b) and its length n in b. An incomplete or damaged frame is
// ErrCorrupt.
func ParseFrame(b []byte) (seq uint64, payload []byte, n int, err error) {
	if len(b) < frameHeader {
		return 0, nil, 0, fmt.Errorf("%w: %d bytes, a frame header is %d", ErrCorrupt, len(b), frameHeader)
	}
	size := binary.BigEndian.Uint32(b)
	if size > MaxPayload || int64(size) > int64(len(b)-frameHeader) {
		return 0, nil, 0, fmt.Errorf("%w: length %d with %d bytes left", ErrCorrupt, size, len(b)-frameHeader)
	}
	seq = binary.BigEndian.Uint64(b[4:])
	payload = b[frameHeader : frameHeader+int(size)]
	crc := crc32.Update(crc32.Checksum(b[4:12], castagnoli), castagnoli, payload)
	if crc != binary.BigEndian.Uint32(b[12:]) {
		return 0, nil, 0, fmt.Errorf("%w: CRC mismatch at seq %d", ErrCorrupt, seq)
	}
	return seq, payload, frameHeader + int(size), nil
}

// QueueOptions configure a Queue.
type QueueOptions struct {
	// Dir holds the segment files and the cursor; "" keeps everything in
	// memory.
	Dir string
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
	// RetryEvery is how often a queue that fell back to memory tries the
	// disk again (default 10 s).
	RetryEvery time.Duration

	// failWrite, when set, is asked before each disk write (tests).
	failWrite func() error
}

// OpenReport says what Open found on disk.
type OpenReport struct {
	Records   int    // unacknowledged records recovered
	Acked     uint64 // the cursor
	LastSeq   uint64 // highest seq on disk or in the cursor
	Truncated int64  // bytes cut off damaged segment tails
	Corrupt   int    // segments found damaged (truncated there)
}

type segment struct {
	first, last uint64 // seqs of its first and last frame (count > 0)
	count       int
	size        int64
	path        string   // disk segment
	f           *os.File // disk segment, open for reading (and appending, the tail)
	mem         []byte   // memory segment
}

func (s *segment) readAt(b []byte, off int64) error {
	if s.f == nil {
		if off+int64(len(b)) > int64(len(s.mem)) {
			return io.ErrUnexpectedEOF
		}
		copy(b, s.mem[off:])
		return nil
	}
	_, err := s.f.ReadAt(b, off)
	return err
}

// Queue is the sink's bounded, ordered, persistent record queue: one
// appender and one reader, each its own goroutine.
type Queue struct {
	o QueueOptions

	mu       sync.Mutex
	segs     []*segment
	total    int64 // bytes of frames in segs
	memTotal int64
	acked    uint64
	degraded bool // appending to memory: the disk failed
	failedAt time.Time
	dirty    bool // appended or acked since the last sync
	cursor   *os.File
	lastSync time.Time
	closed   bool

	// reader position: the next frame of rseg after rseq is at roff.
	rseg *segment
	roff int64
	rseq uint64
	rbuf []byte
	fbuf []byte
}

// OpenQueue opens (creating) the queue in o.Dir and recovers what it holds:
// damaged tails are truncated, segments that the cursor says were
// delivered are removed.
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
	var rep OpenReport
	if o.Dir == "" {
		q.degraded = true
		q.failedAt = time.Now().Add(1 << 62) // never retry: there is no disk
		return q, rep, nil
	}
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return nil, rep, fmt.Errorf("%w: %w", ErrDisk, err)
	}
	cur, err := os.OpenFile(filepath.Join(o.Dir, cursorName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, rep, fmt.Errorf("%w: %w", ErrDisk, err)
	}
	q.cursor = cur
	var cb [12]byte
	if n, _ := cur.ReadAt(cb[:], 0); n == 12 && crc32.Checksum(cb[:8], castagnoli) == binary.BigEndian.Uint32(cb[8:]) {
		q.acked = binary.BigEndian.Uint64(cb[:])
	}
	rep.Acked, rep.LastSeq = q.acked, q.acked
	names, err := filepath.Glob(filepath.Join(o.Dir, "*"+segSuffix))
	if err != nil {
		cur.Close()
		return nil, rep, err
	}
	slices.Sort(names) // 20-digit names sort by seq
	var prev uint64
	for _, name := range names {
		s, trunc, err := recoverSegment(name, prev)
		if err != nil {
			q.closeFiles()
			return nil, rep, fmt.Errorf("%w: %w", ErrDisk, err)
		}
		if trunc > 0 {
			rep.Truncated += trunc
			rep.Corrupt++
		}
		if s == nil {
			os.Remove(name)
			continue
		}
		prev = s.last
		if s.last <= q.acked {
			s.f.Close()
			os.Remove(name)
			continue
		}
		q.segs = append(q.segs, s)
		q.total += s.size
		rep.LastSeq = max(rep.LastSeq, s.last)
	}
	for _, s := range q.segs {
		rep.Records += s.count
	}
	if len(q.segs) > 0 && q.segs[0].first <= q.acked {
		// Partly acknowledged: the reader skips to the cursor.
		rep.Records -= int(q.acked - q.segs[0].first + 1)
	}
	return q, rep, nil
}

// recoverSegment scans a segment file, truncating it at the first damaged
// frame or at a seq that does not grow. nil with no error: nothing valid.
func recoverSegment(name string, prev uint64) (*segment, int64, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	s := &segment{path: name, f: f}
	br := bufio.NewReaderSize(f, 64<<10)
	var hdr [frameHeader]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			break
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > MaxPayload || s.size+frameHeader+int64(size) > st.Size() {
			break
		}
		buf = append(append(buf[:0], hdr[:]...), make([]byte, size)...)
		if _, err := io.ReadFull(br, buf[frameHeader:]); err != nil {
			break
		}
		seq, _, n, err := ParseFrame(buf)
		if err != nil || seq <= prev || (s.count > 0 && seq <= s.last) {
			break
		}
		if s.count == 0 {
			s.first = seq
		}
		s.last = seq
		s.count++
		s.size += int64(n)
	}
	trunc := st.Size() - s.size
	if trunc > 0 {
		if err := f.Truncate(s.size); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	if s.count == 0 {
		f.Close()
		return nil, trunc, nil
	}
	if _, err := f.Seek(s.size, io.SeekStart); err != nil {
		f.Close()
		return nil, 0, err
	}
	return s, trunc, nil
}

// Append adds a frame for seq (which must grow) and drops the oldest
// segments past the bound, returning how many unacknowledged records they
// held. A disk failure keeps the record in memory, switches the queue to
// memory until the disk works again, and returns an error wrapping
// ErrDisk (once per failure).
func (q *Queue) Append(seq uint64, payload []byte) (dropped int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, errors.New("mqttsink: queue closed")
	}
	q.fbuf = AppendFrame(q.fbuf[:0], seq, payload)
	frame := q.fbuf
	tail := q.tail()
	if q.degraded && q.o.Dir != "" && time.Since(q.failedAt) >= q.o.RetryEvery {
		tail = nil // try the disk again with a new segment
		q.degraded = false
	}
	if tail == nil || (tail.f == nil) != q.degraded || tail.size+int64(len(frame)) > q.o.SegmentBytes && tail.size > 0 {
		tail, err = q.newSegment(seq)
	}
	if err == nil && tail.f != nil {
		werr := error(nil)
		if q.o.failWrite != nil {
			werr = q.o.failWrite()
		}
		if werr == nil {
			_, werr = tail.f.Write(frame)
		}
		if werr != nil {
			tail.f.Truncate(tail.size) // no torn frame left behind
			err = fmt.Errorf("%w: %s: %w", ErrDisk, tail.path, werr)
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
	q.dirty = true
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
	q.maybeSync()
	return dropped, err
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
	if !q.degraded {
		path := filepath.Join(q.o.Dir, fmt.Sprintf("%020d%s", seq, segSuffix))
		var f *os.File
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o640)
		if err == nil {
			if t := q.tail(); t != nil && t.f != nil {
				t.f.Sync() // the previous segment is complete
			}
			s := &segment{path: path, f: f}
			q.segs = append(q.segs, s)
			return s, nil
		}
		err = fmt.Errorf("%w: %w", ErrDisk, err)
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
		os.Remove(s.path)
	}
	if q.rseg == s {
		q.rseg = nil
	}
	q.segs = slices.Delete(q.segs, i, i+1)
}

// Next returns a copy of the first record after seq `after` (valid until
// the next call), or ok=false when there is none yet. A record lost to
// the bound is skipped: the gap shows in the seq numbers.
func (q *Queue) Next(after uint64) (seq uint64, payload []byte, ok bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rseg == nil || q.rseq != after || !slices.Contains(q.segs, q.rseg) {
		q.rseg = nil
		for _, s := range q.segs {
			if s.last > after {
				q.rseg, q.roff, q.rseq = s, 0, 0
				break
			}
		}
		if q.rseg == nil {
			return 0, nil, false, nil
		}
	}
	for {
		s := q.rseg
		for q.roff < s.size {
			var hdr [frameHeader]byte
			if err := s.readAt(hdr[:], q.roff); err != nil {
				return 0, nil, false, fmt.Errorf("mqttsink: read %s: %w", s.path, err)
			}
			size := int(binary.BigEndian.Uint32(hdr[:]))
			q.rbuf = slices.Grow(q.rbuf[:0], frameHeader+size)[:frameHeader+size]
			if err := s.readAt(q.rbuf, q.roff); err != nil {
				return 0, nil, false, fmt.Errorf("mqttsink: read %s: %w", s.path, err)
			}
			seq, payload, n, err := ParseFrame(q.rbuf)
			if err != nil {
				return 0, nil, false, fmt.Errorf("%s at %d: %w", s.path, q.roff, err)
			}
			q.roff += int64(n)
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
		q.rseg, q.roff = q.segs[i+1], 0
	}
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
		var cb [12]byte
		binary.BigEndian.PutUint64(cb[:], seq)
		binary.BigEndian.PutUint32(cb[8:], crc32.Checksum(cb[:8], castagnoli))
		q.cursor.WriteAt(cb[:], 0) // a failure only means duplicates after a restart
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
	Degraded bool  // appending to memory because the disk failed
}

// Stats reports what the queue holds.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := QueueStats{Bytes: q.total, MemBytes: q.memTotal, Degraded: q.degraded && q.o.Dir != ""}
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

// Close fsyncs and closes the files; what is in memory is lost.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.sync()
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
	if q.cursor != nil {
		q.cursor.Close()
	}
}
