package mqttsink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/edged-dev/edged/internal/backoff"
	"github.com/edged-dev/edged/runtime/stream"
)

// Errors of the sink.
var (
	// ErrAuth is a broker that refused the credentials (CONNACK 0x86 bad
	// user name or password, 0x87 not authorised, 0x8C bad
	// authentication method).
	ErrAuth = errors.New("mqttsink: broker refused the credentials")
	// ErrTLS is a TLS handshake that failed: an untrusted or expired
	// certificate, a name mismatch, a refused client certificate.
	ErrTLS = errors.New("mqttsink: TLS handshake failed")
	// ErrConnect is any other failure to connect (refused, unreachable,
	// timed out, a broker that does not answer CONNECT).
	ErrConnect = errors.New("mqttsink: cannot connect to the broker")
	// ErrPublish is a publish that failed or was not acknowledged within
	// the ack timeout; the connection is dropped and the record resent.
	ErrPublish = errors.New("mqttsink: publish failed")
)

// Presence payloads, retained on the status topic: "online" when a
// connection is up, "offline" as the will and on a clean stop.
const (
	PayloadOnline  = "online"
	PayloadOffline = "offline"
)

// Options configure a Sink.
type Options struct {
	Name   string   // the sink's name: {sink}, messages
	URL    *url.URL // mqtt://host:port or mqtts://host:port
	Device string   // {device}, and the device of presence messages
	// Topic is the results topic template ({device}, {pipeline}, {sink});
	// StatusTopic the status topic template ({device}, {sink}).
	Topic, StatusTopic string
	QoS                byte // 0 or 1
	Encoding           stream.Encoding
	ClientID           string // {device} and {sink} are replaced
	Username           string
	Password           []byte
	TLS                *tls.Config // mqtts: nil = system roots
	// Dir is the on-disk queue's folder; "" keeps the queue in memory.
	Dir string
	// Root, when set, is the state folder Dir lies in: the queue follows
	// no symbolic link out of it.
	Root       string
	QueueLen   int   // records held in memory before the disk queue (default 1024)
	QueueBytes int64 // the disk queue's bound (default 64 MiB)
	// MemBytes bounds the queue in memory while the disk fails (default
	// min(QueueBytes, 16 MiB)).
	MemBytes       int64
	Keepalive      time.Duration
	ConnectTimeout time.Duration // TCP, TLS and CONNECT of one attempt
	AckTimeout     time.Duration // PUBACK (QoS 1), and every write
	FlushTimeout   time.Duration // on Close: how long to deliver what is queued
	// BackoffMin and BackoffMax bound the delay between connection
	// attempts (defaults 250 ms and 10 s).
	BackoffMin, BackoffMax time.Duration
	// OnEvent, when set, is told what happens (from the sink's
	// goroutines; it must not block and must not publish to this sink).
	OnEvent func(Event)

	queueOptions QueueOptions                                             // tests
	dialTCP      func(ctx context.Context, addr string) (net.Conn, error) // tests; nil = net.Dialer
	clock        func() time.Time                                         // tests; nil = time.Now
}

// EventKind says what happened.
type EventKind uint8

// Event kinds.
const (
	// QueueOpened: the disk queue was opened; Report says what it held.
	QueueOpened EventKind = iota + 1
	// Connected: a connection is up (Err nil).
	Connected
	// ConnectFailed: an attempt failed; Err wraps ErrAuth, ErrTLS or
	// ErrConnect.
	ConnectFailed
	// Disconnected: a connection that was up went down.
	Disconnected
	// PublishFailed: a publish failed or timed out (Err wraps
	// ErrPublish); the connection is dropped and the record resent.
	PublishFailed
	// Refused: the broker refused a record (PUBACK reason code); it is
	// dropped.
	Refused
	// QueueDegraded: the disk queue cannot be written or opened (Err
	// wraps ErrDisk); records are kept in memory only until it can, and
	// the folder is tried again every 10 s.
	QueueDegraded
	// QueueRestored: the disk queue is written again (what was kept in
	// memory meanwhile included).
	QueueRestored
)

