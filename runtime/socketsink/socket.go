package socketsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/runtime/stream"
	"github.com/edged-dev/edged/sensors"
)

// Client errors, reported in ClientEvent.Err and in error records.
var (
	// ErrClosed is returned by a closed sink.
	ErrClosed = errors.New("stream: sink closed")
	// ErrTooManyClients rejects a connection beyond MaxClients.
	ErrTooManyClients = errors.New("stream: too many clients")
	// ErrNotAllowed rejects a peer outside AllowUIDs/AllowGIDs.
	ErrNotAllowed = errors.New("stream: peer not allowed")
	// ErrSlowClient disconnects a client that accepted nothing for
	// WriteTimeout, or left what it was sent unread that long.
	ErrSlowClient = errors.New("stream: client too slow")
	// ErrTooManyForUID rejects a connection beyond MaxClientsPerUID.
	ErrTooManyForUID = errors.New("stream: too many clients of this user")
)

// Socket defaults.
const (
	DefaultSocketMode       os.FileMode = 0o660
	DefaultMaxClients                   = 64
	DefaultClientQueue                  = 256
	DefaultClientQueueBytes             = 8 << 20
	DefaultWriteTimeout                 = 5 * time.Second
	DefaultKeepalive                    = 10 * time.Second
	DefaultFlushTimeout                 = 2 * time.Second
	DefaultMaxRecordBytes               = 1 << 20
)

// batchBytes is how much a client writer gathers before writing.
const batchBytes = 64 << 10

// A Unix stream socket frees what it holds for the peer one write call's
// worth at a time, once the peer has read all of it, and the writer sees a
// slow reader's progress in those units (see client.write). So once more
// than bigWriteBelow waits unread in a client's socket, the writer hands
// the kernel at most writeChunk per call; below, a whole batch.
const (
	writeChunk    = 2 << 10
	bigWriteBelow = 32 << 10
)

// maxPoolBytes bounds the buffer capacity kept in the pool of encoded
// records for reuse; beyond it records are left to the garbage collector
// (only pipelines with very large records, e.g. raw tensors, reach it).
const maxPoolBytes = 16 << 20

// maxBadRequests closes a client after this many refused request lines.
const maxBadRequests = 8

// SocketOptions configures a Socket. Zero values mean the defaults.
type Options struct {
	// Name is the sink's name, used in messages and to find a listener
	// passed by systemd (FileDescriptorName=).
	Name string
	// Path of the socket file. Its directory is created if missing.
	Path string
	// Listener, if set, is used instead of binding Path (socket
	// activation done by the caller). The sink does not close it and does
	// not remove its file: it stays usable for a sink created after this
	// one is closed (configuration reload).
	Listener net.Listener
	// NoActivation stops NewSocket from looking for a listener systemd
	// passed (see InheritedListener) before binding Path itself.
	NoActivation bool
	// Device is written into the records the sink makes itself (error
	// records, replies to requests), as the daemon writes it into the
	// records it publishes.
	Device string
	// Mode of the socket file (default 0660) and Group (name or numeric
	// gid; "" keeps the daemon's primary group). Applied before the file
	// appears under Path. Ignored for inherited listeners, whose .socket
	// unit sets SocketMode= and SocketGroup=.
	Mode  os.FileMode
	Group string
	// Encoding for clients that have not subscribed (default NDJSON).
	Encoding stream.Encoding
	// MaxClients bounds connected clients (default 64); more get an error
	// record and are closed.
	MaxClients int
	// MaxClientsPerUID bounds the clients of one peer uid (SO_PEERCRED),
	// so that no user can take every place (default MaxClients/2, at
	// least 1; at most MaxClients).
	MaxClientsPerUID int
	// QueueLen is each client's queue in records (default 256) and
	// QueueBytes in encoded bytes (default 8 MiB); when either is exceeded
	// the oldest record is dropped, which the client sees as a seq gap.
	// Records are shared between client queues, so the sink's memory for
	// queued records stays near QueueBytes however many clients lag.
	QueueLen   int
	QueueBytes int
	// WriteTimeout disconnects a client that accepts no data for this long
	// (default 5s), and one that leaves what it was sent unread this long
	// while nothing else waits for it: a client that does not read holds
	// no place for good, whether or not records flow to it.
	WriteTimeout time.Duration
	// Keepalive is how long a client may go without being written to: it
	// is then sent a "keepalive" status record (default 10s). A client of
	// a quiet stream thereby sees that the daemon is there, and the
	// daemon that the client reads (WriteTimeout).
	Keepalive time.Duration
	// FlushTimeout bounds how long Close keeps writing queued records to
	// clients that still read (default 2s).
	FlushTimeout time.Duration
	// MaxRecordBytes bounds one encoded record (default 1 MiB, at most
	// MaxCBORMessage). Larger results are summarised: raw tensor data is
	// dropped (shape kept, "truncated":true), then outputs and sensors.
	MaxRecordBytes int
	// AllowUIDs and AllowGIDs, when either is non-empty, admit only peers
	// whose uid, primary gid (SO_PEERCRED) or one of whose supplementary
	// groups (SO_PEERGROUPS) is listed. Others get an error record and are
	// closed. File permissions apply first.
	AllowUIDs, AllowGIDs []uint32
	// OnControl handles control requests ({"reload":"engines"}). It runs
	// on the requesting client's reader goroutine and should return
	// quickly; ctx ends when the sink closes. A nil error is answered with
	// a "reload_requested" status record, an error with an error record
	// carrying its text. When nil, control requests are refused.
	OnControl func(ctx context.Context, req stream.ControlRequest, peer PeerCred) error
	// OnClient, if set, is told about connections, rejections and
	// disconnections (for logs). It is called from sink goroutines and
	// must not block or call back into the sink.
	OnClient func(ClientEvent)
}

