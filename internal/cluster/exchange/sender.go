package exchange

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
)

// Client is a node's connection to one other node's [Server]: one gRPC
// connection (HTTP/2) that carries every channel to that node, each as a
// stream of its own. It is safe for concurrent use.
type Client struct {
	cc   *grpc.ClientConn
	opts []Option
}

// Dial returns a client for the server at target (host:port). It connects
// lazily, on the first Open. Options: [WithTLSFiles], [WithKeepalive],
// and the sender options every Open inherits.
func Dial(target string, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	tc, err := cfg.tlsConfig(false)
	if err != nil {
		return nil, err
	}
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(wireCodecName)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: cfg.keepalive, Timeout: cfg.keepaliveTimeout()}),
	)
	if err != nil {
		return nil, fmt.Errorf("exchange: dial %s: %w", target, err)
	}
	return &Client{cc: cc, opts: opts}, nil
}

// Close closes the connection; open senders fail with ErrBroken.
func (c *Client) Close() error { return c.cc.Close() }

// Sender is the producer end of one channel. SendBatch and SendEvent
// encode on the caller's goroutine and queue the frame; the sender's
// goroutine sends a frame only when the receiver granted a credit. With
// no credit, SendBatch blocks once the send queue is full: a slow
// consumer slows its producer, and memory stays bounded on both sides.
//
// Events (watermarks, barriers, idleness, end of partition) travel in
// line: an event is appended to the last queued frame, behind every
// record sent before it, and never overtakes one. Events need no credit
// of their own when they can ride on a queued frame; alone, an event
// takes a frame and a credit like a batch. So nothing ever overtakes
// anything (aligned checkpoints), and SendEvent does not block until
// WithMaxPendingEvents events wait.
//
// SendBatch, SendEvent, Flush and Close are for one goroutine (the
// producing task); Stats may be called from any.
type Sender[T any] struct {
	ch     ChannelID
	ep     Epoch
	codec  Codec[T]
	cfg    config
	stream grpc.ClientStream
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	queue      []*outFrame
	free       []*outFrame
	dataQueued int
	events     int
	credits    int
	closing    bool
	finished   bool  // the receiver acknowledged the close
	err        error // why the channel ended; set once
	wake       chan struct{}

	framesSent      int64
	recordsSent     int64
	creditsReceived int64
}

// outFrame is an encoded data frame waiting for credit.
type outFrame struct {
	buf     []byte
	hasData bool
	records int
	events  int
	wmAt    int // offset of the trailing watermark's 8 bytes, -1 if the last item is not one
}

// SenderStats are a sender's counters.
type SenderStats struct {
	Credits         int   // credits granted and not used
	Queued          int   // frames waiting for credit
	PendingEvents   int   // events in queued frames
	FramesSent      int64 // data frames handed to gRPC
	RecordsSent     int64
	CreditsReceived int64 // the initial ones included
}

// Open opens channel ch to the receiver registered for it (epoch ep) on
// c's server, and returns once the receiver accepted it. It fails with
// ErrStaleEpoch when the receiver is of a newer epoch, ErrRefused when no
// receiver was registered within the server's accept timeout or one
// already has a sender, and ErrBroken when the server is unreachable.
// ctx bounds the opening only. codec must not be nil (ErrNoCodec).
// Options: [WithSendQueue], [WithMaxPendingEvents], [WithMaxFrameSize].
func Open[T any](ctx context.Context, c *Client, ch ChannelID, ep Epoch, codec Codec[T], opts ...Option) (*Sender[T], error) {
	if err := checkCodec(codec, ch); err != nil {
		return nil, err
	}
	cfg, err := newConfig(append(append([]Option(nil), c.opts...), opts...))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	fail := func(err error) (*Sender[T], error) {
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exchange: open %v: %w", ch, ctx.Err())
		}
		return nil, openError(ch, err)
	}
	stream, err := c.cc.NewStream(sctx, &grpc.StreamDesc{StreamName: methodName, ServerStreams: true, ClientStreams: true}, fullMethod)
	if err != nil {
		return fail(err)
	}
	if err := stream.SendMsg(&grpcframe.Msg{B: hello{ch: ch, epoch: ep}.append(nil)}); err != nil && !errors.Is(err, io.EOF) {
		return fail(err)
	}
	var m grpcframe.Msg
	if err := stream.RecvMsg(&m); err != nil {
		return fail(err)
	}
	credits, err := parseCredits(m.B, frameAccept)
	if err != nil {
		return fail(err)
	}
	if !stop() {
		return fail(ctx.Err())
	}
	s := &Sender[T]{
		ch: ch, ep: ep, codec: codec, cfg: cfg, stream: stream, cancel: cancel,
		credits: credits, creditsReceived: int64(credits), wake: make(chan struct{}),
	}
	s.wg.Add(2)
	go s.writeLoop()
	go s.readLoop()
	return s, nil
}