// EventStarted is the status event of the first record each run of a
// sink sends (docs/PROTOCOL.md): its seq starts the run, and the seqs
// between the previous run's last and it were never used.
const EventStarted = "sink_started"

// Event is something that happened to the sink.
type Event struct {
	Kind   EventKind
	Err    error
	Report OpenReport // QueueOpened (Report.Late: after the folder had failed)
}

// Stats are the sink's counters.
type Stats struct {
	Connected bool
	Connects  uint64 // connections made
	Sent      uint64 // records delivered (PUBACK for QoS 1, written for QoS 0)
	// Dropped counts records lost: DroppedQueueFull (the memory ring or
	// the disk queue's bound), DroppedRefused (the broker refused, or the
	// record was too large to queue) and DroppedDamaged (damage in the
	// queue's files).
	Dropped, DroppedQueueFull, DroppedRefused, DroppedDamaged uint64
	// Errors by reason: auth, tls, connect, publish, disk.
	ErrAuth, ErrTLS, ErrConnect, ErrPublish, ErrDisk uint64
	Queued                                           int    // records not yet acknowledged, memory and disk
	QueueBytes                                       int64  // bytes of the disk queue (and memory while degraded)
	Degraded                                         bool   // the disk queue cannot be written
	Recovered                                        int    // records found in the disk queue (at start, or when it could be opened)
	FirstSeq                                         uint64 // the seq this run started at (its sink_started record)
	LastSeq                                          uint64
	AckedSeq                                         uint64
	Unpublished                                      int // records in the memory ring, not yet in the queue
}

type entry struct {
	seq uint64
	buf []byte // topic length (uint16), topic, record
}

// Sink publishes records to an MQTT broker through an on-disk queue.
type Sink struct {
	o         Options
	topics    map[string]string // results topic by pipeline
	statusTop string
	q         *Queue
	cm        *autopaho.ConnectionManager

	mu      sync.Mutex
	ring    []entry
	head, n int
	seq     uint64
	closed  bool
	conn    net.Conn // the connection of the moment, to drop it on a timeout
	// connCtx is done when conn goes down: a publish in flight on it
	// gives up at once instead of waiting for its ack timeout.
	connCtx    context.Context
	connCancel context.CancelFunc

	wakeW, wakeP chan struct{}
	stopW        chan struct{}
	writerDone   chan struct{}
	publishDone  chan struct{}
	ctx          context.Context
	cancel       context.CancelFunc
	closeOnce    sync.Once
	flushBy      atomic.Int64

	// retry paces reconnects (autopaho's goroutine asks, OnConnectionUp
	// starts a run): a broker that accepts the connection and drops it at
	// once is reconnected to later each time, not at once.
	retryMu sync.Mutex
	retry   backoff.Retry
	wasUp   bool // a connection came up since the last reconnect began

	statusMu sync.Mutex
	statusFn func(event, reason string)
	// early holds what the sink announced before SetStatusFunc (a connect
	// refused at once can beat it); SetStatusFunc sends it.
	early    [][2]string
	downSent bool   // a sink_down status is out for the current outage
	lastErr  string // reason class of the last failure reported

	connected                                        atomic.Bool
	connects, sent, dropRing, dropDisk, dropRefused  atomic.Uint64
	errAuth, errTLS, errConnect, errPublish, errDisk atomic.Uint64
	recovered                                        atomic.Int64
	firstSeq                                         uint64
	openErr                                          error // the disk queue could not be opened
}

// Expand replaces {device}, {sink} and {pipeline} in a topic template.
func Expand(tmpl, device, sink, pipeline string) string {
	return strings.NewReplacer("{device}", device, "{sink}", sink, "{pipeline}", pipeline).Replace(tmpl)
}