// ClientEventKind says what happened to a client.
type ClientEventKind uint8

// Client event kinds.
const (
	ClientConnected ClientEventKind = iota + 1
	ClientRejected
	ClientDisconnected
)

func (k ClientEventKind) String() string {
	switch k {
	case ClientConnected:
		return "connected"
	case ClientRejected:
		return "rejected"
	case ClientDisconnected:
		return "disconnected"
	}
	return "unknown"
}

// ClientEvent reports a client connecting, being rejected or leaving.
type ClientEvent struct {
	Kind ClientEventKind
	ID   uint64
	Peer PeerCred
	// Err is why a client was rejected or disconnected; nil when it hung
	// up or the sink closed.
	Err           error
	Sent, Dropped uint64
}

// SocketStats are a socket sink's counters since it was created.
type Stats struct {
	Clients         int    // connected now
	Accepted        uint64 // connections admitted
	Rejected        uint64 // connections refused (max clients, allowlist)
	RejectedFull    uint64 // of those, refused because MaxClients were connected
	RejectedPerUID  uint64 // of those, refused because the peer's uid had MaxClientsPerUID
	Disconnects     uint64 // admitted clients that went away, for any reason
	SlowDisconnects uint64 // of those, cut off by WriteTimeout
	Unread          uint64 // of those, because they left what they were sent unread
	Published       uint64 // records given to Publish while clients were connected
	Sent            uint64 // records written to clients (all clients)
	Dropped         uint64 // records dropped from client queues (all clients)
	Summarised      uint64 // records shrunk to fit MaxRecordBytes
	Oversize        uint64 // records that could not be made to fit (dropped)
	Requests        uint64 // request lines accepted
	BadRequests     uint64 // request lines refused
}

// ClientInfo describes one connected client.
type ClientInfo struct {
	ID            uint64
	Peer          PeerCred
	Encoding      stream.Encoding
	Pipelines     []string // nil: all
	Sent, Dropped uint64
	Queued        int
}

// Socket is a sink that streams records to clients of a Unix stream socket.
// Publish encodes a record once and queues it for every client; one writer
// goroutine per client writes it out, so a slow client costs others
// nothing.
type Sink struct {
	opts  Options
	ln    *net.UnixListener
	owned bool   // we bound the socket file
	id    fileID // of the file we bound
	path  string

	ctx    context.Context // for OnControl; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex // clients, closed, client subscriptions
	clients []*client
	closed  bool
	nextID  uint64

	poolMu    sync.Mutex
	free      []*encoded
	poolBytes int // capacity held by free

	flushBy atomic.Int64 // unix ns deadline of the closing flush; 0 while open

	acceptDone chan struct{}
	acceptErr  error
	closeOnce  sync.Once
	closeDone  chan struct{}
	clientsWG  sync.WaitGroup

	accepted, rejected, rejectedFull atomic.Uint64
	rejectedPerUID                   atomic.Uint64
	disconnects, slow, unread        atomic.Uint64
	published, sent, dropped         atomic.Uint64
	summarised, oversize             atomic.Uint64
	requests, badRequests            atomic.Uint64
}