// openError classifies a failed open by the server's status.
func openError(ch ChannelID, err error) error {
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return fmt.Errorf("%w: open %v: %w", ErrStaleEpoch, ch, err)
	case codes.NotFound, codes.AlreadyExists:
		return fmt.Errorf("%w: open %v: %w", ErrRefused, ch, err)
	}
	return fmt.Errorf("%w: open %v: %w", ErrBroken, ch, err)
}

// signal wakes everyone waiting on the sender's state. s.mu is held.
func (s *Sender[T]) signal() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// failLocked ends the channel with err (the first reason wins) and
// aborts the stream. s.mu is held.
func (s *Sender[T]) failLocked(err error) {
	if s.err == nil {
		s.err = err
		s.signal()
	}
	s.cancel()
}

// waitLocked waits until cond holds, the channel ended (its error) or ctx
// is done. s.mu is held, and released while waiting.
func (s *Sender[T]) waitLocked(ctx context.Context, cond func() bool) error {
	for s.err == nil && !cond() {
		w := s.wake
		s.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			s.mu.Lock()
			return fmt.Errorf("exchange: %v: %w", s.ch, ctx.Err())
		}
		s.mu.Lock()
	}
	return s.err
}

func (s *Sender[T]) newFrameLocked() *outFrame {
	if n := len(s.free); n > 0 {
		f := s.free[n-1]
		s.free = s.free[:n-1]
		return f
	}
	return &outFrame{wmAt: -1}
}

func (s *Sender[T]) recycleLocked(f *outFrame) {
	if len(s.free) <= s.cfg.sendQueue {
		f.buf, f.hasData, f.records, f.events, f.wmAt = f.buf[:0], false, 0, 0, -1
		s.free = append(s.free, f)
	}
}

// SendBatch encodes recs as one frame and queues it; it blocks while the
// send queue is full (no credit), until ctx is done or the channel ends.
// The caller may reuse recs when it returns. A record the codec fails on
// fails the batch (nothing of it is sent) with an error naming the record.
func (s *Sender[T]) SendBatch(ctx context.Context, recs []T) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	f := s.newFrameLocked()
	s.mu.Unlock()
	b := append(f.buf[:0], frameData, byte(KindRecords))
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for i, v := range recs {
		var err error
		if b, err = appendRecord(b, s.codec, v); err != nil {
			f.buf = b
			s.mu.Lock()
			s.recycleLocked(f)
			s.mu.Unlock()
			return fmt.Errorf("exchange: %v: encode record %d of a batch of %d: %w", s.ch, i, len(recs), err)
		}
	}
	f.buf, f.hasData, f.records = b, true, len(recs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(b) > s.cfg.maxFrame {
		s.recycleLocked(f)
		return fmt.Errorf("exchange: %v: a batch of %d records encodes to %d bytes, more than the max frame size %d (smaller batches, or WithMaxFrameSize)", s.ch, len(recs), len(b), s.cfg.maxFrame)
	}
	if err := s.waitLocked(ctx, func() bool { return s.dataQueued < s.cfg.sendQueue }); err != nil {
		s.recycleLocked(f)
		return err
	}
	if n := len(s.queue); n > 0 && !s.queue[n-1].hasData {
		// The last queued frame holds only events: the batch rides along.
		last := s.queue[n-1]
		last.buf = append(last.buf, f.buf[1:]...)
		last.hasData, last.records, last.wmAt = true, f.records, -1
		s.recycleLocked(f)
	} else {
		s.queue = append(s.queue, f)
	}
	s.dataQueued++
	s.signal()
	return nil
}

