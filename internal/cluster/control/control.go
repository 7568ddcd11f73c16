package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
	"github.com/sluice-io/sluice/internal/engine"
)

const (
	serviceName = "sluice.control.v1.Control"
	methodName  = "Link"
	fullMethod  = "/" + serviceName + "/" + methodName
	codecName   = "sluice-control"
	nodeKey     = "sluice-node"
	// exchangeKey carries the worker's record exchange address (see
	// WithExchangeAddr).
	exchangeKey = "sluice-exchange"
)

// service is the handler type gRPC checks the server against.
type service interface {
	link(stream grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*service)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    methodName,
		ServerStreams: true,
		ClientStreams: true,
		Handler:       func(srv any, stream grpc.ServerStream) error { return srv.(service).link(stream) },
	}},
	Metadata: "sluice/control",
}

var streamDesc = grpc.StreamDesc{StreamName: methodName, ServerStreams: true, ClientStreams: true}

// Server is the coordinator's end: it accepts the links of workers and
// makes each an engine.Remote. It is an engine.Placement. Its methods are
// safe for concurrent use.
type Server struct {
	cfg  config
	gs   *grpc.Server
	stop chan struct{}
	once sync.Once
	// closers counts the link handlers and the goroutines that close a
	// lost link's Remote once its handler returned (its receive ends only
	// then). A handler joins it under mu unless stopped is set, so that no
	// Add races Stop's Wait (gRPC's Stop does not wait for handlers).
	closers sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	workers map[string]*worker
	changed chan struct{} // closed and replaced when workers change
}

type worker struct {
	remote *engine.Remote
	conn   *serverConn
}

// NewServer returns a server with its own gRPC server. Options:
// WithTLSFiles, WithKeepalive, WithMaxFrameSize, WithLogger.
func NewServer(opts ...Option) (*Server, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig(true)
	if err != nil {
		return nil, err
	}
	gopts := grpcframe.ServerOptions("control", cfg.maxFrame, cfg.keepalive, tc, cfg.logger)
	s := &Server{cfg: cfg, gs: grpc.NewServer(gopts...), stop: make(chan struct{}), workers: map[string]*worker{}, changed: make(chan struct{})}
	s.gs.RegisterService(&serviceDesc, s)
	return s, nil
}

// Serve accepts connections on lis until Stop; it returns nil after Stop.
func (s *Server) Serve(lis net.Listener) error {
	err := s.gs.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop ends every link (their hosts are lost) and the gRPC server, and
// waits for them.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		s.mu.Unlock()
		close(s.stop)
		s.gs.Stop()
	})
	s.closers.Wait()
}

// Hosts returns engine.Local, then the live workers in the order of their
// ids (engine.Placement).
func (s *Server) Hosts() []engine.TaskHost {
	out := []engine.TaskHost{engine.Local}
	for _, w := range s.live() {
		out = append(out, w.remote)
	}
	return out
}

// Workers returns the ids of the connected workers, in order.
func (s *Server) Workers() []string {
	var ids []string
	for _, w := range s.live() {
		ids = append(ids, w.remote.ID())
	}
	return ids
}

// WaitWorkers waits until at least n workers are connected or ctx ends.
func (s *Server) WaitWorkers(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if len(s.live()) >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("control: %d of %d workers connected: %w", len(s.live()), n, ctx.Err())
		}
	}
}

func (s *Server) live() []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*worker
	for _, w := range s.workers {
		if w.remote.Err() == nil {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b *worker) int { return cmpString(a.remote.ID(), b.remote.ID()) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// link is the gRPC handler of one worker's stream: it lasts as long as the
// worker's Remote.
func (s *Server) link(stream grpc.ServerStream) error {
	ctx := stream.Context()
	id := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(nodeKey)) == 1 {
		id = md.Get(nodeKey)[0]
	}
	if id == "" {
		s.cfg.logger.Warn("control: refused a link without a node id", "peer", grpcframe.PeerAddr(ctx))
		return status.Error(codes.InvalidArgument, "control: the link needs a node id (metadata "+nodeKey+")")
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "control: the server is stopping")
	}
	s.closers.Add(1) // Done once the Remote is closed, below
	s.mu.Unlock()
	c := &serverConn{stream: stream, done: make(chan struct{})}
	w := &worker{remote: engine.NewRemote(id, c, s.cfg.logger), conn: c}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(exchangeKey)) == 1 {
		w.remote.SetExchangeAddr(md.Get(exchangeKey)[0])
	}
	s.mu.Lock()
	old := s.workers[id]
	s.workers[id] = w
	s.notify()
	s.mu.Unlock()
	if old != nil {
		s.cfg.logger.Warn("control: a worker linked again; its previous link is lost", "node", id)
		_ = old.conn.Close() // its handler returns
	}
	s.cfg.logger.Info("control: worker linked", "node", id, "peer", grpcframe.PeerAddr(ctx))
	select {
	case <-w.remote.Lost():
	case <-c.done:
	case <-s.stop:
	}
	// The Remote's receive returns once this handler did.
	go func() {
		defer s.closers.Done()
		_ = w.remote.Close()
	}()
	s.mu.Lock()
	if s.workers[id] == w {
		delete(s.workers, id)
		s.notify()
	}
	s.mu.Unlock()
	s.cfg.logger.Warn("control: worker link ended", "node", id, "error", w.remote.Err())
	return status.Error(codes.Unavailable, "control: link ended")
}