// NewSocket creates the socket (or takes an inherited listener) and starts
// accepting clients. Close it to stop.
func New(opts Options) (*Sink, error) {
	if opts.Mode == 0 {
		opts.Mode = DefaultSocketMode
	}
	if opts.Encoding == 0 {
		opts.Encoding = stream.NDJSON
	}
	if opts.MaxClients <= 0 {
		opts.MaxClients = DefaultMaxClients
	}
	if opts.MaxClientsPerUID <= 0 {
		opts.MaxClientsPerUID = max(1, opts.MaxClients/2)
	}
	opts.MaxClientsPerUID = min(opts.MaxClientsPerUID, opts.MaxClients)
	if opts.Keepalive <= 0 {
		opts.Keepalive = DefaultKeepalive
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultClientQueue
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = DefaultClientQueueBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	opts.MaxRecordBytes = min(opts.MaxRecordBytes, stream.MaxCBORMessage)
	opts.AllowUIDs = slices.Clone(opts.AllowUIDs)
	opts.AllowGIDs = slices.Clone(opts.AllowGIDs)

	s := &Sink{opts: opts, path: opts.Path, acceptDone: make(chan struct{}), closeDone: make(chan struct{})}
	ln := opts.Listener
	if ln == nil && !opts.NoActivation {
		ln = InheritedListener(opts.Name, opts.Path)
	}
	if ln != nil {
		ul, ok := ln.(*net.UnixListener)
		if !ok || ul.Addr().Network() != "unix" {
			return nil, fmt.Errorf("stream: sink %q: the inherited listener %s is a %s socket, not a Unix stream socket; use ListenStream= with a path in the .socket unit", opts.Name, ln.Addr(), ln.Addr().Network())
		}
		s.ln, s.path = ul, ul.Addr().String()
	} else {
		gid, err := resolveGroup(opts.Group)
		if err != nil {
			return nil, err
		}
		ul, id, err := listenUnix(opts.Path, opts.Mode, gid)
		if err != nil {
			return nil, err
		}
		s.ln, s.id, s.owned = ul, id, true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.acceptLoop()
	return s, nil
}

// Path is the socket's file name.
func (s *Sink) Path() string { return s.path }

// Run waits until ctx is done, then closes the sink (flushing queued
// records to clients that keep reading) and returns nil. It returns an error
// only if the listener fails for good.
func (s *Sink) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.Close()
		return nil
	case <-s.acceptDone:
		err := s.acceptErr
		s.Close()
		return err
	}
}

// Publish queues r for every client subscribed to it. It never blocks on a
// client, keeps no reference to r, and allocates nothing once the sink has
// warmed up. It is safe for concurrent use; after Close it does nothing.
func (s *Sink) Publish(r *stream.Record) {
	if r == nil || r.Kind < stream.KindResult || r.Kind > stream.KindError {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.clients) == 0 {
		return
	}
	s.published.Add(1)
	var needJSON, needCBOR bool
	n := 0
	for _, c := range s.clients {
		if c.wants(r) {
			n++
			if c.enc == stream.CBOR {
				needCBOR = true
			} else {
				needJSON = true
			}
		}
	}
	if n == 0 {
		return
	}
	e := s.get()
	summarised, ok := e.Encode(r, needJSON, needCBOR, s.opts.MaxRecordBytes)
	if !ok {
		s.oversize.Add(1)
		s.put(e)
		for _, c := range s.clients {
			if c.wants(r) {
				c.skip()
			}
		}
		return
	}
	if summarised {
		s.summarised.Add(1)
	}
	e.refs.Store(int32(n))
	for _, c := range s.clients {
		if c.wants(r) {
			c.push(e, c.enc)
		}
	}
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	return Stats{
		Clients: n, Accepted: s.accepted.Load(), Rejected: s.rejected.Load(), RejectedFull: s.rejectedFull.Load(),
		RejectedPerUID: s.rejectedPerUID.Load(),
		Disconnects:    s.disconnects.Load(), SlowDisconnects: s.slow.Load(), Unread: s.unread.Load(),
		Published: s.published.Load(), Sent: s.sent.Load(), Dropped: s.dropped.Load(),
		Summarised: s.summarised.Load(), Oversize: s.oversize.Load(),
		Requests: s.requests.Load(), BadRequests: s.badRequests.Load(),
	}
}