// New opens the disk queue (a folder that cannot be used keeps the queue
// in memory, reported as QueueDegraded, and is tried again every 10 s),
// queues the run's sink_started record and starts connecting; records are
// accepted at once.
func New(o Options) (*Sink, error) {
	if o.URL == nil {
		return nil, errors.New("mqttsink: no broker URL")
	}
	if o.QoS > 1 {
		return nil, fmt.Errorf("mqttsink: qos %d: only 0 and 1 are supported", o.QoS)
	}
	o.defaults()
	s := &Sink{
		o:           o,
		topics:      map[string]string{},
		statusTop:   Expand(o.StatusTopic, o.Device, o.Name, ""),
		ring:        make([]entry, o.QueueLen),
		wakeW:       make(chan struct{}, 1),
		wakeP:       make(chan struct{}, 1),
		stopW:       make(chan struct{}),
		writerDone:  make(chan struct{}),
		publishDone: make(chan struct{}),
	}
	qo := o.queueOptions
	qo.Dir, qo.Root, qo.MaxBytes, qo.MemBytes = o.Dir, o.Root, o.QueueBytes, o.MemBytes
	q, rep, err := OpenQueue(qo)
	if err != nil {
		// The folder is unusable (read-only, full, not a folder): the
		// queue runs in memory and tries it again every RetryEvery.
		s.errDisk.Add(1)
		s.openErr = err
		s.event(Event{Kind: QueueDegraded, Err: err})
	} else if o.Dir != "" {
		s.event(Event{Kind: QueueOpened, Report: rep})
	}
	s.q = q
	s.recovered.Store(int64(rep.Records))
	now := time.Now
	if o.clock != nil {
		now = o.clock
	}
	s.firstSeq = firstSeq(rep, now())
	s.seq = s.firstSeq - 1
	s.Publish(&stream.Record{Kind: stream.KindStatus, Event: EventStarted, Device: o.Device, Source: o.Name, Sink: o.Name, TNs: monoNow(),
		Reason: startReason(o.Name, o.Dir, rep, err, s.firstSeq)})

	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.retry.Policy = backoff.Policy{Min: o.BackoffMin, Max: o.BackoffMax, Reset: max(backoff.Restart.Reset, o.BackoffMax)}
	cm, err := autopaho.NewConnection(s.ctx, s.clientConfig())
	if err != nil {
		s.cancel()
		q.Close()
		return nil, fmt.Errorf("mqttsink: %w", err)
	}
	s.cm = cm
	go s.writer()
	go s.publisher()
	return s, nil
}

// defaults fills the options left at zero.
func (o *Options) defaults() {
	if o.Encoding == 0 {
		o.Encoding = stream.NDJSON
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 1024
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 64 << 20
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 10 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 250 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Second
	}
}

// clientConfig is autopaho's configuration of the sink's connection: a
// clean session on every connection (the queue's cursor, not the broker's
// session, decides what is resent), the retained offline will, and the
// sink's own dial, backoff and connection callbacks.
func (s *Sink) clientConfig() autopaho.ClientConfig {
	return autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{s.o.URL},
		TlsCfg:                        s.o.TLS,
		KeepAlive:                     uint16(min(max(s.o.Keepalive/time.Second, 1), 65535)),
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0,
		ConnectTimeout:                s.o.ConnectTimeout,
		ReconnectBackoff:              s.reconnectDelay,
		AttemptConnection:             s.dial,
		ConnectUsername:               s.o.Username,
		ConnectPassword:               s.o.Password,
		WillMessage:                   &paho.WillMessage{Retain: true, QoS: 1, Topic: s.statusTop, Payload: []byte(PayloadOffline)},
		// Every connection starts a clean session: the queue's cursor, not
		// the broker's session, decides what is resent.
		ConnectPacketBuilder: func(c *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			c.CleanStart = true
			return c, nil
		},
		OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
			s.retryMu.Lock()
			s.retry.Started()
			s.wasUp = true
			s.retryMu.Unlock()
			s.connected.Store(true)
			s.connects.Add(1)
			s.wake(s.wakeP)
		},
		OnConnectionDown: func() bool {
			s.connected.Store(false)
			s.mu.Lock()
			if s.connCancel != nil {
				s.connCancel()
			}
			s.mu.Unlock()
			s.event(Event{Kind: Disconnected})
			s.wake(s.wakeP)
			return true
		},
		OnConnectError: s.connectFailed,
		ClientConfig: paho.ClientConfig{
			ClientID:      Expand(s.o.ClientID, s.o.Device, s.o.Name, ""),
			PacketTimeout: s.o.AckTimeout,
		},
	}
}