// serverConn is an engine.Conn over the server side of a stream. Close
// makes the handler return, which ends the stream.
type serverConn struct {
	stream grpc.ServerStream
	done   chan struct{}
	once   sync.Once
}

func (c *serverConn) Send(b []byte) error {
	select {
	case <-c.done:
		return errors.New("control: link closed")
	default:
	}
	return c.stream.SendMsg(&grpcframe.Msg{B: b})
}

func (c *serverConn) Recv() ([]byte, error) {
	var m grpcframe.Msg
	if err := c.stream.RecvMsg(&m); err != nil {
		return nil, err
	}
	return m.B, nil
}

func (c *serverConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

// Dial links this worker, named nodeID, to the coordinator at target and
// returns the link for engine.Job.ServeTasks. Close ends it. Options:
// WithTLSFiles, WithKeepalive, WithMaxFrameSize.
func Dial(ctx context.Context, target, nodeID string, opts ...Option) (engine.Conn, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if nodeID == "" {
		return nil, errors.New("control: dial: the node id is empty")
	}
	tc, err := cfg.tlsConfig(false)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(codecName), grpc.MaxCallRecvMsgSize(cfg.maxFrame)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.keepalive, Timeout: cfg.keepaliveTimeout()}),
		// A worker dials a leader that may not listen yet (it just won its
		// election): retry every 100ms to 2s rather than with gRPC's
		// default backoff of up to 2 minutes.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 5 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("control: dial %s: %w", target, err)
	}
	md := []string{nodeKey, nodeID}
	if cfg.exchangeAddr != "" {
		md = append(md, exchangeKey, cfg.exchangeAddr)
	}
	sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), md...))
	stop := context.AfterFunc(ctx, cancel) // dialling ends with ctx; the link outlives it
	stream, err := cc.NewStream(sctx, &streamDesc, fullMethod, grpc.WaitForReady(true))
	stop()
	if err != nil {
		cancel()
		_ = cc.Close()
		return nil, fmt.Errorf("control: open the link to %s: %w", target, err)
	}
	return &clientConn{cc: cc, stream: stream, cancel: cancel}, nil
}

// clientConn is an engine.Conn over the client side of a stream.
type clientConn struct {
	cc     *grpc.ClientConn
	stream grpc.ClientStream
	cancel context.CancelFunc
	once   sync.Once
}

func (c *clientConn) Send(b []byte) error { return c.stream.SendMsg(&grpcframe.Msg{B: b}) }

func (c *clientConn) Recv() ([]byte, error) {
	var m grpcframe.Msg
	if err := c.stream.RecvMsg(&m); err != nil {
		return nil, err
	}
	return m.B, nil
}

func (c *clientConn) Close() error {
	c.once.Do(func() {
		c.cancel()
		_ = c.cc.Close()
	})
	return nil
}

func init() { grpcframe.RegisterCodec(codecName) }

// Option configures a Server or Dial.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	keepalive time.Duration
	maxFrame  int
	certFile  string
	keyFile   string
	caFile    string
	logger    *slog.Logger
	// exchangeAddr: Dial's WithExchangeAddr.
	exchangeAddr string
}

func newConfig(opts []Option) (config, error) {
	c := config{keepalive: 10 * time.Second, maxFrame: 256 << 20}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	switch {
	case c.keepalive < time.Second:
		return c, fmt.Errorf("control: keepalive %v: must be at least 1s", c.keepalive)
	case c.maxFrame < 1<<20:
		return c, fmt.Errorf("control: max frame size %d: must be at least 1 MiB", c.maxFrame)
	}
	return c, nil
}

// WithExchangeAddr tells the coordinator, on Dial, where this worker's
// record exchange server is reached (its engine.Network's Addr), so that
// subtasks on other nodes can send to the consumers placed here. Without
// it a coordinator whose job has a record exchange (engine.Config.Network)
// places none of that job's subtasks on this worker.
func WithExchangeAddr(addr string) Option {
	return optionFunc(func(c *config) { c.exchangeAddr = addr })
}

// WithKeepalive sets how often both ends ping an idle connection and how
// long they wait for the answer (half of it, at least 1s) before the link
// counts as broken, which bounds how long a frozen or partitioned worker
// goes unnoticed. gRPC raises a client's interval below 10s to 10s. The
// default is 10s.
func WithKeepalive(d time.Duration) Option { return optionFunc(func(c *config) { c.keepalive = d }) }

func (c *config) keepaliveTimeout() time.Duration { return grpcframe.KeepaliveTimeout(c.keepalive) }

// WithMaxFrameSize bounds one frame (a deployment with its restored state
// is the largest). The default is 256 MiB.
func WithMaxFrameSize(n int) Option { return optionFunc(func(c *config) { c.maxFrame = n }) }

// WithTLSFiles enables mutual TLS 1.3: this node's certificate and key and
// the CA bundle that signed every node's certificate (PEM files). The
// server requires and verifies client certificates and logs each peer it
// refuses. The default is plaintext, which only suits loopback.
func WithTLSFiles(certFile, keyFile, caFile string) Option {
	return optionFunc(func(c *config) { c.certFile, c.keyFile, c.caFile = certFile, keyFile, caFile })
}

// WithLogger sets the server's logger (links, refused peers). The default
// is slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

func (c *config) tlsConfig(server bool) (*tls.Config, error) {
	t, err := grpcframe.TLSConfig(c.certFile, c.keyFile, c.caFile, server)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	return t, nil
}