// Clients describes the connected clients.
func (s *Sink) Clients() []ClientInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ClientInfo, 0, len(s.clients))
	for _, c := range s.clients {
		c.mu.Lock()
		out = append(out, ClientInfo{ID: c.id, Peer: c.peer, Encoding: c.enc, Pipelines: slices.Clone(c.pipelines),
			Sent: c.sent.Load(), Dropped: c.dropped.Load(), Queued: c.n})
		c.mu.Unlock()
	}
	return out
}

// Close stops accepting, writes what is queued to clients that keep reading
// (up to FlushTimeout), disconnects everyone, waits for the sink's
// goroutines and removes the socket file if this sink created it. It is
// idempotent; later calls wait for the first to finish.
func (s *Sink) Close() error {
	s.closeOnce.Do(s.close)
	<-s.closeDone
	return nil
}

func (s *Sink) close() {
	defer close(s.closeDone)
	s.cancel()
	deadline := time.Now().Add(s.opts.FlushTimeout)
	s.flushBy.Store(deadline.UnixNano())
	s.mu.Lock()
	s.closed = true
	clients := slices.Clone(s.clients)
	s.mu.Unlock()

	if s.owned {
		s.ln.Close()
	} else {
		s.ln.SetDeadline(time.Unix(1, 0)) // wake Accept, keep the inherited socket
	}
	<-s.acceptDone
	if !s.owned {
		s.ln.SetDeadline(time.Time{})
	}

	for _, c := range clients {
		c.finishWriting()
	}
	done := make(chan struct{})
	go func() { // owned here: ends when every client goroutine has
		s.clientsWG.Wait()
		close(done)
	}()
	t := time.NewTimer(time.Until(deadline) + 100*time.Millisecond)
	select {
	case <-done:
	case <-t.C:
		for _, c := range clients {
			c.kill()
		}
		<-done
	}
	t.Stop()
	if s.owned {
		removeIfOurs(s.path, s.id)
	}
}

func (s *Sink) acceptLoop() {
	defer close(s.acceptDone)
	failures := 0
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if s.isClosed() {
				return
			}
			if isTemporaryAccept(err) {
				// Out of file descriptors or an aborted handshake:
				// wait and retry instead of spinning.
				backoff.Sleep(s.ctx, acceptBackoff.Delay(failures))
				failures++
				continue
			}
			s.acceptErr = fmt.Errorf("stream: sink %q: accepting on %s: %w", s.opts.Name, s.path, err)
			return
		}
		failures = 0
		s.admit(conn)
	}
}

// acceptBackoff spaces out accepts that fail for want of descriptors.
var acceptBackoff = backoff.Policy{Min: 5 * time.Millisecond, Max: time.Second}

func isTemporaryAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EINTR)
}

