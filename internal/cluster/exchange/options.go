package exchange

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
)

// Option configures a [Server], a [Client], a [Receiver] or a [Sender];
// each option says which it applies to, the others ignore it.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	credits       int
	sendQueue     int
	maxEvents     int
	maxFrame      int
	acceptTimeout time.Duration
	keepalive     time.Duration
	certFile      string
	keyFile       string
	caFile        string
	logger        *slog.Logger
	ready         chan struct{}
}

func defaultConfig() config {
	return config{
		credits:       4,
		sendQueue:     2,
		maxEvents:     1024,
		maxFrame:      64 << 20,
		acceptTimeout: 10 * time.Second,
		keepalive:     10 * time.Second,
	}
}

func newConfig(opts []Option) (config, error) {
	c := defaultConfig()
	for _, o := range opts {
		o.apply(&c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	switch {
	case c.credits < 1:
		return c, fmt.Errorf("exchange: credits %d: must be at least 1", c.credits)
	case c.sendQueue < 1:
		return c, fmt.Errorf("exchange: send queue %d: must be at least 1", c.sendQueue)
	case c.maxEvents < 1:
		return c, fmt.Errorf("exchange: max pending events %d: must be at least 1", c.maxEvents)
	case c.maxFrame < 1024:
		return c, fmt.Errorf("exchange: max frame size %d: must be at least 1024", c.maxFrame)
	case c.keepalive < time.Second:
		return c, fmt.Errorf("exchange: keepalive %v: must be at least 1s", c.keepalive)
	case c.acceptTimeout <= 0:
		return c, fmt.Errorf("exchange: accept timeout %v: must be positive", c.acceptTimeout)
	}
	return c, nil
}

// WithCredits sets how many frames (batches) a [Receiver] buffers: the
// credits it grants its sender. A sender sends a frame only with a credit,
// so a receiver holds at most this many frames besides the one its task
// is processing. The default is 4.
func WithCredits(n int) Option { return optionFunc(func(c *config) { c.credits = n }) }

// WithSendQueue sets how many encoded batches a [Sender] queues while it
// waits for credit, before SendBatch blocks (backpressure). The default is
// 2: one being sent, one being filled.
func WithSendQueue(n int) Option { return optionFunc(func(c *config) { c.sendQueue = n }) }

// WithMaxPendingEvents bounds the events (watermarks, barriers, idleness,
// end) a [Sender] holds while it waits for credit; SendEvent blocks beyond
// it. Consecutive watermarks are coalesced, so this is rarely reached. The
// default is 1024.
func WithMaxPendingEvents(n int) Option { return optionFunc(func(c *config) { c.maxEvents = n }) }

// WithMaxFrameSize bounds a frame's bytes (a batch's encoding): a
// [Sender] refuses a larger batch with an error, a [Server] refuses
// larger gRPC messages. The default is 64 MiB.
func WithMaxFrameSize(n int) Option { return optionFunc(func(c *config) { c.maxFrame = n }) }

// WithAcceptTimeout bounds how long a [Server] holds a sender's stream for
// a receiver to be registered (the consumer task may start after its
// producer). The default is 10s.
func WithAcceptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.acceptTimeout = d })
}

// WithKeepalive sets how often a [Client] and a [Server] ping an idle
// connection, and how long they wait for the answer (half of it, at least
// 1s) before they declare it dead and fail its channels with ErrBroken. It
// bounds how long a partitioned or frozen peer goes unnoticed. gRPC
// raises a client's interval below 10s to 10s. The default is 10s (a dead
// peer is noticed within about 15s).
func WithKeepalive(d time.Duration) Option { return optionFunc(func(c *config) { c.keepalive = d }) }

// keepaliveTimeout is the wait for a ping's answer.
func (c *config) keepaliveTimeout() time.Duration { return grpcframe.KeepaliveTimeout(c.keepalive) }

// WithTLSFiles enables mutual TLS (TLS 1.3) for a [Server] or a [Client]:
// this node's certificate and key and the CA bundle that signed every
// node's certificate (PEM files). A server requires and verifies client
// certificates and logs each peer it refuses; a client verifies the
// server's certificate against the CA and the address it dials. The
// default is plaintext, which only suits loopback.
func WithTLSFiles(certFile, keyFile, caFile string) Option {
	return optionFunc(func(c *config) { c.certFile, c.keyFile, c.caFile = certFile, keyFile, caFile })
}

// WithReady makes a [Receiver] signal ch (a token, without blocking)
// when a frame arrives or the channel ends, instead of a channel of its
// own: a task with several inputs shares one (capacity 1) and waits on it
// with its mailbox, as the engine's gate does with in-process channels.
// Receiver.Ready returns ch. The default is a channel per receiver.
func WithReady(ch chan struct{}) Option { return optionFunc(func(c *config) { c.ready = ch }) }

// WithLogger sets the logger of a [Server] (refused peers and channels).
// The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// tlsConfig loads the TLS files; nil when TLS is off.
func (c *config) tlsConfig(server bool) (*tls.Config, error) {
	t, err := grpcframe.TLSConfig(c.certFile, c.keyFile, c.caFile, server)
	if err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	return t, nil
}
