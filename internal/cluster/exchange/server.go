package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
)

// serviceName and methodName make the gRPC method
// /sluice.exchange.v1.Exchange/Channel: one bidirectional stream per
// channel.
const (
	serviceName = "sluice.exchange.v1.Exchange"
	methodName  = "Channel"
	fullMethod  = "/" + serviceName + "/" + methodName
)

// service is the handler type gRPC checks the server against.
type service interface {
	channel(stream grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*service)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    methodName,
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(service).channel(stream)
		},
	}},
	Metadata: "sluice/exchange",
}

// Server is a node's end of the exchange: it accepts the streams of
// senders on other nodes and hands each to the [Receiver] registered for
// its channel and epoch (see [Listen]). Its methods are safe for
// concurrent use.
type Server struct {
	cfg  config
	gs   *grpc.Server
	stop chan struct{}
	once sync.Once

	mu      sync.Mutex
	regs    map[ChannelID]attachable
	changed chan struct{} // closed and replaced when regs changes
	closed  bool
}

// attachable is a registered receiver, whatever its record type.
type attachable interface {
	epoch() Epoch
	serve(stream grpc.ServerStream, h hello) error
	supersede(err error)
}

// NewServer returns a server with its own gRPC server. Options:
// [WithTLSFiles], [WithAcceptTimeout], [WithMaxFrameSize], [WithKeepalive],
// [WithLogger].
func NewServer(opts ...Option) (*Server, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig(true)
	if err != nil {
		return nil, err
	}
	gopts := grpcframe.ServerOptions("exchange", cfg.maxFrame+64, cfg.keepalive, tc, cfg.logger)
	s := &Server{
		cfg: cfg, gs: grpc.NewServer(gopts...), stop: make(chan struct{}),
		regs: map[ChannelID]attachable{}, changed: make(chan struct{}),
	}
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

// Stop closes every connection and fails the channels still open with an
// error (senders see ErrBroken). Receivers stay registered until closed.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		s.gs.Stop()
	})
}

// register makes r the receiver of ch.
func (s *Server) register(ch ChannelID, r attachable) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: server stopped (%v)", ErrClosed, ch)
	}
	if old, ok := s.regs[ch]; ok {
		if !old.epoch().Less(r.epoch()) {
			return fmt.Errorf("%w: %v: a receiver of %v is registered, this one is of %v", ErrStaleEpoch, ch, old.epoch(), r.epoch())
		}
		old.supersede(fmt.Errorf("%w: %v: replaced by %v", ErrSuperseded, ch, r.epoch()))
	}
	s.regs[ch] = r
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// unregister removes r if it is still ch's receiver.
func (s *Server) unregister(ch ChannelID, r attachable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.regs[ch] == r {
		delete(s.regs, ch)
	}
}

// await returns the receiver registered for h, waiting up to the accept
// timeout for it.
func (s *Server) await(ctx context.Context, h hello) (attachable, error) {
	timer := time.NewTimer(s.cfg.acceptTimeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		r, ok := s.regs[h.ch]
		changed := s.changed
		s.mu.Unlock()
		if ok {
			switch e := r.epoch(); {
			case h.epoch == e:
				return r, nil
			case h.epoch.Less(e):
				return nil, status.Errorf(codes.FailedPrecondition, "%v: sender of %v is stale: the receiver is of %v", h.ch, h.epoch, e)
			}
			// The sender is newer: wait for this node to register its receiver.
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, status.Errorf(codes.NotFound, "%v: no receiver of %v registered within %v", h.ch, h.epoch, s.cfg.acceptTimeout)
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-s.stop:
			return nil, status.Error(codes.Unavailable, "exchange server stopping")
		}
	}
}

// channel is the gRPC handler of one stream.
func (s *Server) channel(stream grpc.ServerStream) error {
	var m grpcframe.Msg
	if err := stream.RecvMsg(&m); err != nil {
		return err
	}
	h, err := parseHello(m.B)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	r, err := s.await(stream.Context(), h)
	if err != nil {
		s.cfg.logger.Warn("exchange: refused a sender", "peer", grpcframe.PeerAddr(stream.Context()), "channel", h.ch.String(), "epoch", h.epoch.String(), "err", err)
		return err
	}
	return r.serve(stream, h)
}
