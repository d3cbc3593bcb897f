package mosquittotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// Broker is a Mosquitto process on a loopback port, with a generated
// configuration and persistence in Dir (so a subscriber's persistent
// session, and what is queued for it, survive a restart of the broker).
// It can be stopped and started again on the same port.
type Broker struct {
	Bin   string // the mosquitto binary
	Dir   string // configuration, persistence and mosquitto.log
	Port  int
	Extra string // more configuration lines for the listener

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
}

// StartBroker starts a broker for a test, on a free port, and stops it
// (printing the end of its log when the test failed) at cleanup.
func StartBroker(t testing.TB, extra string) *Broker {
	t.Helper()
	b := &Broker{Bin: Path(t), Dir: t.TempDir(), Port: FreePort(t), Extra: extra}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Stop()
		if t.Failed() || os.Getenv("EDGED_MOSQUITTO_LOG") != "" {
			t.Logf("mosquitto log (last lines):\n%s", b.LogTail(4000))
		}
	})
	return b
}

// URL is the broker's address with scheme (mqtt or mqtts).
func (b *Broker) URL(scheme string) *url.URL {
	u, _ := url.Parse(fmt.Sprintf("%s://127.0.0.1:%d", scheme, b.Port))
	return u
}

// Start runs the broker and returns once it accepts connections.
func (b *Broker) Start() error {
	conf := filepath.Join(b.Dir, "mosquitto.conf")
	text := fmt.Sprintf(`user root
persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 0
log_dest file %s/mosquitto.log
log_type all
listener %d 127.0.0.1
%s
`, b.Dir, b.Dir, b.Port, b.Extra)
	if !strings.Contains(b.Extra, "allow_anonymous") {
		text += "allow_anonymous true\n"
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(b.Bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	b.mu.Lock()
	b.cmd, b.exit = cmd, exit
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.Port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exit:
			return fmt.Errorf("mosquitto exited at start:\n%s", b.LogTail(40))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mosquitto does not listen on %d", b.Port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the broker with SIGTERM (it saves its persistent state).
func (b *Broker) Stop() {
	b.mu.Lock()
	cmd, exit := b.cmd, b.exit
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exit
	}
}

// Signal sends sig to the running broker.
func (b *Broker) Signal(sig syscall.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.cmd.Process.Signal(sig)
	}
}

// LogTail is the last n lines of the broker's log.
func (b *Broker) LogTail(n int) string {
	log, _ := os.ReadFile(filepath.Join(b.Dir, "mosquitto.log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Message is one message a Subscriber received.
type Message struct {
	Topic   string
	Payload []byte
	Retain  bool
}

// Subscriber is a QoS 1 subscription with a persistent session: it gets
// what was published while it was away, across broker restarts.
type Subscriber struct {
	mu   sync.Mutex
	msgs []Message
	cm   *autopaho.ConnectionManager
	stop context.CancelFunc
}

// Subscribe subscribes clientID to topic at u and returns once the
// subscription is made.
func Subscribe(u *url.URL, topic, clientID, user, pass string) (*Subscriber, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscriber{stop: cancel}
	ready := make(chan struct{}, 1)
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		ConnectUsername:               user,
		ConnectPassword:               []byte(pass),
		KeepAlive:                     5,
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         3600,
		ReconnectBackoff:              func(int) time.Duration { return 100 * time.Millisecond },
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			go func() {
				cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
				select {
				case ready <- struct{}{}:
				default:
				}
			}()
		},
		ClientConfig: paho.ClientConfig{
			ClientID: clientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				s.mu.Lock()
				s.msgs = append(s.msgs, Message{pr.Packet.Topic, append([]byte(nil), pr.Packet.Payload...), pr.Packet.Retain})
				s.mu.Unlock()
				return true, nil
			}},
		},
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	s.cm = cm
	select {
	case <-ready:
		return s, nil
	case <-time.After(10 * time.Second):
		s.Close()
		return nil, errors.New("mosquittotest: the subscriber did not subscribe within 10 s")
	}
}

// SubscribeT is Subscribe for a test, closed at cleanup; the client id is
// "test-sub-<port>".
func SubscribeT(t testing.TB, u *url.URL, topic, user, pass string) *Subscriber {
	t.Helper()
	s, err := Subscribe(u, topic, "test-sub-"+u.Port(), user, pass)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Messages is a copy of what arrived so far, in order.
func (s *Subscriber) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Close disconnects and waits for the client.
func (s *Subscriber) Close() {
	s.stop()
	<-s.cm.Done()
}