// SetStatusFunc sets how the sink announces its state changes as status
// records (sink_up, sink_down, sink_queue_degraded, sink_queue_restored)
// on every sink; f must not block.
func (s *Sink) SetStatusFunc(f func(event, reason string)) {
	s.statusMu.Lock()
	s.statusFn = f
	early := s.early
	s.early = nil
	s.statusMu.Unlock()
	if s.openErr != nil && s.q.Stats().Degraded {
		f("sink_queue_degraded", fmt.Sprintf("mqtt sink %q: the on-disk queue cannot be opened (%v); records are kept in memory only (%d bytes at most, lost if edged stops meanwhile) and the folder is tried again every %v", s.o.Name, s.openErr, s.q.o.MemBytes, s.q.o.RetryEvery))
	}
	for _, e := range early {
		f(e[0], e[1])
	}
}

func (s *Sink) status(event, reason string) {
	s.statusMu.Lock()
	f := s.statusFn
	if f == nil && len(s.early) < 16 {
		s.early = append(s.early, [2]string{event, reason})
	}
	s.statusMu.Unlock()
	if f != nil {
		f(event, reason)
	}
}

func (s *Sink) event(ev Event) {
	if s.o.OnEvent != nil {
		s.o.OnEvent(ev)
	}
}

func (s *Sink) wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// deadlineConn bounds every write: a broker that stops reading fails the
// write instead of blocking the publisher forever.
type deadlineConn struct {
	net.Conn
	d time.Duration
}

func (c deadlineConn) Write(b []byte) (int, error) {
	c.Conn.SetWriteDeadline(time.Now().Add(c.d))
	return c.Conn.Write(b)
}

func (s *Sink) dial(ctx context.Context, _ autopaho.ClientConfig, u *url.URL) (net.Conn, error) {
	c, err := dialBroker(ctx, s.o, u)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.connCancel != nil {
		s.connCancel()
	}
	s.conn = c
	s.connCtx, s.connCancel = context.WithCancel(s.ctx)
	s.mu.Unlock()
	return c, nil
}

// dialBroker opens the TCP connection to the broker at u, and the TLS
// session over it for mqtts, within o.ConnectTimeout; every write on it
// has o.AckTimeout.
func dialBroker(ctx context.Context, o Options, u *url.URL) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	host := u.Host
	if u.Port() == "" {
		port := "1883"
		if u.Scheme == "mqtts" {
			port = "8883"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	dialTCP := o.dialTCP
	if dialTCP == nil {
		var d net.Dialer
		dialTCP = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	raw, err := dialTCP(ctx, host)
	if errors.Is(err, syscall.EPERM) {
		// Not the broker's answer: this machine dropped the connection
		// before it left (a cgroup IP filter or a local firewall).
		return nil, fmt.Errorf("%w: %w (the connection was refused on this machine, not by the broker: systemd's IPAddressDeny= for this unit, "+
			"or a local firewall; allow the broker's address, e.g. IPAddressAllow= in a drop-in: docs/SYSTEMD.md)", ErrConnect, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConnect, err)
	}
	var c net.Conn = deadlineConn{Conn: raw, d: o.AckTimeout}
	if u.Scheme == "mqtts" {
		cfg := o.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("%w: %w", ErrTLS, err)
		}
		return packets.NewThreadSafeConn(tc), nil
	}
	// Plain TCP too: paho writes a packet in several Writes when the
	// connection is not a *net.TCPConn (deadlineConn is not), and its
	// keepalive pinger writes from another goroutine, so a PINGREQ could
	// land inside a PUBLISH (the broker then drops the connection for a
	// protocol error: TestMQTTBadCredentials caught "\xc0\x00onli...").
	return packets.NewThreadSafeConn(c), nil
}

// ProbeClientSuffix is appended to the client id a Probe connects with,
// so that a running edged with the same configuration keeps its session
// (a broker drops a client when another connects with its id).
const ProbeClientSuffix = "-check"

// Probe connects to the broker once as the sink of o would (the URL, TLS
// settings, user name and password), then disconnects; it publishes
// nothing, sends no will and leaves no session behind. The error wraps
// ErrAuth (the credentials were refused), ErrTLS or ErrConnect (the broker
// cannot be reached or refused for another reason). It is edged check's
// probe; the client id is o's with ProbeClientSuffix.
func Probe(ctx context.Context, o Options) error {
	if o.URL == nil {
		return errors.New("mqttsink: no broker URL")
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 10 * time.Second
	}
	conn, err := dialBroker(ctx, o, o.URL)
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	c := paho.NewClient(paho.ClientConfig{Conn: conn, ClientID: Expand(o.ClientID, o.Device, o.Name, "") + ProbeClientSuffix, PacketTimeout: o.AckTimeout})
	cp := &paho.Connect{ClientID: Expand(o.ClientID, o.Device, o.Name, "") + ProbeClientSuffix, CleanStart: true, KeepAlive: 30}
	if o.Username != "" {
		cp.UsernameFlag, cp.Username = true, o.Username
	}
	if len(o.Password) > 0 {
		cp.PasswordFlag, cp.Password = true, o.Password
	}
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	ca, err := c.Connect(cctx, cp)
	if err != nil {
		if ca != nil {
			return classify(autopaho.NewConnackError(err, ca))
		}
		return classify(err)
	}
	c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	select {
	case <-c.Done():
	case <-time.After(o.AckTimeout):
	}
	return nil
}

// currentConn is the connection dialled last (nil after dropConn).
func (s *Sink) currentConn() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn
}