// SendEvent queues ev behind everything sent before it. It blocks only
// while WithMaxPendingEvents events wait for credit. A watermark right
// behind another queued watermark replaces it.
func (s *Sender[T]) SendEvent(ctx context.Context, ev Event) error {
	if ev.Kind < KindWatermark || ev.Kind > KindEnd {
		return fmt.Errorf("exchange: %v: SendEvent of a %v", s.ch, ev.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitLocked(ctx, func() bool { return s.events < s.cfg.maxEvents }); err != nil {
		return err
	}
	var f *outFrame
	if n := len(s.queue); n > 0 {
		f = s.queue[n-1]
	} else {
		f = s.newFrameLocked()
		f.buf = append(f.buf[:0], frameData)
		s.queue = append(s.queue, f)
	}
	switch ev.Kind {
	case KindWatermark:
		if f.wmAt >= 0 {
			binary.LittleEndian.PutUint64(f.buf[f.wmAt:], uint64(ev.Value))
			return nil
		}
		f.buf = append(f.buf, byte(KindWatermark))
		f.wmAt = len(f.buf)
		f.buf = binary.LittleEndian.AppendUint64(f.buf, uint64(ev.Value))
	case KindBarrier:
		f.buf = binary.AppendVarint(append(f.buf, byte(KindBarrier)), ev.Value)
		f.wmAt = -1
	default:
		f.buf = append(f.buf, byte(ev.Kind))
		f.wmAt = -1
	}
	f.events++
	s.events++
	s.signal()
	return nil
}

// Flush waits until every queued frame was handed to gRPC (which needs
// credits: it waits for the receiver's task to take frames).
func (s *Sender[T]) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitLocked(ctx, func() bool { return len(s.queue) == 0 })
}

// Close sends what is queued, closes the channel and waits until the
// receiver has every frame (its Poll then ends with ErrEndOfStream). If
// ctx ends first, or the channel broke, it aborts the stream and returns
// why. It waits for the sender's goroutines either way.
func (s *Sender[T]) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.signal()
	}
	err := s.waitLocked(ctx, func() bool { return false })
	if s.err == nil {
		s.err = fmt.Errorf("%w: sender of %v", ErrClosed, s.ch)
		s.signal()
	}
	finished := s.finished
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if finished {
		return nil
	}
	return err
}

// Stats returns the sender's counters.
func (s *Sender[T]) Stats() SenderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SenderStats{
		Credits: s.credits, Queued: len(s.queue), PendingEvents: s.events,
		FramesSent: s.framesSent, RecordsSent: s.recordsSent, CreditsReceived: s.creditsReceived,
	}
}

// writeLoop sends queued frames, one per credit; when closing, it
// half-closes the stream after the last one.
func (s *Sender[T]) writeLoop() {
	defer s.wg.Done()
	var m grpcframe.Msg
	s.mu.Lock()
	for {
		for s.err == nil && !(len(s.queue) > 0 && s.credits > 0) && !(s.closing && len(s.queue) == 0) {
			w := s.wake
			s.mu.Unlock()
			<-w
			s.mu.Lock()
		}
		if s.err != nil {
			s.mu.Unlock()
			return
		}
		if len(s.queue) == 0 { // closing, everything sent
			s.mu.Unlock()
			if err := s.stream.CloseSend(); err != nil {
				s.mu.Lock()
				s.failLocked(fmt.Errorf("%w: %v: close: %w", ErrBroken, s.ch, err))
				s.mu.Unlock()
			}
			return
		}
		f := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.credits--
		if f.hasData {
			s.dataQueued--
		}
		s.events -= f.events
		s.framesSent++
		s.recordsSent += int64(f.records)
		s.signal()
		s.mu.Unlock()
		m.B = f.buf
		err := s.stream.SendMsg(&m)
		m.B = nil
		s.mu.Lock()
		s.recycleLocked(f)
		if err != nil {
			// io.EOF: the stream ended; readLoop gets the receiver's status.
			if !errors.Is(err, io.EOF) {
				s.failLocked(fmt.Errorf("%w: %v: send: %w", ErrBroken, s.ch, err))
			}
			s.mu.Unlock()
			return
		}
	}
}

// readLoop receives credits until the stream ends.
func (s *Sender[T]) readLoop() {
	defer s.wg.Done()
	for {
		var m grpcframe.Msg
		err := s.stream.RecvMsg(&m)
		if err == nil {
			var n int
			if n, err = parseCredits(m.B, frameCredit); err == nil {
				s.mu.Lock()
				s.credits += n
				s.creditsReceived += int64(n)
				s.signal()
				s.mu.Unlock()
				continue
			}
		}
		s.mu.Lock()
		switch {
		case errors.Is(err, io.EOF) && s.closing:
			s.finished = true
			s.failLocked(fmt.Errorf("%w: sender of %v", ErrClosed, s.ch))
		case errors.Is(err, io.EOF):
			s.failLocked(fmt.Errorf("%w: %v: the receiver ended the stream", ErrBroken, s.ch))
		default:
			s.failLocked(fmt.Errorf("%w: %v: %w", ErrBroken, s.ch, err))
		}
		s.mu.Unlock()
		return
	}
}