func (s *Sink) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// admit checks a new connection and starts its goroutines.
func (s *Sink) admit(conn *net.UnixConn) {
	peer, err := peerCred(conn)
	if err != nil {
		s.reject(conn, PeerCred{PID: -1}, fmt.Errorf("stream: reading peer credentials: %w", err))
		return
	}
	if !allowed(peer, s.opts.AllowUIDs, s.opts.AllowGIDs) {
		s.reject(conn, peer, fmt.Errorf("%w: uid %d gid %d is not in the sink's allow_uids/allow_gids; ask the administrator to add it", ErrNotAllowed, peer.UID, peer.GID))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	if len(s.clients) >= s.opts.MaxClients {
		s.mu.Unlock()
		s.rejectedFull.Add(1)
		s.reject(conn, peer, fmt.Errorf("%w (%d connected); close another client or raise max_clients", ErrTooManyClients, s.opts.MaxClients))
		return
	}
	if n := s.clientsOf(peer.UID); n >= s.opts.MaxClientsPerUID {
		s.mu.Unlock()
		s.rejectedPerUID.Add(1)
		s.reject(conn, peer, fmt.Errorf("%w: uid %d has %d connected, the most one user may (max_clients_per_uid); close one of them", ErrTooManyForUID, peer.UID, n))
		return
	}
	s.nextID++
	now := time.Now()
	c := &client{
		s: s, id: s.nextID, conn: conn, peer: peer, enc: s.opts.Encoding,
		q: make([]entry, s.opts.QueueLen), wake: make(chan struct{}, 1), killed: make(chan struct{}),
		idle: time.NewTimer(time.Hour), lastWrite: now, readSince: now,
	}
	c.idle.Stop()
	c.raw, _ = conn.SyscallConn()
	c.readOutq = c.getOutq
	s.clients = append(s.clients, c)
	s.clientsWG.Add(2)
	s.mu.Unlock()
	s.accepted.Add(1)
	s.event(ClientEvent{Kind: ClientConnected, ID: c.id, Peer: peer})
	go c.writeLoop()
	go c.readLoop()
}

// clientsOf counts the connected clients of uid; s.mu is held.
func (s *Sink) clientsOf(uid uint32) int {
	n := 0
	for _, c := range s.clients {
		if c.peer.UID == uid {
			n++
		}
	}
	return n
}

// reject writes one error record to conn and closes it.
func (s *Sink) reject(conn *net.UnixConn, peer PeerCred, why error) {
	s.rejected.Add(1)
	rec := stream.Record{Kind: stream.KindError, Device: s.opts.Device, Reason: why.Error(), TNs: sensors.Now()}
	var e encoded
	e.Encode(&rec, s.opts.Encoding == stream.NDJSON, s.opts.Encoding == stream.CBOR, 0)
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	conn.Write(e.AppendWire(nil, s.opts.Encoding, 1))
	conn.Close()
	s.event(ClientEvent{Kind: ClientRejected, Peer: peer, Err: why})
}

func (s *Sink) event(ev ClientEvent) {
	if s.opts.OnClient != nil {
		s.opts.OnClient(ev)
	}
}

// get takes an encoded record from the pool.
func (s *Sink) get() *encoded {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if n := len(s.free); n > 0 {
		e := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		s.poolBytes -= e.CapBytes()
		return e
	}
	return new(encoded)
}

func (s *Sink) put(e *encoded) {
	c := e.CapBytes()
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	// Live records: at most the newest QueueLen (every queue drops its
	// oldest) plus one per writer between pop and release.
	if len(s.free) < s.opts.QueueLen+s.opts.MaxClients+16 && s.poolBytes+c <= maxPoolBytes {
		s.free = append(s.free, e)
		s.poolBytes += c
	}
}

// release drops one reference to e.
func (s *Sink) release(e *encoded) {
	if e.refs.Add(-1) == 0 {
		s.put(e)
	}
}

// encoded is one published record, encoded once and shared by every client
// queue it was pushed to; each client splices in its own seq at write
// time. refs counts the queues (and writers) still holding it; the last
// release returns it to the pool.
type encoded struct {
	stream.Encoded
	refs atomic.Int32
}

// entry is one queued record for one client.
type entry struct {
	e    *encoded
	seq  uint64
	enc  stream.Encoding
	size int // bytes it will take on the wire
}

type client struct {
	s    *Sink
	id   uint64
	conn *net.UnixConn
	peer PeerCred

	// Guarded by s.mu: the subscription.
	enc       stream.Encoding
	pipelines []string

	mu      sync.Mutex // the queue and its state
	q       []entry
	head, n int
	qbytes  int
	seq     uint64
	closing bool // write what is queued, then disconnect
	dead    bool // gone: push releases at once

	wake     chan struct{}
	killed   chan struct{}
	killOnce sync.Once

	sent, dropped atomic.Uint64
	wbuf          []byte // the writer's
	raw           syscall.RawConn
	readOutq      func(uintptr) // getOutq, bound once
	outq          int           // the writer's: set by readOutq
	err           error         // why the client was disconnected; guarded by mu

	// The writer's, for clients that do not read (idleCheck): when it
	// last wrote, since when the peer has shown no sign of reading, and
	// how much it had not read when last looked.
	idle        *time.Timer
	lastWrite   time.Time
	readSince   time.Time
	unreadAfter int
}

func (c *client) wants(r *stream.Record) bool {
	return c.pipelines == nil || r.Pipeline == "" || slices.Contains(c.pipelines, r.Pipeline)
}

// push queues e (whose refs already count this client), dropping the
// oldest entries while the queue is over its length or byte bound.
func (c *client) push(e *encoded, enc stream.Encoding) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		c.s.release(e)
		return
	}
	c.seq++
	if c.n == len(c.q) {
		c.dropOldest()
	}
	size := e.WireSize(enc)
	for c.n > 0 && c.qbytes+size > c.s.opts.QueueBytes {
		c.dropOldest()
	}
	c.q[(c.head+c.n)%len(c.q)] = entry{e: e, seq: c.seq, enc: enc, size: size}
	c.n++
	c.qbytes += size
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// dropOldest drops the oldest queued entry; c.mu is held.
func (c *client) dropOldest() {
	old := c.q[c.head]
	c.q[c.head] = entry{}
	c.head = (c.head + 1) % len(c.q)
	c.n--
	c.qbytes -= old.size
	c.s.release(old.e)
	c.dropped.Add(1)
	c.s.dropped.Add(1)
}

