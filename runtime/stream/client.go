package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Client reads records from a socket sink (edged tail, tests, tools).
type Client struct {
	conn *net.UnixConn
	dec  *Decoder
	ctx  context.Context
	stop func() bool
	// awaitSub: a subscription was sent and its "subscribed" reply has not
	// come yet; records before it were queued for the connection's
	// default subscription (all pipelines) and are not returned.
	awaitSub bool

	closeOnce sync.Once
}

// Dial connects to the socket at path. If sub is not nil its subscribe
// request is sent first, and Next returns nothing before the daemon's
// "subscribed" reply (records published between the connect and the
// request reaching the daemon went to the default subscription, every
// pipeline) except error records. The connection is closed when ctx is done, which
// makes a blocked Next return ctx's error.
func Dial(ctx context.Context, path string, sub *Subscription) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("stream: connecting to %s: %w (is edged running, and may this user open the socket?)", path, err)
	}
	uc := c.(*net.UnixConn)
	cl := &Client{conn: uc, ctx: ctx, dec: NewDecoder(uc, DecoderOptions{Framing: FramingAuto, FromStart: true})}
	if sub != nil {
		cl.awaitSub = true
		if err := cl.Send(sub.AppendRequest(nil)); err != nil {
			err = cl.refusal(err)
			uc.Close()
			return nil, fmt.Errorf("stream: subscribing on %s: %w", path, err)
		}
	}
	cl.stop = context.AfterFunc(ctx, func() { uc.Close() })
	return cl, nil
}

// refusal explains a failed write: when the daemon refused the connection
// (too many clients, peer not allowed) it sent an error record and closed
// it, and that record is the reason, wrapped in ErrRemote. Otherwise it
// returns err.
func (c *Client) refusal(err error) error {
	c.conn.SetReadDeadline(time.Now().Add(time.Second))
	defer c.conn.SetReadDeadline(time.Time{})
	var m Message
	if c.dec.Next(&m) == nil && m.Rec.Type == "error" {
		return fmt.Errorf("%w: %s", ErrRemote, m.Rec.Error)
	}
	return err
}

// Next reads the next record into m; see Decoder.Next. After the sink or
// ctx closed the connection it returns io.EOF or ctx's error.
//
// Keepalive records (a quiet stream, see SocketOptions.Keepalive) are not
// returned: their seq counts as received, and records lost before one are
// added to the next record's Missed.
func (c *Client) Next(m *Message) error {
	var missed uint64
	err := c.dec.Next(m)
	for err == nil && c.skip(m) {
		missed += m.Missed
		err = c.dec.Next(m)
	}
	if err == nil {
		m.Missed += missed
	}
	if err != nil && c.ctx.Err() != nil {
		return c.ctx.Err()
	}
	if err != nil && (errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET)) {
		// ECONNRESET: the daemon closed the connection with our input
		// unread (after an error record); what it sent was read first.
		return io.EOF
	}
	return err
}

// skip reports whether Next passes over m: a keepalive, or a record that
// came before the reply to Dial's subscription.
func (c *Client) skip(m *Message) bool {
	if m.Rec.Type == "status" && m.Rec.Event == EventKeepalive {
		return true
	}
	if !c.awaitSub || m.Rec.Type == "error" {
		return false
	}
	if m.Rec.Type == "status" && m.Rec.Event == "subscribed" {
		c.awaitSub = false
		return false
	}
	return true
}

// Conn is the connection, for a caller that reads its bytes without
// decoding them (a benchmark's reader); Next must not be used while it
// does.
func (c *Client) Conn() *net.UnixConn { return c.conn }

// Stats returns the decoder's counts (records, seq gaps).
func (c *Client) Stats() DecoderStats { return c.dec.Stats() }

// Send writes request lines as they are, each a JSON object with its
// newline (docs/PROTOCOL.md); replies come through Next.
func (c *Client) Send(line []byte) error {
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	defer c.conn.SetWriteDeadline(time.Time{})
	_, err := c.conn.Write(line)
	return err
}

// Close closes the connection; it is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.stop()
		c.conn.Close()
	})
	return nil
}

// ErrRemote wraps an error record sent by the daemon.
var ErrRemote = errors.New("stream: daemon replied with an error")

// RequestReload asks the daemon behind the socket at path to re-check every
// model file now (what SIGHUP does for engines) and waits for its reply,
// until ctx is done.
func RequestReload(ctx context.Context, path string) error {
	c, err := Dial(ctx, path, &Subscription{Pipelines: []string{}, Encoding: NDJSON})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Send([]byte(`{"reload":"engines"}` + "\n")); err != nil {
		return fmt.Errorf("stream: sending the reload request to %s: %w", path, c.refusal(err))
	}
	var m Message
	for {
		if err := c.Next(&m); err != nil {
			if err == io.EOF {
				return fmt.Errorf("stream: %s closed the connection before answering the reload request", path)
			}
			return fmt.Errorf("stream: waiting for the reload reply on %s: %w", path, err)
		}
		switch {
		case m.Rec.Type == "error":
			return fmt.Errorf("%w: %s", ErrRemote, m.Rec.Error)
		case m.Rec.Type == "status" && m.Rec.Event == "reload_requested":
			return nil
		}
	}
}