// connContext is done when the connection dialled last goes down.
func (s *Sink) connContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connCtx == nil {
		return s.ctx
	}
	return s.connCtx
}

// dropConn closes c, the connection a publish failed on, so autopaho
// reconnects; a newer connection is left alone.
func (s *Sink) dropConn(c net.Conn) {
	s.mu.Lock()
	if s.conn == c {
		s.conn = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// classify tells why a connection attempt failed.
func classify(err error) error {
	var ce *autopaho.ConnackError
	if errors.As(err, &ce) {
		switch ce.ReasonCode {
		case 0x86, 0x87, 0x8C:
			return fmt.Errorf("%w: %w", ErrAuth, err)
		}
		return fmt.Errorf("%w: %w", ErrConnect, err)
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.Is(err, ErrTLS), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci), errors.As(err, &cv):
		if !errors.Is(err, ErrTLS) {
			return fmt.Errorf("%w: %w", ErrTLS, err)
		}
		return err
	case errors.Is(err, ErrConnect):
		return err
	}
	return fmt.Errorf("%w: %w", ErrConnect, err)
}

// reconnectDelay is autopaho's ReconnectBackoff: the wait before
// connection attempt n (0: the first after start or after a drop). The
// first connection is attempted at once, and so is the first after a
// connection that lasted; a connection dropped soon after it came up
// counts as a failed attempt, so a broker that accepts and drops at once
// is retried as one that refuses: BackoffMin doubling to BackoffMax.
func (s *Sink) reconnectDelay(attempt int) time.Duration {
	s.retryMu.Lock()
	defer s.retryMu.Unlock()
	if attempt > 0 {
		return s.retry.Failed()
	}
	if !s.wasUp {
		return 0 // the first connection
	}
	s.wasUp = false
	return s.retry.Ended()
}

func (s *Sink) connectFailed(err error) {
	err = classify(err)
	class := "connect"
	switch {
	case errors.Is(err, ErrAuth):
		s.errAuth.Add(1)
		class = "auth"
	case errors.Is(err, ErrTLS):
		s.errTLS.Add(1)
		class = "tls"
	default:
		s.errConnect.Add(1)
	}
	s.event(Event{Kind: ConnectFailed, Err: err})
	s.statusMu.Lock()
	announce := !s.downSent || s.lastErr != class
	s.downSent, s.lastErr = true, class
	s.statusMu.Unlock()
	if announce {
		s.status("sink_down", fmt.Sprintf("mqtt sink %q (%s): %v", s.o.Name, s.o.URL.Redacted(), err))
	}
}

// Publish encodes r into the memory ring and returns: it never waits for
// the disk or the broker. When the ring is full the oldest record is
// dropped (a seq gap).
func (s *Sink) Publish(r *stream.Record) {
	if r == nil || (r.Kind != stream.KindResult && r.Kind != stream.KindStatus) {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	topic := s.statusTop
	if r.Kind == stream.KindResult {
		t, ok := s.topics[r.Pipeline]
		if !ok {
			t = Expand(s.o.Topic, s.o.Device, s.o.Name, r.Pipeline)
			s.topics[r.Pipeline] = t
		}
		topic = t
	}
	if s.n == len(s.ring) {
		s.head = (s.head + 1) % len(s.ring)
		s.n--
		s.dropRing.Add(1)
	}
	e := &s.ring[(s.head+s.n)%len(s.ring)]
	s.n++
	s.seq++
	e.seq = s.seq
	b := binary.BigEndian.AppendUint16(e.buf[:0], uint16(len(topic)))
	b = append(b, topic...)
	if s.o.Encoding == stream.CBOR {
		b = stream.AppendCBOR(b, r, e.seq)
	} else {
		b = stream.AppendNDJSON(b, r, e.seq)
		b = b[:len(b)-1] // one object per message: no newline
	}
	e.buf = b
	s.mu.Unlock()
	s.wake(s.wakeW)
}

// writer moves records from the memory ring to the disk queue, and tries
// a folder that failed again every RetryEvery even when no record comes.
func (s *Sink) writer() {
	defer close(s.writerDone)
	var buf []byte
	degraded := s.q.Stats().Degraded
	retry := time.NewTicker(s.q.o.RetryEvery)
	defer retry.Stop()
	for {
		select {
		case <-s.wakeW:
		case <-s.stopW:
		case <-retry.C:
			if degraded {
				err := s.q.Retry()
				if err != nil {
					s.errDisk.Add(1)
				}
				s.noticeQueue(&degraded, err)
			}
		}
		for {
			s.mu.Lock()
			if s.n == 0 {
				s.mu.Unlock()
				break
			}
			e := &s.ring[s.head]
			seq := e.seq
			buf, e.buf = e.buf, buf[:0]
			s.head = (s.head + 1) % len(s.ring)
			s.n--
			s.mu.Unlock()
			dropped, err := s.q.Append(seq, buf)
			s.dropDisk.Add(uint64(dropped))
			switch {
			case errors.Is(err, ErrTooLarge):
				s.dropRefused.Add(1)
				s.event(Event{Kind: Refused, Err: err})
				err = nil
			case err != nil:
				s.errDisk.Add(1)
			}
			s.noticeQueue(&degraded, err)
			s.wake(s.wakeP)
		}
		select {
		case <-s.stopW:
			s.mu.Lock()
			empty := s.n == 0
			s.mu.Unlock()
			if empty {
				return
			}
		default:
		}
	}
}

// noticeQueue announces what changed in the queue: a folder opened late
// (the seq goes on above what it holds), the queue falling back to memory
// or going back to disk.
func (s *Sink) noticeQueue(degraded *bool, err error) {
	if rep, ok := s.q.LateOpen(); ok {
		s.mu.Lock()
		s.seq = max(s.seq, rep.LastSeq, rep.HighWater)
		s.mu.Unlock()
		s.recovered.Add(int64(rep.Records))
		s.event(Event{Kind: QueueOpened, Report: rep})
	}
	d := s.q.Stats().Degraded
	if d == *degraded {
		return
	}
	*degraded = d
	if d {
		s.event(Event{Kind: QueueDegraded, Err: err})
		s.status("sink_queue_degraded", fmt.Sprintf("mqtt sink %q: the on-disk queue cannot be written (%v); records are kept in memory only (%d bytes at most, lost if edged stops meanwhile) until it can; tried again every %v", s.o.Name, err, s.q.o.MemBytes, s.q.o.RetryEvery))
		return
	}
	s.event(Event{Kind: QueueRestored})
	s.status("sink_queue_restored", fmt.Sprintf("mqtt sink %q: the on-disk queue is written again, with the records kept in memory meanwhile", s.o.Name))
}

// publisher sends the disk queue in order, one record at a time, and
// advances the cursor on PUBACK (QoS 1) or after the write (QoS 0). After
// a reconnect it starts again from the cursor.
func (s *Sink) publisher() {
	defer close(s.publishDone)
	for {
		if err := s.cm.AwaitConnection(s.ctx); err != nil {
			return
		}
		conn, cctx := s.currentConn(), s.connContext()
		if !s.online(cctx, conn) {
			continue
		}
		s.statusMu.Lock()
		s.downSent, s.lastErr = false, ""
		s.statusMu.Unlock()
		s.event(Event{Kind: Connected})
		s.status("sink_up", fmt.Sprintf("mqtt sink %q connected to %s", s.o.Name, s.o.URL.Redacted()))
		s.drain(cctx, conn)
		if s.ctx.Err() != nil {
			return
		}
	}
}

// online publishes the retained presence; false drops the connection.
func (s *Sink) online(cctx context.Context, conn net.Conn) bool {
	ctx, cancel := context.WithTimeout(cctx, s.o.AckTimeout)
	defer cancel()
	if _, err := s.cm.Publish(ctx, &paho.Publish{QoS: 1, Retain: true, Topic: s.statusTop, Payload: []byte(PayloadOnline)}); err != nil {
		if s.ctx.Err() == nil {
			s.publishFailed(conn, err)
		}
		return false
	}
	return true
}

func (s *Sink) publishFailed(conn net.Conn, err error) {
	s.errPublish.Add(1)
	s.event(Event{Kind: PublishFailed, Err: fmt.Errorf("%w: %w", ErrPublish, err)})
	s.dropConn(conn)
	// Wait for the next connection to be dialled (autopaho has let go of
	// this one by then), or for a while when the broker stays away:
	// AwaitConnection must not hand back the connection just dropped.
	deadline := time.Now().Add(s.o.AckTimeout + s.o.ConnectTimeout)
	for s.ctx.Err() == nil && time.Now().Before(deadline) {
		if c := s.currentConn(); c != nil && c != conn {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drain publishes while the connection is up; it returns when the
// connection is down or the sink stops.
func (s *Sink) drain(cctx context.Context, conn net.Conn) {
	pos, rewinds := s.q.Acked(), s.q.Rewinds()
	for s.ctx.Err() == nil {
		if r := s.q.Rewinds(); r != rewinds {
			// A folder opened late brought older records: from the cursor.
			pos, rewinds = s.q.Acked(), r
		}
		seq, payload, ok, err := s.q.Next(pos)
		if err != nil {
			// A record that cannot be read back is skipped.
			s.errDisk.Add(1)
			s.dropDisk.Add(1)
			pos++
			s.q.Ack(pos)
			continue
		}
		if !ok {
			if !s.connected.Load() {
				return
			}
			select {
			case <-s.wakeP:
			case <-s.ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if !s.connected.Load() || s.currentConn() != conn {
			return
		}
		topic, body := splitPayload(payload)
		ctx, cancel := context.WithTimeout(cctx, s.o.AckTimeout)
		resp, err := s.cm.Publish(ctx, &paho.Publish{QoS: s.o.QoS, Topic: topic, Payload: body})
		cancel()
		switch {
		case resp != nil && resp.ReasonCode >= 0x80:
			// The broker answered, and said no: resending gets the same.
			s.dropRefused.Add(1)
			s.event(Event{Kind: Refused, Err: fmt.Errorf("%w: broker refused seq %d on %q: reason code 0x%02x %s", ErrPublish, seq, topic, resp.ReasonCode, reasonString(resp))})
		case errors.Is(err, paho.ErrInvalidArguments):
			// The client refused it (the broker's limits): never sendable.
			s.dropRefused.Add(1)
			s.event(Event{Kind: Refused, Err: fmt.Errorf("%w: seq %d on %q: %w", ErrPublish, seq, topic, err)})
		case err != nil:
			if s.ctx.Err() == nil {
				s.publishFailed(conn, err)
			}
			return
		default:
			s.sent.Add(1)
		}
		s.q.Ack(seq)
		pos = seq
	}
}

func reasonString(r *paho.PublishResponse) string {
	if r.Properties != nil {
		return r.Properties.ReasonString
	}
	return ""
}

func splitPayload(p []byte) (topic string, body []byte) {
	if len(p) < 2 {
		return "", nil
	}
	n := int(binary.BigEndian.Uint16(p))
	if 2+n > len(p) {
		return "", nil
	}
	return string(p[2 : 2+n]), p[2+n:]
}

// Run serves until ctx is done, then closes the sink.
func (s *Sink) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.publishDone:
	}
	return s.Close()
}

// Close stops accepting records, moves the memory ring to the disk queue,
// publishes what is queued while connected (within FlushTimeout), sends
// the retained "offline", disconnects, waits for the sink's goroutines and
// closes the queue; what is not delivered stays on disk for the next
// start. Close is idempotent.
func (s *Sink) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stopW)
		<-s.writerDone
		deadline := time.Now().Add(s.o.FlushTimeout)
		for time.Now().Before(deadline) && s.connected.Load() && s.q.Stats().Records > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		if s.connected.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), min(s.o.AckTimeout, time.Second))
			s.cm.Publish(ctx, &paho.Publish{QoS: 1, Retain: true, Topic: s.statusTop, Payload: []byte(PayloadOffline)})
			s.cm.Disconnect(ctx)
			cancel()
		}
		s.cancel()
		s.dropConn(s.currentConn())
		<-s.publishDone
		select {
		case <-s.cm.Done():
		case <-time.After(2 * time.Second):
		}
		s.q.Close()
	})
	return nil
}