// skip consumes a seq number for a record the client will never get.
func (c *client) skip() {
	c.mu.Lock()
	c.seq++
	c.mu.Unlock()
	c.dropped.Add(1)
	c.s.dropped.Add(1)
}

// pushOwn encodes a record meant for this client alone and queues it.
// The caller holds s.mu.
func (c *client) pushOwn(r *stream.Record) {
	r.Device = c.s.opts.Device
	e := c.s.get()
	e.Encode(r, c.enc == stream.NDJSON, c.enc == stream.CBOR, 0)
	e.refs.Store(1)
	c.push(e, c.enc)
}

// pop takes the oldest queued entry.
func (c *client) pop() (entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		return entry{}, false
	}
	ent := c.q[c.head]
	c.q[c.head] = entry{}
	c.head = (c.head + 1) % len(c.q)
	c.n--
	c.qbytes -= ent.size
	return ent, true
}

// waitWork blocks until something is queued; false means stop. While
// nothing is queued it looks after a peer that may not read (idleCheck):
// it sends a keepalive after Keepalive without a write, and disconnects a
// peer that left what it was sent unread for WriteTimeout.
func (c *client) waitWork() bool {
	for {
		c.mu.Lock()
		n, closing := c.n, c.closing
		c.mu.Unlock()
		if n > 0 {
			select {
			case <-c.killed:
				return false
			default:
				return true
			}
		}
		if closing {
			return false
		}
		c.idle.Reset(c.idleWait())
		select {
		case <-c.wake:
		case <-c.killed:
			c.idle.Stop()
			return false
		case <-c.idle.C:
			if err := c.idleCheck(); err != nil {
				c.setErr(err)
				c.s.slow.Add(1)
				c.s.unread.Add(1)
				return false
			}
		}
		c.idle.Stop()
	}
}

// sawRead looks at how much the peer has not read (SIOCOUTQ): when that
// is nothing, or less than when last looked, the peer reads, as of now.
// It returns the amount, -1 when it cannot be told.
func (c *client) sawRead(now time.Time) int {
	q := c.unsent()
	if q < 0 {
		return q
	}
	if q == 0 || q < c.unreadAfter {
		c.readSince = now
	}
	c.unreadAfter = q
	return q
}

// idleWait is how long the writer may wait for work before idleCheck:
// until the keepalive is due, and a quarter of WriteTimeout while the
// peer has something unread.
func (c *client) idleWait() time.Duration {
	d := time.Until(c.lastWrite.Add(c.s.opts.Keepalive))
	if c.unreadAfter > 0 {
		d = min(d, c.s.opts.WriteTimeout/4)
	}
	return max(d, time.Millisecond)
}

// idleCheck runs when nothing was queued for the client for a while. A
// peer that has read nothing of what waits in its socket (SIOCOUTQ did
// not go down) since it was written is disconnected after WriteTimeout,
// or longer when much waits: the kernel frees what a peer reads one
// write at a time, so a reader of writeChunk per WriteTimeout (400 B/s at
// the defaults, as write promises) still counts as reading. Otherwise a
// client that does not read would hold its place for good: nothing more
// is written that could block. A client written nothing for Keepalive is
// sent a keepalive record.
func (c *client) idleCheck() error {
	now := time.Now()
	if q := c.sawRead(now); q > 0 {
		wt := c.s.opts.WriteTimeout
		if now.Sub(c.readSince) >= max(wt, time.Duration(int64(wt)*int64(q)/writeChunk)) {
			return fmt.Errorf("%w: read nothing of what it was sent for %v", ErrSlowClient, now.Sub(c.readSince).Round(time.Millisecond))
		}
	}
	if now.Sub(c.lastWrite) >= c.s.opts.Keepalive {
		c.reply(&stream.Record{Kind: stream.KindStatus, Event: stream.EventKeepalive, TNs: sensors.Now()})
		c.lastWrite = now // queued: it is written next
	}
	return nil
}

