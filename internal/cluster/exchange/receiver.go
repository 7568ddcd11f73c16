package exchange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
)

// Receiver is the consumer end of one channel. Its sender's frames are
// decoded on the stream's goroutine and queued, at most as many as it
// granted credits; each frame taken off the queue (all of its messages
// delivered) returns a credit to the sender. So a task that stops
// polling stops its sender after at most that many frames.
//
// Poll, Next and Ready are for one goroutine (the consuming task); Stats
// and Close may be called from any.
type Receiver[T any] struct {
	srv   *Server
	ch    ChannelID
	ep    Epoch
	codec Codec[T]
	cfg   config

	frames    chan []Message[T] // decoded frames; capacity = credits
	ready     chan struct{}     // a token after each frame and at the end
	creditSig chan struct{}     // a token when credits wait to be announced
	unsent    atomic.Int64      // credits not announced yet
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the stream's receive goroutine

	mu       sync.Mutex
	attached bool
	err      error         // why the channel ended; set once
	ended    chan struct{} // closed when err is set

	cur []Message[T] // the frame being delivered (consumer goroutine)
	idx int

	framesIn  atomic.Int64
	recordsIn atomic.Int64
	granted   atomic.Int64
}

// ReceiverStats are a receiver's counters.
type ReceiverStats struct {
	Queued          int   // frames received and not yet taken (≤ credits)
	FramesReceived  int64 // data frames received
	RecordsReceived int64
	CreditsGranted  int64 // credits announced to the sender, the initial ones included
}