// Stats reports the sink's counters.
func (s *Sink) Stats() Stats {
	qs := s.q.Stats()
	s.mu.Lock()
	n, last := s.n, s.seq
	s.mu.Unlock()
	st := Stats{
		Connected: s.connected.Load(), Connects: s.connects.Load(), Sent: s.sent.Load(),
		DroppedQueueFull: s.dropRing.Load() + s.dropDisk.Load(), DroppedRefused: s.dropRefused.Load(), DroppedDamaged: uint64(qs.Damaged),
		ErrAuth: s.errAuth.Load(), ErrTLS: s.errTLS.Load(), ErrConnect: s.errConnect.Load(), ErrPublish: s.errPublish.Load(), ErrDisk: s.errDisk.Load(),
		Queued: qs.Records + n, QueueBytes: qs.Bytes, Degraded: qs.Degraded, Recovered: int(s.recovered.Load()), FirstSeq: s.firstSeq,
		LastSeq: last, AckedSeq: s.q.Acked(), Unpublished: n,
	}
	st.Dropped = st.DroppedQueueFull + st.DroppedRefused + st.DroppedDamaged
	return st
}

// PEM is the content of a PEM file, read by the caller (the daemon reads
// the files its configuration names once per load, through a size limit);
// Name is its path, for messages. A zero PEM is no file.
type PEM struct {
	Name string
	Data []byte
}

// TLSConfig builds the client TLS configuration: ca (certificates to
// trust; none = the system roots), and a client certificate and key (both
// or neither). Errors name the file.
func TLSConfig(ca, cert, key PEM) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca.Name != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca.Data) {
			return nil, fmt.Errorf("mqttsink: ca_file %s: no PEM certificate in it", ca.Name)
		}
		cfg.RootCAs = pool
	}
	if cert.Name != "" || key.Name != "" {
		c, err := tls.X509KeyPair(cert.Data, key.Data)
		if err != nil {
			return nil, fmt.Errorf("mqttsink: cert_file %s, key_file %s: %w", cert.Name, key.Name, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// Password is the password a password file holds: its content less one
// trailing newline.
func Password(file []byte) []byte {
	return []byte(strings.TrimSuffix(strings.TrimSuffix(string(file), "\n"), "\r"))
}