// finishWriting stops new records for c and asks its writer to write what
// is queued and disconnect.
func (c *client) finishWriting() {
	c.s.mu.Lock()
	if i := slices.Index(c.s.clients, c); i >= 0 {
		c.s.clients = slices.Delete(c.s.clients, i, i+1)
	}
	c.s.mu.Unlock()
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// kill disconnects at once, waking a blocked Read or Write.
func (c *client) kill() {
	c.killOnce.Do(func() {
		close(c.killed)
		c.conn.Close()
	})
}

func (c *client) writeLoop() {
	defer c.s.clientsWG.Done()
	defer c.finish()
	for c.waitWork() {
		if c.wbuf == nil {
			c.wbuf = make([]byte, 0, batchBytes+batchBytes/4)
		}
		c.wbuf = c.wbuf[:0]
		records := uint64(0)
		for len(c.wbuf) < batchBytes {
			ent, ok := c.pop()
			if !ok {
				break
			}
			c.wbuf = ent.e.AppendWire(c.wbuf, ent.enc, ent.seq)
			c.s.release(ent.e)
			records++
		}
		// What idleCheck compares with: unread data counts from the first
		// write the peer has not read (or its last sign of reading).
		c.sawRead(time.Now())
		if err := c.write(c.wbuf); err != nil {
			if errors.Is(err, ErrSlowClient) {
				c.setErr(err)
				c.s.slow.Add(1)
			}
			return
		}
		c.lastWrite, c.unreadAfter = time.Now(), c.unsent()
		c.sent.Add(records)
		c.s.sent.Add(records)
		if cap(c.wbuf) > 4*batchBytes {
			c.wbuf = nil // one huge record: do not keep its buffer per client
		}
	}
}

// write writes b to the client. It fails with ErrSlowClient only when the
// client accepted nothing for WriteTimeout. Progress is any byte written,
// or the peer reading some of what already waits in the socket: a writer
// blocked on a full Unix socket is woken only once the peer has emptied
// most of it, which a steady reader slower than the stream may take far
// longer than WriteTimeout to do, so while blocked the writer looks every
// quarter of WriteTimeout at how much the peer has not read (SIOCOUTQ).
// The kernel counts that per write call, so b goes out in chunks of
// writeChunk. During the closing flush it also stops at the flush
// deadline.
func (c *client) write(b []byte) error {
	wt := c.s.opts.WriteTimeout
	last := time.Now() // the last sign that the client accepts data
	unread := -1       // SIOCOUTQ when last looked, -1: look again
	first := true      // the first wait is short, to see where the peer stands
	for len(b) > 0 {
		now := time.Now()
		deadline := earliest(last.Add(wt), now.Add(wt/4))
		if unread < 0 && first {
			deadline = earliest(deadline, now.Add(wt/64))
		}
		if by := c.s.flushBy.Load(); by != 0 && by < deadline.UnixNano() {
			deadline = time.Unix(0, by)
		}
		c.conn.SetWriteDeadline(deadline)
		chunk := b
		if q := c.unsent(); q < 0 || q >= bigWriteBelow {
			chunk = b[:min(len(b), writeChunk)]
		}
		n, err := c.conn.Write(chunk)
		b = b[n:]
		if n > 0 {
			last, unread, first = time.Now(), -1, true
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		now = time.Now()
		if by := c.s.flushBy.Load(); by != 0 && now.UnixNano() >= by {
			return err // closing: the flush budget is spent
		}
		q := c.unsent()
		if n == 0 && unread >= 0 && q >= 0 && q < unread {
			last = now // the peer read something
		}
		unread, first = q, false
		if now.Sub(last) >= wt {
			return fmt.Errorf("%w: accepted no data for %v", ErrSlowClient, wt)
		}
	}
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// unsent returns how much of what was written to the client the peer has
// not read yet (SIOCOUTQ; for a Unix socket, in kernel buffer units), or
// -1 when it cannot be told. Only the writer calls it; it allocates
// nothing.
func (c *client) unsent() int {
	c.outq = -1
	if c.raw != nil {
		c.raw.Control(c.readOutq)
	}
	return c.outq
}

func (c *client) getOutq(fd uintptr) {
	if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
		c.outq = v
	}
}

// finish removes the client from the sink and releases what it still holds.
func (c *client) finish() {
	s := c.s
	s.mu.Lock()
	if i := slices.Index(s.clients, c); i >= 0 {
		s.clients = slices.Delete(s.clients, i, i+1)
	}
	s.mu.Unlock()
	c.kill()
	c.mu.Lock()
	c.dead = true
	why := c.err
	for c.n > 0 {
		ent := c.q[c.head]
		c.q[c.head] = entry{}
		c.head = (c.head + 1) % len(c.q)
		c.n--
		c.qbytes -= ent.size
		s.release(ent.e)
	}
	c.mu.Unlock()
	s.disconnects.Add(1)
	s.event(ClientEvent{Kind: ClientDisconnected, ID: c.id, Peer: c.peer, Err: why, Sent: c.sent.Load(), Dropped: c.dropped.Load()})
}

// readLoop reads request lines with a fixed buffer: input can never grow
// memory. It stops on a line longer than MaxRequestLine (error record, then
// disconnect), after maxBadRequests refused lines, or when the peer hangs
// up (then it disconnects the client, whether or not records flow to it).
// At EOF alone the client may still read records, so it waits for the
// hang-up.
func (c *client) readLoop() {
	defer c.s.clientsWG.Done()
	var buf [stream.MaxRequestLine]byte
	n, bad := 0, 0
	for {
		m, err := c.conn.Read(buf[n:])
		n += m
		for {
			i := bytes.IndexByte(buf[:n], '\n')
			if i < 0 {
				break
			}
			if !c.handle(bytes.TrimSpace(buf[:i])) {
				bad++
				if bad >= maxBadRequests {
					c.fail(fmt.Errorf("%w: %d refused requests; disconnecting", stream.ErrRequest, bad))
					return
				}
			}
			n = copy(buf[:], buf[i+1:n])
		}
		if n == len(buf) {
			c.fail(fmt.Errorf("%w: request line longer than %d bytes; disconnecting", stream.ErrRequest, stream.MaxRequestLine))
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The peer shut down its sending side; it may still read
				// (a half-close). Wait until it is gone altogether.
				c.waitHangup()
			}
			// Hung up, reset, or closed by the sink. Disconnect now: a
			// client that receives nothing (subscribed to no pipeline)
			// would never reach the writer's error, and would hold its
			// place under max_clients for good.
			c.kill()
			return
		}
	}
}

// waitHangup returns once the peer has closed its end of the connection
// (POLLHUP: both directions are shut down) or the connection is closed
// here. It is called after reading EOF, so the socket stays readable; the
// poller wakes it on every change of the socket's state.
func (c *client) waitHangup() {
	rc, err := c.conn.SyscallConn()
	if err != nil {
		return
	}
	rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		for {
			_, err := unix.Poll(pfd, 0)
			if err == unix.EINTR {
				continue
			}
			return err != nil || pfd[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
		}
	})
}