// Listen registers the receiver of channel ch for epoch ep on s and
// returns it; the sender of ch (same epoch) connects to s with [Open],
// before or after. A receiver of an older epoch registered for ch is
// superseded (its Poll fails with ErrSuperseded); registering one of an
// older or equal epoch than the registered one fails with ErrStaleEpoch.
// codec must not be nil (ErrNoCodec). Options: [WithCredits], [WithReady].
func Listen[T any](s *Server, ch ChannelID, ep Epoch, codec Codec[T], opts ...Option) (*Receiver[T], error) {
	if err := checkCodec(codec, ch); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	r := &Receiver[T]{
		srv: s, ch: ch, ep: ep, codec: codec, cfg: cfg,
		frames:    make(chan []Message[T], cfg.credits),
		ready:     cfg.ready,
		creditSig: make(chan struct{}, 1),
		closed:    make(chan struct{}),
		ended:     make(chan struct{}),
	}
	if r.ready == nil {
		r.ready = make(chan struct{}, 1)
	}
	if err := s.register(ch, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Receiver[T]) epoch() Epoch { return r.ep }

func (r *Receiver[T]) supersede(err error) { r.end(err) }

// end records why the channel ended (the first reason wins) and wakes
// the consumer.
func (r *Receiver[T]) end(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.err = err
	close(r.ended)
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// Ready returns a channel that gets a token when a frame arrived or the
// channel ended: a task waits on it (with its mailbox) when Poll found
// nothing.
func (r *Receiver[T]) Ready() <-chan struct{} { return r.ready }

// Poll returns the next message without blocking; ok is false when none
// is queued. Messages come in the order the sender sent them. After the
// channel ended, Poll first delivers every message received, then returns
// the reason: ErrEndOfStream after the sender closed, ErrBroken (wrapping
// the cause) when the stream broke, ErrClosed or ErrSuperseded. The
// records of a message belong to the caller.
func (r *Receiver[T]) Poll() (m Message[T], ok bool, err error) {
	if r.idx >= len(r.cur) {
		select {
		case f := <-r.frames:
			r.cur, r.idx = f, 0
		default:
			select {
			case <-r.ended:
				select {
				case f := <-r.frames:
					r.cur, r.idx = f, 0
				default:
					r.mu.Lock()
					defer r.mu.Unlock()
					return m, false, r.err
				}
			default:
				return m, false, nil
			}
		}
	}
	m = r.cur[r.idx]
	r.cur[r.idx] = Message[T]{}
	r.idx++
	if r.idx == len(r.cur) {
		r.cur, r.idx = nil, 0
		r.grant(1)
	}
	return m, true, nil
}

// Next returns the next message, waiting for it until ctx is done. It is
// for a receiver with a Ready channel of its own (see [WithReady]).
func (r *Receiver[T]) Next(ctx context.Context) (Message[T], error) {
	for {
		m, ok, err := r.Poll()
		if ok || err != nil {
			return m, err
		}
		select {
		case <-r.ready:
		case <-ctx.Done():
			return m, fmt.Errorf("exchange: %v: %w", r.ch, ctx.Err())
		}
	}
}

// grant returns n credits to the sender (announced by the stream's
// goroutine, coalesced).
func (r *Receiver[T]) grant(n int64) {
	r.unsent.Add(n)
	select {
	case r.creditSig <- struct{}{}:
	default:
	}
}

// Stats returns the receiver's counters.
func (r *Receiver[T]) Stats() ReceiverStats {
	return ReceiverStats{
		Queued:          len(r.frames),
		FramesReceived:  r.framesIn.Load(),
		RecordsReceived: r.recordsIn.Load(),
		CreditsGranted:  r.granted.Load(),
	}
}

// Close unregisters the receiver and aborts its stream (the sender fails
// with ErrBroken), and waits for the stream's goroutine. Poll then returns
// ErrClosed (after the reason the channel ended, if it had).
func (r *Receiver[T]) Close() error {
	r.closeOnce.Do(func() {
		r.end(fmt.Errorf("%w: receiver of %v", ErrClosed, r.ch))
		close(r.closed)
		r.srv.unregister(r.ch, r)
	})
	r.wg.Wait()
	return nil
}

// serve runs one sender's stream on the gRPC handler goroutine: it
// announces credits; a goroutine of the receiver reads and decodes
// frames. It returns (ending the stream) when the sender closed, the
// stream broke, the receiver was closed or the server stopped.
func (r *Receiver[T]) serve(stream grpc.ServerStream, h hello) error {
	r.mu.Lock()
	switch {
	case r.err != nil:
		err := r.err
		r.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "%v", err)
	case r.attached:
		r.mu.Unlock()
		return status.Errorf(codes.AlreadyExists, "%v of %v already has a sender", r.ch, r.ep)
	}
	r.attached = true
	r.wg.Add(1)
	r.mu.Unlock()

	recvDone := make(chan struct{})
	started := false
	defer func() {
		if !started {
			r.wg.Done()
		}
	}()
	initial := int64(r.cfg.credits)
	if err := stream.SendMsg(&grpcframe.Msg{B: appendCredits(nil, frameAccept, int(initial))}); err != nil {
		r.end(fmt.Errorf("%w: %v: accept: %w", ErrBroken, r.ch, err))
		return err
	}
	r.granted.Add(initial)
	started = true
	go r.recvLoop(stream, recvDone)
	var buf []byte
	for {
		select {
		case <-r.creditSig:
			n := r.unsent.Swap(0)
			if n == 0 {
				continue
			}
			buf = appendCredits(buf[:0], frameCredit, int(n))
			if err := stream.SendMsg(&grpcframe.Msg{B: buf}); err != nil {
				r.end(fmt.Errorf("%w: %v: announce credits: %w", ErrBroken, r.ch, err))
				return err
			}
			r.granted.Add(n)
		case <-recvDone:
			r.mu.Lock()
			err := r.err
			r.mu.Unlock()
			if errors.Is(err, ErrEndOfStream) {
				return nil
			}
			return status.Errorf(codes.Aborted, "%v", err)
		case <-r.closed:
			return status.Errorf(codes.Aborted, "%v: receiver closed", r.ch)
		case <-r.srv.stop:
			r.end(fmt.Errorf("%w: %v: server stopped", ErrBroken, r.ch))
			return status.Error(codes.Unavailable, "exchange server stopping")
		}
	}
}

// recvLoop reads, decodes and queues the sender's frames.
func (r *Receiver[T]) recvLoop(stream grpc.ServerStream, done chan<- struct{}) {
	defer r.wg.Done()
	defer close(done)
	for {
		var m grpcframe.Msg
		if err := stream.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) {
				r.end(fmt.Errorf("%w: %v", ErrEndOfStream, r.ch))
			} else {
				r.end(fmt.Errorf("%w: %v: receive: %w", ErrBroken, r.ch, err))
			}
			return
		}
		msgs, nrec, err := parseData(m.B, r.codec)
		if err != nil {
			r.end(fmt.Errorf("%w: %v: frame %d: %w", ErrBroken, r.ch, r.framesIn.Load()+1, err))
			return
		}
		r.framesIn.Add(1)
		r.recordsIn.Add(int64(nrec))
		select {
		case r.frames <- msgs:
		default:
			r.end(fmt.Errorf("%w: %v: the sender sent a frame without credit (%d frames queued)", ErrBroken, r.ch, len(r.frames)))
			return
		}
		select {
		case r.ready <- struct{}{}:
		default:
		}
	}
}