// setErr records the first reason the client is disconnected.
func (c *client) setErr(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// fail sends an error record and disconnects after it is written.
func (c *client) fail(why error) {
	c.s.badRequests.Add(1)
	c.reply(&stream.Record{Kind: stream.KindError, Reason: why.Error(), TNs: sensors.Now()})
	c.setErr(why)
	c.finishWriting()
}

func (c *client) reply(r *stream.Record) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.pushOwn(r)
}

// handle runs one request line; false means it was refused.
func (c *client) handle(line []byte) bool {
	if len(line) == 0 {
		return true
	}
	req, err := stream.ParseRequest(line)
	if err != nil {
		c.s.badRequests.Add(1)
		c.reply(&stream.Record{Kind: stream.KindError, Reason: err.Error(), TNs: sensors.Now()})
		return false
	}
	c.s.requests.Add(1)
	if req.Subscribe != nil {
		c.subscribe(req.Subscribe)
		return true
	}
	if c.s.opts.OnControl == nil {
		c.s.badRequests.Add(1)
		c.reply(&stream.Record{Kind: stream.KindError, Reason: "stream: control requests are not enabled on this socket; send SIGHUP to the daemon instead", TNs: sensors.Now()})
		return false
	}
	if err := c.s.opts.OnControl(c.s.ctx, *req.Control, c.peer); err != nil {
		c.reply(&stream.Record{Kind: stream.KindError, Reason: fmt.Sprintf("stream: reload %s: %v", req.Control.Reload, err), TNs: sensors.Now()})
		return true
	}
	c.reply(&stream.Record{Kind: stream.KindStatus, Event: "reload_requested", Source: req.Control.Reload, TNs: sensors.Now()})
	return true
}

// subscribe applies a subscription. Records queued before it keep their
// encoding; the "subscribed" reply and everything after use the new one.
func (c *client) subscribe(sub *stream.Subscription) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub.Pipelines != nil {
		c.pipelines = slices.Clone(sub.Pipelines)
	}
	if sub.Encoding != 0 {
		c.enc = sub.Encoding
	}
	what := "all pipelines"
	if c.pipelines != nil {
		what = "pipelines [" + strings.Join(c.pipelines, ",") + "]"
	}
	c.pushOwn(&stream.Record{Kind: stream.KindStatus, Event: "subscribed", Reason: what + ", encoding " + c.enc.String(), TNs: sensors.Now()})
}
